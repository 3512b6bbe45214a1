//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same
//! in-memory entry points the cargo-fuzz targets call, so plain `cargo test`
//! exercises every seed and regression input without libFuzzer.
//!
//! What a seed must do is in its name (see fuzz/src/corpus.rs). Every
//! successful parse must be self-consistent (the shape product equals the
//! number of elements).

use std::io::Cursor;
use std::path::Path;

use csam_calib::io::{csv, npy, npz, Elements, LoadedArray};

#[path = "../../../fuzz/src/corpus.rs"]
mod corpus;

/// Replays every corpus file of `target` through `parse` and checks the outcome
/// against the seed expectations.
fn replay<E: std::fmt::Display>(
    target: &str,
    parse: impl Fn(&[u8], &Path) -> Result<LoadedArray, E>,
) {
    for path in corpus::corpus_files(env!("CARGO_MANIFEST_DIR"), target) {
        let bytes = std::fs::read(&path).expect("readable corpus file");
        let outcome = parse(&bytes, &path);
        if let Ok(array) = &outcome {
            assert_eq!(
                array.shape.iter().product::<usize>(),
                array.elements.len(),
                "{}: shape {:?} disagrees with the element count",
                path.display(),
                array.shape
            );
        }
        corpus::check_outcome(&path, &outcome);
    }
}

#[test]
fn npy_corpus_replays() {
    replay("npy", |bytes, path| {
        npy::read_from(bytes, bytes.len() as u64, path)
    });
}

/// The `uint8` path on the same corpus: it never panics, and what it reads
/// is what the widening path reads.
#[test]
fn npy_corpus_replays_through_the_u8_path() {
    let mut read = 0;
    for path in corpus::corpus_files(env!("CARGO_MANIFEST_DIR"), "npy") {
        let bytes = std::fs::read(&path).expect("readable corpus file");
        let len = bytes.len() as u64;
        let Ok(array) = npy::NpyInput::new(&bytes[..], len, &path).and_then(npy::NpyInput::read_u8)
        else {
            continue;
        };
        let widened = npy::read_from(&bytes[..], len, &path).expect("a u8 array reads widened");
        let as_i64: Vec<i64> = array.data.iter().map(|&b| i64::from(b)).collect();
        assert_eq!(widened.shape, array.shape, "{}", path.display());
        assert_eq!(
            widened.elements,
            Elements::Integer(as_i64),
            "{}",
            path.display()
        );
        read += 1;
    }
    assert!(read > 0, "no uint8 seed in fuzz/corpus/npy");
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
