//! Curvature of the training loss: exact Hessian-vector products
//! ([`LossSurface`]), the largest eigenvalue by power iteration
//! ([`top_eigenvalue`]) and the smallest by Lanczos ([`lanczos_min`]).
//! Definitions and settings: docs/theory.md.

pub mod eigen;
pub mod hessian;

pub use eigen::{lanczos_min, power_iteration, top_eigenvalue, Eigen, PowerSettings};
pub use hessian::LossSurface;

use crate::loss::LossError;
use crate::optim::OptimError;

/// Why a curvature measurement could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CurvatureError {
    /// A setting (a field of [`PowerSettings`]) that describes no measurement.
    #[error("invalid {key} = {value}: {reason}")]
    Setting {
        key: &'static str,
        value: String,
        reason: &'static str,
    },
    /// Inputs that describe no measurement (no examples, a loss without a
    /// gradient graph).
    #[error("{0}")]
    Invalid(String),
    /// An iteration produced NaN or infinity (the weights or the loss are
    /// not finite).
    #[error("{method}: non-finite product at iteration {iteration}")]
    NonFinite {
        method: &'static str,
        iteration: usize,
    },
    /// Flattening or scattering the weights failed.
    #[error(transparent)]
    Optim(#[from] OptimError),
    /// The loss could not be computed.
    #[error(transparent)]
    Loss(#[from] LossError),
    /// An error from libtorch, shown without its C++ stack trace.
    #[error("libtorch: {}", crate::torch_message::message(.0))]
    Torch(#[from] tch::TchError),
}

/// Result of this module.
pub type Result<T, E = CurvatureError> = std::result::Result<T, E>;
