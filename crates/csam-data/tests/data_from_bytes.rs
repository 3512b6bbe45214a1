//! `csam_data::parse`: the binary parsers on bytes in memory (the
//! fuzz targets' entry point) give what the path loaders give for the same
//! files, and refuse absurd headers before allocating.

use std::io::Write;
use std::path::{Path, PathBuf};

use csam_data::parse::{self, InMemory};
use csam_data::{load, DataError, DatasetSpec};

fn repo_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data_fixtures")
}

fn named<'a>(name: &'a str, bytes: &'a [u8]) -> InMemory<'a> {
    InMemory {
        name: Path::new(name),
        bytes,
    }
}

#[test]
fn gzipped_idx_bytes_equal_the_directory_load() {
    let dir = repo_data().join("fashion-mnist");
    let images = std::fs::read(dir.join("t10k-images-idx3-ubyte.gz")).unwrap();
    let labels = std::fs::read(dir.join("t10k-labels-idx1-ubyte.gz")).unwrap();
    let from_bytes = parse::idx(named("i.gz", &images), named("l.gz", &labels)).unwrap();
    let spec: DatasetSpec = format!("idx:{}", dir.display()).parse().unwrap();
    let from_dir = load(&spec).unwrap();
    assert_eq!(from_bytes.test.images, from_dir.test.images);
    assert_eq!(from_bytes.test.labels, from_dir.test.labels);
    assert_eq!(from_bytes.test.n_classes, 10);
}

#[test]
fn npy_bytes_equal_the_file_load() {
    let images = std::fs::read(fixtures().join("cifar10c_images.npy")).unwrap();
    let labels = std::fs::read(fixtures().join("cifar10c_labels.npy")).unwrap();
    let from_bytes = parse::npy(named("i", &images), named("l", &labels), Some(10)).unwrap();
    let spec: DatasetSpec = format!(
        "npy:{},{},10",
        fixtures().join("cifar10c_images.npy").display(),
        fixtures().join("cifar10c_labels.npy").display()
    )
    .parse()
    .unwrap();
    let from_files = load(&spec).unwrap();
    assert_eq!(from_bytes.test.images, from_files.test.images);
    assert_eq!(from_bytes.test.labels, from_files.test.labels);
}

/// `n` CIFAR-100 records: coarse label `i % 20`, fine label `i`, pixels `i`.
fn cifar100_records(n: u8) -> Vec<u8> {
    (0..n)
        .flat_map(|i| [vec![i % 20, i], vec![i; 3072]].concat())
        .collect()
}

#[test]
fn cifar_batches_parse_whole_records_only() {
    let batch = cifar100_records(3);
    let source = parse::cifar100_batch(named("train.bin", &batch)).unwrap();
    assert_eq!(source.test.labels, vec![0, 1, 2]);
    assert_eq!(source.test.n_classes, 100);
    // Read as CIFAR-10 the same bytes are 3,074-byte records of 3,073: the
    // record layout does not divide the length.
    assert!(matches!(
        parse::cifar10_batch(named("data_batch_1.bin", &batch)),
        Err(DataError::Truncated { .. })
    ));
    assert!(matches!(
        parse::cifar100_batch(named("train.bin", &batch[..batch.len() - 1])),
        Err(DataError::Truncated { .. })
    ));
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn gzipped_idx_claiming_a_trillion_pixels_is_refused_before_allocating() {
    // 10^6 images of 1000x1000 pixels: 10^12 bytes, in a gzip of ~40 bytes
    // that can expand to at most ~40 kB.
    let mut header = vec![0, 0, 8, 3];
    for d in [1_000_000u32, 1_000, 1_000] {
        header.extend_from_slice(&d.to_be_bytes());
    }
    let images = gzip(&header);
    let labels = [0, 0, 8, 1, 0, 0, 0, 1, 0];
    match parse::idx(named("images.gz", &images), named("labels", &labels)) {
        Err(DataError::BadHeader { offset, reason, .. }) => {
            assert_eq!(offset, 16);
            assert!(reason.contains("1000000000000 bytes"), "{reason}");
        }
        other => panic!("expected BadHeader, got {other:?}"),
    }
}
