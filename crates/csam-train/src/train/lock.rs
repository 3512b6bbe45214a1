//! One writer per run directory: an advisory lock (flock(2)) on the file
//! [`LOCK_FILE`] inside it, held by the process that trains into it.
//!
//! The kernel releases a flock when its holder exits, however it exits, so a
//! lock file left by a killed process holds no lock and the next run simply
//! takes it over; only a live holder refuses a second writer. The file
//! records the holder's pid and host so that the refusal can name it. Locks
//! are per open file description, so a second attempt from the same process
//! through another open is refused too.
//!
//! The holder removes the file when it is done. A contender that opened the
//! file just before that locks a file that is no longer in the directory, so
//! every lock is checked against the path (same device and inode) and taken
//! again on the new file when they differ.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Seek, Write};
use std::os::unix::fs::MetadataExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = ".lock";

/// How many times a lock is taken again after its file was replaced under
/// it (each time means another process finished between our open and our
/// lock; more than a few in a row do not happen).
const ATTEMPTS: usize = 8;

/// The process that holds a lock, as its lock file records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockOwner {
    /// Process id.
    pub pid: u32,
    /// Host name (a run directory on a shared file system can be locked
    /// from another machine).
    pub host: String,
}

impl LockOwner {
    /// This process.
    pub fn current() -> LockOwner {
        LockOwner {
            pid: std::process::id(),
            host: hostname(),
        }
    }
}

impl std::fmt::Display for LockOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} on host {}", self.pid, self.host)
    }
}

/// Why a run directory's lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another live process holds the lock.
    #[error(
        "{} is in use by another csam process ({}); wait for it to finish or stop it, then \
         try again",
        .dir.display(),
        holder(.owner)
    )]
    Busy {
        dir: PathBuf,
        owner: Option<LockOwner>,
    },
    /// The lock file was replaced under every attempt to lock it.
    #[error(
        "{} kept being replaced while this process tried to lock it; another process is \
         starting and stopping runs in {}",
        .path.display(),
        .dir.display()
    )]
    Replaced { path: PathBuf, dir: PathBuf },
    /// The lock file could not be opened, locked or written.
    #[error("{action} {}: {source}", .path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// The holder of a lock, as far as its lock file says.
fn holder(owner: &Option<LockOwner>) -> String {
    owner.as_ref().map_or_else(
        || "which has not recorded its pid yet".to_string(),
        ToString::to_string,
    )
}

/// [`LockError::Io`] of `action` on `path`.
fn io<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LockError + 'a {
    move |source| LockError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

/// The lock of one run directory, held while this value lives; dropping it
/// removes the lock file and releases the lock.
#[derive(Debug)]
pub struct RunLock {
    file: File,
    path: PathBuf,
}

impl RunLock {
    /// Takes the lock of the existing directory `dir`, or refuses with
    /// [`LockError::Busy`] naming the live process that holds it.
    pub fn acquire(dir: &Path) -> Result<RunLock, LockError> {
        let path = dir.join(LOCK_FILE);
        for _ in 0..ATTEMPTS {
            let mut file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false) // the holder's record stays until we hold the lock
                .open(&path)
                .map_err(io("open the lock file", &path))?;
            // SAFETY: flock on a descriptor that `file` keeps open.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let error = std::io::Error::last_os_error();
                return Err(match error.kind() {
                    ErrorKind::WouldBlock => LockError::Busy {
                        dir: dir.to_path_buf(),
                        owner: read_owner(&mut file),
                    },
                    _ => io("lock", &path)(error),
                });
            }
            if is_at(&file, &path) {
                write_owner(&mut file, &LockOwner::current())
                    .map_err(io("write the lock file", &path))?;
                return Ok(RunLock { file, path });
            }
        }
        Err(LockError::Replaced {
            path,
            dir: dir.to_path_buf(),
        })
    }
}

impl RunLock {
    /// Blocks until no process holds the lock of `dir` (at once when none
    /// does), taking nothing: for a process that needs a run another one
    /// is training, and will read it back (or resume it) once that one is
    /// done or gone.
    pub fn wait_until_free(dir: &Path) -> Result<(), LockError> {
        let path = dir.join(LOCK_FILE);
        match open_existing(&path)? {
            // Closing the file when it drops releases the shared lock at once.
            Some(file) => shared_lock(&file, 0).map_err(io("wait for the lock", &path)),
            None => Ok(()),
        }
    }

    /// Refuses with [`LockError::Busy`] while a live process holds the lock
    /// of `dir`, taking nothing and writing nothing (the directory may hold
    /// a user's files rather than a run).
    pub fn check_free(dir: &Path) -> Result<(), LockError> {
        let path = dir.join(LOCK_FILE);
        let Some(mut file) = open_existing(&path)? else {
            return Ok(());
        };
        match shared_lock(&file, libc::LOCK_NB) {
            Ok(()) => Ok(()),
            Err(error) if error.kind() == ErrorKind::WouldBlock => Err(LockError::Busy {
                dir: dir.to_path_buf(),
                owner: read_owner(&mut file),
            }),
            Err(error) => Err(io("lock", &path)(error)),
        }
    }
}

/// A blocking lock on a directory itself (flock(2) on its descriptor), for
/// a short section that must not interleave with another process's: two
/// experiments started at once on one new directory each check it and
/// write its settings file under this lock, so that neither sees the
/// other's half-written state. Released when dropped; writes nothing.
#[derive(Debug)]
pub struct DirectoryLock {
    _directory: File,
}

impl DirectoryLock {
    /// Waits for and takes the lock of the existing directory `dir`.
    pub fn hold(dir: &Path) -> Result<DirectoryLock, LockError> {
        let directory = File::open(dir).map_err(io("open the directory", dir))?;
        // SAFETY: flock on a descriptor that `directory` keeps open.
        if unsafe { libc::flock(directory.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(io("lock the directory", dir)(
                std::io::Error::last_os_error(),
            ));
        }
        Ok(DirectoryLock {
            _directory: directory,
        })
    }
}

/// A shared hold on an experiment's directory for as long as the experiment
/// uses it: flock(2) `LOCK_SH` on the directory's [`LOCK_FILE`], which stays
/// in place. Experiments of the same settings hold it side by side; one that
/// would replace the directory's settings (left by an attempt that never
/// started a run) first checks, under the [`DirectoryLock`], that no process
/// holds it, so that two different experiments started at once on one new
/// directory cannot both go on.
#[derive(Debug)]
pub struct ExperimentUse {
    _file: File,
}

impl ExperimentUse {
    /// Takes a shared hold on the existing directory `dir`, creating its
    /// lock file when missing. Meant to be taken under `dir`'s
    /// [`DirectoryLock`], like [`ExperimentUse::in_use`].
    pub fn hold(dir: &Path) -> Result<ExperimentUse, LockError> {
        let path = dir.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io("open the lock file", &path))?;
        shared_lock(&file, 0).map_err(io("lock", &path))?;
        Ok(ExperimentUse { _file: file })
    }

    /// Whether a process (this one included) holds `dir` through
    /// [`ExperimentUse::hold`]: an exclusive lock tried without waiting,
    /// released at once.
    pub fn in_use(dir: &Path) -> Result<bool, LockError> {
        let path = dir.join(LOCK_FILE);
        let Some(file) = open_existing(&path)? else {
            return Ok(false);
        };
        // SAFETY: flock on a descriptor that `file` keeps open.
        match unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } {
            0 => Ok(false),
            _ => match std::io::Error::last_os_error() {
                error if error.kind() == ErrorKind::WouldBlock => Ok(true),
                error => Err(io("lock", &path)(error)),
            },
        }
    }
}

/// The lock file at `path` opened for reading; `None` when there is none
/// (no process holds the lock).
fn open_existing(path: &Path) -> Result<Option<File>, LockError> {
    match File::open(path) {
        Ok(file) => Ok(Some(file)),
        Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
        Err(error) => Err(io("open the lock file", path)(error)),
    }
}

/// A shared flock on `file` (with `flags` such as `LOCK_NB`), released when
/// the file is closed.
fn shared_lock(file: &File, flags: libc::c_int) -> std::io::Result<()> {
    // SAFETY: flock on a descriptor that `file` keeps open.
    match unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | flags) } {
        0 => Ok(()),
        _ => Err(std::io::Error::last_os_error()),
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Remove only our own file (a user may have deleted it and another
        // process locked a new one); the lock goes with the descriptor.
        if is_at(&self.file, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// True when `path` names the file `file` has open.
fn is_at(file: &File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

/// The owner a lock file records; None while its holder has not written it
/// yet, or for a file that is not a lock record.
fn read_owner(file: &mut File) -> Option<LockOwner> {
    let mut text = String::new();
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(&text).ok()
}

fn write_owner(file: &mut File, owner: &LockOwner) -> std::io::Result<()> {
    // Invariant: a struct of a number and a string always serialises.
    let json = serde_json::to_string(owner).expect("LockOwner serialises to JSON");
    file.set_len(0)?;
    file.rewind()?;
    file.write_all(json.as_bytes())?;
    file.flush()
}

/// This machine's host name ("unknown" if the system does not say).
pub(crate) fn hostname() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `name.len()` bytes into `name`.
    if unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len()) } != 0 {
        return "unknown".to_string();
    }
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    String::from_utf8_lossy(&name[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(dir: &Path) -> LockOwner {
        serde_json::from_slice(&std::fs::read(dir.join(LOCK_FILE)).unwrap()).unwrap()
    }

    #[test]
    fn a_second_writer_is_refused_with_the_owner_named_until_the_first_is_done() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(recorded(dir.path()), LockOwner::current());

        // Another open file description, as another process would have.
        let err = RunLock::acquire(dir.path()).unwrap_err();
        let message = err.to_string();
        let pid = format!("pid {} on host {}", std::process::id(), hostname());
        assert!(matches!(err, LockError::Busy { .. }), "{err:?}");
        assert!(message.contains(&pid), "{message}");
        assert!(message.contains(&dir.path().display().to_string()));

        drop(first);
        assert!(!dir.path().join(LOCK_FILE).exists(), "removed when done");
        let _again = RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn waiting_returns_once_the_holder_is_done() {
        let dir = tempfile::tempdir().unwrap();
        RunLock::wait_until_free(dir.path()).unwrap();
        RunLock::check_free(dir.path()).unwrap();
        assert!(
            !dir.path().join(LOCK_FILE).exists(),
            "checking wrote nothing"
        );
        let held = RunLock::acquire(dir.path()).unwrap();
        let busy = RunLock::check_free(dir.path()).unwrap_err();
        assert!(
            matches!(busy, LockError::Busy { owner: Some(_), .. }),
            "{busy:?}"
        );
        let (sender, receiver) = std::sync::mpsc::channel();
        let path = dir.path().to_path_buf();
        let waiter = std::thread::spawn(move || {
            RunLock::wait_until_free(&path).unwrap();
            sender.send(()).unwrap();
        });
        let early = receiver.recv_timeout(std::time::Duration::from_millis(300));
        assert!(early.is_err(), "returned while the lock was held");
        drop(held);
        receiver
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("returned once the lock was released");
        waiter.join().unwrap();
    }

    #[test]
    fn a_lock_file_left_by_a_dead_process_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        child.wait().unwrap();
        let dead = LockOwner {
            pid: child.id(),
            host: hostname(),
        };
        std::fs::write(
            dir.path().join(LOCK_FILE),
            serde_json::to_string(&dead).unwrap(),
        )
        .unwrap();
        let _lock = RunLock::acquire(dir.path()).unwrap();
        assert_eq!(recorded(dir.path()), LockOwner::current());
    }

    #[test]
    fn a_replaced_lock_file_is_locked_again() {
        let dir = tempfile::tempdir().unwrap();
        let lock = RunLock::acquire(dir.path()).unwrap();
        // A user deletes the file: a new writer locks a new one, and the
        // first writer's drop leaves it alone.
        std::fs::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        let second = RunLock::acquire(dir.path()).unwrap();
        drop(lock);
        assert!(dir.path().join(LOCK_FILE).exists());
        assert!(RunLock::acquire(dir.path()).is_err());
        drop(second);
    }
}
