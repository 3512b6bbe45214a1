//! bSAM (Möllenhoff and Khan 2023, "SAM as an Optimal Relaxation of Bayes",
//! ICLR, Algorithm 1): SAM as an Adam-like optimiser of a Gaussian
//! posterior `N(m, diag(1 / (N s)))` over the weights, whose mean `m` is the
//! model's weights and whose precision vector `s` the optimiser carries.
//!
//! One step on a batch, every operation elementwise (as the authors' code,
//! `optim.py` `build_bsam_optimizer` of team-approx-bayes/bayesian-sam):
//! 1. noise: `theta = m + e / sqrt(N s)`, `e ~ N(0, I)` (drawn before any
//!    gradient);
//! 2. pass 1 at `theta`: the training loss, gradient `g` (BatchNorm running
//!    statistics move here, and only here);
//! 3. the SAM perturbation `eps = rho g / s` (not normalised), taken from the
//!    mean `m`, not from the noisy `theta`;
//! 4. pass 2 at `m + eps`, same batch and loss: gradient `g_eps`; the weights
//!    and running statistics are then restored by copy;
//! 5. `g_m <- beta1 g_m + (1 - beta1) (g_eps + delta m)`;
//! 6. `m <- m - lr g_m / s` with the precision `s` of the step's start;
//! 7. `s <- beta2 s + (1 - beta2) (sqrt(s) |g| + delta + gamma)`.
//!
//! `delta` is the prior precision divided by `N` (the authors' `wdecay =
//! priorprec / N`: a weight decay), `gamma` a damping, `N` the number of
//! training examples (the authors multiply it by a data-augmentation factor,
//! 4 on CIFAR). There is no bias correction; `g_m` starts at 0 and `s` at
//! `s0`. The authors' code computes `sqrt(s) |g|` as `sqrt(s g^2)` and moves
//! `m` (step 6) before `s` (step 7), as here. Their defaults: beta1 0.9,
//! beta2 0.999, `s0` 1, `gamma` 0.1; their CIFAR-10 bSAM run: lr 0.5, rho
//! 0.01, prior precision 10, data factor 4, batch 200 split into 8
//! sub-batches (m-sharpness, which csam's bSAM does not offer), BatchNorm
//! statistics carried through both passes (csam keeps pass 1's, as its SAM).

use super::buffers::BufferSnapshot;
use super::flat::{flatten, scatter};
use super::sam::{check_batch, reported_cross_entropy};
use super::stats::StatsAccumulator;
use super::{OptimError, Params, StepStats};
use crate::loss::{cross_entropy_from_log_probs, gather_true, Fields, LossError, TrainingLoss};
use crate::mixing::TrainBatch;
use crate::model::TrainingPass;
use tch::{nn::VarStore, Tensor};

/// Settings of [`BsamStep`] (the names of Algorithm 1 in the doc comments).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BsamConfig {
    /// Learning rate `alpha` (>= 0).
    pub lr: f64,
    /// `beta1` in `[0, 1)`: the gradient momentum.
    pub beta1: f64,
    /// `beta2` in `[0, 1)`: the precision's moving average.
    pub beta2: f64,
    /// `rho` (>= 0) of the perturbation `rho g / s`.
    pub rho: f64,
    /// `delta` (>= 0): the prior precision over `N`, a weight decay.
    pub weight_decay: f64,
    /// `gamma` (> 0): added to the precision every step, keeping it positive.
    pub damping: f64,
    /// `s0` (> 0): every parameter's precision before the first step.
    pub init_precision: f64,
    /// `N` (> 0): the training set's size, times any data-augmentation factor.
    pub n_data: f64,
    /// The training loss of both passes.
    #[serde(default)]
    pub loss: TrainingLoss,
}

impl BsamConfig {
    /// Checks every setting, each refused by its field name (the rule's
    /// own by [`validate_bsam_rule`], as [`super::UpdateRule::validate`]).
    pub fn validate(&self) -> Result<(), OptimError> {
        validate_bsam_rule(self.rho, self.beta2, self.damping, self.init_precision)?;
        let fields = Fields("bsam");
        fields.non_negative("lr", self.lr)?;
        fields.unit_interval("beta1", self.beta1)?;
        fields.non_negative("weight_decay", self.weight_decay)?;
        fields.positive("n_data", self.n_data)?;
        self.loss.validate()?;
        Ok(())
    }
}

/// bSAM's parameters of its own (the update rule's): `rho > 0` of the ascent
/// `rho g / s`, `beta2` in [0, 1), the damping and the initial precision > 0.
pub(crate) fn validate_bsam_rule(
    rho: f64,
    beta2: f64,
    damping: f64,
    init_precision: f64,
) -> Result<(), LossError> {
    let fields = Fields("bsam");
    fields.positive("rho", rho)?;
    fields.unit_interval("beta2", beta2)?;
    fields.positive("damping", damping)?;
    fields.positive("init_precision", init_precision)
}

/// The names of [`BsamStep`]'s state in a checkpoint's optimizer state.
const MOMENTUM_NAME: &str = "bsam.momentum";
const PRECISION_NAME: &str = "bsam.precision";

/// A bSAM optimiser over the trainable variables of a `VarStore`: its own
/// optimiser (no base optimiser), with the gradient momentum `g_m` and the
/// precision `s` of all parameters, each one flat buffer.
#[derive(Debug)]
pub struct BsamStep {
    config: BsamConfig,
    params: Params,
    momentum: Tensor,
    precision: Tensor,
    buffers: BufferSnapshot,
}

impl BsamStep {
    /// bSAM over the trainable variables of `vs`, `g_m = 0`, `s = s0`.
    pub fn new(config: BsamConfig, vs: &VarStore) -> Result<Self, OptimError> {
        config.validate()?;
        let params = Params::from_var_store(vs);
        if params.is_empty() {
            return Err(OptimError::Config("no trainable parameters".into()));
        }
        let zeros = tch::no_grad(|| flatten(params.tensors()))?.zeros_like();
        Ok(Self {
            precision: zeros.ones_like() * config.init_precision,
            momentum: zeros,
            buffers: BufferSnapshot::new(vs)?,
            params,
            config,
        })
    }

    /// The settings (with the current learning rate).
    pub fn config(&self) -> &BsamConfig {
        &self.config
    }

    /// The parameters, in the order of the flat state.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Sets the learning rate of the next steps (for schedules).
    pub fn set_learning_rate(&mut self, lr: f64) {
        self.config.lr = lr;
    }

    /// Trains `loss` from the next step on.
    pub fn set_loss(&mut self, loss: TrainingLoss) {
        self.config.loss = loss;
    }

    /// The precision `s` of every parameter, flat in [`BsamStep::params`]' order.
    pub fn precision(&self) -> &Tensor {
        &self.precision
    }

    /// The gradient momentum `g_m`, flat like [`BsamStep::precision`].
    pub fn momentum(&self) -> &Tensor {
        &self.momentum
    }

    /// The state a checkpoint keeps to continue bit for bit (`g_m` and `s`;
    /// without bias correction no step count enters the update). The tensors
    /// share the optimiser's storage: write them out before the next step.
    pub fn state(&self) -> Vec<(String, Tensor)> {
        vec![
            (MOMENTUM_NAME.to_string(), self.momentum.shallow_clone()),
            (PRECISION_NAME.to_string(), self.precision.shallow_clone()),
        ]
    }

    /// Restores [`BsamStep::state`]; both entries must be present with the
    /// right shape, else nothing changes.
    pub fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError> {
        let targets = vec![
            (MOMENTUM_NAME.to_string(), &mut self.momentum),
            (PRECISION_NAME.to_string(), &mut self.precision),
        ];
        super::params::load_entries(state, targets)
    }

    /// One step on a batch, with the noise `e` drawn from libtorch's random
    /// generator (its device's), which the caller seeds.
    pub fn step_batch<M>(&mut self, model: &M, batch: &TrainBatch) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
    {
        let noise = self.momentum.f_randn_like()?;
        self.step_with_noise(model, batch, &noise)
    }

    /// One step on a batch with the standard normal draw `noise` (flat, one
    /// value per parameter, in [`BsamStep::params`]' order):
    /// `theta = m + noise / sqrt(N s)`.
    pub fn step_with_noise<M>(
        &mut self,
        model: &M,
        batch: &TrainBatch,
        noise: &Tensor,
    ) -> Result<StepStats, OptimError>
    where
        M: TrainingPass + ?Sized,
    {
        check_batch(batch)?;
        let layout = (
            self.momentum.size(),
            self.momentum.kind(),
            self.momentum.device(),
        );
        if (noise.size(), noise.kind(), noise.device()) != layout {
            return Err(OptimError::Mismatch(format!(
                "bSAM noise is {:?} {:?} on {:?}, the parameters {:?} {:?} on {:?}",
                noise.size(),
                noise.kind(),
                noise.device(),
                layout.0,
                layout.1,
                layout.2
            )));
        }
        let mean = tch::no_grad(|| flatten(self.params.tensors()))?;
        let passes = self.passes(model, batch, &mean, noise);
        // m is restored by copy, also when a pass failed.
        scatter(&mean, self.params.tensors())?;
        self.buffers.restore()?;
        let (grad, grad_eps, stats) = passes?;
        self.update(mean, &grad, &grad_eps)?;
        stats.finish(false)
    }

    /// Passes 1 (at the noisy sample) and 2 (at `m + eps`): `(g, g_eps)` flat
    /// and the step's statistics; leaves the weights at `m + eps`.
    fn passes<M: TrainingPass + ?Sized>(
        &mut self,
        model: &M,
        batch: &TrainBatch,
        mean: &Tensor,
        noise: &Tensor,
    ) -> Result<(Tensor, Tensor, StatsAccumulator), OptimError> {
        let (params, loss) = (self.params.tensors(), &self.config.loss);
        let sample = tch::no_grad(|| {
            let std = (&self.precision * self.config.n_data).rsqrt();
            mean + std * noise
        });
        scatter(&sample, params)?;
        let pass = batch.forward(model)?;
        let objective = pass.objective(|scores, y| loss.mean_of(scores, y))?;
        let grads = Tensor::f_run_backward(&[&objective], params, false, false)?;
        let ce = reported_cross_entropy(loss, objective, &pass)?;
        self.buffers.capture()?;
        let grad = tch::no_grad(|| flatten(&grads))?;
        drop(grads);
        let perturbed = tch::no_grad(|| mean + &grad * self.config.rho / &self.precision);
        scatter(&perturbed, params)?;
        let pass_eps = batch.forward(model)?;
        let objective_eps = pass_eps.objective(|scores, y| loss.mean_of(scores, y))?;
        let grads_eps = Tensor::f_run_backward(&[&objective_eps], params, false, false)?;
        let (scores_eps, y_eps) = pass_eps.primary();
        let ce_eps = tch::no_grad(|| {
            gather_true(&scores_eps.log_probs, y_eps).map(|lp| cross_entropy_from_log_probs(&lp))
        })?;
        let grad_eps = tch::no_grad(|| flatten(&grads_eps))?;
        let (scores, y) = pass.primary();
        let mut stats = StatsAccumulator::new(batch.carries_correctness());
        let grad_norm = tch::no_grad(|| grad.norm());
        stats.add(
            1.0,
            &ce,
            &scores.logits,
            y,
            &grad_norm,
            Some((&objective_eps, &ce_eps)),
        );
        stats.add_heads(pass.heads(), y);
        Ok((grad, grad_eps, stats))
    }

    /// Steps 5-7 of the module's algorithm, from the mean `m` of the step's start.
    fn update(&mut self, mean: Tensor, grad: &Tensor, grad_eps: &Tensor) -> Result<(), OptimError> {
        let BsamConfig {
            lr,
            beta1,
            beta2,
            weight_decay: delta,
            damping: gamma,
            ..
        } = self.config;
        let _guard = tch::no_grad_guard();
        let descent = grad_eps + &mean * delta;
        let _ = self.momentum.lerp_(&descent, 1.0 - beta1);
        let mean = mean - &self.momentum * lr / &self.precision;
        let curvature = self.precision.sqrt() * grad.abs() + (delta + gamma);
        let _ = self.precision.lerp_(&curvature, 1.0 - beta2);
        scatter(&mean, self.params.tensors())
    }
}
