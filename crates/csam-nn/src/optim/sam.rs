//! The SAM family as one training step around any base optimiser (the paper's
//! Algorithm 1; every detail it leaves open is stated in docs/conventions.md,
//! "The SAM step").
//!
//! One SAM step on a batch B:
//! 1. pass 1: train-mode forward, mean cross entropy at theta, gradient g;
//! 2. save theta (into buffers reused across steps), add the perturbation
//!    `e(g)` of the [`Perturbation`] rule: theta_tilde = theta + e;
//! 3. pass 2: same batch, the [`SecondLoss`] at theta_tilde, gradient g';
//!    BatchNorm running statistics are restored to their post-pass-1 values,
//!    so they move once per step;
//! 4. restore theta by copy (never by subtracting e), optionally clip g' to a
//!    global norm, and take the base optimiser's step with g' (weight decay
//!    lives in the base optimiser only).
//!
//! CSAM is this step with [`SecondLoss::Csam`]: only the pass-2 loss changes.
//! With m-sharpness the batch is split into sub-batches of `m` examples, each
//! perturbed with its own gradient; their g' are averaged (weighted by size).
//! A [`SamPolicy`] says on which steps the second pass runs and what the
//! others do (plain steps, or LookSAM's reuse of its last SAM direction);
//! ESAM's masks the perturbation in step 2 and runs pass 2 on the batch's
//! most sharpness-sensitive rows only ([`Esam`]); the sub-batch ascent runs
//! pass 1 on the batch's first rows only ([`SubBatch`]); Momentum-SAM has no
//! pass 1, its perturbation following the base optimiser's momentum ([`Msam`]).

use super::buffers::BufferSnapshot;
use super::flat::{chunk_views, flatten, scatter, FlatCopy};
use super::params::global_norm;
use super::policy::{AeSam, Esam, GradStatistics, Horizon, LookSam, Msam, SamPolicy, SubBatch};
use super::sam_state::SamState;
use super::stats::StatsAccumulator;
use super::{weight_entries, BaseOptimizer, OptimError, Perturbation, StepStats};
use crate::loss::{
    cross_entropy_from_log_probs, gather_true, CsamLoss, Fields, LossError, Scores, TrainingLoss,
};
use crate::mixing::{Forward, TrainBatch};
use crate::model::TrainingPass;
use tch::{nn::VarStore, Tensor};

/// The loss of the second pass (at theta_tilde), made of the training loss.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "loss", rename_all = "snake_case")]
pub enum SecondLoss {
    /// The training loss itself: SAM.
    Plain,
    /// The training loss's per-example terms weighted by CSAM's
    /// `(1 + p~_y)^(-gamma)` where `p~_y > 1/2` ([`CsamLoss`]); `detach` treats
    /// the factor as a constant weight. With cross entropy: the CSAM loss.
    Csam { gamma: f64, detach: bool },
}

/// Settings of [`SamStep`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SamConfig {
    /// Perturbation radius rho > 0 (paper: 0.05 on CIFAR-10, 0.1-0.2 on CIFAR-100).
    pub rho: f64,
    pub perturbation: Perturbation,
    /// The training loss of both passes (and of the plain steps).
    #[serde(default)]
    pub loss: TrainingLoss,
    pub second_loss: SecondLoss,
    /// m-sharpness sub-batch size; `None` perturbs with the whole batch.
    pub m: Option<usize>,
    /// Perturb on every `sam_every`-th step only (steps 0, k, 2k, ...); the
    /// others are plain steps with the pass-1 gradient. 1 = every step.
    pub sam_every: u64,
    /// Clip the update gradient to this global L2 norm (as
    /// `torch.nn.utils.clip_grad_norm_`).
    pub clip_grad_norm: Option<f64>,
    /// On which steps the second pass runs ([`SamPolicy::Every`]: every
    /// `sam_every`-th).
    #[serde(default)]
    pub policy: SamPolicy,
    /// The run's seed and length, which the policies' draws and schedules read.
    #[serde(default)]
    pub horizon: Horizon,
    /// Perturb with pass 1's gradient reduced over the data-parallel
    /// replicas ([`BaseOptimizer::reduce_gradient`]): exact SAM on the
    /// global batch, at the cost of a second all-reduce per step. Off, each
    /// replica perturbs with its own gradient (m-sharpness with m = the
    /// per-replica batch, as google-research/sam's data-parallel step).
    /// Without data parallelism it changes nothing.
    #[serde(default)]
    pub reduce_first_gradient: bool,
}

impl Default for SamConfig {
    /// SAM with rho 0.05 on every step, no m-sharpness, no clipping.
    fn default() -> Self {
        Self {
            rho: 0.05,
            perturbation: Perturbation::Sam,
            loss: TrainingLoss::default(),
            second_loss: SecondLoss::Plain,
            m: None,
            sam_every: 1,
            clip_grad_norm: None,
            policy: SamPolicy::Every,
            horizon: Horizon::default(),
            reduce_first_gradient: false,
        }
    }
}

impl SamConfig {
    /// Checks every setting, each refused by the name of its field in the
    /// update rule (`rho`, `m`, `every`, `eta`, `theta`, `gamma`; see
    /// [`super::UpdateRule`], whose own check is [`SamConfig::validate_rule`])
    /// or of the policy.
    pub fn validate(&self) -> Result<(), LossError> {
        self.validate_rule()?;
        self.policy.validate()?;
        self.validate_policy()?;
        super::rule::validate_clip(self.clip_grad_norm)?;
        self.loss.validate()
    }

    /// The update rule's part: the radius `rho >= 0` (0 is SGD's step at
    /// twice its cost; davda54/sam asserts the same `rho >= 0.0`), a
    /// sub-batch `m >= 1`, the second pass on every `every >= 1`-th step,
    /// the perturbation's and the second-pass loss's parameters. VASSO
    /// averages whole-batch gradients: no m-sharpness.
    pub(crate) fn validate_rule(&self) -> Result<(), LossError> {
        let fields = Fields(self.perturbation.name());
        fields.non_negative("rho", self.rho)?;
        if let Some(m) = self.m {
            fields.check("m", m as f64, m >= 1, "must be at least 1")?;
            fields.check(
                "m",
                m as f64,
                !matches!(self.perturbation, Perturbation::Vasso { .. }),
                "VASSO averages whole-batch gradients: m-sharpness does not apply",
            )?;
        }
        let every = self.sam_every;
        fields.check("every", every as f64, every >= 1, "must be at least 1")?;
        self.perturbation.validate()?;
        SecondLossFn::from_config(self.second_loss).map(drop)
    }

    /// The rule against its policy: a policy other than every-k-th schedules
    /// the second pass itself (so `every` must be 1), the policies that
    /// read whole-batch gradients refuse m-sharpness, and Momentum-SAM,
    /// whose direction is the momentum's, takes SAM's normalisation only.
    pub(crate) fn validate_policy(&self) -> Result<(), LossError> {
        if matches!(self.policy, SamPolicy::Msam(_)) && self.perturbation != Perturbation::Sam {
            return Err(LossError::Policy {
                policy: self.policy.name(),
                rule: self.perturbation.name(),
                reason: "Momentum-SAM perturbs along the base optimiser's momentum scaled to \
                         rho, with no gradient for ASAM's or VASSO's ascent to shape (use sam \
                         or csam)",
            });
        }
        let fields = Fields(self.policy.name());
        fields.check(
            "every",
            self.sam_every as f64,
            self.policy == SamPolicy::Every || self.sam_every == 1,
            "applies to the every-k-th policy only: RST, LookSAM, AE-SAM and ESAM schedule the \
             second pass themselves",
        )?;
        let whole_batch = matches!(
            self.policy,
            SamPolicy::LookSam(_)
                | SamPolicy::AeSam(_)
                | SamPolicy::Esam(_)
                | SamPolicy::SubBatch(_)
                | SamPolicy::Msam(_)
        );
        match self.m {
            Some(m) => fields.check(
                "m",
                m as f64,
                !whole_batch,
                "LookSAM, AE-SAM, ESAM, the sub-batch ascent and Momentum-SAM work with one \
                 perturbation of the whole batch: m-sharpness does not apply",
            ),
            None => Ok(()),
        }
    }
}

/// The pass-2 loss, validated.
#[derive(Debug, Clone, Copy)]
enum SecondLossFn {
    Plain,
    Csam(CsamLoss),
}

impl SecondLossFn {
    fn from_config(loss: SecondLoss) -> Result<Self, LossError> {
        Ok(match loss {
            SecondLoss::Plain => Self::Plain,
            SecondLoss::Csam { gamma, detach } => Self::Csam(CsamLoss::new(gamma, detach)?),
        })
    }

    /// The objective of pass 2 from the scores at theta~.
    fn objective(
        &self,
        loss: &TrainingLoss,
        scores: &Scores,
        targets: &Tensor,
    ) -> Result<Tensor, OptimError> {
        Ok(match self {
            Self::Plain => loss.mean_of(scores, targets)?,
            Self::Csam(csam) => csam.weighted_of(loss, scores, targets)?,
        })
    }
}

/// A SAM / ASAM / CSAM training step with its reusable buffers.
#[derive(Debug)]
pub struct SamStep {
    config: SamConfig,
    second_loss: SecondLossFn,
    /// theta (flat) while the weights are perturbed; allocated on the first SAM step.
    saved_params: Option<FlatCopy>,
    /// ASAM's entries that its `T` scales (flat, boolean), made with
    /// `saved_params` from the parameters' names; `None` for the other rules.
    weight_entries: Option<Tensor>,
    buffers: BufferSnapshot,
    /// What the perturbation rule carries between steps (VASSO's average
    /// gradient, flat); part of a checkpoint (see [`SamStep::state`]).
    memory: Option<Tensor>,
    /// LookSAM's `g_v` (flat), from its last SAM step; checkpointed.
    direction: Option<Tensor>,
    /// AE-SAM's running statistics of `||g||^2`; checkpointed.
    grad_statistics: GradStatistics,
    steps_taken: u64,
}

impl SamStep {
    /// A step for the model whose variables live in `vs`; refuses a
    /// setting out of range ([`SamConfig::validate`]).
    pub fn new(config: SamConfig, vs: &VarStore) -> Result<Self, OptimError> {
        config.validate()?;
        if config.policy.needs_horizon() && config.horizon.total_steps == 0 {
            return Err(OptimError::Config(format!(
                "{}'s schedule needs the run's number of steps (horizon.total_steps)",
                config.policy.name()
            )));
        }
        Ok(Self {
            second_loss: SecondLossFn::from_config(config.second_loss)?,
            config,
            saved_params: None,
            weight_entries: None,
            buffers: BufferSnapshot::new(vs)?,
            memory: None,
            direction: None,
            grad_statistics: GradStatistics::default(),
            steps_taken: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &SamConfig {
        &self.config
    }

    /// Trains `loss` from the next step on (a loss that learns between
    /// epochs, AdaFocal, changes its state; its parameters stay).
    pub fn set_loss(&mut self, loss: TrainingLoss) {
        self.config.loss = loss;
    }

    /// The state a checkpoint must keep to continue bit for bit (sharing
    /// storage): VASSO's average direction, LookSAM's `g_v` and AE-SAM's
    /// statistics, each where the rule and policy carry it.
    pub fn state(&self) -> SamState {
        SamState {
            vasso_average: self.memory.as_ref().map(Tensor::shallow_clone),
            looksam_direction: self.direction.as_ref().map(Tensor::shallow_clone),
            aesam_statistics: match self.config.policy {
                SamPolicy::AeSam(_) => Some(self.grad_statistics),
                _ => None,
            },
        }
    }

    /// Restores [`SamStep::state`].
    pub fn load_state(&mut self, state: SamState) {
        self.memory = state.vasso_average;
        self.direction = state.looksam_direction;
        if let Some(statistics) = state.aesam_statistics {
            self.grad_statistics = statistics;
        }
    }

    /// Number of steps taken so far (SAM and plain).
    pub fn steps_taken(&self) -> u64 {
        self.steps_taken
    }

    /// Sets the step counter, e.g. to the global step of a resumed run, so the
    /// policy's pattern (and its draws) continue where the checkpoint left it.
    pub fn set_steps_taken(&mut self, steps: u64) {
        self.steps_taken = steps;
    }

    /// One training step on the batch `xs` `[B, ...]`, `ys` `[B]` (int64):
    /// a SAM step, or a plain step where the policy skips the second pass.
    pub fn step<M, O>(
        &mut self,
        model: &M,
        xs: &Tensor,
        ys: &Tensor,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        self.step_batch(model, &TrainBatch::plain(xs, ys), optimizer)
    }

    /// [`SamStep::step`] on a batch as the step feeds it to the model (mixed
    /// or not, see [`crate::mixing`]): every pass runs it. The step's index
    /// in the run is [`SamStep::steps_taken`], which the policy reads.
    pub fn step_batch<M, O>(
        &mut self,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let step = self.steps_taken;
        self.steps_taken += 1;
        let clip_norm = self.config.clip_grad_norm;
        match self.config.policy {
            SamPolicy::Every if step.is_multiple_of(self.config.sam_every) => {
                self.full_step(model, batch, optimizer)
            }
            SamPolicy::Rst(rst) if rst.perturbs(step, &self.config.horizon) => {
                self.full_step(model, batch, optimizer)
            }
            SamPolicy::Every | SamPolicy::Rst(_) => {
                plain_step(model, batch, optimizer, &self.config.loss, clip_norm)
            }
            SamPolicy::LookSam(look) => self.look_sam_step(look, step, model, batch, optimizer),
            SamPolicy::AeSam(ae) => self.ae_sam_step(ae, step, model, batch, optimizer),
            SamPolicy::Esam(_) => self.full_step(model, batch, optimizer),
            SamPolicy::SubBatch(sub) => self.sub_batch_step(sub, model, batch, optimizer),
            SamPolicy::Msam(msam) => self.momentum_step(msam, model, batch, optimizer),
        }
    }

    /// The two passes and the base optimiser's step with `g'`.
    fn full_step<M, O>(
        &mut self,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        check_batch(batch)?;
        let sharpness = self.sharpness_gradient(model, batch, &*optimizer, None)?;
        self.apply_sharpness(sharpness, batch, optimizer)
    }

    /// The sub-batch ascent ([`SubBatch`]): pass 1 on the batch's first
    /// `ceil(fraction B)` rows, pass 2 on all of them. The step reports the
    /// loss and accuracy at theta of those rows, the only ones it sees there.
    fn sub_batch_step<M, O>(
        &mut self,
        sub: SubBatch,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let size = check_batch(batch)?;
        let rows = sub.rows(size);
        if rows == size {
            return self.full_step(model, batch, optimizer);
        }
        if batch.carries_correctness() {
            return Err(OptimError::Config(
                "the sub-batch ascent predicts at theta on part of the batch only; a loss that \
                 records each example's correct predictions (CRL) needs all of them"
                    .into(),
            ));
        }
        let head = batch.split(rows)?.swap_remove(0);
        let first = first_pass(
            &self.config.loss,
            model,
            &head,
            optimizer.params().tensors(),
            optimizer.loss_scale(),
            Reduction::<O>::Own,
        )?;
        let sharpness = self.sharpness_gradient(model, batch, &*optimizer, Some(first))?;
        self.apply_sharpness(sharpness, batch, optimizer)
    }

    /// Momentum-SAM ([`Msam`]): the base optimiser's momentum chooses the
    /// perturbation, the one pass is the second (its loss at theta~), the
    /// base optimiser steps at theta~ and the perturbation is added back,
    /// also when the pass fails. The step reports that pass's loss and
    /// accuracy, at theta~: there is no pass at theta.
    fn momentum_step<M, O>(
        &mut self,
        msam: Msam,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let rows = check_batch(batch)? as usize;
        if batch.carries_correctness() {
            return Err(OptimError::Config(
                "Momentum-SAM predicts at theta~ only; a loss that records each example's \
                 correct predictions at theta (CRL) needs a pass there"
                    .into(),
            ));
        }
        let momentum = optimizer.ascent_momentum().ok_or_else(|| {
            OptimError::Config(
                "Momentum-SAM perturbs along SGD's momentum buffer: the base optimiser has none \
                 (it needs SGD with momentum > 0, without Nesterov)"
                    .into(),
            )
        })?;
        let perturbation = msam.perturbation(momentum, self.config.rho)?;
        add_flat(optimizer.params().tensors(), &perturbation)?;
        let stepped = self
            .momentum_pass(model, batch, &*optimizer, rows)
            .and_then(|(grads, stats)| {
                let update = (Update::Mean(grads), batch);
                apply(update, self.config.clip_grad_norm, optimizer, stats)
            });
        add_flat(optimizer.params().tensors(), &-perturbation)?;
        stepped
    }

    /// The pass of [`SamStep::momentum_step`] at the weights as they are:
    /// the second-pass loss's gradient, reduced over the replicas, and the
    /// step's statistics.
    fn momentum_pass<M, O>(
        &self,
        model: &M,
        batch: &TrainBatch,
        optimizer: &O,
        rows: usize,
    ) -> Result<(Vec<Tensor>, StatsAccumulator), OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let pass = batch.forward(model)?;
        let objective =
            pass.objective(|scores, y| self.second_loss.objective(&self.config.loss, scores, y))?;
        let grads = gradients(
            &objective,
            optimizer.params().tensors(),
            optimizer.loss_scale(),
            Reduction::Replicas(optimizer, rows),
        )?;
        let (scores, y) = pass.primary();
        let log_p = tch::no_grad(|| gather_true(&scores.log_probs, y))?;
        let cross_entropy = tch::no_grad(|| cross_entropy_from_log_probs(&log_p));
        let grad_norm = tch::no_grad(|| global_norm(&grads))?;
        let mut stats = StatsAccumulator::new(false);
        stats.add(
            1.0,
            &cross_entropy,
            &scores.logits,
            y,
            &grad_norm,
            Some((&objective, &cross_entropy)),
        );
        stats.add_heads(pass.heads(), y);
        Ok((grads, stats))
    }

    /// [`apply`] with the second-pass gradient. A step skipped for a
    /// float16 overflow also keeps the perturbation's memory (VASSO's
    /// average) from before the step, as it keeps the weights.
    fn apply_sharpness<O: BaseOptimizer + ?Sized>(
        &mut self,
        sharpness: SharpnessGradient,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError> {
        let SharpnessGradient {
            update,
            stats,
            prior_memory,
        } = sharpness;
        let stats = apply(
            (update, batch),
            self.config.clip_grad_norm,
            optimizer,
            stats,
        )?;
        if stats.skipped {
            self.memory = prior_memory;
        }
        Ok(stats)
    }

    /// Pass 1 on the whole batch (the policies that decide after it).
    fn whole_batch_first_pass<M, O>(
        &self,
        model: &M,
        batch: &TrainBatch,
        optimizer: &O,
    ) -> Result<FirstPass, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        check_batch(batch)?;
        let params = optimizer.params().tensors();
        first_pass(
            &self.config.loss,
            model,
            batch,
            params,
            optimizer.loss_scale(),
            Reduction::<O>::Own,
        )
    }

    /// LookSAM ([`LookSam`]): on its SAM steps the two passes, keeping
    /// `g_v`; in between one pass and the update `g + alpha (||g|| / ||g_v||) g_v`.
    fn look_sam_step<M, O>(
        &mut self,
        look: LookSam,
        step: u64,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let first = self.whole_batch_first_pass(model, batch, &*optimizer)?;
        let params = optimizer.params().tensors();
        let grad = tch::no_grad(|| flatten(&first.grads))?;
        let clip_norm = self.config.clip_grad_norm;
        if look.is_sam_step(step) {
            let sharpness = self.sharpness_gradient(model, batch, &*optimizer, Some(first))?;
            let sam_grad = tch::no_grad(|| flatten(sharpness.update.tensors()))?;
            let direction = LookSam::orthogonal(&grad, &sam_grad);
            let stats = self.apply_sharpness(sharpness, batch, optimizer)?;
            // A step skipped for a float16 overflow leaves the last direction.
            if !stats.skipped {
                self.direction = Some(direction);
            }
            return Ok(stats);
        }
        let direction = self.direction.as_ref().ok_or_else(|| {
            OptimError::Mismatch(
                "LookSAM reuses the direction of its last SAM step, which the restored \
                 state lacks"
                    .into(),
            )
        })?;
        let update = look.reused(&grad, direction);
        let grads = chunk_views(&update, params)?;
        let stats = first.plain_stats(batch, &grad.norm());
        apply((Update::Own(grads), batch), clip_norm, optimizer, stats)
    }

    /// AE-SAM ([`AeSam`]): one pass, then the second one only where
    /// `||g||^2` is high against its running statistics.
    fn ae_sam_step<M, O>(
        &mut self,
        ae: AeSam,
        step: u64,
        model: &M,
        batch: &TrainBatch,
        optimizer: &mut O,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let first = self.whole_batch_first_pass(model, batch, &*optimizer)?;
        let grad_norm = tch::no_grad(|| global_norm(&first.grads))?;
        // The decision needs the norm on the host: one synchronisation.
        let squared_norm = grad_norm.f_double_value(&[])?.powi(2);
        let horizon = self.config.horizon;
        let clip_norm = self.config.clip_grad_norm;
        // A non-finite norm (a float16 overflow, whose step is skipped) is
        // kept out of the running statistics.
        if squared_norm.is_finite()
            && ae.observe(squared_norm, step, &horizon, &mut self.grad_statistics)
        {
            let sharpness = self.sharpness_gradient(model, batch, &*optimizer, Some(first))?;
            return self.apply_sharpness(sharpness, batch, optimizer);
        }
        let stats = first.plain_stats(batch, &grad_norm);
        apply(
            (Update::Own(first.grads), batch),
            clip_norm,
            optimizer,
            stats,
        )
    }

    /// The second-pass gradient `g'` of a batch (averaged over its
    /// m-sharpness parts) with the step's statistics; `first` is the first
    /// pass on the whole batch when the policy already ran it. The step is
    /// the one [`SamStep::step_batch`] counted last.
    fn sharpness_gradient<M, O>(
        &mut self,
        model: &M,
        batch: &TrainBatch,
        optimizer: &O,
        mut first: Option<FirstPass>,
    ) -> Result<SharpnessGradient, OptimError>
    where
        M: TrainingPass + ?Sized,
        O: BaseOptimizer + ?Sized,
    {
        let params = optimizer.params().tensors();
        let size = check_batch(batch)?;
        let prior_memory = self.memory.as_ref().map(Tensor::shallow_clone);
        let step = self.steps_taken.saturating_sub(1);
        let loss_scale = optimizer.loss_scale();
        let split;
        let parts = match self.config.m {
            Some(m) if (m as i64) < size => {
                split = batch.split(m as i64)?;
                split.as_slice()
            }
            _ => std::slice::from_ref(batch),
        };
        let saved = match self.saved_params.take() {
            Some(mut copy) if copy.fits(params) => {
                copy.capture(params)?;
                copy
            }
            _ => {
                let copy = FlatCopy::new(params)?;
                self.weight_entries = match self.config.perturbation.scales_weights() {
                    true => Some(weight_entries(
                        optimizer.params().names(),
                        params,
                        copy.values().device(),
                    )?),
                    false => None,
                };
                copy
            }
        };
        let saved = &*self.saved_params.insert(saved);
        let mut stats = StatsAccumulator::new(batch.carries_correctness());
        let mut update: Vec<Tensor> = Vec::new();
        // A whole batch's g' is reduced as its backward pass runs; the
        // parts' sum after the last part.
        let whole_batch = parts.len() == 1;
        for (i, part) in parts.iter().enumerate() {
            let share = part.rows_per_member() as f64 / size as f64;
            let replicas = Reduction::Replicas(optimizer, part.rows_per_member() as usize);
            let first_reduction = match self.config.reduce_first_gradient {
                true => replicas,
                false => Reduction::Own,
            };
            let pass = match first.take() {
                Some(pass) if self.config.reduce_first_gradient => {
                    pass.reduced(optimizer, part.rows_per_member() as usize)
                }
                Some(pass) => Ok(pass),
                None => first_pass(
                    &self.config.loss,
                    model,
                    part,
                    params,
                    loss_scale,
                    first_reduction,
                ),
            };
            let part = pass.and_then(|pass| {
                perturbed_gradient(
                    &self.config,
                    &self.second_loss,
                    &mut self.buffers,
                    &mut self.memory,
                    saved,
                    self.weight_entries.as_ref(),
                    Part {
                        model,
                        batch: part,
                        params,
                        first: i == 0,
                        share,
                        step,
                        loss_scale,
                        reduction: match whole_batch {
                            true => replicas,
                            false => Reduction::Own,
                        },
                    },
                    pass,
                    &mut stats,
                )
            });
            // theta is restored by copy after every part, also when a pass failed.
            saved.restore(params)?;
            let grads = match part {
                Ok(grads) => grads,
                Err(e) => {
                    self.buffers.restore()?;
                    return Err(e);
                }
            };
            update = if update.is_empty() {
                grads
            } else {
                update.iter().zip(&grads).map(|(a, g)| a + g).collect()
            };
        }
        self.buffers.restore()?;
        Ok(SharpnessGradient {
            update: match whole_batch {
                true => Update::Mean(update),
                false => Update::Own(update),
            },
            stats,
            prior_memory,
        })
    }
}

/// What the two passes of a SAM step computed, for [`SamStep::apply_sharpness`].
struct SharpnessGradient {
    /// `g'`, the second-pass gradient, averaged over the m-sharpness parts.
    update: Update,
    stats: StatsAccumulator,
    /// The perturbation's memory before the step (VASSO's average).
    prior_memory: Option<Tensor>,
}

/// One (sub-)batch of a SAM step.
struct Part<'a, M: ?Sized, O: ?Sized> {
    model: &'a M,
    batch: &'a TrainBatch,
    params: &'a [Tensor],
    /// Whether this is the first part (its pass 1 sets the running statistics).
    first: bool,
    /// Fraction of the batch in this part.
    share: f64,
    /// The step's 0-based index in the run (ESAM's masks read it).
    step: u64,
    /// What the losses are multiplied by before backward ([`BaseOptimizer::loss_scale`]).
    loss_scale: f64,
    /// Whose gradient pass 2 gives: the part's own, or (a whole-batch part)
    /// already the replicas' mean.
    reduction: Reduction<'a, O>,
}

/// The first pass at theta: the training loss's gradient `g` and what the
/// step reports of it.
struct FirstPass {
    pass: Forward,
    /// The reported cross entropy.
    cross_entropy: Tensor,
    grads: Vec<Tensor>,
}

/// Train-mode forward of `batch`, the training loss and its gradient
/// (backward from the loss times `loss_scale`, see [`gradients`]), this
/// process's own or reduced over the replicas by `reduction`.
fn first_pass<M: TrainingPass + ?Sized, O: BaseOptimizer + ?Sized>(
    loss: &TrainingLoss,
    model: &M,
    batch: &TrainBatch,
    params: &[Tensor],
    loss_scale: f64,
    reduction: Reduction<'_, O>,
) -> Result<FirstPass, OptimError> {
    let pass = batch.forward(model)?;
    let objective = pass.objective(|scores, y| loss.mean_of(scores, y))?;
    let grads = gradients(&objective, params, loss_scale, reduction)?;
    let cross_entropy = reported_cross_entropy(loss, objective, &pass)?.detach();
    // The graph is spent: its nodes, scattered between the activations in the
    // heap, go now rather than after the second pass.
    Ok(FirstPass {
        pass: pass.detached(),
        cross_entropy,
        grads,
    })
}

impl FirstPass {
    /// This pass with its gradient reduced over the data-parallel replicas
    /// ([`BaseOptimizer::reduce_gradient`]).
    fn reduced<O: BaseOptimizer + ?Sized>(
        self,
        optimizer: &O,
        rows: usize,
    ) -> Result<FirstPass, OptimError> {
        Ok(FirstPass {
            grads: optimizer.reduce_gradient(self.grads, rows)?,
            ..self
        })
    }

    /// The statistics of a step that ends with this pass.
    fn plain_stats(&self, batch: &TrainBatch, grad_norm: &Tensor) -> StatsAccumulator {
        let mut stats = StatsAccumulator::new(batch.carries_correctness());
        let (scores, y) = self.pass.primary();
        stats.add(1.0, &self.cross_entropy, &scores.logits, y, grad_norm, None);
        stats.add_heads(self.pass.heads(), y);
        stats
    }
}

/// Pass 2 on one part after its pass 1 `first`: returns `share * g'` and
/// leaves the weights at theta_tilde (the caller restores theta from
/// `saved`). The BatchNorm buffers are captured after pass 1 of the first
/// part.
#[allow(clippy::too_many_arguments)]
fn perturbed_gradient<M: TrainingPass + ?Sized, O: BaseOptimizer + ?Sized>(
    config: &SamConfig,
    second_loss: &SecondLossFn,
    buffers: &mut BufferSnapshot,
    memory: &mut Option<Tensor>,
    saved: &FlatCopy,
    weight_entries: Option<&Tensor>,
    part: Part<'_, M, O>,
    first_pass: FirstPass,
    stats: &mut StatsAccumulator,
) -> Result<Vec<Tensor>, OptimError> {
    let Part {
        model,
        batch,
        params,
        first,
        share,
        step,
        loss_scale,
        reduction,
    } = part;
    let FirstPass {
        pass,
        cross_entropy: ce,
        grads,
    } = first_pass;
    let (scores, y) = pass.primary();
    let logits = &scores.logits;
    if first {
        buffers.capture()?;
    }
    let flat_grad = tch::no_grad(|| flatten(&grads))?;
    drop(grads);
    let (theta_tilde, grad_norm) = config.perturbation.perturb(
        saved.values(),
        &flat_grad,
        config.rho,
        memory,
        weight_entries,
    );
    let esam = match config.policy {
        SamPolicy::Esam(esam) => Some(esam),
        _ => None,
    };
    let theta_tilde = match esam {
        Some(esam) => esam.masked(saved.values(), theta_tilde, config.horizon.seed, step)?,
        None => theta_tilde,
    };
    scatter(&theta_tilde, params)?;
    drop((flat_grad, theta_tilde));
    // Pass 2 at theta_tilde, with the second-pass loss: on the same part, or
    // on ESAM's selected rows of it.
    let selected = match esam {
        Some(esam) if esam.selects() => Some(sharpness_sensitive_rows(
            esam,
            &config.loss,
            model,
            batch,
            (scores, y),
        )?),
        _ => None,
    };
    let pass_tilde = selected.as_ref().unwrap_or(batch).forward(model)?;
    let objective =
        pass_tilde.objective(|scores, y| second_loss.objective(&config.loss, scores, y))?;
    let (scores_tilde, y_tilde) = pass_tilde.primary();
    let log_p_tilde = tch::no_grad(|| gather_true(&scores_tilde.log_probs, y_tilde))?;
    let weighted = if share == 1.0 {
        objective.shallow_clone()
    } else {
        &objective * share
    };
    let grads_tilde = gradients(&weighted, params, loss_scale, reduction)?;
    let ce_tilde = tch::no_grad(|| cross_entropy_from_log_probs(&log_p_tilde));
    stats.add(
        share,
        &ce,
        logits,
        y,
        &grad_norm,
        Some((&objective, &ce_tilde)),
    );
    stats.add_heads(pass.heads(), y);
    Ok(grads_tilde)
}

/// ESAM's SDS ([`Esam`]): the rows of `batch` whose training loss rises
/// most from theta (`at_theta`, pass 1's scores and targets) to the weights
/// now in the model, judged by a no-grad forward on the whole batch.
fn sharpness_sensitive_rows<M: TrainingPass + ?Sized>(
    esam: Esam,
    loss: &TrainingLoss,
    model: &M,
    batch: &TrainBatch,
    at_theta: (&Scores, &Tensor),
) -> Result<TrainBatch, OptimError> {
    let increase = tch::no_grad(|| -> Result<Tensor, OptimError> {
        let pass = batch.forward(model)?;
        let (scores, y) = pass.primary();
        let (scores_theta, y_theta) = at_theta;
        Ok(loss.per_example(scores, y)? - loss.per_example(scores_theta, y_theta)?)
    })?;
    let rows = esam.select(&increase)?;
    batch.select_rows(&rows)?.ok_or_else(|| {
        OptimError::Config(
            "ESAM's data selection (gamma < 1) picks examples of the batch: a mixed batch or \
             one drawn per member (MIMO) has none; set gamma to 1 or train without mixing"
                .into(),
        )
    })
}

/// Reduces `update` (the gradient over `batch`) over the data-parallel
/// replicas unless it is already their mean, clips it, takes the base
/// optimiser's step with it and reads the step's statistics back.
fn apply<O: BaseOptimizer + ?Sized>(
    (update, batch): (Update, &TrainBatch),
    clip_grad_norm: Option<f64>,
    optimizer: &mut O,
    stats: StatsAccumulator,
) -> Result<StepStats, OptimError> {
    let update = match update {
        Update::Own(grads) => optimizer.reduce_gradient(grads, batch.rows_per_member() as usize)?,
        Update::Mean(grads) => grads,
    };
    let update = clip(update, clip_grad_norm)?;
    optimizer.step(&update)?;
    stats.finish(optimizer.skipped_last_step())
}

/// Adds `values` (flat, in the tensors' order) to `tensors` in place.
fn add_flat(tensors: &[Tensor], values: &Tensor) -> Result<(), OptimError> {
    let _guard = tch::no_grad_guard();
    for (tensor, chunk) in tensors.iter().zip(chunk_views(values, tensors)?) {
        let _ = tensor.detach().f_add_(&chunk)?;
    }
    Ok(())
}

/// Whose gradient a backward pass gives.
enum Reduction<'o, O: ?Sized> {
    /// This process's own.
    Own,
    /// The data-parallel replicas' mean, each over its `rows` examples
    /// ([`BaseOptimizer::reduced_backward`]).
    Replicas(&'o O, usize),
}

// By hand: derived impls would ask `O: Clone`, and a reference is Copy anyway.
impl<O: ?Sized> Clone for Reduction<'_, O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<O: ?Sized> Copy for Reduction<'_, O> {}

/// The gradient a step updates with: this process's own, which [`apply`]
/// reduces over the replicas, or one that already is their mean.
enum Update {
    Own(Vec<Tensor>),
    Mean(Vec<Tensor>),
}

impl Update {
    fn tensors(&self) -> &[Tensor] {
        match self {
            Update::Own(grads) | Update::Mean(grads) => grads,
        }
    }
}

/// The gradient of `objective` with respect to `params`, reduced by
/// `reduction`. Under loss scaling (`loss_scale` != 1,
/// [`super::LossScaled`]) backward runs from `loss_scale * objective` and
/// the gradients are divided by `loss_scale` again, as `GradScaler.scale`
/// and `unscale_` do (a power of two: exact).
fn gradients<O: BaseOptimizer + ?Sized>(
    objective: &Tensor,
    params: &[Tensor],
    loss_scale: f64,
    reduction: Reduction<'_, O>,
) -> Result<Vec<Tensor>, OptimError> {
    let backward = |objective: &Tensor| match reduction {
        Reduction::Own => Ok(Tensor::f_run_backward(&[objective], params, false, false)?),
        Reduction::Replicas(optimizer, rows) => optimizer.reduced_backward(objective, params, rows),
    };
    if loss_scale == 1.0 {
        return backward(objective);
    }
    let scaled = objective * loss_scale;
    let mut grads = backward(&scaled)?;
    // The gradients are this step's own tensors: unscaled in place.
    let _guard = tch::no_grad_guard();
    for grad in &mut grads {
        let _ = grad.f_mul_scalar_(1.0 / loss_scale)?;
    }
    Ok(grads)
}

/// One plain step: train-mode forward, the training loss, gradient, optional
/// clipping, base optimiser step. This is SGD / AdamW training without SAM.
pub fn plain_step<M, O>(
    model: &M,
    batch: &TrainBatch,
    optimizer: &mut O,
    loss: &TrainingLoss,
    clip_grad_norm: Option<f64>,
) -> Result<StepStats, OptimError>
where
    M: TrainingPass + ?Sized,
    O: BaseOptimizer + ?Sized,
{
    let rows = check_batch(batch)? as usize;
    let first = first_pass(
        loss,
        model,
        batch,
        optimizer.params().tensors(),
        optimizer.loss_scale(),
        Reduction::Replicas(&*optimizer, rows),
    )?;
    let grad_norm = tch::no_grad(|| global_norm(&first.grads))?;
    let stats = first.plain_stats(batch, &grad_norm);
    apply(
        (Update::Mean(first.grads), batch),
        clip_grad_norm,
        optimizer,
        stats,
    )
}

/// The mean cross entropy a step reports (its `loss`, whose `exp(-loss)` is
/// the geometric mean `p_y` of the diagnostics): the objective itself when
/// the training loss is cross entropy on an unmixed batch, computed from
/// the pass's own scores and targets otherwise (a mixed batch: the mixed
/// inputs against `y`, or MIT-L's recovered logits).
pub(super) fn reported_cross_entropy(
    loss: &TrainingLoss,
    objective: Tensor,
    pass: &Forward,
) -> Result<Tensor, OptimError> {
    if loss.is_cross_entropy() && pass.is_plain() {
        return Ok(objective);
    }
    let (scores, targets) = pass.primary();
    Ok(tch::no_grad(|| {
        gather_true(&scores.log_probs, targets).map(|lp| cross_entropy_from_log_probs(&lp))
    })?)
}

/// Checks inputs `[B, ...]` and targets `[B]`; the rows each member trains
/// on ([`TrainBatch::rows_per_member`]: `B`, or MIMO's `r B`).
pub(super) fn check_batch(batch: &TrainBatch) -> Result<i64, OptimError> {
    let (x, y) = (batch.first_input().size(), batch.targets().size());
    match (x.first(), y.as_slice()) {
        (Some(&b), &[n]) if b == n && b > 0 => Ok(batch.rows_per_member()),
        _ => Err(OptimError::Loss(crate::loss::LossError::Shape(format!(
            "a batch needs inputs [B, ...] and targets [B] with B >= 1, got {x:?} and {y:?}"
        )))),
    }
}

/// Scales `grads` so that their global L2 norm is at most `max_norm`, as
/// `torch.nn.utils.clip_grad_norm_`: `g * min(1, max_norm / (||g|| + 1e-6))`,
/// computed on the device.
fn clip(grads: Vec<Tensor>, max_norm: Option<f64>) -> Result<Vec<Tensor>, OptimError> {
    let Some(max_norm) = max_norm else {
        return Ok(grads);
    };
    let _guard = tch::no_grad_guard();
    let total = global_norm(&grads)? + 1e-6;
    let coef = (total.full_like(max_norm) / total).clamp_max(1.0);
    Ok(grads.iter().map(|g| g * &coef).collect())
}
