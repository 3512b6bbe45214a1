//! Matrix scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks", §4.2):
//! `q = softmax(W z + b)` with a full `K x K` matrix `W`, i.e. multinomial logistic
//! regression on the logits, fitted by minimising the validation NLL from `W = I, b = 0`
//! (the uncalibrated model). Unregularised by default, as in Guo et al.; Kull et al.
//! (2019) show that its `K^2 + K` parameters overfit small validation sets and
//! recommend ODIR ([`Regularisation::Odir`], via
//! [`AffineCalibrator::with_regularisation`]).

use ndarray::{Array2, ArrayView2};

use super::affine::{AffineCalibrator, AffineVariant, Full, Regularisation};

/// Marker for matrix scaling: features are the logits, `W` is full.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Matrix {}

impl AffineVariant for Matrix {
    type Layout = Full;
    const NAME: &'static str = "matrix";
    const DEFAULT_REGULARISATION: Regularisation = Regularisation::None;
    fn features(logits: ArrayView2<'_, f64>) -> Array2<f64> {
        logits.to_owned()
    }
}

/// Matrix scaling, `softmax(W z + b)`; see the module documentation.
pub type MatrixScaling = AffineCalibrator<Matrix>;
