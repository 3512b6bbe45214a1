//! The configuration of one training run: every hyperparameter, where it
//! comes from (defaults < `--config run.toml` < command-line flags) and the
//! checks that reject a bad value before any work starts.
//!
//! Defaults follow the paper's protocol (paper-notes §5): SGD momentum 0.9,
//! cosine decay, batch 128, lr 0.1, weight decay 5e-4; SAM rho 0.05 and CSAM
//! gamma 1 (paper-notes §1).

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::ConfigError;

/// Which update rule a run trains with (paper-notes §1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerFamily {
    /// The base optimizer alone (one forward/backward per step).
    Sgd,
    /// SAM: ascent `e = rho g / ||g||`, descend with the gradient at `theta + e`.
    Sam,
    /// Adaptive SAM: `e = rho T_w^2 g / ||T_w g||`, `T_w = |w| + eta`.
    Asam,
    /// CSAM: SAM whose second pass uses the calibrated loss with exponent gamma.
    Csam,
}

impl OptimizerFamily {
    /// True for the families that take a perturbation step (and so need rho > 0).
    pub fn is_sharpness_aware(self) -> bool {
        !matches!(self, OptimizerFamily::Sgd)
    }
}

/// The optimizer that applies the (possibly sharpness-aware) gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BaseOptimizer {
    /// SGD with momentum, optional Nesterov, L2 weight decay added to the gradient.
    Sgd,
    /// AdamW (decoupled weight decay).
    Adamw,
}

/// The learning-rate schedule over the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScheduleKind {
    /// Linear warm-up for `warmup_epochs`, then cosine decay to 0 at the last step.
    Cosine,
    /// Multiply the learning rate by `decay_factor` every `step_size` epochs.
    Step,
}

/// The validation metric that picks the best checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BestMetric {
    /// Negative log-likelihood (lower is better).
    Nll,
    /// Expected calibration error, 15 equal-width bins (lower is better).
    Ece,
    /// Adaptive (equal-mass) ECE (lower is better).
    Adaece,
    /// Brier score (lower is better).
    Brier,
    /// Top-1 accuracy (higher is better).
    Accuracy,
}

impl BestMetric {
    /// True when a larger value of the metric is better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, BestMetric::Accuracy)
    }

    /// True when `candidate` improves on `incumbent` (the first epoch always does).
    pub fn improves(self, candidate: f64, incumbent: Option<f64>) -> bool {
        match incumbent {
            None => true,
            Some(best) if self.higher_is_better() => candidate > best,
            Some(best) => candidate < best,
        }
    }
}

macro_rules! serde_enum_text {
    ($($ty:ty),*) => {$(
        impl FromStr for $ty {
            type Err = String;
            fn from_str(text: &str) -> Result<Self, String> {
                <$ty>::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(
                    &text.to_ascii_lowercase(),
                ))
                .map_err(|e| e.to_string())
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                // Invariant: unit variants always serialise to a string.
                let value = serde_json::to_value(self).expect("unit enum serialises");
                f.write_str(value.as_str().unwrap_or_default())
            }
        }
    )*};
}
serde_enum_text!(OptimizerFamily, BaseOptimizer, ScheduleKind, BestMetric);

/// Every setting of a training run. Saved as `config.toml` in the run
/// directory, so a run can be repeated or resumed from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Data set spec (`fashion-mnist`, `digits`, `idx:DIR`, `cifar10:DIR`, ...).
    pub data: String,
    /// Number of training examples held out for validation.
    pub val_size: usize,
    /// Seed of initialisation, split, data order and dropout.
    pub seed: u64,
    /// Model name (`mlp`, `cnn`, `resnet20`, ...).
    pub model: String,
    /// Hidden layer widths of the MLP.
    pub mlp_hidden: Vec<usize>,
    /// Dropout rate in [0, 1) (MLP hidden layers, pooled features of the CNNs).
    pub dropout: f64,
    /// Number of epochs (the schedule spans exactly this many).
    pub epochs: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Momentum of SGD (beta1 of AdamW).
    pub momentum: f64,
    /// Nesterov momentum (SGD only).
    pub nesterov: bool,
    /// Weight decay of the base optimizer (never enters the ascent gradient).
    pub weight_decay: f64,
    /// The base optimizer.
    pub base_optimizer: BaseOptimizer,
    /// Learning-rate schedule.
    pub schedule: ScheduleKind,
    /// Linear warm-up epochs of the cosine schedule.
    pub warmup_epochs: usize,
    /// Final learning rate of the cosine schedule.
    pub min_lr: f64,
    /// Epochs between two decays of the step schedule.
    pub step_size: usize,
    /// Factor in (0, 1] of each step-schedule decay.
    pub decay_factor: f64,
    /// SGD, SAM, ASAM or CSAM.
    pub optimizer: OptimizerFamily,
    /// Perturbation radius of the SAM family.
    pub rho: f64,
    /// ASAM's `eta` in `T_w = |w| + eta`.
    pub eta: f64,
    /// CSAM's exponent gamma in `-(1 + p)^-gamma log p` (0 is SAM).
    pub gamma: f64,
    /// Treat CSAM's factor `(1 + p)^-gamma` as a constant weight (not differentiated).
    pub csam_detach: bool,
    /// m-sharpness: sub-batch size with its own perturbation (None: whole batch).
    pub m: Option<usize>,
    /// Take the sharpness-aware step on every k-th step only (1: every step).
    pub sam_every: usize,
    /// Clip the global L2 norm of the descent gradient to this value.
    pub clip: Option<f64>,
    /// Random crop with padding and horizontal flip on training batches.
    pub augment: bool,
    /// Reshuffle the training set every epoch.
    pub shuffle: bool,
    /// `cpu`, `cuda` or `cuda:N` (None: CUDA when available, else CPU).
    pub device: Option<String>,
    /// Validation metric that selects the best checkpoint.
    pub best_metric: BestMetric,
    /// Intra-op CPU threads of libtorch (None: libtorch's default).
    pub threads: Option<usize>,
    /// Safetensors weights with the model's PyTorch key names to start from
    /// instead of the seeded initialisation (e.g. a PyTorch twin's
    /// `save_file(model.state_dict(), ...)`). None: initialise from the seed.
    pub init: Option<String>,
    /// Log the paper's per-step diagnostics (p_y, p~_y, Lemma 2's bound,
    /// lambda, lambda_0, H(p_y), ||g||) to `theory.jsonl`; SAM and CSAM only
    /// (see [`crate::theory::TheoryRecord`]).
    pub track_theory: bool,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            data: String::new(),
            val_size: 5000,
            seed: 0,
            model: "resnet20".to_string(),
            mlp_hidden: vec![256, 256],
            dropout: 0.0,
            epochs: 200,
            batch_size: 128,
            lr: 0.1,
            momentum: 0.9,
            nesterov: false,
            weight_decay: 5e-4,
            base_optimizer: BaseOptimizer::Sgd,
            schedule: ScheduleKind::Cosine,
            warmup_epochs: 0,
            min_lr: 0.0,
            step_size: 60,
            decay_factor: 0.1,
            optimizer: OptimizerFamily::Sgd,
            rho: 0.05,
            eta: 0.01,
            gamma: 1.0,
            csam_detach: false,
            m: None,
            sam_every: 1,
            clip: None,
            augment: true,
            shuffle: true,
            device: None,
            best_metric: BestMetric::Nll,
            threads: None,
            init: None,
            track_theory: false,
        }
    }
}

/// A setting that is legal but probably not what the user meant.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigWarning(pub String);

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TrainConfig {
    /// Builds the effective configuration: defaults, overlaid by the keys of
    /// the TOML file at `config_path` (if any), overlaid by `overrides` (the
    /// flags given on the command line, as TOML keys of this struct).
    /// Unknown keys are an error in either layer.
    pub fn layered(
        config_path: Option<&Path>,
        overrides: toml::Table,
    ) -> Result<TrainConfig, ConfigError> {
        let mut table = match config_path {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
                text.parse::<toml::Table>()
                    .map_err(|e| ConfigError::Parse {
                        origin: path.display().to_string(),
                        message: e.to_string(),
                    })?
            }
            None => toml::Table::new(),
        };
        table.extend(overrides);
        TrainConfig::deserialize(toml::Value::Table(table)).map_err(|e| ConfigError::Parse {
            origin: match config_path {
                Some(path) => format!("{} and command-line flags", path.display()),
                None => "command-line flags".to_string(),
            },
            message: e.to_string(),
        })
    }

    /// Parses a saved `config.toml` (as written by [`TrainConfig::to_toml`]).
    pub fn from_toml(text: &str, origin: &str) -> Result<TrainConfig, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.to_string(),
        })
    }

    /// The configuration as TOML text (every key, defaults included).
    pub fn to_toml(&self) -> String {
        // Invariant: every field is a TOML-representable value (no maps with
        // non-string keys), so serialisation cannot fail.
        toml::to_string(self).expect("TrainConfig serialises to TOML")
    }

    /// Checks the numeric settings; returns the warnings of legal but odd
    /// values. Names (data spec, model) are checked where they are parsed,
    /// see [`crate::train::session::Names`].
    pub fn validate(&self) -> Result<Vec<ConfigWarning>, ConfigError> {
        let invalid = |key: &'static str, value: String, reason: &str| ConfigError::Invalid {
            key,
            value,
            reason: reason.to_string(),
        };
        let mut warnings = Vec::new();
        if let Some(init) = &self.init {
            if !std::path::Path::new(init).is_file() {
                return Err(invalid("init", init.clone(), "no such weights file"));
            }
        }
        if self.data.trim().is_empty() {
            return Err(invalid(
                "data",
                String::new(),
                "no data set given: pass --data SPEC (e.g. fashion-mnist, digits, cifar10:DIR) or set `data` in the config",
            ));
        }
        if self.val_size == 0 {
            return Err(invalid(
                "val_size",
                "0".into(),
                "the best checkpoint is chosen on validation data: hold out at least 1 example",
            ));
        }
        if self.epochs == 0 {
            return Err(invalid("epochs", "0".into(), "must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(invalid(
                "dropout",
                self.dropout.to_string(),
                "must lie in [0, 1)",
            ));
        }
        if self.mlp_hidden.contains(&0) {
            return Err(invalid(
                "mlp_hidden",
                format!("{:?}", self.mlp_hidden),
                "every hidden width must be at least 1",
            ));
        }
        if self.batch_size == 0 {
            return Err(invalid("batch_size", "0".into(), "must be at least 1"));
        }
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return Err(invalid(
                "lr",
                self.lr.to_string(),
                "must be a finite number > 0",
            ));
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return Err(invalid(
                "momentum",
                self.momentum.to_string(),
                "must lie in [0, 1)",
            ));
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return Err(invalid(
                "weight_decay",
                self.weight_decay.to_string(),
                "must be a finite number >= 0",
            ));
        }
        if self.nesterov && self.base_optimizer != BaseOptimizer::Sgd {
            return Err(invalid(
                "nesterov",
                "true".into(),
                "applies to the SGD base optimizer only",
            ));
        }
        if self.nesterov && self.momentum == 0.0 {
            return Err(invalid("nesterov", "true".into(), "needs momentum > 0"));
        }
        self.validate_schedule()?;
        if self.optimizer.is_sharpness_aware() && !(self.rho.is_finite() && self.rho > 0.0) {
            return Err(invalid(
                "rho",
                self.rho.to_string(),
                "the SAM family needs a finite perturbation radius rho > 0",
            ));
        }
        if !(self.eta.is_finite() && self.eta >= 0.0) {
            return Err(invalid(
                "eta",
                self.eta.to_string(),
                "must be a finite number >= 0",
            ));
        }
        if !(self.gamma.is_finite() && self.gamma >= 0.0) {
            return Err(invalid(
                "gamma",
                self.gamma.to_string(),
                "must be a finite number >= 0",
            ));
        }
        if self.optimizer == OptimizerFamily::Csam && !(0.0..=2.0).contains(&self.gamma) {
            warnings.push(ConfigWarning(format!(
                "gamma = {} lies outside [0, 2], the range the CSAM paper analyses",
                self.gamma
            )));
        }
        if let Some(m) = self.m {
            if m == 0 || m > self.batch_size {
                return Err(invalid(
                    "m",
                    m.to_string(),
                    "the m-sharpness sub-batch size must lie in [1, batch_size]",
                ));
            }
        }
        if self.sam_every == 0 {
            return Err(invalid("sam_every", "0".into(), "must be at least 1"));
        }
        if let Some(clip) = self.clip {
            if !(clip.is_finite() && clip > 0.0) {
                return Err(invalid(
                    "clip",
                    clip.to_string(),
                    "must be a finite number > 0",
                ));
            }
        }
        if self.track_theory
            && !matches!(self.optimizer, OptimizerFamily::Sam | OptimizerFamily::Csam)
        {
            return Err(invalid(
                "track_theory",
                "true".into(),
                &format!(
                    "the theory diagnostics compare theta with SAM's perturbed point \
                     theta~ = theta + rho g/||g|| (the paper's Lemma 2); optimizer {} has no \
                     such point. Use --optimizer sam or csam",
                    self.optimizer
                ),
            ));
        }
        if self.threads == Some(0) {
            return Err(invalid("threads", "0".into(), "must be at least 1"));
        }
        Ok(warnings)
    }

    fn validate_schedule(&self) -> Result<(), ConfigError> {
        if self.warmup_epochs >= self.epochs && self.warmup_epochs > 0 {
            return Err(ConfigError::Invalid {
                key: "warmup_epochs",
                value: self.warmup_epochs.to_string(),
                reason: format!("must be smaller than epochs ({})", self.epochs),
            });
        }
        if !(self.min_lr.is_finite() && self.min_lr >= 0.0 && self.min_lr <= self.lr) {
            return Err(ConfigError::Invalid {
                key: "min_lr",
                value: self.min_lr.to_string(),
                reason: format!("must lie in [0, lr = {}]", self.lr),
            });
        }
        if self.schedule == ScheduleKind::Step {
            if self.step_size == 0 {
                return Err(ConfigError::Invalid {
                    key: "step_size",
                    value: "0".into(),
                    reason: "must be at least 1 epoch".into(),
                });
            }
            if !(self.decay_factor > 0.0 && self.decay_factor <= 1.0) {
                return Err(ConfigError::Invalid {
                    key: "decay_factor",
                    value: self.decay_factor.to_string(),
                    reason: "must lie in (0, 1]".into(),
                });
            }
        }
        Ok(())
    }

    /// The architecture options of `mlp_hidden` and `dropout`.
    pub fn model_options(&self) -> crate::model::ModelOptions {
        crate::model::ModelOptions {
            mlp_hidden: self.mlp_hidden.iter().map(|&h| h as i64).collect(),
            dropout: self.dropout,
        }
    }

    /// How CSAM's second-pass loss was differentiated, for the run summary
    /// (paper-notes §1); None for the other families.
    pub fn csam_gradient_mode(&self) -> Option<&'static str> {
        (self.optimizer == OptimizerFamily::Csam).then_some(if self.csam_detach {
            "detached-weight"
        } else {
            "differentiated"
        })
    }

    /// The keys whose change would make a resumed run differ from an
    /// uninterrupted one; all but `device` and `threads`.
    pub fn differences_that_break_resume(&self, saved: &TrainConfig) -> Vec<&'static str> {
        let mut current = self.clone();
        current.device.clone_from(&saved.device);
        current.threads = saved.threads;
        if current == *saved {
            return Vec::new();
        }
        // Compare key by key through the TOML form, which names the fields.
        let ours = toml::Table::try_from(&current);
        let theirs = toml::Table::try_from(saved);
        match (ours, theirs) {
            (Ok(ours), Ok(theirs)) => CONFIG_KEYS
                .iter()
                .copied()
                .filter(|key| ours.get(*key) != theirs.get(*key))
                .collect(),
            _ => vec!["(configuration)"],
        }
    }
}

/// Every key of [`TrainConfig`], in declaration order.
pub const CONFIG_KEYS: &[&str] = &[
    "data",
    "val_size",
    "seed",
    "model",
    "mlp_hidden",
    "dropout",
    "epochs",
    "batch_size",
    "lr",
    "momentum",
    "nesterov",
    "weight_decay",
    "base_optimizer",
    "schedule",
    "warmup_epochs",
    "min_lr",
    "step_size",
    "decay_factor",
    "optimizer",
    "rho",
    "eta",
    "gamma",
    "csam_detach",
    "m",
    "sam_every",
    "clip",
    "augment",
    "shuffle",
    "device",
    "best_metric",
    "threads",
    "init",
    "track_theory",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> TrainConfig {
        TrainConfig {
            data: "digits".into(),
            ..TrainConfig::default()
        }
    }

    fn overrides(pairs: &[(&str, toml::Value)]) -> toml::Table {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn config_keys_list_every_field() {
        let table = toml::Table::try_from(TrainConfig {
            m: Some(1),
            clip: Some(1.0),
            device: Some("cpu".into()),
            threads: Some(1),
            init: Some("weights.safetensors".into()),
            ..valid()
        })
        .unwrap();
        let mut keys: Vec<&str> = table.keys().map(String::as_str).collect();
        let mut expected = CONFIG_KEYS.to_vec();
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected);
    }

    #[test]
    fn flags_override_file_which_overrides_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.toml");
        std::fs::write(
            &path,
            "data = \"digits\"\nlr = 0.05\noptimizer = \"csam\"\ngamma = 2.0\n",
        )
        .unwrap();
        let config =
            TrainConfig::layered(Some(&path), overrides(&[("lr", toml::Value::Float(0.01))]))
                .unwrap();
        assert_eq!(config.lr, 0.01, "flag beats file");
        assert_eq!(config.gamma, 2.0, "file beats default");
        assert_eq!(config.optimizer, OptimizerFamily::Csam);
        assert_eq!(config.batch_size, 128, "default kept");
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name() {
        let err = TrainConfig::layered(None, overrides(&[("learning_rate", 0.1.into())]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("learning_rate"), "{err}");
    }

    #[test]
    fn unknown_optimizer_is_rejected() {
        let err = TrainConfig::layered(None, overrides(&[("optimizer", "lamb".into())]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("lamb"), "{err}");
        assert_eq!("CSAM".parse::<OptimizerFamily>(), Ok(OptimizerFamily::Csam));
        assert!("lamb".parse::<OptimizerFamily>().is_err());
    }

    #[test]
    fn toml_round_trip_is_identity() {
        let config = TrainConfig {
            m: Some(32),
            clip: Some(5.0),
            step_size: 30,
            schedule: ScheduleKind::Step,
            ..valid()
        };
        assert_eq!(
            TrainConfig::from_toml(&config.to_toml(), "x").unwrap(),
            config
        );
    }

    #[test]
    fn bad_values_are_rejected_naming_the_key() {
        let cases: Vec<(TrainConfig, &str)> = vec![
            (TrainConfig { lr: 0.0, ..valid() }, "lr"),
            (
                TrainConfig {
                    lr: -1.0,
                    ..valid()
                },
                "lr",
            ),
            (
                TrainConfig {
                    lr: f64::NAN,
                    ..valid()
                },
                "lr",
            ),
            (
                TrainConfig {
                    batch_size: 0,
                    ..valid()
                },
                "batch_size",
            ),
            (
                TrainConfig {
                    epochs: 0,
                    ..valid()
                },
                "epochs",
            ),
            (
                TrainConfig {
                    val_size: 0,
                    ..valid()
                },
                "val_size",
            ),
            (
                TrainConfig {
                    dropout: 1.0,
                    ..valid()
                },
                "dropout",
            ),
            (
                TrainConfig {
                    mlp_hidden: vec![64, 0],
                    ..valid()
                },
                "mlp_hidden",
            ),
            (
                TrainConfig {
                    optimizer: OptimizerFamily::Sam,
                    rho: 0.0,
                    ..valid()
                },
                "rho",
            ),
            (
                TrainConfig {
                    optimizer: OptimizerFamily::Csam,
                    rho: -0.05,
                    ..valid()
                },
                "rho",
            ),
            (
                TrainConfig {
                    m: Some(0),
                    ..valid()
                },
                "m",
            ),
            (
                TrainConfig {
                    m: Some(129),
                    ..valid()
                },
                "m",
            ),
            (
                TrainConfig {
                    sam_every: 0,
                    ..valid()
                },
                "sam_every",
            ),
            (
                TrainConfig {
                    momentum: 1.0,
                    ..valid()
                },
                "momentum",
            ),
            (
                TrainConfig {
                    data: " ".into(),
                    ..valid()
                },
                "data",
            ),
            (
                TrainConfig {
                    warmup_epochs: 200,
                    ..valid()
                },
                "warmup_epochs",
            ),
            (
                TrainConfig {
                    schedule: ScheduleKind::Step,
                    decay_factor: 2.0,
                    ..valid()
                },
                "decay_factor",
            ),
            (
                TrainConfig {
                    schedule: ScheduleKind::Step,
                    step_size: 0,
                    ..valid()
                },
                "step_size",
            ),
            (
                TrainConfig {
                    min_lr: 1.0,
                    ..valid()
                },
                "min_lr",
            ),
            (
                TrainConfig {
                    gamma: -0.5,
                    ..valid()
                },
                "gamma",
            ),
            (
                TrainConfig {
                    track_theory: true,
                    ..valid()
                },
                "track_theory",
            ),
            (
                TrainConfig {
                    track_theory: true,
                    optimizer: OptimizerFamily::Asam,
                    ..valid()
                },
                "track_theory",
            ),
        ];
        for (config, key) in cases {
            match config.validate() {
                Err(ConfigError::Invalid { key: got, .. }) => assert_eq!(got, key),
                other => panic!("{key}: expected rejection, got {other:?}"),
            }
        }
    }

    #[test]
    fn rho_zero_is_fine_for_plain_sgd() {
        assert!(TrainConfig {
            rho: 0.0,
            ..valid()
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn gamma_outside_zero_two_warns_but_runs() {
        let config = TrainConfig {
            optimizer: OptimizerFamily::Csam,
            gamma: 3.0,
            ..valid()
        };
        let warnings = config.validate().unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].0.contains("gamma = 3"));
        let inside = TrainConfig {
            gamma: 2.0,
            ..config
        };
        assert!(inside.validate().unwrap().is_empty());
    }

    #[test]
    fn best_metric_direction() {
        assert!(BestMetric::Accuracy.improves(0.9, Some(0.8)));
        assert!(!BestMetric::Accuracy.improves(0.8, Some(0.8)));
        assert!(BestMetric::Nll.improves(0.3, Some(0.4)));
        assert!(!BestMetric::Ece.improves(0.05, Some(0.04)));
        assert!(BestMetric::Ece.improves(0.05, None));
    }

    #[test]
    fn resume_differences_ignore_device_and_threads() {
        let saved = valid();
        let moved = TrainConfig {
            device: Some("cpu".into()),
            threads: Some(2),
            ..saved.clone()
        };
        assert!(moved.differences_that_break_resume(&saved).is_empty());
        let changed = TrainConfig {
            lr: 0.2,
            epochs: 3,
            ..saved.clone()
        };
        assert_eq!(
            changed.differences_that_break_resume(&saved),
            vec!["epochs", "lr"]
        );
    }

    #[test]
    fn csam_gradient_mode_is_reported() {
        let csam = TrainConfig {
            optimizer: OptimizerFamily::Csam,
            ..valid()
        };
        assert_eq!(csam.csam_gradient_mode(), Some("differentiated"));
        let detached = TrainConfig {
            csam_detach: true,
            ..csam
        };
        assert_eq!(detached.csam_gradient_mode(), Some("detached-weight"));
        assert_eq!(valid().csam_gradient_mode(), None);
    }
}
