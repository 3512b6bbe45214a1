//! Cross-check of the metrics against an independent numpy / scikit-learn
//! implementation: `fixtures/gen_metrics_fixtures.py` (committed next to its
//! output `fixtures/metrics/metrics.json`).

use std::path::PathBuf;

use csam_calib::binning::{AdaptiveVariant, Binning, EdgeConvention, Norm};
use csam_calib::calibrators::temperature::{fit_temperature, TemperatureObjective};
use csam_calib::metrics::summary::MetricOptions;
use csam_calib::metrics::{self, tce::tce, OodScore};
use csam_calib::scores::Real;
use ndarray::Array2;
use serde_json::Value;

/// Both sides are f64 over <= 300 x 5 entries: sums of <= 1500 terms (any
/// order: numpy sums pairwise) and logs within a few ulps, so each is within
/// ~1500 * 2.2e-16 ~ 3.3e-13 of the exact value, times values <= 2; 1e-9 is
/// loose. A sample in another bin moves an ECE by >= 1/218 ~ 5e-3.
const TOLERANCE: f64 = 1e-9;

fn fixture() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/metrics/metrics.json");
    let text = std::fs::read_to_string(&path).expect("fixture file is committed");
    serde_json::from_str(&text).expect("fixture is valid JSON")
}

fn matrix(value: &Value) -> Array2<f64> {
    let rows = value.as_array().expect("a matrix is a list of rows");
    let k = rows[0].as_array().expect("a row is a list").len();
    let flat: Vec<f64> = rows
        .iter()
        .flat_map(|row| row.as_array().expect("a row is a list").iter())
        .map(|v| v.as_f64().expect("a number"))
        .collect();
    Array2::from_shape_vec((rows.len(), k), flat).expect("rows of equal length")
}

fn labels(value: &Value) -> Vec<usize> {
    value
        .as_array()
        .expect("labels are a list")
        .iter()
        .map(|v| v.as_u64().expect("a label") as usize)
        .collect()
}

fn number(expected: &Value, key: &str) -> f64 {
    expected[key]
        .as_f64()
        .unwrap_or_else(|| panic!("fixture lacks {key}"))
}

fn assert_close(got: f64, want: f64, tolerance: f64, what: &str) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, numpy says {want}"
    );
}

/// Every probability metric of one matrix against its expected block.
fn check_all<T: Real>(probs: &Array2<T>, labels: &[usize], expected: &Value, tag: &str) {
    let p = probs.view();
    let close = |got: f64, key: &str| {
        assert_close(
            got,
            number(expected, key),
            TOLERANCE,
            &format!("{tag} {key}"),
        )
    };
    close(metrics::nll(p, labels).unwrap(), "nll");
    close(metrics::brier(p, labels).unwrap(), "brier");
    close(metrics::accuracy(p, labels).unwrap(), "accuracy");
    close(
        metrics::mean_confidence(p, labels).unwrap(),
        "mean_confidence",
    );
    close(metrics::mean_entropy(p).unwrap(), "mean_entropy");
    close(
        metrics::auroc_misclassification(p, labels).unwrap(),
        "auroc_misclassification",
    );
    close(metrics::auroc_ovr(p, labels).unwrap(), "auroc_ovr");
    for n_bins in [15, 10] {
        for (edges, name) in [
            (EdgeConvention::RightClosed, "right-closed"),
            (
                EdgeConvention::LeftClosedWithOneBin,
                "left-closed-with-one-bin",
            ),
        ] {
            let binning = Binning::EqualWidth { n_bins, edges };
            for (norm, norm_name) in [(Norm::L1, "l1"), (Norm::L2, "l2"), (Norm::Max, "max")] {
                let got = metrics::ece(p, labels, &binning, norm).unwrap();
                close(got, &format!("ece_{name}_{n_bins}_{norm_name}"));
            }
            let got = metrics::classwise_ece(p, labels, &binning).unwrap();
            close(got, &format!("classwise_{name}_{n_bins}"));
        }
        for (variant, name) in [
            (AdaptiveVariant::Interpolated, "interpolated"),
            (AdaptiveVariant::Chunked, "chunked"),
        ] {
            let got = metrics::adaptive_ece(p, labels, n_bins, variant).unwrap();
            close(got, &format!("adaece_{name}_{n_bins}"));
        }
    }
}

#[test]
fn f64_metrics_match_numpy() {
    let f = fixture();
    check_all(
        &matrix(&f["probs"]),
        &labels(&f["labels"]),
        &f["expected"],
        "f64",
    );
}

#[test]
fn f32_metrics_match_numpy() {
    let f = fixture();
    // The fixture's f32 matrix holds values exactly representable in f32.
    let probs = matrix(&f["probs_f32"]).mapv(|v| v as f32);
    check_all(&probs, &labels(&f["labels"]), &f["expected_f32"], "f32");
}

#[test]
fn ood_auroc_matches_sklearn() {
    let f = fixture();
    let (inside, outside) = (matrix(&f["probs"]), matrix(&f["ood_probs"]));
    for (score, key) in [
        (OodScore::MaxProbability, "max_probability"),
        (OodScore::NegativeEntropy, "negative_entropy"),
    ] {
        let got = metrics::auroc_ood(inside.view(), outside.view(), score).unwrap();
        assert_close(got, number(&f["expected_ood"], key), TOLERANCE, key);
    }
}

#[test]
fn temperature_and_tce_match_numpy() {
    let f = fixture();
    let expected = &f["expected_temperature"];
    let (val, val_labels) = (matrix(&f["val_logits"]), labels(&f["val_labels"]));
    let (test, test_labels) = (matrix(&f["test_logits"]), labels(&f["test_labels"]));
    let options = MetricOptions::default();

    let nll = metrics::nll_from_logits(test.view(), &test_labels).unwrap();
    assert_close(
        nll,
        number(expected, "test_nll_from_logits"),
        TOLERANCE,
        "nll from logits",
    );

    let fit = |objective| {
        fit_temperature(val.view(), &val_labels, objective, &Binning::default()).unwrap()
    };
    let tce_by = |objective| {
        let (test, labels) = (test.view(), &test_labels);
        tce(val.view(), &val_labels, test, labels, &options, objective).unwrap()
    };

    // Ours stops within about 1e-13 of the minimiser in ln T; numpy's golden
    // section compares NLL values, which near the minimum differ by less
    // than their rounding once the bracket is below about sqrt(epsilon)
    // ~1e-8, so that is as close as it locates T: compare T to 1e-7
    // relative and the NLL at it (flat at the minimum) to 1e-9.
    let by_nll = fit(TemperatureObjective::Nll);
    let t_numpy = number(expected, "nll_temperature");
    assert_close(
        by_nll.temperature,
        t_numpy,
        1e-7 * t_numpy,
        "NLL temperature",
    );
    let nll_numpy = number(expected, "nll_value");
    assert_close(by_nll.objective_value, nll_numpy, TOLERANCE, "NLL at T");
    assert!(by_nll.iterations < 30, "{} iterations", by_nll.iterations);

    let by_grid = fit(TemperatureObjective::EceGrid);
    let t_grid = number(expected, "grid_temperature");
    // Both grids hold step / 10 (numpy: a few roundings of 1.7): equal up to ulps.
    assert_close(by_grid.temperature, t_grid, 1e-12, "grid temperature");
    let got = tce_by(TemperatureObjective::EceGrid);
    assert_close(
        got,
        number(expected, "tce_grid"),
        TOLERANCE,
        "TCE (ECE grid)",
    );
    // ECE moves with T continuously between bin jumps; 1e-6 in T moves it ~1e-6.
    let got = tce_by(TemperatureObjective::Nll);
    assert_close(got, number(expected, "tce_nll"), 1e-5, "TCE (NLL)");
}
