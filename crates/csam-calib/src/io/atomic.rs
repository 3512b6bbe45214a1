//! Atomic file writes, the workspace's one writer of every file it keeps
//! (predictions, plots, a run's checkpoints and logs): a reader sees the old
//! file or the complete new one, never a partly written file, and a finished
//! file survives a crash or a power loss.
//!
//! Steps: the content goes to a temporary file in the target's directory (a
//! rename is atomic only within one file system), which is synced to disk,
//! renamed over the target, and then the directory is synced, so that the
//! rename itself is on disk when the write returns. A writer killed before
//! its rename leaves its temporary file; [`is_temporary_name`] recognises it.
//! Between the sync and the rename the test-only fault hook of
//! [`super::fault`] (`CSAM_FAULT`) can kill the process or fail the write.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::array::io_error;
use super::fault::inject_fault;
use crate::error::{CalibError, Result};

/// A step of an atomic write that the operating system refused.
#[derive(Debug, thiserror::Error)]
#[error("cannot {action} {}: {source}", path.display())]
pub struct AtomicWriteError {
    /// What failed: `flush`, `rename into place`, `sync the directory of`,
    /// or `write` (an injected full disk).
    pub action: &'static str,
    /// The target file (or the temporary file whose flush failed).
    pub path: PathBuf,
    pub source: std::io::Error,
}

impl From<AtomicWriteError> for CalibError {
    fn from(error: AtomicWriteError) -> Self {
        io_error(&error.path, error.source)
    }
}

/// Writes `bytes` to `path` atomically (see the module documentation).
/// The new file gets the usual permissions (0666 minus the umask); on
/// failure the temporary file is removed and the old file, if any, is kept.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically_with(path, |temporary| {
        std::fs::write(temporary, bytes).map_err(|e| io_error(path, e))
    })
}

/// Creates `path` atomically from any writer that takes a path (a tensor
/// library's `save`, an encoder): `write` fills the temporary path it is
/// given, which has the target's extension, since some writers pick the
/// format from it. Errors of `write` are returned as they are; the
/// writer's own failures become `E` through [`AtomicWriteError`].
pub fn write_atomically_with<E: From<AtomicWriteError>>(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let temporary = temporary_path(path);
    let outcome = write(&temporary).and_then(|()| {
        let failed = |action, at: &Path| {
            let at = at.to_path_buf();
            move |source| AtomicWriteError {
                action,
                path: at,
                source,
            }
        };
        File::open(&temporary)
            .and_then(|f| f.sync_all())
            .map_err(failed("flush", &temporary))?;
        inject_fault(path).map_err(failed("write", path))?;
        std::fs::rename(&temporary, path).map_err(failed("rename into place", path))?;
        Ok(())
    });
    if outcome.is_err() {
        // Best effort: the temporary file is garbage once the write failed.
        let _ = std::fs::remove_file(&temporary);
        return outcome;
    }
    sync_directory(path).map_err(|source| {
        E::from(AtomicWriteError {
            action: "sync the directory of",
            path: path.to_path_buf(),
            source,
        })
    })
}

/// Flushes the directory entry of `path` (its rename) to disk.
fn sync_directory(path: &Path) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// The marker between a temporary file's stem and its writer's process id.
const TEMPORARY_MARKER: &str = ".tmp-";

/// The temporary path written before the rename: `.STEM.tmp-PID-N.EXT`,
/// hidden, in the target's directory, unique per process (`PID`) and per
/// write within it (`N`), with the target's extension.
fn temporary_path(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let stem = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let extension = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{stem}{TEMPORARY_MARKER}{}-{n}{extension}",
        std::process::id()
    ))
}

/// True for the name of a temporary file of [`write_atomically_with`]
/// (`.STEM.tmp-PID-N[.EXT]`), or of this writer in csam 0.1, which named
/// them `.STEM.tmp-PID[.EXT]` and `.NAME.PID.N.tmp` (a run directory of
/// that version may hold one): never a file anyone keeps, garbage once its
/// writer is gone.
pub fn is_temporary_name(file_name: &str) -> bool {
    let Some(hidden) = file_name.strip_prefix('.') else {
        return false;
    };
    let numeric = |part: &str| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit());
    let marked = hidden
        .split_once(TEMPORARY_MARKER)
        .is_some_and(|(_, tail)| {
            let ids = tail.split('.').next().unwrap_or_default();
            match ids.split_once('-') {
                Some((pid, n)) => numeric(pid) && numeric(n),
                None => numeric(ids),
            }
        });
    let suffixed = hidden.strip_suffix(".tmp").is_some_and(|inner| {
        let mut parts = inner.rsplitn(3, '.');
        let mut next_numeric = || parts.next().is_some_and(numeric);
        next_numeric() && next_numeric() && parts.next().is_some_and(|n| !n.is_empty())
    });
    marked || suffixed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_keeps_directory_and_extension() {
        let temporary = temporary_path(Path::new("/run/model.safetensors"));
        assert_eq!(temporary.parent(), Some(Path::new("/run")));
        assert_eq!(temporary.extension().unwrap(), "safetensors");
        let name = temporary.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(".model.tmp-"), "{name}");
        assert_ne!(
            temporary,
            temporary_path(Path::new("/run/model.safetensors"))
        );
    }

    #[test]
    fn temporary_names_are_recognised() {
        for target in [
            "/run/val_logits.npy",
            "/run/model.safetensors",
            "/run/README",
        ] {
            let temporary = temporary_path(Path::new(target));
            let name = temporary.file_name().unwrap().to_string_lossy();
            assert!(is_temporary_name(&name), "{name}");
        }
        // The names of csam 0.1's two writers.
        for old in [".state.tmp-41.json", ".val_logits.npy.41.0.tmp"] {
            assert!(is_temporary_name(old), "{old}");
        }
        for kept in [
            "val_logits.npy",
            "model.safetensors",
            "weights-3.safetensors",
            ".hidden",
            ".notes.tmp-draft.txt",
            ".notes.tmp-1-draft.txt",
            "eval-a.tmp-1.json",
            ".a.tmp",
            ".a.x.1.tmp",
            "a.1.2.tmp",
            ".1.2.tmp",
        ] {
            assert!(!is_temporary_name(kept), "{kept}");
        }
    }

    #[test]
    fn replaces_existing_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out.bin");
        std::fs::write(&p, b"old contents").unwrap();
        write_atomically(&p, b"new").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn failed_write_keeps_the_old_file_and_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomically(&path, b"old").unwrap();
        let err = write_atomically_with(&path, |temporary| {
            std::fs::write(temporary, b"half").unwrap();
            Err(io_error(temporary, std::io::ErrorKind::Other.into()))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn syncs_the_directory_of_a_bare_name_too() {
        // A bare name has an empty parent, which cannot be opened: the
        // directory synced is the current one.
        assert!(File::open("").is_err());
        sync_directory(Path::new("bare.txt")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        sync_directory(&dir.path().join("a.json")).unwrap();
        assert!(sync_directory(&dir.path().join("missing/a.json")).is_err());
    }

    #[test]
    fn missing_directory_is_an_io_error_naming_the_target() {
        let e = write_atomically(Path::new("/no/such/dir/x.npy"), b"x").unwrap_err();
        assert!(e.to_string().starts_with("/no/such/dir/x.npy:"), "{e}");
    }
}
