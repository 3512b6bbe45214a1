//! The readers against files written by NumPy (fixtures/io/gen_io_fixtures.py);
//! the expected values come from NumPy too (fixtures/io/expected.json).

use std::path::PathBuf;

use csam_calib::io::{load_labels, load_matrix, load_scores, Scores};
use csam_calib::CalibError;
use ndarray::Array2;
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/io")
        .join(name)
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn matrix_of(value: &Value) -> Array2<f64> {
    let rows: Vec<Vec<f64>> = serde_json::from_value(value.clone()).unwrap();
    let n = rows.len();
    let k = rows[0].len();
    Array2::from_shape_vec((n, k), rows.concat()).unwrap()
}

#[test]
fn float_matrices_match_numpy_bit_for_bit() {
    let e = expected();
    for (file, key) in [
        ("matrix_f4.npy", "matrix_f4"),
        ("matrix_f4_big_endian.npy", "matrix_f4"),
        ("matrix_f8.npy", "matrix_f8"),
        ("matrix_f8_big_endian.npy", "matrix_f8"),
        ("matrix_f8_v2.npy", "matrix_f8"),
        ("matrix_f8_v3.npy", "matrix_f8"),
        ("stored_single.npz", "matrix_f8"),
    ] {
        let got = load_matrix(fixture(file), None).unwrap();
        let want = matrix_of(&e[key]);
        let same_bits = got
            .iter()
            .zip(want.iter())
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same_bits && got.dim() == want.dim(),
            "{file}: {got} != {want}"
        );
    }
}

#[test]
fn float16_is_read_as_float32() {
    // MATRIX.astype(numpy.float16): 0.1 rounds to 0.0999755859375 (1638 / 2^14),
    // 1e-7 to the smallest subnormal 2^-24, 1e30 overflows to inf.
    let Scores::F32(m) = load_scores(fixture("matrix_f2.npy"), None).unwrap() else {
        panic!("float16 must become float32")
    };
    assert_eq!(m.dim(), (3, 4));
    assert_eq!(m[[0, 0]], 1638.0 / 16384.0);
    assert_eq!(m[[0, 1]], -2.5);
    assert_eq!(m[[0, 2]], 2f32.powi(-24));
    assert_eq!(m[[0, 3]], f32::INFINITY);
}

#[test]
fn integer_labels_of_every_width_and_byte_order() {
    let e = expected();
    for code in ["i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8"] {
        let want: Vec<i64> = serde_json::from_value(e["labels"][code].clone()).unwrap();
        for order in ["le", "be"] {
            let file = format!("labels_{code}_{order}.npy");
            assert_eq!(load_labels(fixture(&file), None).unwrap(), want, "{file}");
        }
    }
    let bools: Vec<i64> = serde_json::from_value(e["labels_bool"].clone()).unwrap();
    assert_eq!(
        load_labels(fixture("labels_bool.npy"), None).unwrap(),
        bools
    );
}

#[test]
fn compressed_npz_members_by_default_name() {
    let e = expected();
    let npz = fixture("predictions.npz");
    let logits = load_matrix(&npz, None).unwrap();
    assert_eq!(logits, matrix_of(&e["matrix_f4"]));
    let labels: Vec<i64> = serde_json::from_value(e["npz_labels"].clone()).unwrap();
    assert_eq!(load_labels(&npz, None).unwrap(), labels);
    assert_eq!(load_labels(&npz, Some("labels.npy")).unwrap(), labels);
}

fn format_detail(result: csam_calib::Result<Array2<f64>>) -> String {
    match result {
        Err(CalibError::Format { path, detail }) => format!("{}: {detail}", path.display()),
        other => panic!("expected a format error, got {other:?}"),
    }
}

#[test]
fn refusals_name_the_file_and_the_problem() {
    let e = format_detail(load_matrix(fixture("matrix_fortran.npy"), None));
    assert!(
        e.contains("matrix_fortran.npy") && e.contains("Fortran"),
        "{e}"
    );
    let e = format_detail(load_matrix(fixture("ambiguous.npz"), None));
    assert!(
        e.contains("ambiguous.npz") && e.contains("logits, probs"),
        "{e}"
    );
    let e = format_detail(load_matrix(fixture("labels_i8_le.npy"), None));
    assert!(e.contains("2-D"), "{e}");
}

#[test]
fn truncated_copy_reports_expected_and_found_length() {
    let bytes = std::fs::read(fixture("matrix_f8.npy")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.npy");
    std::fs::write(&cut, &bytes[..bytes.len() - 5]).unwrap();
    let e = format_detail(load_matrix(&cut, None));
    let full = bytes.len().to_string();
    let found = (bytes.len() - 5).to_string();
    assert!(
        e.contains("cut.npy: truncated") && e.contains(&full) && e.contains(&found),
        "{e}"
    );
}
