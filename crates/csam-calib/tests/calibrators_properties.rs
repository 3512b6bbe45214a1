//! Invariants every calibrator must keep on any input: probabilities in [0, 1],
//! rows summing to 1, never NaN; and isotonic curves that are monotone.

use csam_calib::calibrators::isotonic::IsotonicRegression;
use csam_calib::calibrators::registry::{fit, CalibratorKind};
use ndarray::Array2;
use proptest::prelude::*;

fn logits(n: usize, k: usize, scale: f64) -> impl Strategy<Value = Array2<f64>> {
    proptest::collection::vec(-1.0f64..1.0, n * k)
        .prop_map(move |z| Array2::from_shape_vec((n, k), z).unwrap() * scale)
}

/// Validation and test logits with K in 2..5 and scales up to 1e3 (saturated softmax),
/// labels with at least two classes.
fn problem() -> impl Strategy<Value = (Array2<f64>, Vec<usize>, Array2<f64>)> {
    (
        2usize..5,
        10usize..50,
        prop_oneof![Just(1.0), Just(10.0), Just(1e3)],
    )
        .prop_flat_map(|(k, n, scale)| {
            (
                logits(n, k, scale),
                proptest::collection::vec(0..k, n)
                    .prop_filter("two classes", |y| y.iter().any(|&c| c != y[0])),
                logits(20, k, scale),
            )
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_calibrator_outputs_probability_rows((val, labels, test) in problem()) {
        for &kind in CalibratorKind::ALL {
            if kind == CalibratorKind::Platt && val.ncols() != 2 {
                prop_assert!(fit(kind, val.view(), &labels).is_err());
                continue;
            }
            let fitted = fit(kind, val.view(), &labels).unwrap();
            for logits in [&val, &test] {
                let q = fitted.transform(logits.view()).unwrap();
                for (n, row) in q.rows().into_iter().enumerate() {
                    prop_assert!(row.iter().all(|p| (0.0..=1.0).contains(p)), "{kind} row {n}: {row}");
                    // <= 4 quotients by a computed sum of <= 4 terms, summed again:
                    // < 3 * 4 * 2.2e-16 ~ 2.7e-15; a row left unnormalised is off by far more.
                    prop_assert!((row.sum() - 1.0).abs() < 1e-12, "{kind} row {n} sums to {}", row.sum());
                }
            }
        }
    }

    /// The fitted curve is non-decreasing everywhere (not only at the data) and its
    /// values stay within the range of the targets.
    #[test]
    fn isotonic_curve_is_monotone_and_bounded(
        points in proptest::collection::vec((0u8..20, 0.0f64..1.0, 0.0f64..3.0), 1..80),
        queries in proptest::collection::vec(-0.5f64..1.5, 1..50),
    ) {
        let x: Vec<f64> = points.iter().map(|p| f64::from(p.0) / 19.0).collect();
        let y: Vec<f64> = points.iter().map(|p| p.1).collect();
        let w: Vec<f64> = points.iter().map(|p| p.2).collect();
        prop_assume!(w.iter().any(|&v| v > 0.0));
        let curve = IsotonicRegression::fit(&x, &y, Some(&w)).unwrap();
        let mut queries = queries;
        queries.sort_by(f64::total_cmp);
        let values: Vec<f64> = queries.iter().map(|&q| curve.predict(q)).collect();
        prop_assert!(values.windows(2).all(|v| v[0] <= v[1]), "{values:?}");
        let (lo, hi) = y.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
        prop_assert!(values.iter().all(|&v| v >= lo - 1e-12 && v <= hi + 1e-12));
    }
}
