//! Training on mixed inputs: mixup and mixup inference in training (MIT-L),
//! as a way of feeding a batch to the model that composes with every loss
//! and every update rule.
//!
//! A step draws once ([`Mixing::draw`]: a partner for each example and the
//! mixing coefficients, from a seed the caller derives from the run's seed
//! and the step, so resumed runs draw the same); [`TrainBatch`] then holds
//! the mixed inputs, and each forward pass of the step (SGD's one, SAM's
//! two) runs them through the model and returns the terms of the objective
//! ([`Forward`]): `sum_t w_t L(scores_t, targets_t)` for any per-batch loss
//! `L` (the training loss, or CSAM's weighting of it at theta~).

use rand::SeedableRng;
use rand_distr::Distribution;
use tch::Tensor;

use crate::loss::{Fields, LossError, Scores};
use crate::model::{Outputs, TrainingPass};

/// How a training step feeds its batch to the model.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Mixing {
    /// The batch as it is.
    #[default]
    None,
    /// Mixup (Zhang, Cisse, Dauphin and Lopez-Paz 2018, "mixup: beyond
    /// empirical risk minimization", ICLR; for calibration Thulasidasan et
    /// al. 2019): `x~ = lambda x + (1 - lambda) x_pi`, `lambda ~ Beta(alpha,
    /// alpha)` once per step, `pi` a random permutation of the batch, and the
    /// loss `lambda L(f(x~), y) + (1 - lambda) L(f(x~), y_pi)`, as their code
    /// (facebookresearch/mixup-cifar10, `mixup_data`, `mixup_criterion`).
    /// `alpha = 0` is no mixing (their `lam = 1`). Default `alpha = 1`, their
    /// CIFAR-10 setting.
    Mixup {
        /// The Beta distribution's parameter, >= 0.
        #[serde(default = "Mixing::default_alpha")]
        alpha: f64,
    },
    /// MIT-L, mixup inference in training, decoupled at the last layer
    /// (Wang, Li, Zhao, Heng and Zhang 2023, "On the pitfall of mixup for
    /// uncertainty calibration", CVPR): two mixed copies of the batch,
    /// `x_1 = l1 x + (1 - l1) x_pi` and `x_2 = l2 x + (1 - l2) x_pi` with
    /// `l1 = max(b1, 1 - b1) >= 1/2 >= l2 = min(b2, 1 - b2)`, `b1, b2 ~
    /// Beta(alpha, alpha)`, both drawn again while `l1 - l2 < margin` (or
    /// `l1 = l2`); their outputs `o_1`, `o_2` give back each example's own
    /// logits by assuming the network linear in its input,
    /// `f_a = ((1 - l2) o_1 - (1 - l1) o_2) / (l1 - l2)` and
    /// `f_b = (l1 o_2 - l2 o_1) / (l1 - l2)`, trained on the original labels:
    /// `L(f_a, y) / 2 + L(f_b, y_pi) / 2`. Inference is the plain forward
    /// pass. As the authors' code (dengbaowang/Mixup-Inference-in-Training,
    /// `main.py`, method `MIT-L`); defaults `alpha = 1`, `margin = 0`, their
    /// README's runs.
    MitL {
        /// The Beta distribution's parameter, > 0.
        #[serde(default = "Mixing::default_alpha")]
        alpha: f64,
        /// The least gap `l1 - l2`, in `[0, 1)`.
        #[serde(default)]
        margin: f64,
    },
}

/// One step's draw: each example's partner and the coefficients.
#[derive(Debug, Clone, PartialEq)]
pub struct Draw {
    /// `pi`: example `i` is mixed with example `partner[i]`.
    pub partner: Vec<i64>,
    /// `lambda` of mixup, or `(l1, l2)` of MIT-L.
    pub coefficients: Coefficients,
}

/// The mixing coefficients of a [`Draw`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Coefficients {
    /// The batch is not mixed.
    None,
    /// Mixup's `lambda`.
    Mixup(f64),
    /// MIT-L's `(l1, l2)`, `l1 > l2`.
    Decoupled(f64, f64),
}

impl Mixing {
    fn default_alpha() -> f64 {
        1.0
    }

    /// Mixup at its default `alpha = 1`.
    pub fn mixup() -> Mixing {
        Mixing::Mixup {
            alpha: Mixing::default_alpha(),
        }
    }

    /// MIT-L at its defaults `alpha = 1`, `margin = 0`.
    pub fn mit_l() -> Mixing {
        Mixing::MitL {
            alpha: Mixing::default_alpha(),
            margin: 0.0,
        }
    }

    /// The name of the branch (`none`, `mixup`, `mit-l`).
    pub fn name(&self) -> &'static str {
        match self {
            Mixing::None => "none",
            Mixing::Mixup { .. } => "mixup",
            Mixing::MitL { .. } => "mit-l",
        }
    }

    /// Refuses parameters outside the method's definition.
    pub fn validate(&self) -> Result<(), LossError> {
        let fields = Fields(self.name());
        match *self {
            Mixing::None => Ok(()),
            Mixing::Mixup { alpha } => fields.non_negative("alpha", alpha),
            Mixing::MitL { alpha, margin } => {
                let positive = alpha.is_finite() && alpha > 0.0;
                fields.check(
                    "alpha",
                    alpha,
                    positive,
                    "must be finite and > 0 (MIT-L needs two different mixing coefficients)",
                )?;
                fields.unit_interval("margin", margin)
            }
        }
    }

    /// Whether the batch is fed as it is (also mixup with `alpha = 0`).
    pub fn is_none(&self) -> bool {
        match *self {
            Mixing::None => true,
            Mixing::Mixup { alpha } => alpha == 0.0,
            Mixing::MitL { .. } => false,
        }
    }

    /// The draw of a step over a batch of `batch` examples, a pure function
    /// of `seed`. Expects validated parameters.
    pub fn draw(&self, batch: usize, seed: u64) -> Draw {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let coefficients = match *self {
            Mixing::Mixup { alpha } if alpha > 0.0 => Coefficients::Mixup(beta(alpha, &mut rng)),
            Mixing::MitL { alpha, margin } => loop {
                let (b1, b2) = (beta(alpha, &mut rng), beta(alpha, &mut rng));
                let (l1, l2) = (b1.max(1.0 - b1), b2.min(1.0 - b2));
                if l1 - l2 >= margin && l1 > l2 {
                    break Coefficients::Decoupled(l1, l2);
                }
            },
            _ => Coefficients::None,
        };
        let mut partner: Vec<i64> = (0..batch as i64).collect();
        if coefficients != Coefficients::None {
            rand::seq::SliceRandom::shuffle(partner.as_mut_slice(), &mut rng);
        }
        Draw {
            partner,
            coefficients,
        }
    }
}

/// A draw from `Beta(alpha, alpha)`, `alpha > 0`.
fn beta(alpha: f64, rng: &mut impl rand::Rng) -> f64 {
    // Invariant: validate() refuses alpha <= 0 where a draw is needed.
    rand_distr::Beta::new(alpha, alpha)
        .expect("alpha > 0 after validation")
        .sample(rng)
}

/// A batch as the passes of one step feed it to the model.
#[derive(Debug)]
pub struct TrainBatch {
    /// The model's inputs: the batch, its mixup, or MIT-L's two mixtures.
    inputs: Vec<Tensor>,
    targets: Tensor,
    /// `y_pi`, for a mixed batch.
    partner_targets: Option<Tensor>,
    coefficients: Coefficients,
    /// The examples' normalised histories of correct predictions `[B]`,
    /// when the run keeps them (CRL; an unmixed batch only).
    correctness: Option<Tensor>,
    /// The rows `[M, N]` (indices into the batch) each member of a model of
    /// members reads, when they are drawn per member (MIMO); `None`: every
    /// member reads the batch as it is.
    rows: Option<Tensor>,
    /// The weight `w` of the model's KL term `w KL(q || p)` in every pass's
    /// objective, when the model learns a posterior (see
    /// [`TrainBatch::with_kl_weight`]).
    kl_weight: Option<f64>,
}

impl TrainBatch {
    /// The batch `xs` `[B, ...]`, `ys` `[B]` as it is.
    pub fn plain(xs: &Tensor, ys: &Tensor) -> TrainBatch {
        TrainBatch {
            inputs: vec![xs.shallow_clone()],
            targets: ys.shallow_clone(),
            partner_targets: None,
            coefficients: Coefficients::None,
            correctness: None,
            rows: None,
            kl_weight: None,
        }
    }

    /// The batch `xs` `[B, ...]`, `ys` `[B]` with member `m` of a model of
    /// members reading the examples `rows[m]` (`rows` `[M, N]`, int64
    /// indices into the batch on its device): MIMO's shuffles
    /// ([`crate::model::Ensemble::member_rows`]). Its objective is the sum
    /// of the members' losses against their own rows' targets.
    pub fn drawn_per_member(xs: &Tensor, ys: &Tensor, rows: Tensor) -> TrainBatch {
        TrainBatch {
            rows: Some(rows),
            ..TrainBatch::plain(xs, ys)
        }
    }

    /// The same batch with every pass's objective adding `weight KL(q || p)`,
    /// the KL term the model gives ([`TrainingPass::kl_divergence`]; nothing
    /// for a model without one): the negative evidence lower bound per
    /// example with `weight = kl_weight(t) / N` (see
    /// [`crate::model::bayesian`]). Its sub-batches ([`TrainBatch::split`])
    /// carry the whole term, so their size-weighted mean does.
    pub fn with_kl_weight(self, weight: f64) -> TrainBatch {
        TrainBatch {
            kl_weight: Some(weight),
            ..self
        }
    }

    /// The same batch carrying its examples' normalised histories of
    /// correct predictions `[B]`, which its scores pass to the loss.
    pub fn with_correctness(self, correctness: Tensor) -> TrainBatch {
        TrainBatch {
            correctness: Some(correctness),
            ..self
        }
    }

    /// The batch mixed as `draw` says (its partners index the batch).
    pub fn mixed(xs: &Tensor, ys: &Tensor, draw: &Draw) -> Result<TrainBatch, LossError> {
        if draw.coefficients == Coefficients::None {
            return Ok(TrainBatch::plain(xs, ys));
        }
        let partner = Tensor::from_slice(&draw.partner).to_device(xs.device());
        let partner_xs = xs.f_index_select(0, &partner)?;
        let mix = |l: f64| -> Result<Tensor, LossError> {
            Ok(xs
                .f_mul_scalar(l)?
                .f_add(&partner_xs.f_mul_scalar(1.0 - l)?)?)
        };
        let inputs = match draw.coefficients {
            Coefficients::Mixup(lambda) => vec![mix(lambda)?],
            Coefficients::Decoupled(l1, l2) => vec![mix(l1)?, mix(l2)?],
            Coefficients::None => unreachable!("returned above"),
        };
        Ok(TrainBatch {
            inputs,
            targets: ys.shallow_clone(),
            partner_targets: Some(ys.f_index_select(0, &partner)?),
            coefficients: draw.coefficients,
            correctness: None,
            rows: None,
            kl_weight: None,
        })
    }

    /// Whether it carries its examples' histories of correct predictions
    /// (then its step reports each example's hit, to record).
    pub fn carries_correctness(&self) -> bool {
        self.correctness.is_some()
    }

    /// The targets `y` `[B]`.
    pub fn targets(&self) -> &Tensor {
        &self.targets
    }

    /// The rows each member trains on: `N` of a batch drawn per member,
    /// the batch size `B` otherwise (what a sub-batch's share of the
    /// gradient counts).
    pub fn rows_per_member(&self) -> i64 {
        match &self.rows {
            Some(rows) => rows.size()[1],
            None => self.targets.size()[0],
        }
    }

    /// The inputs of the first forward pass (for shape checks).
    pub fn first_input(&self) -> &Tensor {
        &self.inputs[0]
    }

    /// The sub-batches of (at most) `size` examples, mixed as this batch
    /// (m-sharpness splits a mixed batch after mixing); a batch drawn per
    /// member splits its members' rows, each part reading the whole batch.
    pub fn split(&self, size: i64) -> Result<Vec<TrainBatch>, LossError> {
        if let Some(rows) = &self.rows {
            return Ok(rows
                .f_split(size, 1)?
                .into_iter()
                .map(|part| TrainBatch {
                    rows: Some(part),
                    kl_weight: self.kl_weight,
                    ..TrainBatch::plain(&self.inputs[0], &self.targets)
                })
                .collect());
        }
        let split = |t: &Tensor| t.f_split(size, 0);
        let inputs: Vec<Vec<Tensor>> = self.inputs.iter().map(split).collect::<Result<_, _>>()?;
        let targets = split(&self.targets)?;
        let partners = self.partner_targets.as_ref().map(split).transpose()?;
        let correctness = self.correctness.as_ref().map(split).transpose()?;
        Ok((0..targets.len())
            .map(|i| TrainBatch {
                inputs: inputs
                    .iter()
                    .map(|parts| parts[i].shallow_clone())
                    .collect(),
                targets: targets[i].shallow_clone(),
                partner_targets: partners.as_ref().map(|p| p[i].shallow_clone()),
                coefficients: self.coefficients,
                correctness: correctness.as_ref().map(|c| c[i].shallow_clone()),
                rows: None,
                kl_weight: self.kl_weight,
            })
            .collect())
    }

    /// The examples `rows` (int64 indices on the batch's device) of a batch
    /// read as it is, with its correctness histories and its KL weight
    /// (the whole term, as [`TrainBatch::split`]); `None` for a mixed
    /// batch or one drawn per member, whose rows are not examples.
    pub fn select_rows(&self, rows: &Tensor) -> Result<Option<TrainBatch>, LossError> {
        if self.rows.is_some() || self.coefficients != Coefficients::None {
            return Ok(None);
        }
        let pick = |t: &Tensor| t.f_index_select(0, rows);
        Ok(Some(TrainBatch {
            inputs: vec![pick(&self.inputs[0])?],
            targets: pick(&self.targets)?,
            correctness: self.correctness.as_ref().map(pick).transpose()?,
            kl_weight: self.kl_weight,
            ..TrainBatch::plain(&self.inputs[0], &self.targets)
        }))
    }

    /// One forward pass (train mode) over the batch: the terms of the
    /// objective, and the model's weighted KL term when the batch has a
    /// weight for it.
    pub fn forward<M: TrainingPass + ?Sized>(&self, model: &M) -> Result<Forward, LossError> {
        let mut pass = self.loss_terms(model)?;
        if let Some(weight) = self.kl_weight {
            pass.penalty = model
                .kl_divergence()
                .map(|kl| kl.f_mul_scalar(weight))
                .transpose()?;
        }
        Ok(pass)
    }

    /// One forward pass (train mode) over the batch: the loss's terms.
    fn loss_terms<M: TrainingPass + ?Sized>(&self, model: &M) -> Result<Forward, LossError> {
        let mut outputs: Vec<Outputs> = match &self.rows {
            None => self
                .inputs
                .iter()
                .map(|x| model.training_outputs(x))
                .collect(),
            Some(rows) => vec![self.per_member_outputs(model, rows)?],
        };
        let y = &self.targets;
        let scores = |logits: &Tensor| Scores::new(logits, y);
        let own_scores = |logits: &Tensor| self.own_scores(logits);
        if let Some(heads) = outputs[0].heads.take() {
            if self.partner_targets.is_some() {
                return Err(LossError::Shape(
                    "a model with two classifiers (BalCAL) trains on batches as they are, not \
                     mixed ones"
                        .to_string(),
                ));
            }
            let [(linear, linear_weight), (etf, etf_weight)] = heads.terms(y)?;
            return Ok(Forward {
                terms: vec![
                    Term::new(own_scores(&linear)?, y, linear_weight),
                    Term::new(own_scores(&etf)?, y, etf_weight),
                ],
                shown: Some((scores(&outputs[0].logits)?, y.shallow_clone())),
                heads: Some((linear, etf)),
                penalty: None,
            });
        }
        if let Some(members) = outputs[0].members.take() {
            return self.members_forward(&members, &outputs[0].logits);
        }
        let logits: Vec<&Tensor> = outputs.iter().map(|o| &o.logits).collect();
        let terms = match (self.coefficients, &self.partner_targets) {
            (Coefficients::Mixup(lambda), Some(y_pi)) => {
                let mixed = scores(logits[0])?;
                let partner = mixed.shallow_clone();
                vec![
                    Term::new(mixed, y, lambda),
                    Term::new(partner, y_pi, 1.0 - lambda),
                ]
            }
            (Coefficients::Decoupled(l1, l2), Some(y_pi)) => {
                let (o1, o2) = (logits[0], logits[1]);
                let own = (o1 * (1.0 - l2) - o2 * (1.0 - l1)) / (l1 - l2);
                let partner = (o2 * l1 - o1 * l2) / (l1 - l2);
                vec![
                    Term::new(scores(&own)?, y, 0.5),
                    Term::new(Scores::new(&partner, y_pi)?, y_pi, 0.5),
                ]
            }
            _ => vec![Term::new(own_scores(logits[0])?, y, 1.0)],
        };
        Ok(Forward {
            terms,
            shown: None,
            heads: None,
            penalty: None,
        })
    }

    /// The scores of `logits` against the batch's targets, carrying its
    /// examples' histories of correct predictions when it has them.
    fn own_scores(&self, logits: &Tensor) -> Result<Scores, LossError> {
        let mut own = Scores::new(logits, &self.targets)?;
        own.correctness = self.correctness.as_ref().map(Tensor::shallow_clone);
        Ok(own)
    }

    /// The terms of a model of members' pass: each member's logits
    /// `members` `[M, N, K]` against the targets of the rows it read, and
    /// the statistics of the model's `logits` (its mean prediction), or,
    /// where each member read its own rows, of every member's prediction of
    /// them (uncertainty-baselines' training metrics).
    fn members_forward(&self, members: &Tensor, logits: &Tensor) -> Result<Forward, LossError> {
        if self.partner_targets.is_some() {
            return Err(LossError::Shape(
                "a model of several members (BatchEnsemble, MIMO) trains each member on the \
                 batch's own examples, not mixed ones"
                    .to_string(),
            ));
        }
        let (m, y) = (members.size()[0], &self.targets);
        let Some(rows) = &self.rows else {
            // Every member read the batch: its targets, the members' mean.
            let targets = y.f_expand([m, y.size()[0]], false)?;
            let own_scores = |z: &Tensor, _: &Tensor| self.own_scores(z);
            return Ok(Forward {
                terms: member_terms(members, &targets, 1.0 / m as f64, own_scores)?,
                shown: Some((Scores::new(logits, y)?, y.shallow_clone())),
                heads: None,
                penalty: None,
            });
        };
        if self.correctness.is_some() {
            return Err(LossError::Shape(
                "a loss that ranks examples by their history of correct predictions (CRL) \
                 needs one prediction per example; MIMO's members each read their own shuffle \
                 of the batch"
                    .to_string(),
            ));
        }
        // Each member read its own rows: their targets, the members' sum.
        let targets = y.f_index_select(0, &rows.reshape([-1]))?;
        let flat = members.reshape([-1, members.size()[2]]);
        Ok(Forward {
            terms: member_terms(members, &targets.reshape([m, -1]), 1.0, Scores::new)?,
            shown: Some((Scores::new(&flat, &targets)?, targets)),
            heads: None,
            penalty: None,
        })
    }

    /// The train-mode outputs of a model of members whose member `m` reads
    /// the rows `rows[m]` of the batch (stacked member after member).
    fn per_member_outputs<M: TrainingPass + ?Sized>(
        &self,
        model: &M,
        rows: &Tensor,
    ) -> Result<Outputs, LossError> {
        let stacked = self.inputs[0].f_index_select(0, &rows.reshape([-1]))?;
        model.member_training_outputs(&stacked).ok_or_else(|| {
            LossError::Shape(
                "a batch drawn per member (MIMO) trains a model of members; this model is one \
                 network"
                    .to_string(),
            )
        })
    }
}

/// The terms `w L(z_m, y_m)` of a model of members: each member `m`'s
/// logits `z_m` (`members` `[M, N, K]`) against its targets `y_m`
/// (`targets` `[M, N]`). BatchEnsemble: `y_m = y` and `w = 1 / M`, the mean
/// of the members' losses (uncertainty-baselines' cross entropy over the
/// batch tiled `M` times). MIMO: `y_m = y_{pi_m}`, member `m`'s shuffle,
/// and `w = 1`, the sum (uncertainty-baselines' `mimo.py`,
/// `reduce_mean(reduce_sum(crossentropy, axis=1))`: the members' cross
/// entropies summed, averaged over the rows), for any loss.
fn member_terms(
    members: &Tensor,
    targets: &Tensor,
    weight: f64,
    scores: impl Fn(&Tensor, &Tensor) -> Result<Scores, LossError>,
) -> Result<Vec<Term>, LossError> {
    (0..members.size()[0])
        .map(|m| {
            let y = targets.get(m);
            Ok(Term::new(scores(&members.get(m), &y)?, &y, weight))
        })
        .collect()
}

/// One term `w L(scores, targets)` of a pass's objective.
#[derive(Debug)]
struct Term {
    scores: Scores,
    targets: Tensor,
    weight: f64,
}

impl Term {
    fn new(scores: Scores, targets: &Tensor, weight: f64) -> Term {
        Term {
            scores,
            targets: targets.shallow_clone(),
            weight,
        }
    }

    fn detached(&self) -> Term {
        Term::new(self.scores.detached(), &self.targets, self.weight)
    }
}

/// The outputs of one forward pass as the terms of its objective.
#[derive(Debug)]
pub struct Forward {
    terms: Vec<Term>,
    /// The scores the step's statistics read, with their targets, when they
    /// are no term's: a two-headed model's balance of its heads, a model of
    /// members' mean prediction, or MIMO's members' predictions of their
    /// rows, flattened `[M N, K]`.
    shown: Option<(Scores, Tensor)>,
    /// A two-headed model's `(linear, scaled ETF)` logits, as its terms.
    heads: Option<(Tensor, Tensor)>,
    /// The weighted KL term of a model that learns a posterior.
    penalty: Option<Tensor>,
}

impl Forward {
    /// `sum_t w_t loss(scores_t, targets_t)`, plus the weighted KL term of
    /// a model that learns a posterior; the loss itself for an unmixed
    /// batch (no multiplication by 1) of a point-estimate model.
    pub fn objective<E>(
        &self,
        loss: impl Fn(&Scores, &Tensor) -> Result<Tensor, E>,
    ) -> Result<Tensor, E>
    where
        E: From<LossError>,
    {
        let data = self.data_objective(loss)?;
        match &self.penalty {
            None => Ok(data),
            Some(penalty) => data.f_add(penalty).map_err(|e| E::from(LossError::from(e))),
        }
    }

    /// `sum_t w_t loss(scores_t, targets_t)`.
    fn data_objective<E>(
        &self,
        loss: impl Fn(&Scores, &Tensor) -> Result<Tensor, E>,
    ) -> Result<Tensor, E>
    where
        E: From<LossError>,
    {
        if let [only] = self.terms.as_slice() {
            return loss(&only.scores, &only.targets);
        }
        let mut total: Option<Tensor> = None;
        for term in &self.terms {
            let value = loss(&term.scores, &term.targets)?
                .f_mul_scalar(term.weight)
                .map_err(|e| E::from(LossError::from(e)))?;
            total = Some(match total {
                None => value,
                Some(sum) => sum + value,
            });
        }
        // Invariant: a pass has at least one term.
        Ok(total.expect("a forward pass has a term"))
    }

    /// The scores and targets the step's statistics read: the batch's own
    /// (mixup: the mixed batch with `y`; MIT-L: the recovered `f_a`; a
    /// two-headed model or a model of members: the logits it predicts
    /// with; MIMO in training: each member's logits of its rows, `[M N, K]`
    /// against their targets).
    pub fn primary(&self) -> (&Scores, &Tensor) {
        match &self.shown {
            Some((scores, targets)) => (scores, targets),
            None => (&self.terms[0].scores, &self.terms[0].targets),
        }
    }

    /// A two-headed model's `(linear, scaled ETF)` logits, which its
    /// classifiers were trained on ([`crate::model::TwoHeads::terms`]).
    pub fn heads(&self) -> Option<(&Tensor, &Tensor)> {
        self.heads.as_ref().map(|(linear, etf)| (linear, etf))
    }

    /// The same outputs, sharing storage, without the autograd graph: what
    /// a step keeps of a pass once its gradient is taken, so that the
    /// graph's nodes are freed with its activations (see
    /// docs/conventions.md, "The SAM step").
    pub fn detached(&self) -> Forward {
        Forward {
            terms: self.terms.iter().map(Term::detached).collect(),
            shown: self
                .shown
                .as_ref()
                .map(|(scores, targets)| (scores.detached(), targets.shallow_clone())),
            heads: self
                .heads
                .as_ref()
                .map(|(linear, etf)| (linear.detach(), etf.detach())),
            penalty: self.penalty.as_ref().map(Tensor::detach),
        }
    }

    /// Whether the pass fed the batch as it is and its objective is the
    /// loss (no KL term).
    pub fn is_plain(&self) -> bool {
        self.terms.len() == 1 && self.penalty.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loss::TrainingLoss;
    use tch::{nn, Device, Kind};

    /// A detached pass keeps its values, in the same storage, but no
    /// autograd graph: what the SAM step keeps of pass 1 holds none of its
    /// nodes.
    #[test]
    fn detached_pass_shares_values_without_the_graph() {
        let vs = nn::VarStore::new(Device::Cpu);
        let w = vs.root().randn("w", &[4, 3], 0.0, 1.0);
        let model = nn::func_t(move |xs, _| xs.matmul(&w));
        let xs = Tensor::randn([5, 4], (Kind::Float, Device::Cpu));
        let ys = Tensor::from_slice(&[0i64, 1, 2, 0, 1]);
        let pass = TrainBatch::plain(&xs, &ys).forward(&model).unwrap();
        let kept = pass.detached();
        let ((scores, y), (kept_scores, kept_y)) = (pass.primary(), kept.primary());
        assert!(scores.logits.requires_grad() && scores.log_probs.requires_grad());
        assert!(!kept_scores.logits.requires_grad() && !kept_scores.log_probs.requires_grad());
        assert_eq!(kept_scores.logits.data_ptr(), scores.logits.data_ptr());
        assert_eq!(
            kept_scores.log_probs.data_ptr(),
            scores.log_probs.data_ptr()
        );
        assert!(kept_y.equal(y));
        let loss = TrainingLoss::default();
        let objective = |p: &Forward| p.objective(|s, t| loss.mean_of(s, t)).unwrap();
        let (live, spent) = (objective(&pass), objective(&kept));
        assert!(live.requires_grad() && !spent.requires_grad());
        // The same ops on the same values in the same order: equal bits.
        assert!(spent.equal(&live.detach()));
    }
}
