//! The run's atomic file writes, as [`TrainError`]s: csam-calib's one atomic
//! writer ([`csam_calib::io::write_atomically_with`]: temporary file in the
//! same directory, synced, renamed over the target, directory synced; with
//! the `CSAM_FAULT` hook of the crash-safety tests). A reader (or a killed
//! run) sees either the old file or the new one, never a torn one; a killed
//! writer can leave its temporary file behind, which [`is_temporary`]
//! recognises so that a resumed run ignores and removes it.

use std::path::Path;

use csam_calib::io::{write_atomically_with, AtomicWriteError};

use super::error::{Result, TrainError};

pub use csam_calib::io::is_temporary_name as is_temporary;

impl From<AtomicWriteError> for TrainError {
    fn from(error: AtomicWriteError) -> Self {
        TrainError::Io {
            action: error.action,
            path: error.path,
            source: error.source,
        }
    }
}

/// Creates `path` atomically: `write` fills the temporary path it is given
/// (any writer that takes a path: `VarStore::save`, an npy writer, ...).
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    write_atomically_with(path, write)
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
    fn writes_and_passes_the_writers_own_error_through() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.json");
        write_atomic(&path, b"old").unwrap();
        let err = write_atomic_with(&path, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err(TrainError::NoBestEpoch)
        });
        assert!(matches!(&err, Err(TrainError::NoBestEpoch)), "{err:?}");
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn temporaries_are_recognised_and_kept_files_are_not() {
        assert!(is_temporary(".val_logits.npy.41.0.tmp"));
        assert!(is_temporary(".state.tmp-41.json"));
        for kept in [
            "model.safetensors",
            ".notes.tmp-draft.txt",
            "eval-a.tmp-1.json",
        ] {
            assert!(!is_temporary(kept), "{kept}");
        }
    }

    #[test]
    fn writer_failures_keep_their_action() {
        let e = write_atomic(Path::new("/no/such/dir/state.json"), b"{}").unwrap_err();
        assert!(
            e.to_string().starts_with("write /no/such/dir/.state.tmp-"),
            "{e}"
        );
        let rename = TrainError::from(AtomicWriteError {
            action: "rename into place",
            path: "/run/state.json".into(),
            source: std::io::ErrorKind::PermissionDenied.into(),
        });
        assert!(
            rename
                .to_string()
                .starts_with("rename into place /run/state.json:"),
            "{rename}"
        );
    }
}
