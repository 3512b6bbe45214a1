//! Numerical hygiene of the metrics and calibrators, as properties:
//! log-sum-exp everywhere (logits of +-1e4 give finite results, and NLL is
//! unchanged by a shift of 1e4 that overflows a naive softmax), no NaN from
//! probabilities of exactly 0 or 1, and `f32` input accumulated in `f64`
//! (a million rows give the exact answer, where an `f32` sum drifts by
//! percent).

use csam_calib::binning::{AdaptiveVariant, Binning, EdgeConvention, Norm};
use csam_calib::calibrators::registry::{fit, CalibratorKind};
use csam_calib::calibrators::temperature::TemperatureObjective;
use csam_calib::metrics::summary::{summarize, MetricOptions, MetricSummary};
use csam_calib::metrics::tce::tce;
use csam_calib::metrics::{
    accuracy, brier, classwise_ece, ece, mean_confidence, mean_entropy, nll, nll_from_logits,
};
use csam_calib::scores::{log_probabilities, softmax};
use ndarray::{Array2, ArrayView2};
use proptest::prelude::*;

/// Every number of a summary is finite (the AUROCs where defined).
fn assert_finite(summary: &MetricSummary, what: &str) {
    let values = [
        summary.accuracy,
        summary.ece,
        summary.ece_l2,
        summary.mce,
        summary.adaece,
        summary.classwise_ece,
        summary.nll,
        summary.brier,
        summary.mean_confidence,
        summary.mean_entropy,
    ];
    let optional = [
        summary.auroc_misclassification,
        summary.auroc_ovr,
        summary.tce,
    ];
    assert!(
        values
            .iter()
            .chain(optional.iter().flatten())
            .all(|v| v.is_finite()),
        "{what}: {summary:?}"
    );
}

/// Each calibrator fitted on `logits` maps them to finite probability rows
/// (Platt scaling only where K = 2).
fn assert_calibrators_finite(logits: ArrayView2<'_, f64>, labels: &[usize], what: &str) {
    for &kind in CalibratorKind::ALL {
        if kind == CalibratorKind::Platt && logits.ncols() != 2 {
            continue;
        }
        let fitted = fit(kind, logits, labels).unwrap_or_else(|e| panic!("{what} {kind}: {e}"));
        let q = fitted.transform(logits).unwrap();
        for row in q.rows() {
            // Rows are normalised: <= 5 quotients by a sum of <= 5 terms, summed again,
            // < 3 * 5 * 2.2e-16 ~ 3.3e-15; an unnormalised row is off by far more.
            assert!(
                row.iter().all(|p| p.is_finite() && (0.0..=1.0).contains(p))
                    && (row.sum() - 1.0).abs() < 1e-9,
                "{what} {kind}: {row}"
            );
        }
    }
}

/// Labels with at least two classes (so every calibrator can be fitted).
fn labels(n: usize, k: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0..k, n).prop_filter("two classes", |y| y.iter().any(|&c| c != y[0]))
}

/// Logits whose entries are -1e4, 0 or 1e4 plus a small offset: saturated
/// rows, ties between huge logits, and huge gaps.
fn extreme_logits(n: usize, k: usize) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(
        (prop_oneof![Just(-1e4), Just(0.0), Just(1e4)], -1.0f64..1.0),
        n * k,
    )
    .prop_map(move |v| {
        Array2::from_shape_vec((n, k), v.into_iter().map(|(a, b)| a + b).collect()).unwrap()
    })
}

/// Probability rows with exact zeros and ones: one-hot rows, and rows that
/// split their mass evenly over a subset of the classes.
fn hard_probabilities(n: usize, k: usize) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(proptest::collection::vec(any::<bool>(), k), n).prop_map(
        move |mask| {
            let mut probs = Array2::zeros((n, k));
            for (i, row) in mask.iter().enumerate() {
                let chosen: Vec<usize> = (0..k).filter(|&c| row[c]).collect();
                let chosen = if chosen.is_empty() {
                    vec![i % k]
                } else {
                    chosen
                };
                for &c in &chosen {
                    probs[[i, c]] = 1.0 / chosen.len() as f64;
                }
            }
            probs
        },
    )
}

fn problem<S: Strategy<Value = Array2<f64>>>(
    matrix: fn(usize, usize) -> S,
) -> impl Strategy<Value = (Array2<f64>, Vec<usize>)> {
    (2usize..6, 8usize..40).prop_flat_map(move |(k, n)| (matrix(n, k), labels(n, k)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// NLL from logits is invariant under adding a constant to every logit;
    /// with a shift of 1e4, `exp` of a naive softmax overflows.
    #[test]
    fn nll_from_logits_ignores_a_huge_shift(
        (z, y) in problem(|n, k| proptest::collection::vec(-10.0f64..10.0, n * k)
            .prop_map(move |v| Array2::from_shape_vec((n, k), v).unwrap())),
        shift in prop_oneof![Just(-1e4), Just(1e4)],
    ) {
        let base = nll_from_logits(z.view(), &y).unwrap();
        let shifted = nll_from_logits((&z + shift).view(), &y).unwrap();
        // z + 1e4 rounds each logit by <= 0.5 ulp(1e4) = 9.1e-13, and lse(z) - z_y is
        // 1-Lipschitz in each: <= 1.8e-12 per row; a naive softmax gives inf or NaN.
        prop_assert!((base - shifted).abs() <= 1e-9 * base.max(1.0), "{base} vs {shifted}");
    }

    /// Logits of +-1e4: finite softmax rows summing to 1, finite NLL, finite
    /// summary and TCE, finite calibrated probabilities.
    #[test]
    fn logits_of_ten_thousand_give_finite_metrics((z, y) in problem(extreme_logits)) {
        let probs = softmax(z.view());
        for row in probs.rows() {
            // <= 5 quotients by a sum of <= 5 terms, summed again: < 3.3e-15.
            prop_assert!(row.iter().all(|p| p.is_finite()) && (row.sum() - 1.0).abs() < 1e-12, "{row}");
        }
        prop_assert!(nll_from_logits(z.view(), &y).unwrap().is_finite());
        let options = MetricOptions::default();
        let mut summary = summarize(probs.view(), &y, &options).unwrap();
        for objective in [TemperatureObjective::Nll, TemperatureObjective::EceGrid] {
            summary.tce = Some(tce(z.view(), &y, z.view(), &y, &options, objective).unwrap());
            assert_finite(&summary, "logits of 1e4");
        }
        assert_calibrators_finite(z.view(), &y, "logits of 1e4");
    }

    /// Probabilities with entries of exactly 0 and 1 (a model that saved
    /// hard or clipped probabilities): every metric finite under every
    /// binning, and the calibrators fitted on their logarithms (what
    /// `csam metrics --probs` feeds them) finite.
    #[test]
    fn probabilities_of_exactly_zero_and_one_give_no_nan((p, y) in problem(hard_probabilities)) {
        for edges in [EdgeConvention::RightClosed, EdgeConvention::LeftClosedWithOneBin] {
            for adaptive in [AdaptiveVariant::Interpolated, AdaptiveVariant::Chunked] {
                let options = MetricOptions { edges, adaptive, ..MetricOptions::default() };
                assert_finite(&summarize(p.view(), &y, &options).unwrap(), "exact 0 / 1");
            }
        }
        let z = log_probabilities(p.view());
        let options = MetricOptions::default();
        for objective in [TemperatureObjective::Nll, TemperatureObjective::EceGrid] {
            prop_assert!(tce(z.view(), &y, z.view(), &y, &options, objective).unwrap().is_finite());
        }
        assert_calibrators_finite(z.view(), &y, "log of exact 0 / 1");
        let p32 = p.mapv(|v| v as f32);
        let binning = options.equal_width();
        for value in [
            nll(p32.view(), &y).unwrap(),
            brier(p32.view(), &y).unwrap(),
            mean_entropy(p32.view()).unwrap(),
            ece(p32.view(), &y, &binning, Norm::L1).unwrap(),
            classwise_ece(p32.view(), &y, &binning).unwrap(),
        ] {
            prop_assert!(value.is_finite());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3))]

    /// A million and more `f32` rows `[c, 1 - c]`, a fraction `hits / 10` of
    /// them right: the metrics equal the closed forms in `f64` (sums of one
    /// `f32` value are exact in `f64`), which a running `f32` sum misses by
    /// far (its spacing near 7e5 is 0.06).
    #[test]
    fn a_million_f32_rows_are_accumulated_in_f64(
        c in 0.5f32..1.0,
        hits in 1usize..10,
        extra in 0usize..1000,
    ) {
        let n = 1_000_000 + extra;
        let right = |i: usize| i % 10 < hits;
        let probs = Array2::from_shape_fn((n, 2), |(_, k)| if k == 0 { c } else { 1.0 - c });
        let labels: Vec<usize> = (0..n).map(|i| usize::from(!right(i))).collect();
        let n_right = (0..n).filter(|&i| right(i)).count() as f64;
        let (conf, rest) = (f64::from(c), f64::from(1.0 - c));
        let acc = n_right / n as f64;

        let binning = Binning::EqualWidth { n_bins: 15, edges: EdgeConvention::RightClosed };
        let ece32 = ece(probs.view(), &labels, &binning, Norm::L1).unwrap();
        // Sums of one f32 value over < 2^20 rows need < 44 bits: exact in f64. What is
        // left is a division and a subtraction a side, <= 2 ulps of values < 1 (2.2e-16).
        prop_assert!((ece32 - (acc - conf).abs()).abs() < 1e-14, "ECE {ece32} vs {}", (acc - conf).abs());
        prop_assert_eq!(accuracy(probs.view(), &labels).unwrap(), acc);
        prop_assert!((mean_confidence(probs.view(), &labels).unwrap() - conf).abs() < 1e-15);
        let wrong = n as f64 - n_right;
        let expected_nll = -(n_right * conf.ln() + wrong * rest.ln()) / n as f64;
        let got = nll(probs.view(), &labels).unwrap();
        // A running f64 sum of ~1e6 same-sign terms: relative error <= n * eps ~ 2.2e-10
        // (Higham's gamma_n); a running f32 sum drifts by percent.
        prop_assert!((got - expected_nll).abs() < 1e-9 * expected_nll, "NLL {got} vs {expected_nll}");
    }
}
