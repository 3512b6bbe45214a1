//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same
//! in-memory entry points the cargo-fuzz targets call, so plain `cargo test`
//! exercises every seed and regression input without libFuzzer.
//!
//! Seeds (`seed_*`) are real files: each must parse, except the few named in
//! `EXPECTED_ERRORS`, which must be refused with an error. Any other file in
//! the directory (a crash reproducer kept as a regression) only has to return
//! without panicking. Every successful parse must be self-consistent (the shape
//! product equals the number of elements).

use std::io::Cursor;
use std::path::{Path, PathBuf};

use csam_calib::io::{csv, npy, npz, LoadedArray};

/// Seeds that are deliberately invalid input.
const EXPECTED_ERRORS: &[&str] = &[
    // Lines with different numbers of values.
    "seed_ragged.csv",
    // Two arrays, neither of them preferred, and no name given.
    "seed_ambiguous.npz",
    // float16 is not a supported dtype.
    "seed_matrix_f2.npy",
    // Fortran order is refused with a hint to save in C order.
    "seed_matrix_fortran.npy",
];

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|entry| entry.expect("readable directory entry").path())
        .filter(|path| path.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    files
}

/// Replays every corpus file of `target` through `parse` and checks the outcome
/// against the seed expectations.
fn replay<E: std::fmt::Display>(
    target: &str,
    parse: impl Fn(&[u8], &Path) -> Result<LoadedArray, E>,
) {
    for path in corpus(target) {
        let bytes = std::fs::read(&path).expect("readable corpus file");
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let outcome = parse(&bytes, &path);
        if let Ok(array) = &outcome {
            assert_eq!(
                array.shape.iter().product::<usize>(),
                array.elements.len(),
                "{name}: shape {:?} disagrees with the element count",
                array.shape
            );
        }
        if name.starts_with("seed_") {
            let expect_error = EXPECTED_ERRORS.contains(&name);
            match outcome {
                Ok(_) if expect_error => panic!("{name}: parsed but should be refused"),
                Err(e) if !expect_error => panic!("{name}: refused: {e}"),
                _ => {}
            }
        }
    }
}

#[test]
fn npy_corpus_replays() {
    replay("npy", |bytes, path| {
        npy::read_from(bytes, bytes.len() as u64, path)
    });
}

#[test]
fn npz_corpus_replays() {
    replay("npz", |bytes, path| {
        npz::read_from(Cursor::new(bytes), None, &["logits", "probs"], path)
    });
}

#[test]
fn csv_corpus_replays() {
    replay("csv", |bytes, _| {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        csv::parse(text)
    });
}
