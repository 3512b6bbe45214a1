//! Cross-checks of the calibrators against scikit-learn / scipy / numpy references
//! produced by `fixtures/gen_calibrator_fixtures.py` (see its docstring).
//!
//! Tolerances:
//! * isotonic regression (1-D and one-vs-rest): 1e-9 absolute (same algorithm, exact);
//! * histogram binning: 1e-12 absolute (counting, then one division per row);
//! * affine calibrators: objective (mean NLL + penalty) at most 1e-10 above the
//!   reference optimum and within 1e-8 of it, calibrated test probabilities within 1e-6
//!   (the references themselves agree to ~1e-7: sklearn vs scipy on matrix scaling);
//! * Platt scaling: slope and intercept within 1e-6, probabilities within 1e-7.

use std::path::Path;

use csam_calib::calibrators::affine::{AffineCalibrator, AffineVariant, Regularisation};
use csam_calib::calibrators::dirichlet::Dirichlet;
use csam_calib::calibrators::histogram::HistogramBinning;
use csam_calib::calibrators::isotonic::{IsotonicCalibration, IsotonicRegression};
use csam_calib::calibrators::matrix::Matrix;
use csam_calib::calibrators::platt::PlattScaling;
use csam_calib::calibrators::vector::Vector;
use csam_calib::calibrators::Calibrator;
use ndarray::Array2;
use serde::de::DeserializeOwned;
use serde::Deserialize;

mod calibrators_support;
use calibrators_support::{matrix, mean_nll};

fn fixture<T: DeserializeOwned>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/calibrators")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn assert_close(what: &str, ours: &Array2<f64>, reference: &[Vec<f64>], tolerance: f64) {
    let reference = matrix(reference);
    assert_eq!(ours.dim(), reference.dim(), "{what}: shape");
    for ((idx, a), b) in ours.indexed_iter().zip(reference.iter()) {
        assert!(
            (a - b).abs() <= tolerance,
            "{what} at {idx:?}: ours {a}, reference {b}"
        );
    }
}

#[derive(Deserialize)]
struct IsotonicCase {
    name: String,
    x: Vec<f64>,
    y: Vec<f64>,
    weights: Option<Vec<f64>>,
    query: Vec<f64>,
    predictions: Vec<f64>,
}

#[derive(Deserialize)]
struct IsotonicCases {
    cases: Vec<IsotonicCase>,
}

#[test]
fn isotonic_regression_matches_sklearn_with_ties_weights_and_clipping() {
    let fixture: IsotonicCases = fixture("isotonic_1d.json");
    assert_eq!(fixture.cases.len(), 6);
    for case in &fixture.cases {
        let fit = IsotonicRegression::fit(&case.x, &case.y, case.weights.as_deref()).unwrap();
        for (&q, &expected) in case.query.iter().zip(&case.predictions) {
            let ours = fit.predict(q);
            // Pooled weighted means of <= 80 values |y| <= 5, any order: <= 80 * 2.2e-16
            // * 5 ~ 1e-13, plus an interpolation's few roundings; a wrong pool is >= 1e-2 off.
            assert!(
                (ours - expected).abs() <= 1e-9,
                "{}: at x = {q}: ours {ours}, sklearn {expected}",
                case.name
            );
        }
    }
}

#[derive(Deserialize)]
struct OneVsRest {
    logits: Vec<Vec<f64>>,
    labels: Vec<usize>,
    test_logits: Vec<Vec<f64>>,
    isotonic: Vec<Vec<f64>>,
    histogram: Vec<Vec<f64>>,
}

#[test]
fn one_vs_rest_isotonic_matches_sklearn() {
    let f: OneVsRest = fixture("one_vs_rest.json");
    let mut calibrator = IsotonicCalibration::default();
    calibrator.fit(matrix(&f.logits).view(), &f.labels).unwrap();
    let ours = calibrator.transform(matrix(&f.test_logits).view()).unwrap();
    // Pooled means of <= 240 probabilities, then a renormalisation over 4 classes:
    // <= 250 * 2.2e-16 ~ 6e-14 of values <= 1; 1e-9 is loose, a wrong pool is not.
    assert_close("isotonic", &ours, &f.isotonic, 1e-9);
}

#[test]
fn histogram_binning_matches_numpy() {
    let f: OneVsRest = fixture("one_vs_rest.json");
    let mut calibrator = HistogramBinning::default();
    calibrator.fit(matrix(&f.logits).view(), &f.labels).unwrap();
    let ours = calibrator.transform(matrix(&f.test_logits).view()).unwrap();
    // Integer counts, one division and a renormalisation over 4 classes: a few
    // roundings of values <= 1, ~1e-15; a row in the wrong bin moves a mean by >= 1/240.
    assert_close("histogram", &ours, &f.histogram, 1e-12);
}

#[derive(Deserialize)]
struct AffineCase {
    name: String,
    method: String,
    regularisation: Regularisation,
    objective: f64,
    test_probabilities: Vec<Vec<f64>>,
}

#[derive(Deserialize)]
struct AffineFixture {
    logits: Vec<Vec<f64>>,
    labels: Vec<usize>,
    test_logits: Vec<Vec<f64>>,
    cases: Vec<AffineCase>,
}

/// The penalty of the fit, recomputed from the documented formula and the fitted parameters.
fn penalty(
    regularisation: Regularisation,
    weights: &Array2<f64>,
    bias: &[f64],
    n_params: usize,
) -> f64 {
    let k = bias.len() as f64;
    let identity = Array2::<f64>::eye(bias.len());
    let bias_sq: f64 = bias.iter().map(|b| b * b).sum();
    match regularisation {
        Regularisation::None => 0.0,
        Regularisation::L2 { lambda } => {
            lambda / n_params as f64 * ((weights - &identity).mapv(|d| d * d).sum() + bias_sq)
        }
        Regularisation::Odir { lambda, mu } => {
            let off: f64 = weights
                .indexed_iter()
                .filter(|((i, j), _)| i != j)
                .map(|(_, w)| w * w)
                .sum();
            lambda / (k * (k - 1.0)) * off + mu / k * bias_sq
        }
    }
}

fn check_affine<V: AffineVariant>(
    f: &AffineFixture,
    case: &AffineCase,
    full_weights: impl Fn(&AffineCalibrator<V>) -> Array2<f64>,
) {
    let logits = matrix(&f.logits);
    let mut calibrator = AffineCalibrator::<V>::with_regularisation(case.regularisation).unwrap();
    calibrator.fit(logits.view(), &f.labels).unwrap();
    let weights = full_weights(&calibrator);
    let k = calibrator.bias().len();
    let n_params = k + if V::NAME == "vector" { k } else { k * k };
    let objective = mean_nll(&calibrator.transform(logits.view()).unwrap(), &f.labels)
        + penalty(case.regularisation, &weights, calibrator.bias(), n_params);
    // Above: our stop (max |grad| <= 1e-9, smallest identified Hessian eigenvalue
    // >= 0.027 here, numpy on the fixture) leaves |grad|^2 / 2 lambda ~ 1e-16, and the
    // mean of 300 NLL terms ~7e-14 of round-off. Below: room for a reference that
    // stopped on its ftol / gtol before the optimum.
    assert!(
        objective <= case.objective + 1e-10 && objective >= case.objective - 1e-8,
        "{}: objective ours {objective}, reference {}",
        case.name,
        case.objective
    );
    let test = calibrator.transform(matrix(&f.test_logits).view()).unwrap();
    // Both stop at max |grad| <= 1e-9 (the references: 1e-12); with lambda >= 0.027
    // the parameters agree within sqrt(8) * 1e-9 / 0.027 ~ 1e-7, which moves logits of
    // features of norm <= 20 by <= 2e-6 and probabilities (slope <= 1/2) by <= 1e-6.
    assert_close(&case.name, &test, &case.test_probabilities, 1e-6);
}

#[test]
fn affine_calibrators_match_sklearn_and_scipy_optima() {
    let f: AffineFixture = fixture("affine.json");
    let full = |rows: Vec<Vec<f64>>| matrix(&rows);
    assert_eq!(f.cases.len(), 7);
    for case in &f.cases {
        match case.method.as_str() {
            "vector" => check_affine::<Vector>(&f, case, |c| {
                Array2::from_diag(&ndarray::arr1(&c.weights()))
            }),
            "matrix" => check_affine::<Matrix>(&f, case, |c| full(c.weights())),
            "dirichlet" => check_affine::<Dirichlet>(&f, case, |c| full(c.weights())),
            other => panic!("unknown method {other}"),
        }
    }
}

#[derive(Deserialize)]
struct PlattFixture {
    logits: Vec<Vec<f64>>,
    labels: Vec<usize>,
    slope: f64,
    intercept: f64,
    sigmoid_calibration_slope: f64,
    sigmoid_calibration_intercept: f64,
    test_logits: Vec<Vec<f64>>,
    test_probability_1: Vec<f64>,
}

#[test]
fn platt_scaling_matches_sklearn_logistic_regression_on_smoothed_targets() {
    let f: PlattFixture = fixture("platt.json");
    let mut platt = PlattScaling::default();
    platt.fit(matrix(&f.logits).view(), &f.labels).unwrap();
    for (ours, reference) in [
        (platt.slope(), f.slope),
        (platt.intercept(), f.intercept),
        (platt.slope(), f.sigmoid_calibration_slope),
        (platt.intercept(), f.sigmoid_calibration_intercept),
    ] {
        // A 200-row logistic fit, both stopped at max |grad| <= 1e-9 (sklearn: tol
        // 1e-12); the Hessian's smaller eigenvalue is 0.159 (numpy, on the fixture),
        // so the parameters agree within sqrt(2) * 1e-9 / 0.159 ~ 9e-9.
        assert!(
            (ours - reference).abs() <= 1e-6,
            "ours {ours}, sklearn {reference}"
        );
    }
    let q = platt.transform(matrix(&f.test_logits).view()).unwrap();
    for (n, &expected) in f.test_probability_1.iter().enumerate() {
        // Parameters within 9e-9 move p by <= 1/4 * 9e-9 * |(margin, 1)| <= 7e-8
        // (test margins <= 30).
        assert!(
            (q[[n, 1]] - expected).abs() <= 1e-7,
            "row {n}: {} vs {expected}",
            q[[n, 1]]
        );
        // sigmoid(-u) + sigmoid(u): two quotients and a sum, <= 3 * 0.5 ulp(1) ~ 3.3e-16.
        assert!((q[[n, 0]] + q[[n, 1]] - 1.0).abs() <= 1e-15);
    }
}
