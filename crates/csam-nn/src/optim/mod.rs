//! Optimisers: the base optimisers (SGD, AdamW), learning-rate schedules,
//! the SAM family as a wrapper around any base optimiser (docs/conventions.md,
//! "The SAM step") and bSAM, an optimiser of its own ([`BsamStep`]).
//!
//! Gradients are passed explicitly: a step computes them with
//! `Tensor::run_backward` (PyTorch's `autograd.grad`) and hands them to
//! [`BaseOptimizer::step`]; the parameters' `.grad` fields are never used, so no
//! `zero_grad` is needed.

mod adamw;
mod bsam;
mod buffers;
pub(crate) mod flat;
mod loss_scale;
mod params;
mod perturbation;
pub mod policy;
mod rule;
pub mod sam;
mod sam_state;
pub mod schedule;
mod sgd;
mod stats;
mod update;

pub use adamw::{AdamW, AdamWConfig};
pub use bsam::{BsamConfig, BsamStep};
pub use buffers::BufferSnapshot;
pub use loss_scale::{LossScaleConfig, LossScaled};
pub use params::Params;
pub use perturbation::{weight_entries, Perturbation};
pub use policy::{
    AeSam, Esam, Horizon, LookSam, MomentumDirection, Msam, Rst, SamPolicy, SubBatch,
};
pub use rule::{validate_clip, OptimizerFamily, SamRun, Sharpness, UpdateRule};
pub use sam::{plain_step, SamConfig, SamStep, SecondLoss};
pub use sam_state::SamState;
pub use schedule::LrSchedule;
pub use sgd::{Sgd, SgdConfig};
pub use stats::{PerturbedStats, StepStats};

use crate::loss::LossError;
use tch::{TchError, Tensor};

/// Errors of the optimisers and of a training step.
#[derive(Debug, thiserror::Error)]
pub enum OptimError {
    /// A hyperparameter is out of range.
    #[error("invalid optimiser setting: {0}")]
    Config(String),
    /// The gradients or a state tensor do not match the parameters.
    #[error("optimiser state mismatch: {0}")]
    Mismatch(String),
    /// The loss could not be computed (bad batch shapes or labels).
    #[error(transparent)]
    Loss(#[from] LossError),
    /// The loss or the gradient became non-finite (the step was already applied).
    #[error("training diverged: {0}")]
    Diverged(String),
    /// libtorch rejected an operation (shown without its C++ stack trace).
    #[error("{}", crate::torch_message::message(.0))]
    Torch(#[from] TchError),
    /// Reducing the gradient over data-parallel replicas failed (a replica
    /// died, or the collective timed out).
    #[error(transparent)]
    Replicas(Box<dyn std::error::Error + Send + Sync>),
}

/// A first-order optimiser over a fixed list of named parameters.
///
/// State tensors are exposed by name (`"<param>.<state>"`, plus optimiser-wide
/// entries such as `"step"`) so that a checkpoint writer can store them in a
/// safetensors file and [`BaseOptimizer::load_state`] can restore them.
pub trait BaseOptimizer: Send {
    /// The parameters this optimiser updates, in the order gradients are given.
    fn params(&self) -> &Params;

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Sets the learning rate used by the next steps (for schedules).
    fn set_learning_rate(&mut self, lr: f64);

    /// One update with `grads[i]` the gradient of `params().tensors()[i]`.
    fn step(&mut self, grads: &[Tensor]) -> Result<(), OptimError>;

    /// The gradient a step uses, from this process's `grads` (same order as
    /// [`BaseOptimizer::params`], the mean over `rows` examples): `grads`
    /// itself, except under data parallelism, where a wrapper around the
    /// optimiser returns the replicas' gradients averaged with their rows as
    /// weights, the mean over the global batch (csam-train's
    /// `DataParallel`). The steps call it on the update before clipping, as
    /// PyTorch's DDP averages before the user clips, and SAM's exact
    /// large-batch mode also on pass 1's gradient.
    fn reduce_gradient(&self, grads: Vec<Tensor>, _rows: usize) -> Result<Vec<Tensor>, OptimError> {
        Ok(grads)
    }

    /// The gradient of `objective` with respect to `params` (this
    /// optimiser's parameters), reduced as [`BaseOptimizer::reduce_gradient`]
    /// reduces this process's gradient over `rows` examples: backward, then
    /// the reduction, except under data parallelism, where the wrapper sums
    /// the gradients over the replicas in buckets while the backward pass
    /// still runs (DDP's overlap).
    fn reduced_backward(
        &self,
        objective: &Tensor,
        params: &[Tensor],
        rows: usize,
    ) -> Result<Vec<Tensor>, OptimError> {
        let grads = Tensor::f_run_backward(&[objective], params, false, false)?;
        self.reduce_gradient(grads, rows)
    }

    /// The factor the steps multiply each loss by before backward and divide
    /// its gradient by right after: 1, except under float16 loss scaling
    /// ([`LossScaled`]).
    fn loss_scale(&self) -> f64 {
        1.0
    }

    /// Whether the last [`BaseOptimizer::step`] left the weights and state
    /// as they were because the gradient overflowed (only [`LossScaled`]
    /// skips steps).
    fn skipped_last_step(&self) -> bool {
        false
    }

    /// The momentum Momentum-SAM perturbs along ([`Msam`]): SGD's heavy-ball
    /// buffer, flat in [`BaseOptimizer::params`]' order. None for an
    /// optimiser without one (SGD without momentum, AdamW) and for Nesterov
    /// SGD, of which the authors' rule has no form; a wrapper answers for
    /// the optimiser it wraps.
    fn ascent_momentum(&self) -> Option<&Tensor> {
        None
    }

    /// The optimiser state as `(name, tensor)` pairs. The tensors share the
    /// optimiser's storage (no copy): write them out before the next step.
    fn state(&self) -> Vec<(String, Tensor)>;

    /// Restores a state produced by [`BaseOptimizer::state`] (values copied in;
    /// every expected name must be present with the right shape).
    fn load_state(&mut self, state: &[(String, Tensor)]) -> Result<(), OptimError>;
}

/// Which base optimiser to build, with its hyperparameters (serde-tagged by
/// `optimizer`: `{"optimizer": "sgd", "lr": 0.1, ...}`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "optimizer", rename_all = "snake_case")]
pub enum OptimizerConfig {
    Sgd(SgdConfig),
    #[serde(rename = "adamw")]
    AdamW(AdamWConfig),
}

impl OptimizerConfig {
    /// Builds the optimiser over the trainable variables of `vs`.
    pub fn build(&self, vs: &tch::nn::VarStore) -> Result<Box<dyn BaseOptimizer>, OptimError> {
        Ok(match *self {
            OptimizerConfig::Sgd(c) => Box::new(Sgd::new(vs, c)?),
            OptimizerConfig::AdamW(c) => Box::new(AdamW::new(vs, c)?),
        })
    }
}
