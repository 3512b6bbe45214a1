//! CSAM's second-pass loss: each example's term weighted by
//! `(1 + p~_y)^(-gamma)` where `p~_y > 1/2`.

use tch::Tensor;

use super::{gather_true, true_class_log_probs, LossError, Scores, TrainingLoss};

/// The CSAM loss of the paper (Eq. "refined loss function"; the choices it
/// leaves open: docs/conventions.md, "CSAM's loss").
///
/// Per example, with `p = p_y` the softmax probability of the true class:
/// `l = -log p` if `p <= 1/2`, else `l = -(1 + p)^(-gamma) log p`; the loss is
/// the batch mean. `gamma = 0` is cross entropy. With `detach = false` (the
/// default) the gradient flows through the factor `(1 + p)^(-gamma)`, as for a
/// plain function of `p` (like focal loss); with `detach = true` the factor is a
/// constant per-example weight.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CsamLoss {
    gamma: f64,
    detach: bool,
}

impl CsamLoss {
    /// A CSAM loss; `gamma` must be finite and non-negative. The paper's analysis
    /// (Theorem 3) covers `[0, 2]`, but its own gamma sweep goes to 3, so larger
    /// values are allowed here; the training configuration warns about them.
    pub fn new(gamma: f64, detach: bool) -> Result<Self, LossError> {
        super::Fields("csam").non_negative("gamma", gamma)?;
        Ok(Self { gamma, detach })
    }

    /// The exponent `gamma`.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// Whether the factor `(1 + p)^(-gamma)` is treated as a constant.
    pub fn detach(&self) -> bool {
        self.detach
    }

    /// The loss of logits `[B, K]` and targets `[B]`.
    pub fn loss(&self, logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
        Ok(self.of_log_probs(&true_class_log_probs(logits, targets)?))
    }

    /// The loss from the true-class log-probabilities `[B]`; `p = exp(log p)`.
    pub fn of_log_probs(&self, log_p_true: &Tensor) -> Tensor {
        -(self.weights(log_p_true) * log_p_true).mean(None)
    }

    /// The per-example weights `w_i = (1 + p_i)^(-gamma)` where `p_i > 1/2`
    /// and 1 elsewhere, from the true-class log-probabilities `[B]`; the
    /// factor keeps its autograd graph unless `detach`.
    pub fn weights(&self, log_p_true: &Tensor) -> Tensor {
        let p = log_p_true.exp();
        let factor = (&p + 1.0).pow_tensor_scalar(-self.gamma);
        let factor = if self.detach { factor.detach() } else { factor };
        factor.where_scalarother(&p.gt(0.5), 1.0)
    }

    /// CSAM's second pass with any training loss: `mean_i w_i l_i + R`, the
    /// loss's per-example terms weighted by [`CsamLoss::weights`] of the
    /// true-class probabilities at theta~, plus its batch term `R` unweighted
    /// (a regulariser of the whole batch has no example to weight). With
    /// cross entropy this is [`CsamLoss::loss`], computed the same way, bit
    /// for bit.
    pub fn weighted(
        &self,
        loss: &TrainingLoss,
        logits: &Tensor,
        targets: &Tensor,
    ) -> Result<Tensor, LossError> {
        self.weighted_of(loss, &Scores::new(logits, targets)?, targets)
    }

    /// [`CsamLoss::weighted`] from [`Scores`].
    pub fn weighted_of(
        &self,
        loss: &TrainingLoss,
        scores: &Scores,
        targets: &Tensor,
    ) -> Result<Tensor, LossError> {
        let log_p_true = gather_true(&scores.log_probs, targets)?;
        if loss.is_cross_entropy() {
            return Ok(self.of_log_probs(&log_p_true));
        }
        let weights = self.weights(&log_p_true);
        let weighted = weights * loss.per_example(scores, targets)?;
        loss.with_batch_term(&weighted, scores, targets)
    }
}
