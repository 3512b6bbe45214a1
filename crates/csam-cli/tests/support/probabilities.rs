//! Probabilities from the logits a run wrote, computed here (not by csam)
//! so that tests can check csam's own averaging against them.

use std::path::Path;

use csam_calib::io::npy;
use ndarray::{Array2, Axis};

/// The matrix of a `.npy` file of logits, as `f64`.
pub fn read_logits(path: &Path) -> Array2<f64> {
    npy::read(path)
        .unwrap()
        .into_scores(path)
        .unwrap()
        .into_f64()
}

/// Row-wise softmax of `logits`, in `f64`.
pub fn softmax(mut logits: Array2<f64>) -> Array2<f64> {
    for mut row in logits.rows_mut() {
        let max = row.fold(f64::NEG_INFINITY, |m, &z| m.max(z));
        row.mapv_inplace(|z| (z - max).exp());
        let sum = row.sum();
        row /= sum;
    }
    logits
}

/// The deep ensemble's test probabilities from the files `csam train` wrote:
/// the mean over runs of the softmax of `test_logits.npy`.
pub fn mean_softmax_of_test_logits(runs: &[&Path]) -> Array2<f64> {
    let probs: Vec<Array2<f64>> = runs
        .iter()
        .map(|run| {
            let path = run.join("test_logits.npy");
            softmax(read_logits(&path))
        })
        .collect();
    let views: Vec<_> = probs.iter().map(Array2::view).collect();
    ndarray::stack(Axis(0), &views)
        .unwrap()
        .mean_axis(Axis(0))
        .unwrap()
}
