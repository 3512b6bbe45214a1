//! Classification losses on logits: cross entropy and the CSAM loss.
//!
//! Both are computed from the log-probability of the true class,
//! `log p_y = log_softmax(z)_y` (log-sum-exp, no NaN for saturated softmax), in
//! the floating-point kind of the logits (float64 logits give a float64 loss,
//! unlike `Tensor::cross_entropy_for_logits`, which computes in float32).

use tch::{Kind, TchError, Tensor};

/// Errors of the loss functions.
#[derive(Debug, thiserror::Error)]
pub enum LossError {
    /// Logits or targets have the wrong shape or kind.
    #[error("loss input: {0}")]
    Shape(String),
    /// A loss parameter is out of range.
    #[error("invalid loss parameter: {0}")]
    Parameter(String),
    /// libtorch rejected an operation (for example a target outside
    /// `0..n_classes`), shown without its C++ stack trace.
    #[error("{}", crate::torch_message::message(.0))]
    Torch(#[from] TchError),
}

/// `log p_y` per example: `log_softmax(logits, 1)` gathered at the targets.
///
/// `logits` is `[B, K]` (float), `targets` is `[B]` (int64, values in `0..K`).
/// Returns a `[B]` tensor that keeps the autograd graph.
pub fn true_class_log_probs(logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
    let (l, t) = (logits.size(), targets.size());
    if l.len() != 2 || l[0] < 1 || l[1] < 1 {
        return Err(LossError::Shape(format!(
            "logits must be [batch >= 1, classes >= 1], got {l:?}"
        )));
    }
    if t.len() != 1 || t[0] != l[0] {
        return Err(LossError::Shape(format!(
            "targets must be [{}] to match logits {l:?}, got {t:?}",
            l[0]
        )));
    }
    if targets.kind() != Kind::Int64 {
        return Err(LossError::Shape(format!(
            "targets must be int64, got {:?}",
            targets.kind()
        )));
    }
    let log_probs = logits.f_log_softmax(1, None)?;
    Ok(log_probs
        .f_gather(1, &targets.f_unsqueeze(1)?, false)?
        .f_squeeze_dim(1)?)
}

/// Mean cross entropy `-(1/B) sum_i log p_{y_i}` of logits `[B, K]` and targets `[B]`.
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor, LossError> {
    Ok(cross_entropy_from_log_probs(&true_class_log_probs(
        logits, targets,
    )?))
}

/// Mean cross entropy from the true-class log-probabilities `[B]`.
pub fn cross_entropy_from_log_probs(log_p_true: &Tensor) -> Tensor {
    -log_p_true.mean(None)
}

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
        if !(gamma.is_finite() && gamma >= 0.0) {
            return Err(LossError::Parameter(format!(
                "CSAM gamma must be finite and >= 0 (paper Eq. refined loss), got {gamma}"
            )));
        }
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
        let p = log_p_true.exp();
        let factor = (&p + 1.0).pow_tensor_scalar(-self.gamma);
        let factor = if self.detach { factor.detach() } else { factor };
        let weight = factor.where_scalarother(&p.gt(0.5), 1.0);
        -(weight * log_p_true).mean(None)
    }
}
