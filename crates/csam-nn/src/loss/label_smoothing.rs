//! Label smoothing.

use tch::Tensor;

use super::{gather_true, ExampleLoss, LossError, Scores};

/// Label smoothing (Szegedy et al. 2016, "Rethinking the Inception
/// architecture", Section 7; for calibration Muller et al. 2019, "When does
/// label smoothing help?"): cross entropy against the target
/// `q = (1 - epsilon) onehot(y) + epsilon / K`, so
/// `l = (1 - epsilon)(-log p_y) + epsilon * mean_k(-log p_k)`.
/// `epsilon = 0` is cross entropy. This is PyTorch's
/// `cross_entropy(label_smoothing=epsilon)` and the
/// `LabelSmoothingCrossEntropy` of the calibration code bases this baseline
/// follows (by-liu/MbLS, by-liu/CALS, cvlab-yonsei/ACLS), whose
/// `configs/loss/ls.yaml` sets `epsilon = 0.05`, the default here (Szegedy
/// et al. used 0.1 on ImageNet). MDCA's code (`solvers/loss.py`,
/// `LabelSmoothingLoss`) spreads `epsilon` over the `K - 1` other classes
/// instead.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabelSmoothing {
    /// The smoothed mass, in `[0, 1)`.
    #[serde(default = "LabelSmoothing::default_epsilon")]
    pub epsilon: f64,
}

impl LabelSmoothing {
    fn default_epsilon() -> f64 {
        0.05
    }
}

impl Default for LabelSmoothing {
    fn default() -> Self {
        LabelSmoothing {
            epsilon: LabelSmoothing::default_epsilon(),
        }
    }
}

impl ExampleLoss for LabelSmoothing {
    fn validate(&self) -> Result<(), LossError> {
        match (0.0..1.0).contains(&self.epsilon) {
            true => Ok(()),
            false => Err(LossError::Field {
                loss: "label-smoothing",
                field: "epsilon",
                value: self.epsilon,
                reason: "must lie in [0, 1)",
            }),
        }
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_probs = &scores.log_probs;
        let true_term = -gather_true(log_probs, targets)?;
        let uniform_term = -log_probs.f_mean_dim(1, false, None)?;
        Ok(true_term * (1.0 - self.epsilon) + uniform_term * self.epsilon)
    }
}
