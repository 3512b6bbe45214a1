//! Atomic file replacement: write a temporary file next to the target, flush
//! it to disk, then rename it over the target. A reader (or a killed run)
//! sees either the old file or the new one, never a torn one. A killed
//! writer can leave its temporary file behind; [`is_temporary`] recognises
//! it so that a resumed run ignores and removes it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::error::{Result, TrainError};

/// The marker between a temporary file's stem and the writer's process id.
const TEMPORARY_MARKER: &str = ".tmp-";

/// The temporary path `write_atomic` writes to before the rename: hidden,
/// in the same directory (a rename is atomic only within one file system),
/// unique per process, and with the target's extension, since some writers
/// pick the format from it (`VarStore::save` writes safetensors only to a
/// `.safetensors` name).
fn temporary_path(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let extension = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{stem}{TEMPORARY_MARKER}{}{extension}",
        std::process::id()
    ))
}

/// True for a file name that [`write_atomic_with`] (`.STEM.tmp-PID[.EXT]`)
/// or `csam_calib`'s atomic writer (the `.npy` files) uses for its
/// temporary file: never a file the run keeps, garbage once its writer is
/// gone.
pub fn is_temporary(file_name: &str) -> bool {
    let ours = file_name.strip_prefix('.').is_some_and(|rest| {
        rest.split_once(TEMPORARY_MARKER).is_some_and(|(_, tail)| {
            let pid = tail.split('.').next().unwrap_or_default();
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
        })
    });
    ours || csam_calib::io::is_temporary_name(file_name)
}

/// Fault injection for the crash-safety tests, read once from the
/// environment: `CSAM_FAULT=kill:NAME` SIGKILLs the process after the
/// temporary file of target NAME (a file name, e.g. `state.json`) is written
/// and flushed, before the rename, the one moment a time-based kill cannot
/// hit on purpose; `CSAM_FAULT=enospc:NAME` fails that write as a full disk
/// would. Unset (always, outside tests) it costs one lookup per process.
#[derive(Debug, PartialEq)]
enum Fault {
    Kill(String),
    NoSpace(String),
}

fn fault() -> Option<&'static Fault> {
    static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
    FAULT
        .get_or_init(|| {
            let spec = std::env::var("CSAM_FAULT").ok()?;
            match spec.split_once(':')? {
                ("kill", name) => Some(Fault::Kill(name.to_string())),
                ("enospc", name) => Some(Fault::NoSpace(name.to_string())),
                _ => None,
            }
        })
        .as_ref()
}

/// Applies the injected fault, if any, to the write of `path`.
fn inject_fault(path: &Path) -> Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy());
    match (fault(), name) {
        (Some(Fault::Kill(target)), Some(name)) if *target == name => {
            // SAFETY: kill(2) on our own pid; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            Ok(())
        }
        (Some(Fault::NoSpace(target)), Some(name)) if *target == name => Err(TrainError::Io {
            action: "write",
            path: path.to_path_buf(),
            source: std::io::Error::from_raw_os_error(libc::ENOSPC),
        }),
        _ => Ok(()),
    }
}

/// Creates `path` atomically: `write` fills the temporary path it is given
/// (any writer that takes a path: `VarStore::save`, an npy writer, ...).
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temporary_path(path);
    let outcome = write(&tmp).and_then(|()| {
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(TrainError::io("flush", &tmp))?;
        inject_fault(path)?;
        std::fs::rename(&tmp, path).map_err(TrainError::io("rename into place", path))
    });
    if outcome.is_err() {
        // Best effort: the temporary file is garbage once the write failed.
        let _ = std::fs::remove_file(&tmp);
    }
    outcome
}

/// Writes `bytes` to `path` atomically.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic_with(path, |tmp| {
        std::fs::write(tmp, bytes).map_err(TrainError::io("write", tmp))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_keeps_directory_and_extension() {
        let tmp = temporary_path(Path::new("/run/model.safetensors"));
        assert_eq!(tmp.parent(), Some(Path::new("/run")));
        assert_eq!(tmp.extension().unwrap(), "safetensors");
        assert!(tmp
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(".model.tmp-"));
    }

    #[test]
    fn temporaries_are_recognised_and_kept_files_are_not() {
        for path in ["/run/model.safetensors", "/run/state.json", "/run/README"] {
            let tmp = temporary_path(Path::new(path));
            let name = tmp.file_name().unwrap().to_string_lossy();
            assert!(is_temporary(&name), "{name}");
        }
        assert!(is_temporary(".val_logits.npy.41.0.tmp"));
        for kept in [
            "model.safetensors",
            "weights-3.safetensors",
            ".hidden",
            ".notes.tmp-draft.txt",
            "eval-a.tmp-1.json",
        ] {
            assert!(!is_temporary(kept), "{kept}");
        }
    }

    #[test]
    fn replaces_content_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
    }

    #[test]
    fn failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err(TrainError::RunDir("simulated failure".into()))
        });
        assert!(err.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
