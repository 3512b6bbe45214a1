//! Per-step statistics of a training step, for logging and the paper's
//! diagnostics (docs/theory.md).

use super::OptimError;
use crate::model::balcal::HeadLogits;
use tch::{Device, Kind, Tensor};

/// What one training step measured on its mini-batch (train-mode forward passes).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct StepStats {
    /// Mean cross entropy at theta (pass 1).
    pub loss: f64,
    /// Fraction of the batch whose argmax at theta is the label.
    pub accuracy: f64,
    /// `||g||_2`, the global norm of the pass-1 gradient (with m-sharpness: the
    /// size-weighted mean of the sub-batch gradient norms).
    pub grad_norm: f64,
    /// Geometric mean `p_y = exp(mean log p_y)` of the true-class probabilities
    /// at theta (`= exp(-loss)`).
    pub p_true: f64,
    /// Statistics at theta_tilde; `None` for a step without perturbation.
    pub perturbed: Option<PerturbedStats>,
    /// Whether the update was skipped because a gradient overflowed under
    /// float16 loss scaling (`grad_norm` and the perturbed statistics may
    /// then be infinite or NaN).
    #[serde(default)]
    pub skipped: bool,
    /// Whether each example's prediction at theta (pass 1) was its label,
    /// in batch order: what a correctness history records. Empty unless the
    /// batch carried its examples' histories (only then is it read back).
    #[serde(skip)]
    pub hits: Vec<bool>,
    /// Both classifiers' logits at theta of a two-headed model (BalCAL),
    /// from which the epoch sets their balance; `None` for other models.
    #[serde(skip)]
    pub heads: Option<HeadLogits>,
}

/// Statistics of the second pass at `theta_tilde = theta + e`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PerturbedStats {
    /// The second-pass objective that was differentiated (cross entropy for SAM,
    /// the CSAM loss for CSAM).
    pub loss: f64,
    /// Mean cross entropy at theta_tilde.
    pub cross_entropy: f64,
    /// Geometric mean `p~_y = exp(-cross_entropy)` of the true-class probabilities.
    pub p_true: f64,
}

/// Device-side sums of a step's statistics, read back with one host
/// synchronisation in [`StatsAccumulator::finish`].
pub(crate) struct StatsAccumulator {
    /// `[ce, correct fraction, grad norm, second loss, ce at theta_tilde]`,
    /// each a 0-d tensor weighted by the sub-batch's share of the batch.
    sums: Option<Vec<Tensor>>,
    /// Each (sub-)batch's per-example hits at theta, in batch order; None
    /// when the step does not report them.
    hits: Option<Vec<Tensor>>,
    /// A two-headed model's logits at theta `(linear, scaled ETF, targets)`,
    /// each (sub-)batch's, read back with the sums.
    heads: Vec<[Tensor; 3]>,
}

impl StatsAccumulator {
    /// Statistics of one step, with its per-example hits when `with_hits`.
    pub(crate) fn new(with_hits: bool) -> Self {
        Self {
            sums: None,
            hits: with_hits.then(Vec::new),
            heads: Vec::new(),
        }
    }

    /// Adds one (sub-)batch holding fraction `weight` of the batch. `perturbed`
    /// is `(second-pass objective, cross entropy at theta_tilde)`.
    pub(crate) fn add(
        &mut self,
        weight: f64,
        cross_entropy: &Tensor,
        logits: &Tensor,
        targets: &Tensor,
        grad_norm: &Tensor,
        perturbed: Option<(&Tensor, &Tensor)>,
    ) {
        let _guard = tch::no_grad_guard();
        let hits = logits.argmax(-1, false).eq_tensor(targets);
        let correct = hits.to_kind(Kind::Double).mean(None);
        if let Some(kept) = &mut self.hits {
            kept.push(hits);
        }
        let mut values = vec![cross_entropy.detach(), correct, grad_norm.detach()];
        if let Some((objective, ce)) = perturbed {
            values.push(objective.detach());
            values.push(ce.detach());
        }
        let values: Vec<Tensor> = values
            .into_iter()
            .map(|v| v.to_kind(Kind::Double) * weight)
            .collect();
        self.sums = Some(match self.sums.take() {
            None => values,
            Some(sums) => sums.iter().zip(&values).map(|(s, v)| s + v).collect(),
        });
    }

    /// Keeps a two-headed model's logits at theta `(linear, scaled ETF)`
    /// with their `targets`; nothing for a model with one classifier.
    pub(crate) fn add_heads(&mut self, heads: Option<(&Tensor, &Tensor)>, targets: &Tensor) {
        if let Some((linear, etf)) = heads {
            self.heads
                .push([linear.detach(), etf.detach(), targets.shallow_clone()]);
        }
    }

    /// Reads the sums back to the host and checks that they are finite: all
    /// of them, or when the step was `skipped` for an overflow of its
    /// gradient, the loss and accuracy at theta (the forward pass).
    pub(crate) fn finish(self, skipped: bool) -> Result<StepStats, OptimError> {
        let sums = self
            .sums
            .ok_or_else(|| OptimError::Mismatch("a step saw no sub-batch".into()))?;
        let host = Tensor::stack(&sums, 0).to_device(Device::Cpu);
        let v = Vec::<f64>::try_from(&host)?;
        let heads = match self.heads.as_slice() {
            [] => None,
            parts => {
                let part = |i: usize| -> Vec<Tensor> {
                    parts.iter().map(|p| p[i].shallow_clone()).collect()
                };
                let [linear, etf, targets] = [0, 1, 2].map(|i| Tensor::cat(&part(i), 0));
                Some(HeadLogits::read(&linear, &etf, &targets)?)
            }
        };
        let hits = match &self.hits {
            Some(kept) => {
                let host = Tensor::cat(kept, 0)
                    .to_kind(Kind::Uint8)
                    .to_device(Device::Cpu);
                Vec::<u8>::try_from(&host)?
                    .into_iter()
                    .map(|hit| hit == 1)
                    .collect()
            }
            None => Vec::new(),
        };
        let checked = if skipped { &v[..2] } else { &v[..] };
        if let Some(bad) = checked.iter().position(|x| !x.is_finite()) {
            let names = [
                "loss",
                "accuracy",
                "gradient norm",
                "perturbed loss",
                "perturbed CE",
            ];
            return Err(OptimError::Diverged(format!(
                "{} is {} after this step",
                names[bad], v[bad]
            )));
        }
        Ok(StepStats {
            loss: v[0],
            accuracy: v[1],
            grad_norm: v[2],
            p_true: (-v[0]).exp(),
            perturbed: (v.len() == 5).then(|| PerturbedStats {
                loss: v[3],
                cross_entropy: v[4],
                p_true: (-v[4]).exp(),
            }),
            skipped,
            hits,
            heads,
        })
    }
}
