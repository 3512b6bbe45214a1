//! Vector scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks", §4.2):
//! `q = softmax(w ⊙ z + b)` with one weight `w_k` and one intercept `b_k` per class,
//! fitted by minimising the validation NLL from `w = 1, b = 0` (the uncalibrated
//! model). Temperature scaling is the special case `w_k = 1/T, b = 0`.
//! Unregularised by default; the fit and JSON form are those of
//! [`AffineCalibrator`].

use ndarray::{Array2, ArrayView2};

use super::affine::{AffineCalibrator, AffineVariant, Diagonal, Regularisation};

/// Marker for vector scaling: features are the logits, `W` is diagonal.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Vector {}

impl AffineVariant for Vector {
    type Layout = Diagonal;
    const NAME: &'static str = "vector";
    const DEFAULT_REGULARISATION: Regularisation = Regularisation::None;
    fn features(logits: ArrayView2<'_, f64>) -> Array2<f64> {
        logits.to_owned()
    }
}

/// Vector scaling, `softmax(w ⊙ z + b)`; see the module documentation.
pub type VectorScaling = AffineCalibrator<Vector>;
