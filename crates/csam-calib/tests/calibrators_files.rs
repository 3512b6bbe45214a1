//! Calibrator files: `FittedCalibrator::load` reads what `to_json` wrote, and
//! refuses devices, directories and files over `MAX_CALIBRATOR_FILE_BYTES`
//! without reading them; the cap holds the largest calibrators it promises.

use std::path::Path;

use csam_calib::calibrators::affine::Regularisation;
use csam_calib::calibrators::matrix::MatrixScaling;
use csam_calib::calibrators::registry::{
    fit, CalibratorKind, FittedCalibrator, MAX_CALIBRATOR_FILE_BYTES,
};
use csam_calib::CalibError;
use ndarray::{array, Array2};
use rand::{Rng, SeedableRng};

#[test]
fn load_reads_what_to_json_wrote() {
    let logits = array![
        [0.0, 2.0],
        [1.0, -1.0],
        [0.5, 0.4],
        [-2.0, 1.0],
        [2.0, 0.1],
        [1.5, 1.4]
    ];
    let labels = [1, 0, 1, 1, 0, 0];
    let dir = tempfile::tempdir().unwrap();
    for &kind in CalibratorKind::ALL {
        let fitted = fit(kind, logits.view(), &labels).unwrap();
        let path = dir.path().join(format!("{kind}.json"));
        std::fs::write(&path, fitted.to_json().unwrap()).unwrap();
        let loaded = FittedCalibrator::load(&path).unwrap();
        assert_eq!(
            loaded.transform(logits.view()).unwrap(),
            fitted.transform(logits.view()).unwrap(),
            "{kind}"
        );
    }
}

/// The error of loading `path`, checked to be one line naming the path.
fn refusal(path: &Path) -> CalibError {
    let e = FittedCalibrator::load(path).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with(&path.display().to_string()) && !text.contains('\n'),
        "{text}"
    );
    e
}

#[cfg(unix)]
#[test]
fn devices_and_directories_are_refused_unread() {
    // /dev/zero never ends: reading it to the end would fill memory.
    for device in ["/dev/zero", "/dev/urandom"].map(Path::new) {
        if device.exists() {
            let e = refusal(device);
            assert!(
                matches!(e, CalibError::Io { .. }) && e.to_string().contains("not a regular file"),
                "{e}"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(refusal(dir.path()), CalibError::Io { .. }));
    assert!(matches!(
        refusal(&dir.path().join("missing.json")),
        CalibError::Io { .. }
    ));
}

#[test]
fn a_file_over_the_cap_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    // Sparse: one byte over the cap costs no disk and, refused on its length,
    // no reading.
    let path = dir.path().join("huge.json");
    std::fs::File::create(&path)
        .unwrap()
        .set_len(MAX_CALIBRATOR_FILE_BYTES + 1)
        .unwrap();
    let e = refusal(&path);
    assert!(
        matches!(e, CalibError::Format { .. })
            && e.to_string().contains(&format!(
                "{} bytes, more than",
                MAX_CALIBRATOR_FILE_BYTES + 1
            )),
        "{e}"
    );
    let binary = dir.path().join("binary.json");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    assert!(refusal(&binary).to_string().contains("not UTF-8"));
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"method": "beta"}"#).unwrap();
    assert!(refusal(&other)
        .to_string()
        .contains("invalid calibrator JSON"));
}

#[test]
fn the_cap_holds_the_largest_calibrators_it_promises() {
    // Matrix scaling for K = 1000 classes, every number at its longest
    // shortest-round-trip form (24 characters).
    let longest = -1.234_567_890_123_456_7e-100_f64;
    assert_eq!(serde_json::to_string(&longest).unwrap().len(), 24);
    let k = 1000;
    let weights = vec![vec![longest; k]; k];
    let matrix =
        MatrixScaling::from_parameters(&weights, vec![longest; k], Regularisation::None).unwrap();
    let json = FittedCalibrator::Matrix(matrix).to_json().unwrap();
    let numbers = (k * k + k) as u64;
    assert!(
        json.len() as u64 <= 34 * numbers + 1024,
        "{} bytes",
        json.len()
    );
    assert!(json.len() as u64 <= MAX_CALIBRATOR_FILE_BYTES);

    // Isotonic regression on N rows of K classes keeps at most 4 (N + K)
    // numbers (registry documentation), at <= 34 bytes each plus a little per
    // class: 490 000 rows and classes fit under the cap.
    let (n, k) = (20_000, 10);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
    let labels: Vec<usize> = (0..n).map(|_| rng.random_range(0..k)).collect();
    let logits = Array2::from_shape_fn((n, k), |(i, j)| {
        rng.random::<f64>() * 3.0 + if labels[i] == j { 1.0 } else { 0.0 }
    });
    let isotonic = fit(CalibratorKind::Isotonic, logits.view(), &labels).unwrap();
    let FittedCalibrator::Isotonic(curves) = &isotonic else {
        unreachable!("fit returns the kind asked for")
    };
    let numbers: usize = curves
        .curves()
        .iter()
        .map(|c| 2 * c.thresholds().0.len())
        .sum();
    assert!(numbers <= 4 * (n + k), "{numbers} numbers");
    let json = isotonic.to_json().unwrap();
    assert!(
        json.len() <= 34 * numbers + 100 * k,
        "{} bytes for {numbers} numbers",
        json.len()
    );
    assert!(34 * 4 * 490_000 + 100 * 1000 <= MAX_CALIBRATOR_FILE_BYTES as usize);
}
