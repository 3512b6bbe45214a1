//! Multi-class difference in confidence and accuracy.

use tch::Tensor;

use super::focal::Focal;
use super::{ExampleLoss, Fields, LossError, Scores};

/// MDCA (Hebbalaguppe, Prakash, Madan and Arora 2022, "A stitch in time
/// saves nine: a train-time regularizing loss for improved neural network
/// calibration", CVPR): a classification loss plus `beta` times, over the
/// batch, the mean over classes of the gap between the mean predicted
/// probability of a class and its frequency,
///
/// `MDCA = (1/K) sum_k |(1/B) sum_i p_ik - (1/B) sum_i 1[y_i = k]|`,
///
/// a term of the whole batch (classes absent from the batch count, with
/// frequency 0). The classification loss is focal loss with exponent
/// `gamma`; `gamma = 0` is cross entropy, the authors' NLL+MDCA. As their
/// code (mdca-loss/MDCA-Calibration, `solvers/loss.py`, `MDCA` and
/// `ClassficationAndMDCA`); defaults `beta = 1`, `gamma = 0`, their
/// `scripts/cifar10.sh` NLL+MDCA (their FL+MDCA takes `gamma = 1`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mdca {
    /// The weight `beta >= 0` of MDCA.
    #[serde(default = "Mdca::default_beta")]
    pub beta: f64,
    /// The focal exponent `gamma >= 0` of the classification loss.
    #[serde(default)]
    pub gamma: f64,
}

impl Mdca {
    fn default_beta() -> f64 {
        1.0
    }

    fn classification(&self) -> Focal {
        Focal { gamma: self.gamma }
    }
}

impl Default for Mdca {
    fn default() -> Self {
        Mdca {
            beta: Mdca::default_beta(),
            gamma: 0.0,
        }
    }
}

impl ExampleLoss for Mdca {
    fn validate(&self) -> Result<(), LossError> {
        let fields = Fields("mdca");
        fields.non_negative("beta", self.beta)?;
        fields.non_negative("gamma", self.gamma)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        self.classification().per_example(scores, targets)
    }

    fn batch_term(&self, scores: &Scores, targets: &Tensor) -> Result<Option<Tensor>, LossError> {
        let probs = scores.log_probs.f_exp()?;
        let kind = probs.kind();
        let mean_probability = probs.f_mean_dim(0, false, kind)?;
        let frequency = targets
            .f_one_hot(probs.size()[1])?
            .f_to_kind(kind)?
            .f_mean_dim(0, false, kind)?;
        let gap = (mean_probability - frequency).f_abs()?.f_mean(kind)?;
        Ok(Some(gap * self.beta))
    }
}
