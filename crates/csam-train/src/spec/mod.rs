//! The run specification: one typed tree that says everything a training run
//! is, each branch the lower layer's own type with its own checks, so that an
//! invalid combination cannot be written down (a CSAM gamma on an SGD run, a
//! step size on a cosine schedule).
//!
//! ```text
//! RunSpec
//! ├── data:    DataSpec   { source, val_size, split_seed, augment, shuffle }
//! ├── model:   ModelSpec  { arch, mlp_hidden, dropout, drop_path, shakedrop, init,
//! │                         init_new_classifier, script, head: Linear | Balcal{lambda, delta},
//! │                         ensemble: Single | BatchEnsemble{size, random_sign_init}
//! │                                   | Mimo{size, input_repetition, batch_repetitions} }
//! ├── loss:    LossSpec   CrossEntropy | Focal | Flsd | LabelSmoothing | DualFocal
//! │                       | MarginLabelSmoothing | Acls | PairwiseConstraints | Mmce | Mdca
//! │                       | AdaFocal | Crl
//! ├── mixing:  MixingSpec None | Mixup{alpha} | MitL{alpha, margin}
//! ├── optim:   OptimSpec  { lr, weight_decay, clip,
//! │                         base: Sgd{momentum, nesterov} | Adamw{momentum},
//! │                         schedule: Cosine{warmup_epochs, min_lr} | Step{step_size, decay_factor},
//! │                         rule: Sgd | Sam{rho, m, every} | Asam{rho, eta, m, every}
//! │                               | Csam{rho, gamma, detach, m, every} | Vasso{rho, theta, every}
//! │                               | Bsam{rho, beta2, damping, init_precision, data_factor} }
//! ├── epochs, batch_size, seed, track_theory
//! ├── metrics:   MetricOptions { n_bins, edges, adaptive, tolerance }
//! └── selection: BestMetric
//! ```
//!
//! [`Runtime`] (device, threads, progress) is how one process runs the spec,
//! not part of the run: a run may resume on another device.
//!
//! A run's `config.toml` is this tree in TOML with `schema = 2` at the top
//! ([`RunSpec::to_toml`]). Settings also come as flat keys (the command line's
//! flags, a flat `--config` file, and the `config.toml` of runs written
//! before the schema existed): [`keys::KEYS`] maps each flat key to its place
//! in the tree, and [`SpecLayers`] layers defaults < file < flags. A new run
//! of `csam train` starts from the default recipe ([`RunSpec::recipe`], the
//! MLP protocol of `csam compare`); a field's serde default, what a saved
//! `config.toml` means where it leaves the field out, is [`RunSpec::new`]'s.

mod check;
mod data;
mod error;
pub mod keys;
mod layers;
mod loss;
mod mixing;
mod model;
mod optim;
mod recipe;
mod selection;
mod text;

use serde::{Deserialize, Serialize};

pub use data::{DataSpec, ValSize};
pub use error::ConfigError;
pub use layers::{SpecLayers, Warning};
pub use loss::LossSpec;
pub use mixing::MixingSpec;
pub use model::{ModelSpec, DEFAULT_MLP_HIDDEN};
pub use optim::{BaseSpec, OptimSpec, OptimizerFamily, Schedule, Sharpness, UpdateRule};
pub use recipe::DEFAULT_VAL_FRACTION;
pub use selection::BestMetric;

use csam_calib::metrics::summary::MetricOptions;
use csam_nn::model::precision::Precision;
use csam_nn::model::Ensemble;
use csam_nn::optim::SamPolicy;

/// The version of the nested `config.toml` layout this release writes.
/// Files without a `schema` key are the flat layout of earlier releases.
pub const SCHEMA_VERSION: u32 = 2;

/// Everything that defines a training run. Build it with [`SpecLayers`] (from
/// flags and files) or directly; [`RunSpec::validate`] checks every branch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSpec {
    /// Epochs (the schedule spans exactly this many).
    #[serde(default = "default_epochs")]
    pub epochs: usize,
    /// Mini-batch size.
    #[serde(default = "default_batch_size")]
    pub batch_size: usize,
    /// Seed of initialisation, split, data order, augmentation and dropout.
    #[serde(default)]
    pub seed: u64,
    /// The validation metric that picks the best checkpoint.
    #[serde(default = "default_selection")]
    pub selection: BestMetric,
    /// Log the paper's per-step diagnostics to `theory.jsonl` (SAM and CSAM
    /// only, see [`crate::theory`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub track_theory: bool,
    /// The data.
    pub data: DataSpec,
    /// The model.
    #[serde(default)]
    pub model: ModelSpec,
    /// The training loss.
    #[serde(default)]
    pub loss: LossSpec,
    /// How training feeds each batch to the model (mixup, MIT-L).
    #[serde(default)]
    pub mixing: MixingSpec,
    /// Optimizer, schedule and update rule.
    #[serde(default)]
    pub optim: OptimSpec,
    /// Binning of every calibration metric the run reports (per-epoch
    /// validation, the summary, post-hoc columns, `csam eval`).
    #[serde(default)]
    pub metrics: MetricOptions,
}

fn default_epochs() -> usize {
    200
}

fn default_batch_size() -> usize {
    128
}

fn default_selection() -> BestMetric {
    BestMetric::Nll
}

/// How one process runs a spec; not part of the run's identity. A run
/// directory keeps the last one in `runtime.toml` (flat keys), which a resume
/// starts from, so it replays on the same thread count unless told otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Runtime {
    /// `cpu`, `cuda` or `cuda:N` (None: CUDA when available, else CPU).
    pub device: Option<String>,
    /// Intra-op CPU threads of libtorch (None: libtorch's default).
    pub threads: Option<usize>,
    /// Write the run's TensorBoard event file (see [`crate::tensorboard`]).
    /// On by default: it costs under a kilobyte and one append per epoch,
    /// and a run's curves are then one `tensorboard --logdir` away, also
    /// while it trains. A runtime setting, not part of the run:
    /// the file is another view of `metrics.jsonl` and `theory.jsonl` and
    /// changes no number, so a run resumes, and an experiment reuses it,
    /// whether it is on or off. Absent in older `runtime.toml` files: on.
    #[serde(default = "default_tensorboard")]
    pub tensorboard: bool,
    /// The event file's step points: the training loss and learning rate
    /// of every `log_every_n_steps`-th step (0: none), at step = the global
    /// step ([`crate::tensorboard::StepPoint`]), as Lightning's
    /// `log_every_n_steps` (default 50). A runtime setting: read from the
    /// step's statistics, which the loop reads anyway, so it changes no
    /// number of the run. Absent in older `runtime.toml` files: 50.
    #[serde(default = "default_log_every_n_steps")]
    pub log_every_n_steps: usize,
    /// Threads that decode a streamed data set's images (`imagenet:`;
    /// None: one per available core). A runtime setting: the batches do
    /// not depend on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// Keep the training split on the device and build its batches there
    /// ([`csam_data::LoaderOptions::resident`]): meant for a GPU and data
    /// that fits in its memory (CIFAR-sized). A runtime setting: the
    /// batches are the same bits either way, so on the CPU it changes
    /// nothing but where the gather runs (and is slower there). Absent in older `runtime.toml`
    /// files: off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resident_data: bool,
}

fn default_tensorboard() -> bool {
    true
}

fn default_log_every_n_steps() -> usize {
    50
}

impl Default for Runtime {
    fn default() -> Self {
        Runtime {
            device: None,
            threads: None,
            tensorboard: default_tensorboard(),
            log_every_n_steps: default_log_every_n_steps(),
            workers: None,
            resident_data: false,
        }
    }
}

impl Runtime {
    /// The file name in a run directory.
    pub const FILE: &'static str = "runtime.toml";

    /// Gives libtorch's intra-op pool this process's thread count, if one is
    /// set. Every process that computes with libtorch calls it before its
    /// first tensor operation: a comparison that only evaluates finished runs
    /// must not fall back to libtorch's default, which on a shared machine
    /// makes its OpenMP threads wait on each other.
    pub fn apply_threads(&self) {
        if let Some(threads) = self.threads {
            tch::set_num_threads(threads as i32);
        }
    }

    /// The threads that decode a streamed data set: `workers`, or one per
    /// core this process may use.
    pub fn data_workers(&self) -> usize {
        self.workers.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
        })
    }

    /// Refuses zero threads or workers (the device is checked where it is
    /// opened).
    pub fn validate(&self) -> Result<(), ConfigError> {
        match (self.threads, self.workers) {
            (Some(0), _) => Err(check::invalid("threads", 0, "must be at least 1")),
            (_, Some(0)) => Err(check::invalid("workers", 0, "must be at least 1")),
            _ => Ok(()),
        }
    }
}

impl RunSpec {
    /// A spec for `data` with every other setting at its default (ResNet-20,
    /// SGD momentum 0.9, lr 0.1, cosine decay, 200 epochs, batch 128).
    pub fn new(data: DataSpec) -> RunSpec {
        RunSpec {
            epochs: default_epochs(),
            batch_size: default_batch_size(),
            seed: 0,
            selection: default_selection(),
            track_theory: false,
            data,
            model: ModelSpec::default(),
            loss: LossSpec::default(),
            mixing: MixingSpec::default(),
            optim: OptimSpec::default(),
            metrics: MetricOptions::default(),
        }
    }

    /// The same spec with defaults that depend on other branches made
    /// explicit (see [`ModelSpec::normalized`]).
    pub fn normalized(mut self) -> RunSpec {
        self.model = self.model.normalized();
        self
    }

    /// Checks every branch; returns warnings for legal but unusual values.
    pub fn validate(&self) -> Result<Vec<Warning>, ConfigError> {
        check::at_least_one("epochs", self.epochs)?;
        check::at_least_one("batch_size", self.batch_size)?;
        check::at_least_one("bins", self.metrics.n_bins)?;
        self.data.validate()?;
        model::validate(&self.model)?;
        loss::validate(&self.loss)?;
        mixing::validate(&self.mixing)?;
        self.optim.validate(self.epochs, self.batch_size)?;
        if self.track_theory && !self.optim.rule.has_sam_point() {
            return Err(check::invalid(
                "track_theory",
                true,
                &format!(
                    "the theory diagnostics compare theta with SAM's perturbed point \
                     theta~ = theta + rho g/||g|| (the paper's Lemma 2); optimizer {} has no \
                     such point; use optimizer sam or csam",
                    self.optim.rule.family()
                ),
            ));
        }
        if self.model.precision == Precision::Fp16
            && matches!(self.optim.rule, UpdateRule::Bsam { .. })
        {
            return Err(check::invalid(
                "precision",
                "fp16",
                "float16 training scales the loss of the base optimizers' steps (as \
                 torch.amp.GradScaler); bSAM is an optimizer of its own without it: use bf16",
            ));
        }
        if self.loss.needs_correctness_history() && !self.mixing.is_none() {
            return Err(check::invalid(
                "mixing",
                self.mixing.name(),
                &format!(
                    "loss {} ranks each example by its own history of correct predictions; a \
                     mixed batch has no such examples",
                    self.loss.name()
                ),
            ));
        }
        if !self.model.head.is_linear() && !self.mixing.is_none() {
            return Err(check::invalid(
                "mixing",
                self.mixing.name(),
                &format!(
                    "head {} trains each of its two classifiers on the batch's own examples; \
                     a mixed batch has none",
                    self.model.head.name()
                ),
            ));
        }
        self.validate_bayesian()?;
        if !self.model.ensemble.is_single() && !self.mixing.is_none() {
            return Err(check::invalid(
                "mixing",
                self.mixing.name(),
                &format!(
                    "ensemble {} trains each member on the batch's own examples; a mixed batch \
                     has none",
                    self.model.ensemble.name()
                ),
            ));
        }
        let at_theta = match self.optim.policy {
            SamPolicy::SubBatch(_) => {
                Some("the sub-batch ascent predicts at theta on part of the batch only")
            }
            SamPolicy::Msam(_) => Some("Momentum-SAM predicts at theta~ only"),
            _ => None,
        };
        if let (true, Some(why)) = (self.loss.needs_correctness_history(), at_theta) {
            return Err(check::invalid(
                "sam_policy",
                self.optim.policy.name(),
                &format!(
                    "loss {} records each example's correct predictions at theta; {why}",
                    self.loss.name()
                ),
            ));
        }
        if self.loss.needs_correctness_history()
            && matches!(self.model.ensemble, Ensemble::Mimo { .. })
        {
            return Err(check::invalid(
                "ensemble",
                "mimo",
                &format!(
                    "loss {} ranks each example by its own history of correct predictions; \
                     MIMO's members each read their own shuffle of the batch",
                    self.loss.name()
                ),
            ));
        }
        self.validate_data_selection()?;
        if self.track_theory && !self.mixing.is_none() {
            return Err(check::invalid(
                "track_theory",
                true,
                &format!(
                    "the theory diagnostics are defined on the batch's own examples; mixing {} \
                     trains on mixtures of them",
                    self.mixing.name()
                ),
            ));
        }
        let mut warnings = Vec::new();
        if let UpdateRule::Csam { gamma, .. } = self.optim.rule {
            if gamma > 2.0 {
                warnings.push(Warning(format!(
                    "gamma = {gamma} lies outside [0, 2], the range the CSAM paper analyses"
                )));
            }
        }
        Ok(warnings)
    }

    /// The spec as a run's `config.toml` (nested, with its schema version).
    pub fn to_toml(&self) -> String {
        // Invariant: every field is a TOML value with string keys.
        let body = toml::to_string(self).expect("RunSpec serialises to TOML");
        format!("schema = {SCHEMA_VERSION}\n{body}")
    }

    /// Reads a run's saved `config.toml`: the nested layout of this release,
    /// or the flat layout of earlier ones (which wrote every key, also those
    /// its optimizer did not read: they are dropped here). `origin` names the
    /// file in errors.
    pub fn from_saved_toml(text: &str, origin: &str) -> Result<RunSpec, ConfigError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| ConfigError::Parse {
                origin: origin.to_string(),
                message: e.message().to_string(),
            })?;
        let layers = SpecLayers::saved(table, origin)?;
        Ok(layers.build()?.0)
    }

    /// Refuses with a Bayesian model what its objective does not define: a
    /// mixed batch (the evidence lower bound is of the training examples),
    /// weight decay (the KL term regularises the weights; decay would also
    /// pull `rho`, the posterior scale's parameter, to 0) and bSAM (a
    /// variational method with its own posterior).
    /// ESAM's data selection trains on some of the batch's own examples,
    /// which a mixed batch and MIMO's per-member shuffles do not have.
    fn validate_data_selection(&self) -> Result<(), ConfigError> {
        let SamPolicy::Esam(esam) = self.optim.policy else {
            return Ok(());
        };
        let mimo = matches!(self.model.ensemble, Ensemble::Mimo { .. });
        let clash = match (esam.selects(), self.mixing.is_none(), mimo) {
            (false, _, _) => None,
            (true, false, _) => Some(("mixing", self.mixing.name())),
            (true, true, true) => Some(("ensemble", "mimo")),
            (true, true, false) => None,
        };
        match clash {
            Some((key, value)) => Err(check::invalid(
                key,
                value,
                "ESAM's data selection (esam_gamma < 1) runs the second pass on the batch's own \
                 examples whose loss rises most; this batch has none to select (set esam_gamma \
                 = 1)",
            )),
            None => Ok(()),
        }
    }

    fn validate_bayesian(&self) -> Result<(), ConfigError> {
        let bayesian = self.model.bayesian;
        if bayesian.is_none() {
            return Ok(());
        }
        let name = bayesian.name();
        if !self.mixing.is_none() {
            let reason = format!(
                "bayesian {name} trains on the evidence lower bound of the batch's own \
                 examples; a mixed batch has none"
            );
            return Err(check::invalid("mixing", self.mixing.name(), &reason));
        }
        if self.optim.weight_decay != 0.0 {
            let reason = format!(
                "bayesian {name} is regularised by its KL term; weight decay would also shrink \
                 rho, the posterior scale's parameter: set weight_decay = 0"
            );
            return Err(check::invalid(
                "weight_decay",
                self.optim.weight_decay,
                &reason,
            ));
        }
        if matches!(self.optim.rule, UpdateRule::Bsam { .. }) {
            let reason = format!(
                "is a variational method with its own posterior; bayesian {name} cannot apply \
                 to it"
            );
            return Err(check::invalid("optimizer", "bsam", &reason));
        }
        Ok(())
    }

    /// The settings in which `saved` differs from this spec, as flat key
    /// names where the setting has one (dotted paths otherwise).
    pub fn differences(&self, saved: &RunSpec) -> Vec<String> {
        if self == saved {
            return Vec::new();
        }
        let (Ok(ours), Ok(theirs)) = (toml::Table::try_from(self), toml::Table::try_from(saved))
        else {
            return vec!["(spec)".to_string()];
        };
        let mut changed = Vec::new();
        layers::diff_paths(&ours, &theirs, &mut Vec::new(), &mut changed);
        changed
    }

    /// The spec as flat keys (the command line's names), each applicable key
    /// that the tree holds.
    pub fn to_flat(&self) -> toml::Table {
        // Invariant: as in `to_toml`.
        let nested = toml::Table::try_from(self).expect("RunSpec serialises to TOML");
        layers::flatten(&nested)
    }
}
