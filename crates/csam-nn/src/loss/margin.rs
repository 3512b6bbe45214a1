//! Margin-based label smoothing.

use tch::Tensor;

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// MbLS, margin-based label smoothing (Liu, Ben Ayed, Galdran and Dolz 2022,
/// "The devil is in the margins: margin-based label smoothing for network
/// calibration", CVPR): cross entropy plus a hinge on the logit distances
/// beyond a margin, `l = -log p_y + alpha * mean_k max(0, max_j z_j - z_k - m)`.
/// Defaults `m = 10`, `alpha = 0.1`, the paper's. As the authors' code
/// (by-liu/MbLS, `LogitMarginL1`: `relu(diff - margin).mean()` over batch and
/// classes) the hinge is averaged over the K classes; csam computes the
/// distances from `log_softmax(z)`, whose differences are the logits'.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MarginLabelSmoothing {
    /// The margin `m > 0` on the logit distances.
    #[serde(default = "MarginLabelSmoothing::default_margin")]
    pub margin: f64,
    /// The weight `alpha >= 0` of the hinge.
    #[serde(default = "MarginLabelSmoothing::default_alpha")]
    pub alpha: f64,
}

impl MarginLabelSmoothing {
    fn default_margin() -> f64 {
        10.0
    }

    fn default_alpha() -> f64 {
        0.1
    }
}

impl Default for MarginLabelSmoothing {
    fn default() -> Self {
        MarginLabelSmoothing {
            margin: MarginLabelSmoothing::default_margin(),
            alpha: MarginLabelSmoothing::default_alpha(),
        }
    }
}

impl ExampleLoss for MarginLabelSmoothing {
    fn validate(&self) -> Result<(), LossError> {
        let fields = Fields("mbls");
        fields.positive("margin", self.margin)?;
        fields.non_negative("alpha", self.alpha)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let log_probs = &scores.log_probs;
        let cross_entropy = -gather_true(log_probs, targets)?;
        let (largest, _) = log_probs.f_max_dim(1, true)?;
        let hinge = (largest - log_probs - self.margin)
            .f_relu()?
            .f_mean_dim(1, false, None)?;
        Ok(cross_entropy + hinge * self.alpha)
    }
}
