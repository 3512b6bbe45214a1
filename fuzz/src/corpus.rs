//! The committed corpus of a fuzz target, replayed by plain `cargo test`
//! (crates/*/tests/fuzz_corpus.rs include this file with `#[path]`).
//!
//! Seeds named `seed_bad_*` are invalid on purpose and must be refused; other
//! seeds (`seed_*`) are real files and must load; any other file (a crash
//! reproducer kept as a regression) only has to return without panicking.

use std::path::{Path, PathBuf};

/// The files of `fuzz/corpus/<target>/`, sorted; `crate_dir` is the replaying
/// crate's `CARGO_MANIFEST_DIR` (two levels below the repository root).
pub fn corpus_files(crate_dir: &str, target: &str) -> Vec<PathBuf> {
    let dir = Path::new(crate_dir).join("../../fuzz/corpus").join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    files
}

/// Panics unless `outcome` is what the name of corpus file `path` promises.
pub fn check_outcome<T, E: std::fmt::Display>(path: &Path, outcome: &Result<T, E>) {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if name.starts_with("seed_bad_") {
        assert!(
            outcome.is_err(),
            "{}: loaded but is invalid",
            path.display()
        );
    } else if name.starts_with("seed_") {
        if let Err(e) = outcome {
            panic!("{}: refused: {e}", path.display());
        }
    }
}
