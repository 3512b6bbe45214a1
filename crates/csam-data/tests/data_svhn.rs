//! `svhn:DIR` on MAT-files written by scipy at test time
//! (`tests/data_fixtures/make_svhn.py`): pixels and labels equal what
//! torchvision's `SVHN` computes from the same files (its transpose and its
//! 10 -> 0 mapping, done by the script in numpy), compressed or not, labels
//! stored as uint8 or double; and the malformed files: truncated, wrong
//! magic, v7.3, big-endian, element sizes that do not add up.
//!
//! Needs the project venv's python with scipy (`cargo xtask setup` installs
//! it); skips with a notice without it.

mod support;

use std::path::Path;
use std::sync::OnceLock;

use csam_data::parse::{self, InMemory};
use csam_data::{load, DataError, DataSource, DatasetSpec};
use support::{expected, python, run_fixture_script};

/// The fixture directory, written once per test binary; None without python.
fn fixtures() -> Option<&'static Path> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    DIR.get_or_init(|| {
        let python = python()?;
        let dir = tempfile::tempdir().unwrap();
        run_fixture_script(&python, "make_svhn.py", &[dir.path()]);
        Some(dir)
    })
    .as_ref()
    .map(|d| d.path())
}

fn load_svhn(dir: &Path) -> Result<DataSource, DataError> {
    load(&DatasetSpec::Svhn(dir.to_path_buf()))
}

#[test]
fn scipy_files_load_as_torchvision_reads_them() {
    let Some(fixtures) = fixtures() else { return };
    for variant in ["compressed", "plain"] {
        let dir = fixtures.join(variant);
        let source = load_svhn(&dir).unwrap();
        let train = source.train.expect("train_32x32.mat is there");
        for (part, loaded) in [("train", &train), ("test", &source.test)] {
            let reference = expected(&dir, part, 10);
            assert_eq!(
                (loaded.n, loaded.channels, loaded.height, loaded.width),
                (reference.n, 3, 32, 32),
                "{variant} {part}"
            );
            assert_eq!(loaded.n_classes, 10);
            assert_eq!(loaded.labels, reference.labels, "{variant} {part} labels");
            assert_eq!(loaded.labels[0], 0, "the digit stored as 10 is label 0");
            assert!(loaded.images == reference.images, "{variant} {part} pixels");
        }
        assert_eq!(
            source.test.name,
            format!("svhn:{}/test", dir.display()),
            "parts are named after the spec"
        );
    }
}

#[test]
fn train_file_is_optional_and_test_file_is_not() {
    let Some(fixtures) = fixtures() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let test = fixtures.join("plain/test_32x32.mat");
    std::fs::copy(&test, tmp.path().join("test_32x32.mat")).unwrap();
    let source = load_svhn(tmp.path()).unwrap();
    assert!(source.train.is_none());
    assert_eq!(source.test.n, 7);
    std::fs::remove_file(tmp.path().join("test_32x32.mat")).unwrap();
    match load_svhn(tmp.path()) {
        Err(DataError::Missing { path, hint }) => {
            assert!(path.ends_with("test_32x32.mat"), "{path:?}");
            assert!(hint.contains("train_32x32.mat"), "{hint}");
        }
        other => panic!("expected Missing, got {other:?}"),
    }
}

fn parse_mat(bytes: &[u8]) -> Result<DataSource, DataError> {
    parse::svhn_mat(InMemory {
        name: Path::new("test_32x32.mat"),
        bytes,
    })
}

/// The uncompressed test file's bytes, and the offset of its first element.
fn plain_file(fixtures: &Path) -> Vec<u8> {
    std::fs::read(fixtures.join("plain/test_32x32.mat")).unwrap()
}

fn bad_header(result: Result<DataSource, DataError>) -> (u64, String) {
    match result {
        Err(DataError::BadHeader { offset, reason, .. }) => (offset, reason),
        other => panic!("expected BadHeader, got {other:?}"),
    }
}

#[test]
fn the_same_bytes_parse_from_memory() {
    let Some(fixtures) = fixtures() else { return };
    let from_memory = parse_mat(&plain_file(fixtures)).unwrap().test;
    let reference = expected(&fixtures.join("plain"), "test", 10);
    assert_eq!(from_memory.labels, reference.labels);
    assert!(from_memory.images == reference.images);
}

#[test]
fn truncated_files_name_the_offset() {
    let Some(fixtures) = fixtures() else { return };
    let plain = plain_file(fixtures);
    for cut in [0, 100, 128 + 4, plain.len() - 1] {
        match parse_mat(&plain[..cut]) {
            Err(DataError::Truncated { offset, .. }) => {
                assert_eq!(offset, cut as u64, "cut at {cut}")
            }
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
    let compressed = std::fs::read(fixtures.join("compressed/test_32x32.mat")).unwrap();
    // A cut inside the zlib stream is a broken stream or a short element.
    let result = parse_mat(&compressed[..compressed.len() - 10]);
    assert!(
        matches!(
            result,
            Err(DataError::Truncated { .. } | DataError::Compressed { .. })
        ),
        "{result:?}"
    );
}

#[test]
fn wrong_magic_v73_and_big_endian_are_refused_clearly() {
    let Some(fixtures) = fixtures() else { return };
    let plain = plain_file(fixtures);
    let mut v4 = plain.clone();
    v4[..6].copy_from_slice(b"\0\0\0\0\x01\0");
    assert!(matches!(
        parse_mat(&v4),
        Err(DataError::BadMagic { offset: 0, .. })
    ));

    // A v7.3 file as MATLAB writes it: its own header text, version 0x0200,
    // then HDF5 (the superblock at byte 512).
    let mut v73 = vec![0u8; 1024];
    let text = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 .";
    v73[..text.len()].copy_from_slice(text);
    v73[124..128].copy_from_slice(&[0x00, 0x02, b'I', b'M']);
    v73[512..520].copy_from_slice(b"\x89HDF\r\n\x1a\n");
    let (_, reason) = bad_header(parse_mat(&v73));
    assert!(
        reason.contains("v7.3") && reason.contains("HDF5"),
        "{reason}"
    );
    // Only the version word says so (a header text edited by hand).
    let mut version_only = plain.clone();
    version_only[124..126].copy_from_slice(&[0x00, 0x02]);
    let (offset, reason) = bad_header(parse_mat(&version_only));
    assert!(reason.contains("v7.3"), "{offset} {reason}");

    let mut big_endian = plain.clone();
    big_endian[124..128].copy_from_slice(&[0x01, 0x00, b'M', b'I']);
    let (offset, reason) = bad_header(parse_mat(&big_endian));
    assert_eq!(offset, 126);
    assert!(reason.contains("big-endian"), "{reason}");

    let mut no_indicator = plain.clone();
    no_indicator[126..128].copy_from_slice(b"XX");
    assert!(matches!(
        parse_mat(&no_indicator),
        Err(DataError::BadMagic { offset: 126, .. })
    ));
}

/// Little-endian `u32` at `at`.
fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

fn set_word(bytes: &mut [u8], at: usize, value: u32) {
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

#[test]
fn element_sizes_that_do_not_add_up_are_refused_at_their_offset() {
    let Some(fixtures) = fixtures() else { return };
    let plain = plain_file(fixtures);
    // The first matrix (X): tag at 128, flags at 136, dims at 152
    // (miINT32, 16 bytes: 32 32 3 7), name at 176 (small), values at 184.
    assert_eq!(
        (word(&plain, 128), word(&plain, 152), word(&plain, 156)),
        (14, 5, 16),
        "scipy's layout of X"
    );
    assert_eq!(word(&plain, 184), 2, "X's values are miUINT8");

    // The matrix claims more bytes than the file holds.
    let mut long_matrix = plain.clone();
    set_word(&mut long_matrix, 132, word(&plain, 132) + 8);
    assert!(parse_mat(&long_matrix).is_err());

    // The values claim one byte more than the dimensions need.
    let mut values = plain.clone();
    set_word(&mut values, 188, word(&plain, 188) + 1);
    let (offset, reason) = bad_header(parse_mat(&values));
    assert_eq!(offset, 184, "{reason}");
    assert!(reason.contains("bytes of values"), "{reason}");

    // Dimensions of 6 bytes, and a dimension that is negative.
    let mut dims = plain.clone();
    set_word(&mut dims, 156, 6);
    let (offset, _) = bad_header(parse_mat(&dims));
    assert_eq!(offset, 152);
    let mut negative = plain.clone();
    set_word(&mut negative, 160, u32::MAX);
    let (offset, reason) = bad_header(parse_mat(&negative));
    assert_eq!(offset, 152, "{reason}");

    // A small element claiming more than the 4 bytes it has room for.
    let mut small = plain.clone();
    set_word(&mut small, 176, (5 << 16) | 1);
    let (offset, reason) = bad_header(parse_mat(&small));
    assert_eq!(offset, 176, "{reason}");

    // A top-level element of another type.
    let mut other = plain.clone();
    set_word(&mut other, 128, 9);
    let (offset, _) = bad_header(parse_mat(&other));
    assert_eq!(offset, 128);

    // Four bytes more after the last matrix: a tag cut short.
    let mut trailing = plain.clone();
    trailing.extend_from_slice(&[0, 0, 0, 0]);
    assert!(matches!(
        parse_mat(&trailing),
        Err(DataError::Truncated { .. })
    ));
}

#[test]
fn labels_outside_1_to_10_and_wrong_shapes_are_refused() {
    let Some(fixtures) = fixtures() else { return };
    let plain = plain_file(fixtures);
    // The test file's y is uint8 (plain variant): its values are the last 7
    // bytes before the 1-byte padding to 8.
    let y_values = plain.len() - 8;
    assert_eq!(plain[y_values], 10, "the first digit is a 10");
    for bad in [0u8, 11] {
        let mut file = plain.clone();
        file[y_values + 1] = bad;
        match parse_mat(&file) {
            Err(DataError::BadLabel { offset, value, .. }) => {
                assert_eq!((offset, value), (y_values as u64 + 1, bad.to_string()))
            }
            other => panic!("label {bad}: expected BadLabel, got {other:?}"),
        }
    }
}
