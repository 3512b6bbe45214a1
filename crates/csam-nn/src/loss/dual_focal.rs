//! Dual focal loss.

use tch::Tensor;

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// Dual focal loss (Tao, Dong and Xu 2023, "Dual focal loss for
/// calibration", ICML): `l = -(1 - p_y + p_j)^gamma log p_y`, the batch mean,
/// with `p_j` the largest class probability below `p_y` (0 when there is
/// none). That is the authors' code (Linwei94/ICML2023-DualFocalLoss,
/// `Losses/dual_focal_loss.py`: a mask of the probabilities smaller than
/// `p_y`, then their maximum); the paper's text says "the largest non-target
/// probability", which is the same whenever the true class is the most
/// probable. The factor keeps its gradient, through `p_y` and `p_j`, as in
/// their code. Default `gamma = 2.6`: the authors' README lists gamma by data
/// set and architecture (CIFAR-10: ResNet-50 5, ResNet-110 4.5, Wide ResNet
/// 2.6, DenseNet-121 5; CIFAR-100: 5, 6.1, 3.9, 3.4; Tiny-ImageNet ResNet-50
/// 2.3), and 2.6 is their Wide ResNet on CIFAR-10, the CSAM paper's backbone
/// and data.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DualFocal {
    /// The exponent, finite and >= 0.
    #[serde(default = "DualFocal::default_gamma")]
    pub gamma: f64,
}

impl DualFocal {
    fn default_gamma() -> f64 {
        2.6
    }
}

impl Default for DualFocal {
    fn default() -> Self {
        DualFocal {
            gamma: DualFocal::default_gamma(),
        }
    }
}

impl ExampleLoss for DualFocal {
    fn validate(&self) -> Result<(), LossError> {
        Fields("dual-focal").non_negative("gamma", self.gamma)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_probs = &scores.log_probs;
        let log_p = gather_true(log_probs, targets)?;
        let probs = log_probs.f_exp()?;
        let below = probs.f_lt_tensor(&log_p.f_exp()?.f_unsqueeze(1)?)?;
        let (p_j, _) = (probs * below.f_to_kind(log_probs.kind())?).f_max_dim(1, false)?;
        let one_minus_p = log_p.f_expm1()?.f_neg()?;
        let factor = (one_minus_p + p_j).f_pow_tensor_scalar(self.gamma)?;
        Ok(-(factor * &log_p))
    }
}
