//! Calibration and ranking metrics of predicted probabilities (conventions:
//! crates/csam-calib/README.md, "Metric conventions").
//!
//! Every metric is a function of `probs` (`N x K`, `f32` or `f64`, rows of class
//! probabilities) and `labels` (`N` class indices), plus the binning scheme where
//! one applies. Values are accumulated in `f64` and returned as fractions (the
//! paper prints percent). Confidence is the largest probability of a row, the
//! prediction its first index (numpy's `argmax`).
//!
//! Each metric refuses empty or mismatched input, labels outside `0..K` and any
//! entry it reads that is NaN or outside `[0, 1]` (the error names row and
//! column). Row sums are not checked here (that would cost a second pass over
//! the matrix): call [`crate::scores::validate_probabilities`] first, as
//! [`summary::summarize`] does.
//!
//! * [`calibration_error`]: ECE (l1 / l2 / max), AdaECE, classwise ECE and the
//!   reliability diagram, all from [`crate::binning::BinStats`];
//! * [`auroc`](mod@auroc): misclassification, OOD and one-vs-rest AUROC, exact with ties;
//! * [`scoring`]: NLL, Brier, accuracy, mean confidence, mean entropy, the
//!   per-row entropies and the mean binary entropy of the true-class probability;
//! * [`histogram`]: the confidence histogram;
//! * [`bootstrap`](mod@bootstrap): bias-corrected and accelerated (BCa) intervals
//!   for any metric;
//! * [`tce`](mod@tce): ECE after temperature scaling fitted on validation data;
//! * [`summary`]: all of the above in one serialisable record.

pub mod auroc;
pub mod bootstrap;
pub mod calibration_error;
mod classwise;
pub mod histogram;
mod normal;
pub mod scoring;
pub mod summary;
pub mod tce;

pub use auroc::{
    auroc, auroc_misclassification, auroc_ood, auroc_ovr, par_auroc_misclassification, OodScore,
};
pub use bootstrap::{bootstrap, BootstrapOptions, ConfidenceInterval};
pub use calibration_error::{
    adaptive_ece, classwise_ece, ece, par_adaptive_ece, par_classwise_ece, par_ece,
    par_reliability_diagram, reliability_diagram,
};
pub use histogram::{confidence_histogram, ConfidenceHistogram};
pub use scoring::{
    accuracy, binary_entropy, brier, entropies, mean_confidence, mean_entropy,
    mean_true_class_entropy, nll, nll_from_logits,
};

use ndarray::{ArrayView2, Axis};

use crate::error::{CalibError, Result};
use crate::scores::{top_class, validate_labels, Real};

/// Checks that `probs` has rows and classes and that `labels` has one valid
/// label per row.
fn check_predictions<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<()> {
    let (n, k) = probs.dim();
    if n == 0 || k == 0 {
        return Err(CalibError::Empty(format!(
            "probabilities are {n} x {k}; metrics need at least one row and one class"
        )));
    }
    validate_labels(labels, n, k)
}

/// `(confidence, prediction == label)` of every row, in one pass over the matrix.
pub fn confidence_hits<'a, 'b, T: Real>(
    probs: ArrayView2<'a, T>,
    labels: &'b [usize],
) -> impl Iterator<Item = Result<(f64, bool)>> + use<'a, 'b, T> {
    labels.iter().enumerate().map(move |(row, &label)| {
        // A view is Copy: index_axis_move consumes a copy, not `probs` itself.
        let (predicted, confidence) = top_class(probs.index_axis_move(Axis(0), row), row)?;
        Ok((confidence, predicted == label))
    })
}

/// The mean of `n` fallible per-row values.
fn mean_of(values: impl Iterator<Item = Result<f64>>, n: usize) -> Result<f64> {
    let mut sum = 0.0;
    for value in values {
        sum += value?;
    }
    Ok(sum / n as f64)
}

#[cfg(test)]
pub(crate) mod test_support {
    use ndarray::Array2;
    use proptest::prelude::*;

    /// Two-class rows whose confidence is `conf` (0.5 ..= 1) and whose prediction
    /// (class 0) is right exactly when `correct` (the label is 0, else 1).
    pub fn two_class(cases: &[(f64, bool)]) -> (Array2<f64>, Vec<usize>) {
        let probs = Array2::from_shape_fn((cases.len(), 2), |(i, k)| {
            let conf = cases[i].0;
            if k == 0 {
                conf
            } else {
                1.0 - conf
            }
        });
        let labels = cases
            .iter()
            .map(|&(_, correct)| usize::from(!correct))
            .collect();
        (probs, labels)
    }

    /// A `rows x k` matrix of entries that stress binning: on a grid of 1/30
    /// (0 and 1 among them), on the edges `j / n_bins` and up to two ulps
    /// either side, `-0.0`, and uniform in `[0, 1]`; then `corrupt` entries
    /// written over it.
    pub fn mixed_entries(
        rows: usize,
        k: usize,
        n_bins: usize,
        seed: u64,
        corrupt: &[(prop::sample::Index, f64)],
    ) -> Array2<f64> {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut probs = Array2::from_shape_fn((rows, k), |_| match rng.random_range(0..4u8) {
            0 => f64::from(rng.random_range(0..=30u8)) / 30.0,
            1 => {
                let edge = rng.random_range(0..=n_bins) as f64 / n_bins as f64;
                let ulps = rng.random_range(-2..=2_i64);
                f64::from_bits((edge.to_bits() as i64 + ulps).max(0) as u64).min(1.0)
            }
            2 => -0.0,
            _ => rng.random::<f64>(),
        });
        for (at, bad) in corrupt {
            let i = at.index(rows * k);
            probs[[i / k, i % k]] = *bad;
        }
        probs
    }
}
