//! The optimisation branch of a run: the base optimizer, the learning-rate
//! schedule, the update rule (plain, or one of the SAM family around the base
//! optimizer) and gradient clipping.

use serde::{Deserialize, Serialize};

use super::check::{at_least_one, finite_above, invalid, unit_interval};
use super::ConfigError;
use csam_nn::optim::{Perturbation, SamPolicy, SecondLoss};

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
        if let Some(clip) = self.clip {
            finite_above("clip", clip, 0.0, false)?;
        }
        self.base.validate()?;
        self.schedule.validate(self.lr, epochs)?;
        self.rule.validate(batch_size)?;
        if matches!(self.rule, UpdateRule::Bsam { .. }) {
            self.validate_bsam()?;
        }
        self.validate_policy()
    }

    /// Forward-backward passes per step on average: 1 for plain SGD, 2 for
    /// bSAM, `1 +` the share of steps that run the second pass for the SAM
    /// family (`1/every`, or the policy's expected share): the cost of a step
    /// relative to SGD's, for scheduling runs.
    pub fn passes_per_step(&self) -> f64 {
        if let UpdateRule::Bsam { .. } = self.rule {
            return 2.0;
        }
        self.rule.sharpness().map_or(1.0, |sharpness| {
            1.0 + self
                .policy
                .expected_second_pass_share(sharpness.every as u64)
        })
    }

    /// The efficient SAM policies wrap the SAM family's two-pass step; each
    /// refuses a parameter out of its range and the settings it replaces.
    fn validate_policy(&self) -> Result<(), ConfigError> {
        let name = self.policy.name();
        let Some(sharpness) = self.rule.sharpness() else {
            return match self.policy {
                SamPolicy::Every => Ok(()),
                _ => Err(invalid(
                    "sam_policy",
                    name,
                    &format!(
                        "schedules the second pass of a SAM-family rule (sam, asam, csam, \
                         vasso); optimizer {} has none",
                        self.rule.family()
                    ),
                )),
            };
        };
        super::loss::keyed(&["optim", "policy"], name, self.policy.validate())?;
        if self.policy != SamPolicy::Every && sharpness.every != 1 {
            return Err(invalid(
                "sam_every",
                sharpness.every,
                &format!(
                    "applies to sam_policy = every only; {name} schedules the second pass itself"
                ),
            ));
        }
        let whole_batch = matches!(
            self.policy,
            SamPolicy::LookSam(_) | SamPolicy::AeSam(_) | SamPolicy::Esam(_)
        );
        match (whole_batch, sharpness.m) {
            (true, Some(m)) => Err(invalid(
                "m",
                m,
                &format!("{name} works with whole-batch gradients: m-sharpness does not apply"),
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

/// The update rule: plain steps, or a SAM-family step around the base
/// optimizer. Every SAM-family step on mini-batch B:
/// 1. `g` = gradient of the loss at `theta` (BatchNorm statistics updated
///    here, and only here);
/// 2. `theta~ = theta + e` with the rule's perturbation `e`;
/// 3. `g'` = gradient of the second-pass loss at `theta~`, same batch;
/// 4. restore `theta` by copy and take the base optimizer's step with `g'`.
///
/// `m` splits the batch into sub-batches of m examples, each with its own
/// perturbation, and averages their `g'` (m-sharpness); `every = k` takes
/// the two-pass step on every k-th global step and a plain step otherwise.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum UpdateRule {
    /// One forward and backward pass per step.
    #[default]
    Sgd,
    /// SAM (Foret et al. 2021): `e = rho g / (||g||_2 + 1e-12)`, the global L2
    /// norm over all trainable parameters.
    Sam {
        /// Perturbation radius (> 0).
        #[serde(default = "default_rho")]
        rho: f64,
        /// m-sharpness sub-batch size, in `[1, batch_size]` (None: the whole batch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        m: Option<usize>,
        /// Two-pass step on every k-th step.
        #[serde(default = "one")]
        every: usize,
    },
    /// Adaptive SAM (Kwon et al. 2021): `e = rho T_w^2 g / ||T_w g||`,
    /// `T_w = |w| + eta` elementwise.
    Asam {
        /// Perturbation radius (> 0; the ASAM paper uses 0.5-2).
        #[serde(default = "default_rho")]
        rho: f64,
        /// `eta` in `T_w = |w| + eta` (>= 0).
        #[serde(default = "default_eta")]
        eta: f64,
        /// m-sharpness sub-batch size (None: the whole batch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        m: Option<usize>,
        /// Two-pass step on every k-th step.
        #[serde(default = "one")]
        every: usize,
    },
    /// CSAM: SAM whose second pass weights each example's loss by
    /// `(1 + p~_y)^(-gamma)` where `p~_y > 1/2` (weight 1 otherwise), `p~_y`
    /// the true-class probability at `theta~`; for cross entropy
    /// `-(1 + p~_y)^(-gamma) log p~_y`. `gamma = 0` is SAM.
    Csam {
        /// Perturbation radius (> 0).
        #[serde(default = "default_rho")]
        rho: f64,
        /// The exponent, >= 0; the paper analyses `[0, 2]`.
        #[serde(default = "default_gamma")]
        gamma: f64,
        /// Treat the factor as a constant per-example weight instead of
        /// differentiating through it.
        #[serde(default)]
        detach: bool,
        /// m-sharpness sub-batch size (None: the whole batch).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        m: Option<usize>,
        /// Two-pass step on every k-th step.
        #[serde(default = "one")]
        every: usize,
    },
    /// VASSO (Li and Giannakis 2023): SAM's step along an exponential moving
    /// average of the gradients, `d_t = (1 - theta) d_{t-1} + theta g_t`,
    /// `e = rho d_t / ||d_t||` (see `csam_nn::optim::Perturbation::Vasso`).
    /// The average is of whole-batch gradients: no m-sharpness.
    Vasso {
        /// Perturbation radius (> 0).
        #[serde(default = "default_rho")]
        rho: f64,
        /// Weight of the new gradient in the average, in (0, 1]; 1 is SAM.
        /// Default 0.9, the authors' (BingcongLi/VaSSO: `configs/defaulf_cfg.py`
        /// and the `train.sh` of its WRN-28-10 runs).
        #[serde(default = "default_vasso_theta")]
        theta: f64,
        /// Two-pass step on every k-th step.
        #[serde(default = "one")]
        every: usize,
    },
    /// bSAM (Möllenhoff and Khan 2023): an Adam-like optimizer of its own
    /// over a Gaussian posterior `N(m, 1/(N s))` of the weights, the SAM
    /// ascent `rho g / s` from the gradient `g` at a noisy sample (see
    /// `csam_nn::optim::BsamStep`). It reads `lr`, `momentum` (beta1) and
    /// `weight_decay` (delta, the prior precision over N); `N` is the
    /// training split's size times `data_factor`. Two passes every step,
    /// whole batches, cross entropy or another training loss in both.
    Bsam {
        /// `rho` (> 0) of the ascent `rho g / s`; default 0.01, the authors'
        /// CIFAR setting.
        #[serde(default = "default_bsam_rho")]
        rho: f64,
        /// The precision's moving-average factor, in [0, 1) (default 0.999).
        #[serde(default = "default_bsam_beta2")]
        beta2: f64,
        /// The damping gamma > 0 added to the precision (default 0.1).
        #[serde(default = "default_bsam_damping")]
        damping: f64,
        /// The precision s0 > 0 of every weight before the first step (default 1).
        #[serde(default = "default_bsam_factor")]
        init_precision: f64,
        /// N = the training split's size times this factor > 0 (default 1;
        /// the authors use 4 with CIFAR's augmentation).
        #[serde(default = "default_bsam_factor")]
        data_factor: f64,
    },
}

fn default_bsam_rho() -> f64 {
    0.01
}

fn default_bsam_beta2() -> f64 {
    0.999
}

fn default_bsam_damping() -> f64 {
    0.1
}

fn default_bsam_factor() -> f64 {
    1.0
}

fn default_vasso_theta() -> f64 {
    0.9
}

fn default_rho() -> f64 {
    0.05
}

fn default_eta() -> f64 {
    0.01
}

fn default_gamma() -> f64 {
    1.0
}

fn one() -> usize {
    1
}

/// The update rules by name, without their parameters: what experiments
/// compare (`csam compare --methods sgd,sam,csam`) and results are keyed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerFamily {
    /// [`UpdateRule::Sgd`].
    Sgd,
    /// [`UpdateRule::Sam`].
    Sam,
    /// [`UpdateRule::Asam`].
    Asam,
    /// [`UpdateRule::Csam`].
    Csam,
    /// [`UpdateRule::Vasso`].
    Vasso,
    /// [`UpdateRule::Bsam`].
    Bsam,
}

super::text::serde_enum_text!(OptimizerFamily);

/// The parameters every SAM-family rule shares.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sharpness {
    /// Perturbation radius.
    pub rho: f64,
    /// m-sharpness sub-batch size.
    pub m: Option<usize>,
    /// Two-pass step on every k-th step.
    pub every: usize,
}

impl UpdateRule {
    /// The rule's family (its name).
    pub fn family(&self) -> OptimizerFamily {
        match self {
            UpdateRule::Sgd => OptimizerFamily::Sgd,
            UpdateRule::Sam { .. } => OptimizerFamily::Sam,
            UpdateRule::Asam { .. } => OptimizerFamily::Asam,
            UpdateRule::Csam { .. } => OptimizerFamily::Csam,
            UpdateRule::Vasso { .. } => OptimizerFamily::Vasso,
            UpdateRule::Bsam { .. } => OptimizerFamily::Bsam,
        }
    }

    /// The rule of `family` with radius `rho` (SAM family) and exponent
    /// `gamma` (CSAM), every other parameter at its default.
    pub fn of_family(family: OptimizerFamily, rho: f64, gamma: f64) -> UpdateRule {
        let (m, every) = (None, one());
        match family {
            OptimizerFamily::Sgd => UpdateRule::Sgd,
            OptimizerFamily::Sam => UpdateRule::Sam { rho, m, every },
            OptimizerFamily::Asam => UpdateRule::Asam {
                rho,
                eta: default_eta(),
                m,
                every,
            },
            OptimizerFamily::Csam => UpdateRule::Csam {
                rho,
                gamma,
                detach: false,
                m,
                every,
            },
            OptimizerFamily::Vasso => UpdateRule::Vasso {
                rho,
                theta: default_vasso_theta(),
                every,
            },
            OptimizerFamily::Bsam => UpdateRule::Bsam {
                rho,
                beta2: default_bsam_beta2(),
                damping: default_bsam_damping(),
                init_precision: default_bsam_factor(),
                data_factor: default_bsam_factor(),
            },
        }
    }

    /// The SAM-family parameters; None for plain SGD and for bSAM, whose
    /// `rho` is no radius (its ascent `rho g / s` is not normalised).
    pub fn sharpness(&self) -> Option<Sharpness> {
        match *self {
            UpdateRule::Sgd | UpdateRule::Bsam { .. } => None,
            UpdateRule::Sam { rho, m, every }
            | UpdateRule::Asam { rho, m, every, .. }
            | UpdateRule::Csam { rho, m, every, .. } => Some(Sharpness { rho, m, every }),
            UpdateRule::Vasso { rho, every, .. } => Some(Sharpness {
                rho,
                m: None,
                every,
            }),
        }
    }

    /// How the ascent direction is built; None for plain SGD.
    pub fn perturbation(&self) -> Option<Perturbation> {
        match *self {
            UpdateRule::Sgd | UpdateRule::Bsam { .. } => None,
            UpdateRule::Sam { .. } | UpdateRule::Csam { .. } => Some(Perturbation::Sam),
            UpdateRule::Asam { eta, .. } => Some(Perturbation::Asam { eta }),
            UpdateRule::Vasso { theta, .. } => Some(Perturbation::Vasso { theta }),
        }
    }

    /// The loss of the second pass.
    pub fn second_loss(&self) -> SecondLoss {
        match *self {
            UpdateRule::Csam { gamma, detach, .. } => SecondLoss::Csam { gamma, detach },
            _ => SecondLoss::Plain,
        }
    }

    /// Whether the rule has SAM's perturbed point `theta + rho g/||g||`,
    /// which the theory diagnostics compare with `theta` (SAM and CSAM).
    pub fn has_sam_point(&self) -> bool {
        matches!(self, UpdateRule::Sam { .. } | UpdateRule::Csam { .. })
    }

    /// How CSAM's second-pass factor was differentiated, for the run summary;
    /// None for the other rules.
    pub fn csam_gradient_mode(&self) -> Option<&'static str> {
        match *self {
            UpdateRule::Csam { detach: true, .. } => Some("detached-weight"),
            UpdateRule::Csam { detach: false, .. } => Some("differentiated"),
            _ => None,
        }
    }

    fn validate(&self, batch_size: usize) -> Result<(), ConfigError> {
        if let UpdateRule::Bsam {
            rho,
            beta2,
            damping,
            init_precision,
            data_factor,
        } = *self
        {
            finite_above("rho", rho, 0.0, false)?;
            unit_interval("bsam_beta2", beta2)?;
            finite_above("bsam_damping", damping, 0.0, false)?;
            finite_above("bsam_init_precision", init_precision, 0.0, false)?;
            return finite_above("bsam_data_factor", data_factor, 0.0, false);
        }
        let Some(Sharpness { rho, m, every }) = self.sharpness() else {
            return Ok(());
        };
        if !(rho.is_finite() && rho > 0.0) {
            return Err(invalid(
                "rho",
                rho,
                "the SAM family needs a finite perturbation radius rho > 0",
            ));
        }
        if let Some(m) = m {
            if m == 0 || m > batch_size {
                return Err(invalid(
                    "m",
                    m,
                    "the m-sharpness sub-batch size must lie in [1, batch_size]",
                ));
            }
        }
        at_least_one("sam_every", every)?;
        match *self {
            UpdateRule::Asam { eta, .. } => finite_above("eta", eta, 0.0, true),
            UpdateRule::Csam { gamma, .. } => finite_above("gamma", gamma, 0.0, true),
            UpdateRule::Vasso { theta, .. } => match theta > 0.0 && theta <= 1.0 {
                true => Ok(()),
                false => Err(invalid("vasso_theta", theta, "must lie in (0, 1]")),
            },
            _ => Ok(()),
        }
    }
}
