//! Atomic file writes: readers see the old file or the complete new one, never
//! a partly written file.

use std::io::Write;
use std::path::Path;

use super::array::io_error;
use crate::error::Result;

/// Writes `bytes` to `path` through a temporary file in the same directory,
/// synced to disk and then renamed over `path`.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut temp = tempfile::Builder::new()
        .prefix(".csam-")
        .suffix(".tmp")
        .tempfile_in(dir)
        .map_err(|e| io_error(path, e))?;
    temp.write_all(bytes).map_err(|e| io_error(path, e))?;
    temp.as_file().sync_all().map_err(|e| io_error(path, e))?;
    temp.persist(path).map_err(|e| io_error(path, e.error))?;
    Ok(())
}
