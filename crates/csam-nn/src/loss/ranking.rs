//! The correctness ranking loss and the history of correct predictions it
//! ranks by.

use tch::{Kind, Tensor};

use super::{gather_true, ExampleLoss, Fields, LossError, Scores};

/// CRL, the correctness ranking loss (Moon, Kim, Shin and Hwang 2020,
/// "Confidence-aware learning for deep neural networks", ICML): cross
/// entropy plus a term of the whole batch that orders the confidences
/// `kappa_i` (largest softmax probability) as the examples' histories of
/// correct predictions `c_i` ([`CorrectnessHistory::normalised`]), each
/// example paired with the next one in the batch (the last with the first):
///
/// `R = weight * (1/B) sum_i max(0, |c_i - c_(i+1)| - sign(c_i - c_(i+1)) (kappa_i - kappa_(i+1)))`;
///
/// a pair of equal histories adds 0 (and still counts in the mean). As the
/// authors' code (daintlab/confidence-aware-learning, `train.py`:
/// `MarginRankingLoss` over `torch.roll(.., -1)` pairs, `crl_utils.py`);
/// default `weight = 1`, their `rank_weight`. The histories come with the
/// batch ([`Scores::correctness`]): only a training run keeps them.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Crl {
    /// The weight `>= 0` of the ranking term.
    #[serde(default = "Crl::default_weight")]
    pub weight: f64,
}

impl Crl {
    fn default_weight() -> f64 {
        1.0
    }
}

impl Default for Crl {
    fn default() -> Self {
        Crl {
            weight: Crl::default_weight(),
        }
    }
}

impl ExampleLoss for Crl {
    fn validate(&self) -> Result<(), LossError> {
        Fields("crl").non_negative("weight", self.weight)
    }

    fn per_example(&self, scores: &Scores, targets: &Tensor) -> Result<Tensor, LossError> {
        Ok(-gather_true(&scores.log_probs, targets)?)
    }

    fn batch_term(&self, scores: &Scores, _targets: &Tensor) -> Result<Option<Tensor>, LossError> {
        let history = scores.correctness.as_ref().ok_or_else(|| {
            LossError::Shape(
                "CRL ranks each example by its history of correct predictions, which only a \
                 training run keeps; this batch came without one"
                    .to_string(),
            )
        })?;
        let (log_confidence, _) = scores.log_probs.f_max_dim(1, false)?;
        let confidence = log_confidence.f_exp()?;
        let history = history.f_to_kind(confidence.kind())?;
        let next = |t: &Tensor| t.f_roll([-1], [0]);
        let gap = &history - next(&history)?;
        let (order, margin) = (gap.f_sign()?, gap.f_abs()?);
        let ranking = (margin - order * (&confidence - next(&confidence)?))
            .f_relu()?
            .f_mean(confidence.kind())?;
        Ok(Some(ranking * self.weight))
    }
}

/// Each training example's count of correct predictions so far, and the
/// normalisation CRL ranks them by (the authors' `crl_utils.History`).
#[derive(Debug, Clone, PartialEq)]
pub struct CorrectnessHistory {
    counts: Vec<f64>,
    /// The most correct predictions an example can have had: 1 during
    /// epochs 1 and 2, then one more each epoch.
    most: f64,
}

impl CorrectnessHistory {
    /// No predictions yet for `examples` training examples.
    pub fn new(examples: usize) -> CorrectnessHistory {
        CorrectnessHistory {
            counts: vec![0.0; examples],
            most: 1.0,
        }
    }

    /// `(count_i - min) / (most - min)` of `examples` (indices into the
    /// training split), `min` the fewest correct predictions of any training
    /// example; all 0 where every example is at `most`.
    pub fn normalised(&self, examples: &[usize]) -> Vec<f64> {
        let least = self.counts.iter().copied().fold(f64::INFINITY, f64::min);
        let span = self.most - least;
        examples
            .iter()
            .map(|&i| match span > 0.0 {
                true => (self.counts[i] - least) / span,
                false => 0.0,
            })
            .collect()
    }

    /// Counts the right predictions (`hits`) of `examples`.
    pub fn record(&mut self, examples: &[usize], hits: &[bool]) {
        for (&i, &hit) in examples.iter().zip(hits) {
            self.counts[i] += f64::from(u8::from(hit));
        }
    }

    /// After the 1-based `epoch`: from the end of epoch 2 on, an example
    /// may have been right once more.
    pub fn end_epoch(&mut self, epoch: usize) {
        if epoch > 1 {
            self.most += 1.0;
        }
    }

    /// The history as one float64 tensor `[most, counts...]`, for a
    /// checkpoint.
    pub fn to_tensor(&self) -> Tensor {
        Tensor::from_slice(&[&[self.most], self.counts.as_slice()].concat())
    }

    /// Replaces the history with one saved by
    /// [`CorrectnessHistory::to_tensor`], which must count as many examples.
    pub fn load(&mut self, tensor: &Tensor) -> Result<(), LossError> {
        let values = Vec::<f64>::try_from(tensor.f_to_kind(Kind::Double)?.f_flatten(0, -1)?)?;
        match values.split_first() {
            Some((&most, counts)) if counts.len() == self.counts.len() => {
                self.most = most;
                self.counts = counts.to_vec();
                Ok(())
            }
            _ => Err(LossError::Shape(format!(
                "a correctness history of {} examples needs {} values, the checkpoint holds {}",
                self.counts.len(),
                self.counts.len() + 1,
                values.len()
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_normalises_as_the_authors_code() {
        let mut history = CorrectnessHistory::new(4);
        // Epoch 1: nothing counted yet, every example at 0.
        assert_eq!(history.normalised(&[0, 1, 2, 3]), vec![0.0; 4]);
        history.record(&[2, 0], &[true, false]);
        history.record(&[1, 3], &[true, true]);
        history.end_epoch(1);
        // Still most = 1: counts 0, 1, 1, 1 with min 0.
        assert_eq!(history.normalised(&[3, 0]), vec![1.0, 0.0]);
        history.record(&[0, 1, 2, 3], &[true, true, false, true]);
        history.end_epoch(2);
        // most = 2: counts 1, 2, 1, 2, min 1: (c - 1) / (2 - 1).
        assert_eq!(history.normalised(&[0, 1, 2, 3]), vec![0.0, 1.0, 0.0, 1.0]);
        let mut back = CorrectnessHistory::new(4);
        back.load(&history.to_tensor()).unwrap();
        assert_eq!(back, history);
        assert!(CorrectnessHistory::new(5)
            .load(&history.to_tensor())
            .is_err());
        // Every example always right: no spread to rank by.
        let mut perfect = CorrectnessHistory::new(2);
        perfect.record(&[0, 1], &[true, true]);
        assert_eq!(perfect.normalised(&[0, 1]), vec![0.0, 0.0]);
    }
}
