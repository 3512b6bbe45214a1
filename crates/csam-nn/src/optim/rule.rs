//! The update rule, declared once: plain steps, or one of the SAM family
//! around the base optimizer, or bSAM. This serde type is the run
//! specification's `[optim.rule]` branch as it is; its parameters carry their
//! defaults here and are checked here ([`UpdateRule::validate`]), and the rule
//! builds its own step ([`UpdateRule::sam_step`]; bSAM's takes the base
//! optimizer's settings too, [`super::BsamConfig`]). A new parameter of a rule
//! is a field of its variant (with its default) and one line of the run
//! specification's key table.

use serde::{Deserialize, Serialize};
use tch::nn::VarStore;

use super::bsam::validate_bsam_rule;
use super::policy::{Horizon, SamPolicy};
use super::{OptimError, Perturbation, SamConfig, SamStep, SecondLoss};
use crate::loss::{Fields, LossError, TrainingLoss};

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
        /// Perturbation radius (>= 0 for the step, where 0 takes SGD's step;
        /// a run refuses 0).
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
    /// `T_w = |w| + eta` elementwise on the parameters named `weight`, as the
    /// authors' code ([`Perturbation::Asam`]).
    Asam {
        /// Perturbation radius (>= 0 for the step, a run refuses 0; the ASAM
        /// paper uses 0.5-2).
        #[serde(default = "default_rho")]
        rho: f64,
        /// `eta` in `T_w = |w| + eta` (>= 0).
        #[serde(default = "default_eta")]
        eta: f64,
        /// `T` on every parameter tensor with SAM's 1e-12 guard, the form of
        /// davda54/sam's `adaptive=True` ([`Perturbation::AsamAllTensors`]),
        /// instead of the authors' `T` on the weights only.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        scale_all: bool,
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
        /// Perturbation radius (>= 0 for the step, where 0 takes SGD's step;
        /// a run refuses 0).
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
    /// `e = rho d_t / ||d_t||` (see [`Perturbation::Vasso`]).
    /// The average is of whole-batch gradients: no m-sharpness.
    Vasso {
        /// Perturbation radius (>= 0 for the step, where 0 takes SGD's step;
        /// a run refuses 0).
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
    /// [`super::BsamStep`]). It reads `lr`, `momentum` (beta1) and
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

impl OptimizerFamily {
    /// Every family, in the order of [`UpdateRule`]'s variants.
    pub const ALL: [OptimizerFamily; 6] = [
        OptimizerFamily::Sgd,
        OptimizerFamily::Sam,
        OptimizerFamily::Asam,
        OptimizerFamily::Csam,
        OptimizerFamily::Vasso,
        OptimizerFamily::Bsam,
    ];

    /// The name the run specification, the command line and results use.
    pub fn name(self) -> &'static str {
        match self {
            OptimizerFamily::Sgd => "sgd",
            OptimizerFamily::Sam => "sam",
            OptimizerFamily::Asam => "asam",
            OptimizerFamily::Csam => "csam",
            OptimizerFamily::Vasso => "vasso",
            OptimizerFamily::Bsam => "bsam",
        }
    }
}

impl std::fmt::Display for OptimizerFamily {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for OptimizerFamily {
    type Err = String;

    /// The family called `text` (any case), or serde's message for an
    /// unknown variant, so the command line and configs refuse it alike.
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.to_ascii_lowercase();
        Self::ALL
            .into_iter()
            .find(|family| family.name() == wanted)
            .ok_or_else(|| {
                let names: Vec<String> = Self::ALL
                    .iter()
                    .map(|family| format!("`{}`", family.name()))
                    .collect();
                format!(
                    "unknown variant `{wanted}`, expected one of {}",
                    names.join(", ")
                )
            })
    }
}

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
                scale_all: false,
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
            UpdateRule::Asam {
                eta,
                scale_all: false,
                ..
            } => Some(Perturbation::Asam { eta }),
            UpdateRule::Asam {
                eta,
                scale_all: true,
                ..
            } => Some(Perturbation::AsamAllTensors { eta }),
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

    /// Checks the rule's own parameters, each refused by its field name
    /// (`rho`, `every`, `gamma`, `beta2`, ...): the checks of the step it
    /// builds ([`SamConfig::validate`], [`super::BsamConfig`]'s), so a rule that
    /// passes here builds. How the rule combines with the rest of a run is
    /// checked where that is known ([`UpdateRule::check_policy`]; `m`
    /// against the batch size by the run specification).
    pub fn validate(&self) -> Result<(), LossError> {
        match *self {
            UpdateRule::Sgd => Ok(()),
            UpdateRule::Bsam {
                rho,
                beta2,
                damping,
                init_precision,
                data_factor,
            } => {
                validate_bsam_rule(rho, beta2, damping, init_precision)?;
                Fields("bsam").positive("data_factor", data_factor)
            }
            _ => self
                .sam_config(SamRun::default())
                .map_or(Ok(()), |config| config.validate_rule()),
        }
    }

    /// Checks the rule against the efficient-SAM `policy` that schedules its
    /// second pass ([`SamConfig::validate`]'s check of the two). A rule
    /// without a second pass builds no SAM step, so nothing here concerns it.
    pub fn check_policy(&self, policy: &SamPolicy) -> Result<(), LossError> {
        let run = SamRun {
            policy: *policy,
            ..SamRun::default()
        };
        self.sam_config(run)
            .map_or(Ok(()), |config| config.validate_policy())
    }

    /// The settings of this rule's SAM-family step in `run`; None for plain
    /// SGD and bSAM, which have no second pass of this kind.
    pub fn sam_config(&self, run: SamRun) -> Option<SamConfig> {
        let Sharpness { rho, m, every } = self.sharpness()?;
        Some(SamConfig {
            rho,
            perturbation: self.perturbation()?,
            loss: run.loss,
            second_loss: self.second_loss(),
            m,
            sam_every: every as u64,
            clip_grad_norm: run.clip,
            policy: run.policy,
            horizon: run.horizon,
            reduce_first_gradient: run.reduce_first_gradient,
        })
    }

    /// The SAM-family step of this rule in `run` for the model whose
    /// variables live in `vs` (None for plain SGD and bSAM).
    pub fn sam_step(&self, run: SamRun, vs: &VarStore) -> Result<Option<SamStep>, OptimError> {
        self.sam_config(run)
            .map(|config| SamStep::new(config, vs))
            .transpose()
    }
}

/// What a SAM-family step takes from its run besides the rule (the fields
/// of [`SamConfig`] of the same meaning).
#[derive(Debug, Clone, Default)]
pub struct SamRun {
    /// The training loss of both passes.
    pub loss: TrainingLoss,
    /// Clip the update gradient to this global L2 norm.
    pub clip: Option<f64>,
    /// On which steps the second pass runs.
    pub policy: SamPolicy,
    /// The run's seed and length.
    pub horizon: Horizon,
    /// Perturb with the gradient reduced over data-parallel replicas.
    pub reduce_first_gradient: bool,
}

/// Clipping of the update gradient: a finite global norm > 0 (what the run
/// specification and [`SamConfig::validate`] check).
pub fn validate_clip(clip: Option<f64>) -> Result<(), LossError> {
    match clip {
        Some(clip) => Fields("optim").positive("clip", clip),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::optim::{BsamConfig, LookSam};

    fn sam(rho: f64, m: Option<usize>, every: usize) -> UpdateRule {
        UpdateRule::Sam { rho, m, every }
    }

    /// The field a refusal names.
    fn field(error: LossError) -> &'static str {
        match error {
            LossError::Field { field, .. } => field,
            other => panic!("not a field error: {other}"),
        }
    }

    #[test]
    fn a_rule_is_refused_by_the_check_of_the_step_it_builds() {
        let csam = |gamma: f64| UpdateRule::Csam {
            rho: 0.05,
            gamma,
            detach: false,
            m: None,
            every: 1,
        };
        let cases = [
            (sam(-0.1, None, 1), "rho"),
            (sam(f64::NAN, None, 1), "rho"),
            (sam(0.05, Some(0), 1), "m"),
            (sam(0.05, None, 0), "every"),
            (
                UpdateRule::Asam {
                    rho: 0.5,
                    eta: -1.0,
                    scale_all: false,
                    m: None,
                    every: 1,
                },
                "eta",
            ),
            (
                UpdateRule::Vasso {
                    rho: 0.05,
                    theta: 1.5,
                    every: 1,
                },
                "theta",
            ),
            (csam(-1.0), "gamma"),
            (csam(f64::INFINITY), "gamma"),
        ];
        let vs = VarStore::new(tch::Device::Cpu);
        for (rule, expected) in cases {
            let refused = rule.validate().expect_err(&format!("{rule:?}"));
            let message = refused.to_string();
            assert_eq!(field(refused), expected, "{rule:?}");
            let built = rule.sam_step(SamRun::default(), &vs);
            let step_message = built.expect_err("the step refuses it too").to_string();
            assert_eq!(step_message, message, "one check, one message");
        }
        for good in [sam(0.0, Some(3), 2), csam(0.0), csam(2.0)] {
            assert!(good.validate().is_ok(), "{good:?}");
            assert!(good.sam_step(SamRun::default(), &vs).unwrap().is_some());
        }
        assert!(UpdateRule::Sgd
            .sam_step(SamRun::default(), &vs)
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_policy_that_replaces_every_or_m_is_refused_by_the_rule_and_the_step() {
        let vs = VarStore::new(tch::Device::Cpu);
        let look = SamPolicy::LookSam(LookSam::default());
        for (rule, expected) in [(sam(0.05, None, 2), "every"), (sam(0.05, Some(4), 1), "m")] {
            let refused = rule.check_policy(&look).expect_err(&format!("{rule:?}"));
            let message = refused.to_string();
            assert_eq!(field(refused), expected);
            let run = SamRun {
                policy: look,
                ..SamRun::default()
            };
            let step_message = rule.sam_step(run, &vs).expect_err("refused").to_string();
            assert_eq!(step_message, message);
            assert!(rule.check_policy(&SamPolicy::Every).is_ok());
        }
    }

    #[test]
    fn a_bsam_rule_is_refused_by_the_check_of_its_optimizer() {
        let rule = |rho: f64, beta2: f64| UpdateRule::Bsam {
            rho,
            beta2,
            damping: 0.1,
            init_precision: 1.0,
            data_factor: 1.0,
        };
        for (bad, expected) in [(rule(0.0, 0.999), "rho"), (rule(0.01, 1.0), "beta2")] {
            let refused = bad.validate().expect_err(&format!("{bad:?}"));
            let message = refused.to_string();
            assert_eq!(field(refused), expected);
            let UpdateRule::Bsam { rho, beta2, .. } = bad else {
                unreachable!()
            };
            let config = BsamConfig {
                lr: 0.1,
                beta1: 0.9,
                beta2,
                rho,
                weight_decay: 5e-4,
                damping: 0.1,
                init_precision: 1.0,
                n_data: 1000.0,
                loss: TrainingLoss::default(),
            };
            let refused = config.validate().expect_err("the optimizer refuses it too");
            assert_eq!(refused.to_string(), message);
        }
    }

    #[test]
    fn family_names_parse_in_any_case_and_unknown_ones_as_serde_refuses_them() {
        for family in OptimizerFamily::ALL {
            let upper = family.name().to_ascii_uppercase();
            assert_eq!(upper.parse::<OptimizerFamily>(), Ok(family));
            assert_eq!(family.to_string(), family.name());
            let json = serde_json::to_string(&family).unwrap();
            assert_eq!(json, format!("\"{}\"", family.name()));
        }
        let ours = "adam".parse::<OptimizerFamily>().unwrap_err();
        let serde = serde_json::from_str::<OptimizerFamily>("\"adam\"").unwrap_err();
        assert!(serde.to_string().starts_with(&ours), "{serde} vs {ours}");
    }
}
