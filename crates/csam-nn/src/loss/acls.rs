//! Adaptive and conditional label smoothing.

use tch::Tensor;

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// ACLS (Park, Noh, Oh, Baek and Ham 2023, "ACLS: adaptive and conditional
/// label smoothing for network calibration", ICCV): cross entropy plus a
/// regulariser on the logits. With `m = max_k z_k` the largest logit, per
/// example
///
/// `l = -log p_y + alpha * (lambda_pos * sum_{k: z_k = m} max(0, m - M)^2
///      + lambda_neg / (K - 1) * sum_{k: z_k < m} max(0, sg(m) - z_k - M)^2)`:
///
/// the largest logit itself is pushed down once it exceeds the margin `M`,
/// and every other logit further than `M` below it is pulled up (`sg`: the
/// largest logit is held constant in that term). The target class has no
/// part of its own in the regulariser. As the authors' code
/// (cvlab-yonsei/ACLS, `calibrate/losses/acls.py`): the first sum is divided
/// by `B`, the second by `B (K - 1)`, whatever the ties; defaults
/// `lambda_pos = 1`, `lambda_neg = 0.1`, `alpha = 0.1`, `M = 10`, their
/// `configs/loss/acls.yaml`. Unlike the losses of probabilities, the first
/// term reads the logits' absolute value, not only their differences.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Acls {
    /// The weight `lambda_pos >= 0` of the largest logit's term.
    #[serde(default = "Acls::default_pos_lambda")]
    pub pos_lambda: f64,
    /// The weight `lambda_neg >= 0` of the other logits' term.
    #[serde(default = "Acls::default_neg_lambda")]
    pub neg_lambda: f64,
    /// The weight `alpha >= 0` of the regulariser.
    #[serde(default = "Acls::default_alpha")]
    pub alpha: f64,
    /// The margin `M > 0`.
    #[serde(default = "Acls::default_margin")]
    pub margin: f64,
}

impl Acls {
    fn default_pos_lambda() -> f64 {
        1.0
    }

    fn default_neg_lambda() -> f64 {
        0.1
    }

    fn default_alpha() -> f64 {
        0.1
    }

    fn default_margin() -> f64 {
        10.0
    }
}

impl Default for Acls {
    fn default() -> Self {
        Acls {
            pos_lambda: Acls::default_pos_lambda(),
            neg_lambda: Acls::default_neg_lambda(),
            alpha: Acls::default_alpha(),
            margin: Acls::default_margin(),
        }
    }
}

impl ExampleLoss for Acls {
    fn validate(&self) -> Result<(), LossError> {
        let fields = Fields("acls");
        fields.non_negative("pos_lambda", self.pos_lambda)?;
        fields.non_negative("neg_lambda", self.neg_lambda)?;
        fields.non_negative("alpha", self.alpha)?;
        fields.positive("margin", self.margin)
    }

    fn min_classes(&self) -> usize {
        2
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let logits = &scores.logits;
        let classes = logits.size()[1];
        if classes < self.min_classes() as i64 {
            return Err(LossError::Shape(format!(
                "ACLS compares the largest logit with the others: it needs at least 2 \
                 classes, got {classes}"
            )));
        }
        let cross_entropy = -gather_true(&scores.log_probs, targets)?;
        let (largest, _) = logits.f_max_dim(1, true)?;
        let is_largest = logits
            .detach()
            .f_eq_tensor(&largest.detach())?
            .f_to_kind(logits.kind())?;
        let squared_hinge =
            |t: Tensor| -> Result<Tensor, LossError> { Ok(t.f_relu()?.f_square()?) };
        let positive = (&is_largest * squared_hinge(&largest - self.margin)?).f_sum_dim_intlist(
            1,
            false,
            logits.kind(),
        )?;
        let is_other: Tensor = 1.0 - &is_largest;
        let negative = (is_other * squared_hinge(largest.detach() - logits - self.margin)?)
            .f_sum_dim_intlist(1, false, logits.kind())?
            / (classes - 1) as f64;
        let regulariser = positive * self.pos_lambda + negative * self.neg_lambda;
        Ok(cross_entropy + regulariser * self.alpha)
    }
}
