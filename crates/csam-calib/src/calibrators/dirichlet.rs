//! Dirichlet calibration (Kull et al. 2019, "Beyond temperature scaling: Obtaining
//! well-calibrated multi-class probabilities with Dirichlet calibration", NeurIPS):
//! `q = softmax(W ln p + b)` with `p = softmax(z)` the uncalibrated probabilities and
//! a full `K x K` matrix `W`: matrix scaling applied to log-probabilities. It is the
//! family of calibration maps whose class-conditional distributions of `p` are
//! Dirichlet. Fitted from `W = I, b = 0` (which returns `p` unchanged).
//!
//! `ln p` is clamped below at `ln(f64::MIN_POSITIVE)` (about -708.4), the crate's
//! convention for the log of a probability that underflowed to 0; this also keeps the
//! features finite for any finite logits.
//!
//! Default regulariser: ODIR with `lambda = mu = 1e-3` (a light penalty; Kull et al.
//! choose both by cross-validation over powers of ten, which callers can do with
//! [`AffineCalibrator::with_regularisation`]). The L2 option
//! ([`Regularisation::L2`]) is centred on the identity map.

use ndarray::{Array2, ArrayView2};

use super::affine::{AffineCalibrator, AffineVariant, Full, Regularisation};
use crate::scores::log_softmax;

/// Marker for Dirichlet calibration: features are `ln softmax(z)`, `W` is full.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Dirichlet {}

impl AffineVariant for Dirichlet {
    type Layout = Full;
    const NAME: &'static str = "dirichlet";
    const DEFAULT_REGULARISATION: Regularisation = Regularisation::Odir {
        lambda: 1e-3,
        mu: 1e-3,
    };
    fn features(logits: ArrayView2<'_, f64>) -> Array2<f64> {
        let floor = f64::MIN_POSITIVE.ln();
        log_softmax(logits).mapv(|lp| lp.max(floor))
    }
}

/// Dirichlet calibration, `softmax(W ln p + b)`; see the module documentation.
pub type DirichletCalibration = AffineCalibrator<Dirichlet>;
