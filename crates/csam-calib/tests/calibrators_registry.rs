//! The registry: names, fitting by name, JSON round trips and refusal of bad JSON.

use csam_calib::calibrators::registry::{fit, CalibratorKind, FittedCalibrator};
use csam_calib::calibrators::Calibrator;
use csam_calib::CalibError;
use ndarray::{array, Array2};

fn binary_problem() -> (Array2<f64>, Vec<usize>) {
    let logits = array![
        [0.0, 2.0],
        [1.0, -1.0],
        [0.5, 0.4],
        [-2.0, 1.0],
        [0.3, 0.9],
        [2.0, 0.1],
        [0.0, 0.0],
        [1.5, 1.4]
    ];
    (logits, vec![1, 0, 1, 1, 0, 0, 1, 0])
}

#[test]
fn names_round_trip_and_unknown_names_list_the_valid_ones() {
    for &kind in CalibratorKind::ALL {
        assert_eq!(kind.to_string().parse::<CalibratorKind>().unwrap(), kind);
    }
    assert_eq!(
        "Isotonic".parse::<CalibratorKind>().unwrap(),
        CalibratorKind::Isotonic
    );
    let err = "beta".parse::<CalibratorKind>().unwrap_err().to_string();
    assert!(
        err.contains("beta") && err.contains("vector, matrix, dirichlet"),
        "{err}"
    );
}

#[test]
fn json_round_trip_reproduces_identical_transforms() {
    let (logits, labels) = binary_problem();
    let probe = array![[0.2, -0.7], [3.0, 1.0], [-0.4, 0.4]];
    for &kind in CalibratorKind::ALL {
        let fitted = fit(kind, logits.view(), &labels).unwrap();
        let json = fitted.to_json().unwrap();
        assert!(json.contains(&format!("\"method\": \"{kind}\"")), "{json}");
        let loaded = FittedCalibrator::from_json(&json).unwrap();
        assert_eq!(loaded.kind(), kind);
        assert_eq!(
            loaded.transform(probe.view()).unwrap(),
            fitted.transform(probe.view()).unwrap(),
            "{kind}"
        );
    }
}

#[test]
fn refits_keep_the_method() {
    let (logits, labels) = binary_problem();
    let mut fitted = fit(CalibratorKind::Histogram, logits.view(), &labels).unwrap();
    fitted.fit(logits.view(), &labels).unwrap();
    assert_eq!(fitted.name(), "histogram");
}

#[test]
fn from_json_refuses_malformed_input() {
    let bad = [
        "not json",
        r#"{"method": "beta"}"#,
        r#"{"weights": [1.0, 1.0], "bias": [0.0, 0.0], "regularisation": {"kind": "none"}}"#,
        r#"{"method": "vector", "weights": [1.0], "bias": [0.0, 0.0], "regularisation": {"kind": "none"}}"#,
        r#"{"method": "matrix", "weights": [[1.0, 0.0], [0.0]], "bias": [0.0, 0.0], "regularisation": {"kind": "none"}}"#,
        r#"{"method": "matrix", "weights": [[1.0, 0.0]], "bias": [0.0, 0.0], "regularisation": {"kind": "none"}}"#,
        r#"{"method": "dirichlet", "weights": [[1.0, 0.0], [0.0, 1.0]], "bias": [0.0, 0.0], "regularisation": {"kind": "odir", "lambda": -1.0, "mu": 0.0}}"#,
        r#"{"method": "platt", "slope": 1.0}"#,
        r#"{"method": "isotonic", "curves": [{"x": [0.0, 1.0], "y": [0.0, 1.0]}]}"#,
        r#"{"method": "histogram", "n_bins": 0, "bin_values": [[], []]}"#,
    ];
    for json in bad {
        match FittedCalibrator::from_json(json) {
            Err(CalibError::InvalidArgument(_)) => {}
            other => panic!("{json}: expected a refusal, got {other:?}"),
        }
    }
    let good = r#"{"method": "matrix", "weights": [[2.0, 0.0], [0.0, 2.0]], "bias": [0.0, 0.0], "regularisation": {"kind": "none"}}"#;
    let q = FittedCalibrator::from_json(good)
        .unwrap()
        .transform(array![[0.0, 1.0]].view())
        .unwrap();
    let expected = 1.0 / (1.0 + (-2.0f64).exp());
    // Softmax of (0, 2) against the sigmoid: <= 4 roundings (exp within 1 ulp) of
    // values <= 1.2 a side, < 5e-16.
    assert!((q[[0, 1]] - expected).abs() < 1e-15);
}

#[test]
fn fit_and_transform_refuse_bad_input_for_every_method() {
    let (logits, labels) = binary_problem();
    for &kind in CalibratorKind::ALL {
        let empty = Array2::<f64>::zeros((0, 2));
        assert!(
            matches!(fit(kind, empty.view(), &[]), Err(CalibError::Empty(_))),
            "{kind}"
        );
        assert!(matches!(
            fit(kind, logits.view(), &labels[..3]),
            Err(CalibError::ShapeMismatch(_))
        ));
        let mut out_of_range = labels.clone();
        out_of_range[4] = 2;
        assert!(matches!(
            fit(kind, logits.view(), &out_of_range),
            Err(CalibError::LabelOutOfRange { row: 4, .. })
        ));
        let mut nan = logits.clone();
        nan[[5, 1]] = f64::NAN;
        assert!(matches!(
            fit(kind, nan.view(), &labels),
            Err(CalibError::NonFinite { row: 5, col: 1, .. })
        ));
        let fitted = fit(kind, logits.view(), &labels).unwrap();
        // Temperature scaling has no fitted K: it accepts any number of columns.
        if kind.name() != "temperature" {
            assert!(matches!(
                fitted.transform(array![[0.0, 1.0, 2.0]].view()),
                Err(CalibError::ShapeMismatch(_))
            ));
        }
        assert!(matches!(
            fitted.transform(nan.view()),
            Err(CalibError::NonFinite { row: 5, col: 1, .. })
        ));
    }
    let three = array![[0.0, 1.0, 2.0], [2.0, 1.0, 0.0]];
    let err = fit(CalibratorKind::Platt, three.view(), &[0, 2]).unwrap_err();
    assert!(
        matches!(
            err,
            CalibError::Fit {
                method: "platt",
                ..
            }
        ),
        "{err}"
    );
}
