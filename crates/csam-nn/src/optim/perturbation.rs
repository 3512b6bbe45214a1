//! Perturbation rules of the SAM family: the ascent step `e` added to the weights.

use crate::loss::{Fields, LossError};
use tch::Tensor;

/// Added to norms in denominators so that a zero gradient gives `e = 0`, not NaN.
const NORM_EPS: f64 = 1e-12;
/// ASAM's guard in the same place: Kwon et al.'s code adds 1e-16.
const ASAM_NORM_EPS: f64 = 1e-16;

/// How the ascent step `e` is built from the gradient `g` (docs/conventions.md,
/// "The SAM step").
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "rule", rename_all = "snake_case")]
pub enum Perturbation {
    /// SAM (Foret et al. 2021): `e = rho * g / (||g||_2 + 1e-12)`, the global L2
    /// norm over all trainable parameters.
    Sam,
    /// ASAM (Kwon et al. 2021), as the authors' code (SamsungLabs/ASAM,
    /// `asam.py`): `e = rho * T^2 g / (||T g||_2 + 1e-16)` with `T = |w| + eta`
    /// elementwise on the parameters whose name contains `weight`
    /// (convolutions, linear layers, BatchNorm's scale) and `T = 1` on the
    /// others (biases, BatchNorm's shift). Typical rho 0.5-2.
    Asam { eta: f64 },
    /// ASAM in the form of davda54/sam (`adaptive=True`), the form most
    /// PyTorch SAM code copies: `T = |w| + eta` on every parameter tensor
    /// (biases and BatchNorm's shift too) and SAM's guard,
    /// `e = rho * T^2 g / (||T g||_2 + 1e-12)`. That code has no `eta`: with
    /// `eta = 0` this is its step.
    AsamAllTensors { eta: f64 },
    /// VASSO (Li and Giannakis 2023, "Enhancing sharpness-aware optimization
    /// through variance suppression", NeurIPS): SAM's step along an
    /// exponential moving average of the gradients,
    /// `d_t = (1 - theta) d_{t-1} + theta g_t` with `d_0 = g_0` (as the
    /// authors' code, which also starts from the first gradient), and
    /// `e = rho * d_t / (||d_t||_2 + 1e-12)` (their code adds 1e-7). `theta`
    /// in (0, 1]; 1 is SAM. The average is carried from step to step (and
    /// checkpointed by the training loop).
    Vasso { theta: f64 },
}

impl Perturbation {
    /// The perturbed weights `theta + e(g)` and `||g||_2` (a 0-d tensor on the
    /// weights' device: no host synchronisation), from all trainable weights
    /// `theta` and their gradient `g` flattened into 1-D tensors (the global
    /// norms are then plain norms). `memory` is what the rule carries between
    /// steps (VASSO's average direction; untouched by the other rules).
    /// `weight_entries` marks the entries that ASAM's `T` scales (a boolean
    /// tensor like `theta`, see [`weight_entries`]); `None`, every entry. The
    /// other rules do not read it.
    pub fn perturb(
        &self,
        theta: &Tensor,
        grad: &Tensor,
        rho: f64,
        memory: &mut Option<Tensor>,
        weight_entries: Option<&Tensor>,
    ) -> (Tensor, Tensor) {
        let _guard = tch::no_grad_guard();
        let grad_norm = grad.norm();
        let theta_tilde = match *self {
            Perturbation::Sam => {
                let scale = ratio(rho, &(&grad_norm + NORM_EPS));
                theta.addcmul(grad, &scale)
            }
            Perturbation::Vasso { theta: weight } => {
                let direction = match memory.take() {
                    Some(average) => average * (1.0 - weight) + grad * weight,
                    None => grad.copy(),
                };
                let scale = ratio(rho, &(direction.norm() + NORM_EPS));
                let tilde = theta.addcmul(&direction, &scale);
                *memory = Some(direction);
                tilde
            }
            Perturbation::Asam { eta } => {
                adaptive(theta, grad, (rho, eta), weight_entries, ASAM_NORM_EPS)
            }
            Perturbation::AsamAllTensors { eta } => {
                adaptive(theta, grad, (rho, eta), None, NORM_EPS)
            }
        };
        (theta_tilde, grad_norm)
    }

    /// Whether the rule reads [`weight_entries`].
    pub fn scales_weights(&self) -> bool {
        matches!(self, Perturbation::Asam { .. })
    }

    /// The rule's name (`sam`, `asam`, `vasso`).
    pub fn name(&self) -> &'static str {
        match self {
            Perturbation::Sam => "sam",
            Perturbation::Asam { .. } | Perturbation::AsamAllTensors { .. } => "asam",
            Perturbation::Vasso { .. } => "vasso",
        }
    }

    /// Checks the rule's own parameters, each refused by its field name.
    pub(crate) fn validate(&self) -> Result<(), LossError> {
        let fields = Fields(self.name());
        match *self {
            Perturbation::Sam => Ok(()),
            Perturbation::Asam { eta } | Perturbation::AsamAllTensors { eta } => {
                fields.non_negative("eta", eta)
            }
            Perturbation::Vasso { theta } => fields.check(
                "theta",
                theta,
                theta > 0.0 && theta <= 1.0,
                "must lie in (0, 1]",
            ),
        }
    }
}

/// The flat entries (parameters in `names` order, each flattened) of the
/// parameters whose name contains `weight`: those ASAM's `T` scales, as its
/// authors' code tests `'weight' in name`. A boolean tensor on `device`.
pub fn weight_entries(
    names: &[String],
    tensors: &[Tensor],
    device: tch::Device,
) -> Result<Tensor, tch::TchError> {
    let parts = names
        .iter()
        .zip(tensors)
        .map(|(name, tensor)| {
            Tensor::f_full(
                [tensor.numel() as i64],
                i64::from(name.contains("weight")),
                (tch::Kind::Bool, device),
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    Tensor::f_cat(&parts, 0)
}

/// ASAM's `theta + rho * T^2 g / (||T g||_2 + guard)` with `T = |w| + eta`
/// on the `scaled` entries (every entry for `None`) and 1 elsewhere.
fn adaptive(
    theta: &Tensor,
    grad: &Tensor,
    (rho, eta): (f64, f64),
    scaled: Option<&Tensor>,
    guard: f64,
) -> Tensor {
    let t = theta.abs() + eta;
    let t = match scaled {
        Some(scaled) => t.where_scalarother(scaled, 1.0),
        None => t,
    };
    let t_grad = &t * grad;
    let scale = ratio(rho, &(t_grad.norm() + guard));
    theta.addcmul(&(t * t_grad), &scale) // T^2 g
}

/// `numerator / denominator` for a 0-d tensor denominator, rounded once (as
/// PyTorch's `rho / norm`; tch's `f64 / &Tensor` is a reciprocal power).
fn ratio(numerator: f64, denominator: &Tensor) -> Tensor {
    denominator.full_like(numerator) / denominator
}
