//! Atomic file writes: readers see the old file or the complete new one, never
//! a partly written file.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use super::array::io_error;
use crate::error::Result;

/// Writes `bytes` to `path` through a temporary file in the same directory
/// (`.NAME.PID.N.tmp`), synced to disk and then renamed over `path`. The new
/// file gets the usual permissions (0666 minus the umask); on failure the
/// temporary file is removed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let temp = temporary_sibling(path);
    let result = write_synced(&temp, bytes).and_then(|()| std::fs::rename(&temp, path));
    if result.is_err() {
        // Best effort: the temporary file may not exist if creating it failed.
        let _ = std::fs::remove_file(&temp);
    }
    result.map_err(|e| io_error(path, e))
}

fn write_synced(temp: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).open(temp)?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// A name next to `path` that no other writer in this or another process uses.
fn temporary_sibling(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.{}.{n}.tmp", std::process::id()))
}

/// True for a name [`write_atomically`] gives its temporary files
/// (`.NAME.PID.N.tmp`): a leftover of a writer killed before its rename,
/// never a file anyone keeps.
pub fn is_temporary_name(file_name: &str) -> bool {
    let Some(inner) = file_name
        .strip_prefix('.')
        .and_then(|rest| rest.strip_suffix(".tmp"))
    else {
        return false;
    };
    let mut parts = inner.rsplitn(3, '.');
    let numeric = |part: Option<&str>| {
        part.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
    };
    numeric(parts.next()) && numeric(parts.next()) && parts.next().is_some_and(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_are_recognised() {
        let temp = temporary_sibling(Path::new("/run/val_logits.npy"));
        assert!(is_temporary_name(
            &temp.file_name().unwrap().to_string_lossy()
        ));
        for kept in [
            "val_logits.npy",
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
    fn missing_directory_is_an_io_error_naming_the_target() {
        let e = write_atomically(Path::new("/no/such/dir/x.npy"), b"x").unwrap_err();
        assert!(e.to_string().starts_with("/no/such/dir/x.npy:"), "{e}");
    }
}
