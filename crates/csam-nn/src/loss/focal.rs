//! Focal losses: focal loss with a fixed exponent and FLSD-53, its
//! sample-dependent schedule.

use tch::Tensor;

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// `(1 - p)^gamma` from `log p`, with `1 - p = -expm1(log p)` (exact for `p`
/// near 1, where `1 - exp(log p)` loses its digits). The factor keeps its
/// autograd graph, as in the authors' code.
fn focal_factor(log_p_true: &Tensor, gamma: f64) -> Result<Tensor, LossError> {
    Ok(log_p_true.f_expm1()?.f_neg()?.f_pow_tensor_scalar(gamma)?)
}

/// Focal loss (Lin et al. 2017, "Focal loss for dense object detection";
/// for calibration Mukhoti et al. 2020, "Calibrating deep neural networks
/// using focal loss"): `l = -(1 - p_y)^gamma log p_y`, the batch mean.
/// `gamma = 0` is cross entropy. Default `gamma = 3`, Mukhoti et al.'s FL-3
/// (their code: torrvision/focal_calibration, `Losses/focal_loss.py`, which
/// sums over the batch; csam takes the mean, as for every loss).
///
/// For `0 < gamma < 1` the gradient of `(1 - p)^gamma` is infinite at
/// `p = 1` exactly (a fully saturated softmax): such a step diverges, and
/// the run stops with its error rather than training on.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Focal {
    /// The focusing exponent, finite and >= 0.
    #[serde(default = "Focal::default_gamma")]
    pub gamma: f64,
}

impl Focal {
    fn default_gamma() -> f64 {
        3.0
    }
}

impl Default for Focal {
    fn default() -> Self {
        Focal {
            gamma: Focal::default_gamma(),
        }
    }
}

impl ExampleLoss for Focal {
    fn validate(&self) -> Result<(), LossError> {
        Fields("focal").non_negative("gamma", self.gamma)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_probs = &scores.log_probs;
        let log_p = gather_true(log_probs, targets)?;
        Ok(-(focal_factor(&log_p, self.gamma)? * &log_p))
    }
}

/// FLSD-53 (Mukhoti et al. 2020, Section 5: "sample-dependent" focal loss):
/// focal loss with `gamma = 5` for examples whose `p_y < 0.2` and `gamma = 3`
/// otherwise, the exponent chosen from `p_y`'s value (no gradient flows
/// through the choice). Their code (torrvision/focal_calibration,
/// `Losses/focal_loss_adaptive_gamma.py`) takes 5 below 0.2, 3 in
/// `[0.2, 0.5)` and its `gamma = 3` from 0.5 up: the same two exponents.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Flsd {}

impl Flsd {
    /// Below this `p_y` the larger exponent applies.
    pub const THRESHOLD: f64 = 0.2;
    /// The exponent below [`Flsd::THRESHOLD`].
    pub const GAMMA_BELOW: f64 = 5.0;
    /// The exponent from [`Flsd::THRESHOLD`] up.
    pub const GAMMA_ABOVE: f64 = 3.0;
}

impl ExampleLoss for Flsd {
    fn validate(&self) -> Result<(), LossError> {
        Ok(())
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_probs = &scores.log_probs;
        let log_p = gather_true(log_probs, targets)?;
        let below = log_p.f_exp()?.f_lt(Flsd::THRESHOLD)?;
        let factor = focal_factor(&log_p, Flsd::GAMMA_BELOW)?
            .f_where_self(&below, &focal_factor(&log_p, Flsd::GAMMA_ABOVE)?)?;
        Ok(-(factor * &log_p))
    }
}
