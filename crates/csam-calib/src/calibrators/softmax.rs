//! Numerically stable row-wise softmax and log-softmax, private to the
//! calibrators (the crate-wide `scores` module offers the same maps; this copy
//! keeps the calibrators independent of it until the two are merged).

use ndarray::{Array2, ArrayView1, ArrayView2, Axis};

/// `ln sum_k exp(z_k)`, computed as `m + ln sum_k exp(z_k - m)` with `m = max_k z_k`
/// so that no term overflows. The row must be non-empty and finite.
pub(crate) fn log_sum_exp(row: ArrayView1<'_, f64>) -> f64 {
    let max = row.fold(f64::NEG_INFINITY, |m, &z| m.max(z));
    max + row.iter().map(|&z| (z - max).exp()).sum::<f64>().ln()
}

/// Row-wise `ln softmax(z)_k = z_k - ln sum_j exp(z_j)`.
pub(crate) fn log_softmax_rows(logits: ArrayView2<'_, f64>) -> Array2<f64> {
    let mut out = logits.to_owned();
    for mut row in out.axis_iter_mut(Axis(0)) {
        let lse = log_sum_exp(row.view());
        row.mapv_inplace(|z| z - lse);
    }
    out
}

/// Row-wise `softmax(z)_k = exp(z_k - ln sum_j exp(z_j))`; every row sums to 1.
pub(crate) fn softmax_rows(logits: ArrayView2<'_, f64>) -> Array2<f64> {
    let mut out = log_softmax_rows(logits);
    out.mapv_inplace(f64::exp);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn softmax_matches_hand_computation_and_survives_huge_logits() {
        let p = softmax_rows(array![[0.0, (2.0f64).ln()], [1000.0, 0.0]].view());
        assert!((p[[0, 0]] - 1.0 / 3.0).abs() < 1e-15);
        assert!((p[[0, 1]] - 2.0 / 3.0).abs() < 1e-15);
        assert_eq!(p[[1, 0]], 1.0);
        assert_eq!(p[[1, 1]], 0.0);
        let lp = log_softmax_rows(array![[1000.0, 0.0]].view());
        assert_eq!(lp[[0, 1]], -1000.0);
    }
}
