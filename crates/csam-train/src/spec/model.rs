//! The model branch of a run: the architecture, its options, and where its
//! initial weights come from.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::check::keyed;
use super::check::{invalid, unit_interval};
use super::keys::{self, Applies};
use super::ConfigError;
use csam_nn::model::memory_format::MemoryFormat;
use csam_nn::model::precision::Precision;
use csam_nn::model::{Bayesian, Ensemble, Head, ModelKind, ModelOptions};

/// The hidden widths of an MLP when none are given.
pub const DEFAULT_MLP_HIDDEN: [usize; 2] = [256, 256];

/// The model of a run.
///
/// `arch = "torchscript:FILE"` is read as `arch = "torchscript"` with
/// `script = "FILE"` (the short form of the command line, like the data
/// sources' `cifar10:DIR`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "ModelFields")]
pub struct ModelSpec {
    /// A registered architecture (`mlp`, `cnn`, `resnet20`, ..., `torchscript`).
    pub arch: ModelKind,
    /// Hidden layer widths, for the architectures they shape (the MLP);
    /// `None` for the others. [`ModelSpec::normalized`] fills in
    /// [`DEFAULT_MLP_HIDDEN`] where it applies and none was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlp_hidden: Option<Vec<usize>>,
    /// Dropout rate in `[0, 1)` (MLP hidden layers, pooled features of the
    /// convolutional networks); 0 disables it.
    #[serde(default)]
    pub dropout: f64,
    /// The classifier on the features: linear, or BalCAL's two (the branch
    /// `[model.head]`, tagged by `kind`; linear in the `config.toml` of runs
    /// written before it existed).
    #[serde(default)]
    pub head: Head,
    /// Safetensors weights with the model's PyTorch key names to start from,
    /// instead of the seeded initialisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init: Option<PathBuf>,
    /// With `init`: keep the model's own seeded classifier (the linear
    /// layer, and BalCAL's head) instead of the file's, to fine-tune on
    /// another set of classes.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub init_new_classifier: bool,
    /// The file of architecture `torchscript`: a module saved with
    /// `torch.jit.script` or `torch.jit.trace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    /// Stochastic depth rate `r` in `[0, 1)` of the ViTs (timm's
    /// `drop_path_rate`; block `i` of `D` at `r i / (D - 1)`); 0 disables it
    /// and is left out of `config.toml`, so runs written before it load
    /// and compare equal.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub drop_path: f64,
    /// ShakeDrop's probability `p_L` in `[0, 1)` for PyramidNet's last unit
    /// (Yamada et al. 2019; unit `l` of `L` at `(l / L) p_L`); 0 disables
    /// it and is left out of `config.toml`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shakedrop: f64,
    /// One network, or several members in one (the branch
    /// `[model.ensemble]`, tagged by `kind`: `single`, `batch-ensemble`
    /// with `size` and `random_sign_init`, or `mimo` with `size`,
    /// `input_repetition` and `batch_repetitions`; one network in the
    /// `config.toml` of runs written before it existed).
    #[serde(default)]
    pub ensemble: Ensemble,
    /// Point estimates of the weights, or a posterior over them (the branch
    /// `[model.bayesian]`, tagged by `kind`: `none`, or `mean-field` or
    /// `rank1` with `prior_std`, `samples` and `kl_annealing_epochs`; point
    /// estimates in
    /// the `config.toml` of runs written before it existed). Always written,
    /// as `[model.ensemble]`, so that a refusal names the chosen branch.
    #[serde(default)]
    pub bayesian: Bayesian,
    /// The precision of the forward passes: float32, or autocast to
    /// bfloat16 or float16 (weights, gradients and optimiser state stay
    /// float32; [`csam_nn::model::precision`]); float32 is left out of
    /// `config.toml`, so runs written before it load and compare equal.
    #[serde(default, skip_serializing_if = "is_fp32")]
    pub precision: Precision,
    /// The layout of the convolution weights and input batches: contiguous
    /// (NCHW), or channels_last (NHWC, as `torch.channels_last`;
    /// [`csam_nn::model::memory_format`]) for the convolutional models;
    /// contiguous is left out of `config.toml`, so runs written before it
    /// load and compare equal.
    #[serde(default, skip_serializing_if = "is_contiguous")]
    pub memory_format: MemoryFormat,
    /// Whether a data-parallel run's BatchNorm layers normalise with the
    /// statistics of the global batch (`nn.SyncBatchNorm`;
    /// [`csam_nn::model::batch_norm`]) instead of each process's rows. It
    /// changes the numbers, so it is part of the run; false is left out of
    /// `config.toml`, so runs written before it load and compare equal.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sync_batch_norm: bool,
}

fn is_contiguous(format: &MemoryFormat) -> bool {
    *format == MemoryFormat::Contiguous
}

fn is_fp32(precision: &Precision) -> bool {
    *precision == Precision::Fp32
}

fn is_zero(value: &f64) -> bool {
    *value == 0.0
}

/// The prefix of `arch` that names a TorchScript file.
const TORCHSCRIPT_PREFIX: &str = "torchscript:";

/// [`ModelSpec`] as written, before `torchscript:FILE` is split.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelFields {
    #[serde(default = "default_arch_name")]
    arch: String,
    #[serde(default)]
    mlp_hidden: Option<Vec<usize>>,
    #[serde(default)]
    dropout: f64,
    #[serde(default)]
    head: Head,
    #[serde(default)]
    init: Option<PathBuf>,
    #[serde(default)]
    init_new_classifier: bool,
    #[serde(default)]
    script: Option<PathBuf>,
    #[serde(default)]
    drop_path: f64,
    #[serde(default)]
    shakedrop: f64,
    #[serde(default)]
    ensemble: Ensemble,
    #[serde(default)]
    bayesian: Bayesian,
    #[serde(default)]
    precision: Precision,
    #[serde(default)]
    memory_format: MemoryFormat,
    #[serde(default)]
    sync_batch_norm: bool,
}

impl TryFrom<ModelFields> for ModelSpec {
    type Error = String;

    fn try_from(fields: ModelFields) -> Result<Self, String> {
        let (arch, named_script) = split_model_name(&fields.arch)?;
        let script = match (named_script, fields.script) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "model '{}' names its file, and script names another: give one",
                    fields.arch
                ))
            }
            (named, given) => named.or(given),
        };
        Ok(ModelSpec {
            arch,
            mlp_hidden: fields.mlp_hidden,
            dropout: fields.dropout,
            head: fields.head,
            init: fields.init,
            init_new_classifier: fields.init_new_classifier,
            script,
            drop_path: fields.drop_path,
            shakedrop: fields.shakedrop,
            ensemble: fields.ensemble,
            bayesian: fields.bayesian,
            precision: fields.precision,
            memory_format: fields.memory_format,
            sync_batch_norm: fields.sync_batch_norm,
        })
    }
}

/// The architecture a model name (`resnet20`, `torchscript:FILE`) names,
/// and the file where it names one.
fn split_model_name(name: &str) -> Result<(ModelKind, Option<PathBuf>), String> {
    let (arch, script) = match name.strip_prefix(TORCHSCRIPT_PREFIX) {
        Some(file) => ("torchscript", Some(PathBuf::from(file))),
        None => (name, None),
    };
    let arch = arch
        .parse()
        .map_err(|e: csam_nn::model::ModelError| e.to_string())?;
    Ok((arch, script))
}

fn default_arch_name() -> String {
    "resnet20".to_string()
}

fn default_arch() -> ModelKind {
    // Invariant: the registry holds resnet20.
    default_arch_name().parse().expect("resnet20 is registered")
}

impl Default for ModelSpec {
    /// CIFAR ResNet-20, seeded initialisation, no dropout.
    fn default() -> Self {
        ModelSpec {
            arch: default_arch(),
            mlp_hidden: None,
            dropout: 0.0,
            head: Head::Linear,
            init: None,
            init_new_classifier: false,
            script: None,
            drop_path: 0.0,
            shakedrop: 0.0,
            ensemble: Ensemble::Single,
            bayesian: Bayesian::None,
            precision: Precision::Fp32,
            memory_format: MemoryFormat::Contiguous,
            sync_batch_norm: false,
        }
    }
}

impl ModelSpec {
    /// The model `name` (a registered architecture, or `torchscript:FILE`)
    /// with default options.
    pub fn named(name: &str) -> Result<ModelSpec, String> {
        let (arch, script) = split_model_name(name)?;
        Ok(ModelSpec {
            arch,
            script,
            ..ModelSpec::default()
        })
    }

    /// The same model with the hidden widths made explicit where the
    /// architecture takes them, so two specs of one model compare equal.
    pub fn normalized(mut self) -> ModelSpec {
        if self.arch.takes_hidden_widths() && self.mlp_hidden.is_none() {
            self.mlp_hidden = Some(DEFAULT_MLP_HIDDEN.to_vec());
        }
        self
    }

    /// Checks the options against the architecture and the init and script
    /// files' existence.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_script()?;
        unit_interval("dropout", self.dropout)?;
        self.regulariser("drop_path", self.drop_path)?;
        self.regulariser("shakedrop", self.shakedrop)?;
        keyed(&["model", "head"], self.head.name(), self.head.validate())?;
        self.validate_ensemble()?;
        self.validate_bayesian()?;
        if self.memory_format != MemoryFormat::Contiguous {
            self.read_by_arch("memory_format", self.memory_format.name())?;
        }
        if self.sync_batch_norm {
            self.read_by_arch("sync_batch_norm", "true")?;
        }
        match (&self.mlp_hidden, self.arch.takes_hidden_widths()) {
            (Some(widths), false) => {
                return Err(invalid(
                    "mlp_hidden",
                    format!("{widths:?}"),
                    &format!("model {} has no hidden widths to set", self.arch),
                ))
            }
            (Some(widths), true) if widths.is_empty() || widths.contains(&0) => {
                return Err(invalid(
                    "mlp_hidden",
                    format!("{widths:?}"),
                    "every hidden width must be at least 1",
                ))
            }
            _ => {}
        }
        match &self.init {
            Some(init) if !init.is_file() => {
                return Err(invalid("init", init.display(), "no such weights file"));
            }
            None if self.init_new_classifier => {
                return Err(invalid(
                    "init_new_classifier",
                    true,
                    "applies only with init, the initial weights whose classifier it replaces",
                ));
            }
            _ => {}
        }
        Ok(())
    }

    /// A TorchScript model has its file, no other model has one, and its
    /// classifier cannot be told apart from its other weights.
    fn validate_script(&self) -> Result<(), ConfigError> {
        let torchscript = self.arch.name() == "torchscript";
        match &self.script {
            None if torchscript => Err(invalid(
                "model",
                self.arch,
                "model torchscript needs its file: --model torchscript:FILE",
            )),
            Some(file) if !torchscript => self.read_by_arch("script", file.display()),
            Some(file) if !file.is_file() => Err(invalid(
                "script",
                file.display(),
                "no such TorchScript file",
            )),
            Some(_) if self.init_new_classifier => Err(invalid(
                "init_new_classifier",
                true,
                "a TorchScript model does not say which of its weights are the classifier",
            )),
            _ => Ok(()),
        }
    }

    /// Refuses an ensemble's parameters outside its definition, on an
    /// architecture that does not build members (a nested `config.toml`
    /// bypasses the key table's check), or with a head other than linear.
    fn validate_ensemble(&self) -> Result<(), ConfigError> {
        if self.ensemble.is_single() {
            return Ok(());
        }
        let name = self.ensemble.name();
        keyed(&["model", "ensemble"], name, self.ensemble.validate())?;
        self.read_by_arch("ensemble", name)?;
        if !self.head.is_linear() {
            let reason = format!(
                "gives each member its own linear classifier; head {} cannot apply to it",
                self.head.name()
            );
            return Err(invalid("ensemble", name, &reason));
        }
        Ok(())
    }

    /// Refuses a posterior's parameters outside its definition, on an
    /// architecture that does not build Gaussian layers, with members it
    /// does not apply to (or without those it needs) or with a head other
    /// than linear.
    fn validate_bayesian(&self) -> Result<(), ConfigError> {
        if self.bayesian.is_none() {
            return Ok(());
        }
        let name = self.bayesian.name();
        keyed(&["model", "bayesian"], name, self.bayesian.validate())?;
        self.read_by_arch("bayesian", name)?;
        if let Some(reason) = self.bayesian.ensemble_conflict(&self.ensemble) {
            return Err(invalid("bayesian", name, &reason));
        }
        if !self.head.is_linear() {
            let reason = format!(
                "samples the linear classifier's weights; head {} cannot apply to it",
                self.head.name()
            );
            return Err(invalid("bayesian", name, &reason));
        }
        Ok(())
    }

    /// Refuses a regulariser's rate outside `[0, 1)`, and a non-zero rate on
    /// an architecture that does not read it.
    fn regulariser(&self, key: &'static str, rate: f64) -> Result<(), ConfigError> {
        unit_interval(key, rate)?;
        if rate == 0.0 {
            return Ok(());
        }
        self.read_by_arch(key, rate)
    }

    /// Refuses `key`, set to `value`, unless the key table gives it to this
    /// architecture (a nested `config.toml` bypasses the table's check of
    /// flat keys).
    fn read_by_arch(&self, key: &'static str, value: impl ToString) -> Result<(), ConfigError> {
        // Invariant: the keys asked about here are read by some models.
        let Some(Applies::When { values, .. }) = keys::find(key).map(|k| k.applies) else {
            unreachable!("{key} is a key read by some models")
        };
        if values.contains(self.arch.name()) {
            return Ok(());
        }
        let reason = format!(
            "applies only to {}, not {}",
            values.names().join(", "),
            self.arch
        );
        Err(invalid(key, value, &reason))
    }

    /// The options the architecture builders read.
    pub fn options(&self) -> ModelOptions {
        let hidden = self.mlp_hidden.as_deref().unwrap_or(&DEFAULT_MLP_HIDDEN);
        ModelOptions {
            mlp_hidden: hidden.iter().map(|&h| h as i64).collect(),
            dropout: self.dropout,
            head: self.head,
            script: self.script.clone(),
            drop_path: self.drop_path,
            shakedrop: self.shakedrop,
            ensemble: self.ensemble,
            bayesian: self.bayesian,
            precision: self.precision,
            memory_format: self.memory_format,
            sync_batch_norm: None,
        }
    }
}
