//! Helpers shared by the calibrator integration tests, written independently of
//! the crate's own softmax so that they can catch its mistakes.
#![allow(dead_code)] // each test binary uses a subset

use ndarray::{Array2, ArrayView2};

/// Mean negative log-likelihood `-(1/N) sum_n ln q_{n, y_n}`.
pub fn mean_nll(probabilities: &Array2<f64>, labels: &[usize]) -> f64 {
    -labels
        .iter()
        .enumerate()
        .map(|(n, &y)| probabilities[[n, y]].ln())
        .sum::<f64>()
        / labels.len() as f64
}

/// Row-wise softmax.
pub fn softmax(logits: ArrayView2<'_, f64>) -> Array2<f64> {
    let mut p = logits.to_owned();
    for mut row in p.rows_mut() {
        let max = row.fold(f64::NEG_INFINITY, |m, &v| m.max(v));
        row.mapv_inplace(|v| (v - max).exp());
        let sum = row.sum();
        row.mapv_inplace(|v| v / sum);
    }
    p
}

/// An `N x K` matrix from rows of equal length.
pub fn matrix(rows: &[Vec<f64>]) -> Array2<f64> {
    let k = rows[0].len();
    Array2::from_shape_vec((rows.len(), k), rows.concat()).expect("rows of equal length")
}
