//! The last step shared by the one-vs-rest calibrators (histogram binning,
//! isotonic regression): `K` independently calibrated class scores are turned
//! back into a probability vector by dividing by their sum (Zadrozny & Elkan 2002, §3).

use ndarray::{Array2, ArrayView2, Zip};

/// Divides each row of `scores` (non-negative) by its sum. A row whose scores
/// are all 0 (every class judged impossible, which carries no information) is
/// replaced by the matching row of `fallback`, the uncalibrated probabilities,
/// so that no row is ever 0/0.
pub(crate) fn renormalise_rows(
    mut scores: Array2<f64>,
    fallback: ArrayView2<'_, f64>,
) -> Array2<f64> {
    Zip::from(scores.rows_mut())
        .and(fallback.rows())
        .for_each(|mut row, fallback_row| {
            let sum: f64 = row.sum();
            if sum > 0.0 {
                row.mapv_inplace(|s| s / sum);
            } else {
                row.assign(&fallback_row);
            }
        });
    scores
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn divides_by_row_sums_and_falls_back_on_zero_rows() {
        let out = renormalise_rows(
            array![[1.0, 3.0], [0.0, 0.0]],
            array![[0.5, 0.5], [0.9, 0.1]].view(),
        );
        assert_eq!(out, array![[0.25, 0.75], [0.9, 0.1]]);
    }
}
