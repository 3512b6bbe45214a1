//! The optimisation branch of a run: the base optimizer, the learning-rate
//! schedule, the update rule (plain, or one of the SAM family around the base
//! optimizer; [`UpdateRule`] is csam-nn's own type, declared and checked
//! there) and gradient clipping.

use serde::{Deserialize, Serialize};

use super::check::{finite_above, invalid, keyed, unit_interval};
use super::ConfigError;
use csam_nn::optim::{validate_clip, SamPolicy};
pub use csam_nn::optim::{OptimizerFamily, Sharpness, UpdateRule};

/// How the weights are updated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OptimSpec {
    /// Peak learning rate (the schedule's base).
    #[serde(default = "default_lr")]
    pub lr: f64,
    /// Weight decay of the base optimizer; it never enters the ascent
    /// gradient of the SAM family.
    #[serde(default = "default_weight_decay")]
    pub weight_decay: f64,
    /// Clip the global L2 norm of the descent gradient (SAM family: `g'`
    /// only, since the ascent direction is normalised anyway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clip: Option<f64>,
    /// The optimizer that applies the (possibly sharpness-aware) gradient.
    #[serde(default)]
    pub base: BaseSpec,
    /// The learning rate over the run.
    #[serde(default)]
    pub schedule: Schedule,
    /// Plain steps, or the SAM family's two passes.
    #[serde(default)]
    pub rule: UpdateRule,
    /// On which steps a SAM-family rule runs its second pass (the efficient
    /// SAM policies: RST, LookSAM, AE-SAM); every `sam_every`-th by default.
    #[serde(default, skip_serializing_if = "is_every")]
    pub policy: SamPolicy,
    /// Under data parallelism, a SAM-family rule perturbs with the global
    /// batch's gradient (pass 1's gradient averaged over the processes, a
    /// second all-reduce per step) instead of each process's own (m-sharpness
    /// with m = the per-process batch). One process: no effect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub global_ascent: bool,
}

fn is_every(policy: &SamPolicy) -> bool {
    *policy == SamPolicy::Every
}

fn default_lr() -> f64 {
    0.1
}

fn default_weight_decay() -> f64 {
    5e-4
}

fn default_momentum() -> f64 {
    0.9
}

impl Default for OptimSpec {
    /// The paper's protocol: SGD momentum 0.9, lr 0.1, weight decay 5e-4,
    /// cosine decay to 0, plain steps.
    fn default() -> Self {
        OptimSpec {
            lr: default_lr(),
            weight_decay: default_weight_decay(),
            clip: None,
            base: BaseSpec::default(),
            schedule: Schedule::default(),
            rule: UpdateRule::default(),
            policy: SamPolicy::Every,
            global_ascent: false,
        }
    }
}

impl OptimSpec {
    /// Checks every part; `batch_size` bounds the m-sharpness sub-batch.
    pub fn validate(&self, epochs: usize, batch_size: usize) -> Result<(), ConfigError> {
        finite_above("lr", self.lr, 0.0, false)?;
        finite_above("weight_decay", self.weight_decay, 0.0, true)?;
        keyed(&["optim"], "clip", validate_clip(self.clip))?;
        self.base.validate()?;
        self.schedule.validate(self.lr, epochs)?;
        let rule = self.rule.family().name();
        keyed(&["optim", "rule"], rule, self.rule.validate())?;
        if let Some(sharpness) = self.rule.sharpness() {
            self.validate_run_sharpness(sharpness, batch_size)?;
        }
        if matches!(self.rule, UpdateRule::Bsam { .. }) {
            self.validate_bsam()?;
        }
        self.validate_policy()
    }

    /// Forward-backward passes per step on average: 1 for plain SGD, 2 for
    /// bSAM, the policy's expected passes for the SAM family
    /// ([`SamPolicy::expected_passes_per_step`]): the cost of a step relative
    /// to SGD's, for scheduling runs.
    pub fn passes_per_step(&self) -> f64 {
        if let UpdateRule::Bsam { .. } = self.rule {
            return 2.0;
        }
        self.rule.sharpness().map_or(1.0, |sharpness| {
            self.policy.expected_passes_per_step(sharpness.every as u64)
        })
    }

    /// The efficient SAM policies wrap the SAM family's two-pass step; each
    /// refuses a parameter out of its range and the settings it replaces.
    fn validate_policy(&self) -> Result<(), ConfigError> {
        let name = self.policy.name();
        if self.rule.sharpness().is_none() && self.policy != SamPolicy::Every {
            return Err(invalid(
                "sam_policy",
                name,
                &format!(
                    "schedules the second pass of a SAM-family rule (sam, asam, csam, \
                     vasso); optimizer {} has none",
                    self.rule.family()
                ),
            ));
        }
        keyed(&["optim", "policy"], name, self.policy.validate())?;
        if matches!(self.policy, SamPolicy::Msam(_)) {
            self.validate_msam_base()?;
        }
        keyed(
            &["optim", "rule"],
            name,
            self.rule.check_policy(&self.policy),
        )
    }

    /// Momentum-SAM perturbs along SGD's heavy-ball momentum
    /// ([`csam_nn::optim::BaseOptimizer::ascent_momentum`]), which AdamW, SGD
    /// without momentum and Nesterov SGD do not give.
    fn validate_msam_base(&self) -> Result<(), ConfigError> {
        let reason = match self.base {
            BaseSpec::Sgd { momentum, .. } if momentum == 0.0 => Some((
                "momentum",
                momentum.to_string(),
                "sam_policy msam perturbs along SGD's momentum, which momentum 0 leaves at zero",
            )),
            BaseSpec::Sgd { nesterov: true, .. } => Some((
                "nesterov",
                true.to_string(),
                "sam_policy msam follows its authors' heavy-ball SGD, which has no Nesterov form",
            )),
            BaseSpec::Adamw { .. } => Some((
                "base_optimizer",
                "adamw".to_string(),
                "sam_policy msam perturbs along SGD's momentum buffer; AdamW's is not implemented",
            )),
            BaseSpec::Sgd { .. } => None,
        };
        match reason {
            Some((key, value, reason)) => Err(invalid(key, value, reason)),
            None => Ok(()),
        }
    }

    /// What a run asks of a SAM-family rule beyond the step's own checks: a
    /// radius above 0 (the step allows 0, SAM at radius 0 being SGD) and an
    /// m-sharpness sub-batch within the batch.
    fn validate_run_sharpness(
        &self,
        sharpness: Sharpness,
        batch_size: usize,
    ) -> Result<(), ConfigError> {
        if sharpness.rho == 0.0 {
            return Err(invalid(
                "rho",
                0.0,
                "a SAM-family run needs rho > 0 (at 0 it takes SGD's step at twice its \
                 cost: use optimizer = sgd)",
            ));
        }
        match sharpness.m {
            Some(m) if m > batch_size => Err(invalid(
                "m",
                m,
                &format!("the m-sharpness sub-batch must not exceed batch_size ({batch_size})"),
            )),
            _ => Ok(()),
        }
    }

    /// bSAM is its own optimizer: it reads `lr`, `momentum` (its beta1) and
    /// `weight_decay` (its delta, the prior precision over N) and refuses the
    /// base optimizer's other settings rather than ignore them.
    fn validate_bsam(&self) -> Result<(), ConfigError> {
        const OWN: &str = "bSAM is its own optimizer (lr, momentum as its beta1, weight_decay \
                           as its prior precision over N)";
        match self.base {
            BaseSpec::Adamw { .. } => {
                return Err(invalid(
                    "base_optimizer",
                    "adamw",
                    &format!("{OWN}; it has no base optimizer"),
                ))
            }
            BaseSpec::Sgd { nesterov: true, .. } => {
                return Err(invalid(
                    "nesterov",
                    true,
                    &format!("{OWN}; it has no Nesterov momentum"),
                ))
            }
            BaseSpec::Sgd { .. } => {}
        }
        match self.clip {
            Some(clip) => Err(invalid(
                "clip",
                clip,
                &format!("{OWN}; it does not clip its gradients"),
            )),
            None => Ok(()),
        }
    }
}

/// The base optimizer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum BaseSpec {
    /// SGD with momentum (optionally Nesterov), L2 weight decay added to the
    /// gradient (`torch.optim.SGD`).
    Sgd {
        /// Momentum in `[0, 1)`.
        #[serde(default = "default_momentum")]
        momentum: f64,
        /// Nesterov momentum (needs momentum > 0).
        #[serde(default)]
        nesterov: bool,
    },
    /// AdamW, decoupled weight decay (`torch.optim.AdamW`, beta2 0.999, eps 1e-8).
    Adamw {
        /// beta1 in `[0, 1)`, under the key `momentum` it shares with SGD.
        #[serde(default = "default_momentum")]
        momentum: f64,
    },
}

impl Default for BaseSpec {
    fn default() -> Self {
        BaseSpec::Sgd {
            momentum: default_momentum(),
            nesterov: false,
        }
    }
}

impl BaseSpec {
    /// The base optimizer's name (`sgd`, `adamw`).
    pub fn name(&self) -> &'static str {
        match self {
            BaseSpec::Sgd { .. } => "sgd",
            BaseSpec::Adamw { .. } => "adamw",
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        match *self {
            BaseSpec::Sgd { momentum, nesterov } => {
                unit_interval("momentum", momentum)?;
                match nesterov && momentum == 0.0 {
                    true => Err(invalid("nesterov", true, "needs momentum > 0")),
                    false => Ok(()),
                }
            }
            BaseSpec::Adamw { momentum } => unit_interval("momentum", momentum),
        }
    }
}

/// The learning-rate schedule over the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum Schedule {
    /// Linear warm-up for `warmup_epochs`, then cosine decay to `min_lr` at the
    /// last step (`CosineAnnealingLR` without warm-up).
    Cosine {
        /// Epochs of linear warm-up (fewer than the run's epochs).
        #[serde(default)]
        warmup_epochs: usize,
        /// The final learning rate, in `[0, lr]`.
        #[serde(default)]
        min_lr: f64,
    },
    /// `lr * decay_factor^floor(epoch / step_size)` (`StepLR`).
    Step {
        /// Epochs between two decays.
        #[serde(default = "default_step_size")]
        step_size: usize,
        /// Factor in `(0, 1]` of each decay.
        #[serde(default = "default_decay_factor")]
        decay_factor: f64,
    },
}

fn default_step_size() -> usize {
    60
}

fn default_decay_factor() -> f64 {
    0.1
}

impl Default for Schedule {
    fn default() -> Self {
        Schedule::Cosine {
            warmup_epochs: 0,
            min_lr: 0.0,
        }
    }
}

impl Schedule {
    fn validate(&self, lr: f64, epochs: usize) -> Result<(), ConfigError> {
        match *self {
            Schedule::Cosine {
                warmup_epochs,
                min_lr,
            } => {
                if warmup_epochs > 0 && warmup_epochs >= epochs {
                    return Err(invalid(
                        "warmup_epochs",
                        warmup_epochs,
                        &format!("must be smaller than epochs ({epochs})"),
                    ));
                }
                match min_lr.is_finite() && (0.0..=lr).contains(&min_lr) {
                    true => Ok(()),
                    false => Err(invalid(
                        "min_lr",
                        min_lr,
                        &format!("must lie in [0, lr = {lr}]"),
                    )),
                }
            }
            Schedule::Step {
                step_size,
                decay_factor,
            } => {
                if step_size == 0 {
                    return Err(invalid("step_size", 0, "must be at least 1 epoch"));
                }
                match decay_factor > 0.0 && decay_factor <= 1.0 {
                    true => Ok(()),
                    false => Err(invalid("decay_factor", decay_factor, "must lie in (0, 1]")),
                }
            }
        }
    }
}
