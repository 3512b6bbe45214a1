//! Calibration by pairwise constraints.

use tch::Tensor;

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// CPC, calibration by pairwise constraints (Cheng and Vasconcelos 2022,
/// "Calibrating deep neural networks by pairwise constraints", CVPR): cross
/// entropy plus two families of binary constraints between classes, with
/// `s(t) = log sigmoid(t)` and `R` the `K - 1` classes other than `y`:
///
/// - discrimination, the target beats each other class:
///   `BDC = -1/(K - 1) * sum_{j in R} s(z_y - z_j)`;
/// - exclusion, the other classes are indistinguishable from each other:
///   `BEC = -1/((K - 1)(K - 2)) * sum_{j, k in R} s(z_j - z_k + 1e-10) / 2`;
///
/// `l = -log p_y + w_bdc * BDC + w_bec * BEC`. The authors published no
/// code; csam follows the implementation the later baselines use (by-liu/CALS,
/// `calibrate/losses/cpc_loss.py`, copied by BalCAL), which sums BEC over all
/// ordered pairs with `j = k` included (a constant `ln 2 / (2 (K - 2))` of no
/// gradient); defaults `w_bdc = 0.1`, `w_bec = 1`, its `configs/loss/cpc.yaml`.
/// Needs at least 3 classes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PairwiseConstraints {
    /// The weight `w_bdc >= 0` of the discrimination constraints.
    #[serde(default = "PairwiseConstraints::default_bdc_weight")]
    pub bdc_weight: f64,
    /// The weight `w_bec >= 0` of the exclusion constraints.
    #[serde(default = "PairwiseConstraints::default_bec_weight")]
    pub bec_weight: f64,
}

impl PairwiseConstraints {
    /// The shift inside BEC's log-sigmoid, the reference implementation's.
    const EPS: f64 = 1e-10;

    fn default_bdc_weight() -> f64 {
        0.1
    }

    fn default_bec_weight() -> f64 {
        1.0
    }
}

impl Default for PairwiseConstraints {
    fn default() -> Self {
        PairwiseConstraints {
            bdc_weight: PairwiseConstraints::default_bdc_weight(),
            bec_weight: PairwiseConstraints::default_bec_weight(),
        }
    }
}

impl ExampleLoss for PairwiseConstraints {
    fn validate(&self) -> Result<(), LossError> {
        let fields = Fields("cpc");
        fields.non_negative("bdc_weight", self.bdc_weight)?;
        fields.non_negative("bec_weight", self.bec_weight)
    }

    fn min_classes(&self) -> usize {
        3
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        let logits = &scores.logits;
        let (batch, classes) = (logits.size()[0], logits.size()[1]);
        if classes < self.min_classes() as i64 {
            return Err(LossError::Shape(format!(
                "CPC's exclusion constraints compare pairs of non-target classes: it needs \
                 at least 3 classes, got {classes}"
            )));
        }
        let kind = logits.kind();
        let cross_entropy = -gather_true(&scores.log_probs, targets)?;
        let target_logit = logits.f_gather(1, &targets.f_unsqueeze(1)?, false)?;
        let is_other = targets.f_one_hot(classes)?.f_eq(0)?;
        let others = logits
            .f_masked_select(&is_other)?
            .f_view([batch, classes - 1])?;
        let discrimination = (target_logit - &others)
            .f_log_sigmoid()?
            .f_sum_dim_intlist(1, false, kind)?
            / -((classes - 1) as f64);
        let differences = others.f_unsqueeze(2)? - others.f_unsqueeze(1)?;
        let exclusion = (differences + Self::EPS)
            .f_log_sigmoid()?
            .f_sum_dim_intlist(&[1i64, 2][..], false, kind)?
            / -(2.0 * ((classes - 1) * (classes - 2)) as f64);
        Ok(cross_entropy + discrimination * self.bdc_weight + exclusion * self.bec_weight)
    }
}
