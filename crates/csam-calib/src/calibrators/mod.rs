//! Post-hoc calibrators: fitted on validation predictions only, then applied
//! to any predictions of the same model (the list: crates/csam-calib/README.md,
//! "Post-hoc calibrators").
//!
//! All calibrators consume logits. For a model that only saved probabilities,
//! pass `ln p` (see [`crate::scores::log_probabilities`]): softmax of `ln p` is `p`.

pub mod temperature;

use ndarray::{Array2, ArrayView2};

use crate::error::Result;

/// A post-hoc calibration map from logits to calibrated probabilities.
pub trait Calibrator {
    /// Name used on the command line and as the key in reports ("temperature", "isotonic", ...).
    fn name(&self) -> &'static str;
    /// Fits the map on validation logits (`N x K`) and labels (`N`, each in `0..K`).
    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()>;
    /// Calibrated probabilities (`N x K`, every row sums to 1). Fails if not fitted
    /// or if `K` differs from the fitted `K`.
    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>>;
}

pub mod affine;
pub mod dirichlet;
pub mod histogram;
pub mod isotonic;
pub mod matrix;
pub mod platt;
pub mod registry;
pub mod vector;

mod exp_lanes;
mod input;
mod lbfgs;
mod one_vs_rest;
