//! Checks made before a run writes anything, so that a run directory that
//! cannot be created or written, or a file system too full for what the run
//! will write, is a clear error at the start instead of a failure hours in.
//! A disk that fills up during the run anyway is handled by the atomic
//! writes: the previous checkpoint stays intact (see [`super::atomic`]).

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use tch::nn::VarStore;

/// A run directory that the run could not write, found before it starts.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    /// A path the operating system cannot take.
    #[error("{} contains a NUL byte", .path.display())]
    NulInPath { path: PathBuf },
    /// The run directory's nearest existing ancestor is a file.
    #[error(
        "cannot create the run directory {}: {} is not a directory",
        .root.display(),
        .existing.display()
    )]
    NotADirectory { root: PathBuf, existing: PathBuf },
    /// The run directory, or the ancestor it would be created in, is not
    /// writable.
    #[error("{} {} is not writable ({reason})", unwritable(.root, .existing), .existing.display())]
    NotWritable {
        root: PathBuf,
        existing: PathBuf,
        /// Said inside the message, so not a separate cause.
        reason: std::io::Error,
    },
    /// The file system could not say how much space it has.
    #[error("query free space of {}: {source}", .path.display())]
    FreeSpace {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file system has less space than the run writes.
    #[error(
        "not enough free space for the run directory {}: {} writes up to {} and {} has {} \
         available",
        .root.display(),
        match .resuming {
            true => "the rest of the run",
            false => "the run",
        },
        mebibytes(*.needed),
        .existing.display(),
        mebibytes(*.available)
    )]
    NoSpace {
        root: PathBuf,
        resuming: bool,
        needed: u64,
        existing: PathBuf,
        available: u64,
    },
}

/// The subject of [`PreflightError::NotWritable`]: the run directory itself,
/// or the creation of it below `existing`.
fn unwritable(root: &Path, existing: &Path) -> String {
    if existing == root {
        "the run directory".to_string()
    } else {
        format!("cannot create the run directory {}:", root.display())
    }
}

type Result<T> = std::result::Result<T, PreflightError>;

/// Slack for the small files (config, logs, JSON reports), bytes.
const SMALL_FILES_BYTES: u64 = 1 << 20;

/// The deepest existing ancestor of `path` (itself included); `.` for a
/// relative path none of whose ancestors exist.
fn nearest_existing(path: &Path) -> PathBuf {
    path.ancestors()
        .find(|p| !p.as_os_str().is_empty() && p.exists())
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn c_path(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| PreflightError::NulInPath {
        path: path.to_path_buf(),
    })
}

/// Refuses a run directory that cannot be created or written: a path below
/// a regular file, or a directory (or nearest existing parent) without
/// write permission or on a read-only file system. Creates nothing.
pub fn check_writable(root: &Path) -> Result<()> {
    let existing = nearest_existing(root);
    if !existing.is_dir() {
        return Err(PreflightError::NotADirectory {
            root: root.to_path_buf(),
            existing,
        });
    }
    let path = c_path(&existing)?;
    // SAFETY: `path` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::access(path.as_ptr(), libc::W_OK | libc::X_OK) } != 0 {
        return Err(PreflightError::NotWritable {
            root: root.to_path_buf(),
            existing,
            reason: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Bytes available to this user on the file system holding `path`.
fn available_bytes(path: &Path) -> Result<u64> {
    let c = c_path(path)?;
    // SAFETY: statvfs fills the zeroed struct it is given; `c` outlives the call.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut stats) } != 0 {
        return Err(PreflightError::FreeSpace {
            path: path.to_path_buf(),
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(stats.f_bavail as u64 * stats.f_frsize as u64)
}

/// The size of a checkpoint in weights: the weights and the optimizer
/// state (at most two more, AdamW's two moments).
const CHECKPOINT_WEIGHTS: u64 = 3;

/// An upper estimate of the bytes a run writes into its directory at its
/// fullest: with W the weights' size, a checkpoint (3 W) twice while the
/// next epoch's replaces it (6 W); `model.safetensors`,
/// `model-last.safetensors` and one temporary copy add 3 W. Then the
/// `prediction_values` f32 logits and their labels, and the small files.
pub fn estimate_run_bytes(weight_bytes: u64, prediction_values: u64, predictions: u64) -> u64 {
    (2 * CHECKPOINT_WEIGHTS + 3) * weight_bytes
        + 4 * prediction_values
        + 8 * predictions
        + SMALL_FILES_BYTES
}

/// What a resumed run still adds to its directory, given the whole run's
/// estimate `run_bytes` ([`estimate_run_bytes`]): the checkpoint it resumes
/// from and `model.safetensors` (written with the first epoch) are already
/// on disk (4 W), so what is left is the next checkpoint beside the last,
/// `model-last.safetensors` and one temporary copy (5 W), the predictions
/// and the small files.
pub fn estimate_resume_bytes(run_bytes: u64, weight_bytes: u64) -> u64 {
    run_bytes.saturating_sub((CHECKPOINT_WEIGHTS + 1) * weight_bytes)
}

/// The size in bytes of the variables of `vs`.
pub fn weight_bytes(vs: &VarStore) -> u64 {
    vs.variables()
        .values()
        .map(|t| (t.numel() * t.kind().elt_size_in_bytes()) as u64)
        .sum()
}

/// Refuses to start when the file system that will hold `root` has less
/// than `needed` bytes available; `resuming` says that `needed` is what the
/// rest of a resumed run writes.
pub fn check_free_space(root: &Path, needed: u64, resuming: bool) -> Result<()> {
    let existing = nearest_existing(root);
    let available = available_bytes(&existing)?;
    if available < needed {
        return Err(PreflightError::NoSpace {
            root: root.to_path_buf(),
            resuming,
            needed,
            existing,
            available,
        });
    }
    Ok(())
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_below_a_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("notes.txt");
        std::fs::write(&file, "mine").unwrap();
        let err = check_writable(&file.join("run")).unwrap_err().to_string();
        assert!(err.contains("notes.txt is not a directory"), "{err}");
        assert!(check_writable(&dir.path().join("new/run")).is_ok());
    }

    #[test]
    fn relative_paths_start_from_the_current_directory() {
        assert_eq!(
            nearest_existing(Path::new("no-such-dir-xyz/run")),
            Path::new(".")
        );
    }

    #[test]
    fn more_than_the_disk_holds_is_refused_and_little_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let run = dir.path().join("run");
        let available = available_bytes(dir.path()).unwrap();
        assert!(available > 0);
        check_free_space(&run, 1, false).unwrap();
        let too_much = available.saturating_mul(2).max(u64::MAX / 2);
        let err = check_free_space(&run, too_much, false)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not enough free space"), "{err}");
        assert!(err.contains(": the run writes up to"), "{err}");
        let err = check_free_space(&run, too_much, true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("the rest of the run writes up to"), "{err}");
    }

    /// The case of the report that asked for it: the MLP 784-256-256-10
    /// (f32) on 2,000 + 2,000 predictions of 10 classes, a 13 MB file
    /// system that held epoch 4's checkpoint and 9.9 MiB free. The whole
    /// run's estimate (10.4 MiB) does not fit; what the resumed run still
    /// writes does, and it is the whole run less the 4 W already on disk.
    #[test]
    fn a_resume_counts_only_what_is_still_to_be_written() {
        let weights = 4 * (784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
        let whole = estimate_run_bytes(weights, 4000 * 10, 4000);
        let rest = estimate_resume_bytes(whole, weights);
        let free = (9.9 * (1u64 << 20) as f64) as u64;
        assert_eq!(mebibytes(whole), "10.4 MiB");
        assert!(whole > free && rest < free, "{whole} {rest} {free}");
        assert_eq!(whole - rest, 4 * weights);
        // Still more than the next checkpoint and the final files need.
        assert!(rest >= 5 * weights + 4 * 4000 * 10 + 8 * 4000);
    }

    #[test]
    fn estimate_grows_with_weights_and_predictions() {
        let base = estimate_run_bytes(1000, 10, 5);
        assert!(estimate_run_bytes(2000, 10, 5) > base + 8000);
        assert!(estimate_run_bytes(1000, 20, 5) > base);
        assert!(base >= SMALL_FILES_BYTES);
    }
}
