//! Perturbation rules of the SAM family: the ascent step `e` added to the weights.

use super::params::global_norm;
use tch::Tensor;

/// Added to norms in denominators so that a zero gradient gives `e = 0`, not NaN.
const NORM_EPS: f64 = 1e-12;

/// How the ascent step `e` is built from the gradient `g` (paper-notes §1).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Perturbation {
    /// SAM (Foret et al. 2021): `e = rho * g / (||g||_2 + 1e-12)`, the global L2
    /// norm over all trainable parameters.
    Sam,
    /// ASAM (Kwon et al. 2021): `e = rho * T^2 g / (||T g||_2 + 1e-12)` with
    /// `T = |w| + eta` elementwise, for every parameter tensor. Typical rho 0.5-2.
    Asam { eta: f64 },
}

impl Perturbation {
    /// Adds `e(g)` to `params` in place and returns `||g||_2` as a 0-d tensor on
    /// the parameters' device (no host synchronisation). `grads[i]` is the
    /// gradient of `params[i]`. Call under `tch::no_grad` when the parameters
    /// require gradients.
    pub fn apply(&self, params: &[Tensor], grads: &[Tensor], rho: f64) -> Tensor {
        let grad_norm = global_norm(grads);
        match *self {
            Perturbation::Sam => {
                let scale = ratio(rho, &(&grad_norm + NORM_EPS));
                for (p, g) in params.iter().zip(grads) {
                    let _ = p.shallow_clone().addcmul_(g, &scale);
                }
            }
            Perturbation::Asam { eta } => {
                let t: Vec<Tensor> = params.iter().map(|p| p.abs() + eta).collect();
                let mut scaled: Vec<Tensor> = t.iter().zip(grads).map(|(t, g)| t * g).collect();
                let scale = ratio(rho, &(global_norm(&scaled) + NORM_EPS));
                for ((p, tg), t) in params.iter().zip(&mut scaled).zip(&t) {
                    let _ = tg.g_mul_(t); // T^2 g
                    let _ = p.shallow_clone().addcmul_(tg, &scale);
                }
            }
        }
        grad_norm
    }

    /// Checks the rule's own parameters.
    pub(crate) fn validate(&self) -> Result<(), String> {
        match *self {
            Perturbation::Sam => Ok(()),
            Perturbation::Asam { eta } if eta.is_finite() && eta >= 0.0 => Ok(()),
            Perturbation::Asam { eta } => Err(format!("ASAM eta must be >= 0, got {eta}")),
        }
    }
}

/// `numerator / denominator` for a 0-d tensor denominator, rounded once (as
/// PyTorch's `rho / norm`; tch's `f64 / &Tensor` is a reciprocal power).
fn ratio(numerator: f64, denominator: &Tensor) -> Tensor {
    denominator.full_like(numerator) / denominator
}
