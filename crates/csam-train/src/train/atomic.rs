//! Atomic file replacement: write a temporary file next to the target, flush
//! it to disk, then rename it over the target. A reader (or a killed run)
//! sees either the old file or the new one, never a torn one.

use std::fs::File;
use std::path::{Path, PathBuf};

use super::error::{Result, TrainError};

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
    path.with_file_name(format!(".{stem}.tmp-{}{extension}", std::process::id()))
}

/// Creates `path` atomically: `write` fills the temporary path it is given
/// (any writer that takes a path: `VarStore::save`, an npy writer, ...).
pub fn write_atomic_with(path: &Path, write: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let tmp = temporary_path(path);
    let outcome = write(&tmp).and_then(|()| {
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(TrainError::io("flush", &tmp))?;
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
