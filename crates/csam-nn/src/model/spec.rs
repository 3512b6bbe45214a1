//! The model's specification, declared once: the architecture, its options
//! and where its initial weights come from. This serde type is the run
//! specification's `[model]` branch as it is; its options carry their
//! defaults here and are checked here ([`ModelSpec::validate`], the one check
//! of both a run's spec and the builder), and the builders read it
//! ([`super::build_model_with`]). A new model option is a field here and one
//! line of the run specification's key table.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::memory_format::MemoryFormat;
use super::precision::Precision;
use super::registry::ModelTrait;
use super::{Bayesian, Ensemble, Head, ModelError, ModelKind, StochasticDepth};

/// The hidden widths of an MLP when none are given.
pub const DEFAULT_MLP_HIDDEN: [usize; 2] = [256, 256];

/// The model of a run.
///
/// A spec written `arch = "torchscript:FILE"` (the command line's short
/// form, like the data sources' `cifar10:DIR`) is split into `arch` and
/// `script` by the run specification's reader before it reaches this type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// A registered architecture (`mlp`, `cnn`, `resnet20`, ..., `torchscript`).
    #[serde(default = "default_arch")]
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
    /// float32; [`super::precision`]); float32 is left out of
    /// `config.toml`, so runs written before it load and compare equal.
    #[serde(default, skip_serializing_if = "is_fp32")]
    pub precision: Precision,
    /// The layout of the convolution weights and input batches: contiguous
    /// (NCHW), or channels_last (NHWC, as `torch.channels_last`;
    /// [`super::memory_format`]) for the convolutional models;
    /// contiguous is left out of `config.toml`, so runs written before it
    /// load and compare equal.
    #[serde(default, skip_serializing_if = "is_contiguous")]
    pub memory_format: MemoryFormat,
    /// Whether a data-parallel run's BatchNorm layers normalise with the
    /// statistics of the global batch (`nn.SyncBatchNorm`;
    /// [`super::batch_norm`]) instead of each process's rows. It
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

fn default_arch() -> ModelKind {
    // Invariant: the registry holds resnet20.
    "resnet20".parse().expect("resnet20 is registered")
}

impl Default for ModelSpec {
    /// CIFAR ResNet-20, seeded initialisation, no dropout.
    fn default() -> Self {
        ModelSpec::of(default_arch())
    }
}

/// The prefix of a model name that names a TorchScript file.
pub const TORCHSCRIPT_PREFIX: &str = "torchscript:";

impl ModelSpec {
    /// `arch` with default options.
    pub fn of(arch: ModelKind) -> ModelSpec {
        ModelSpec {
            arch,
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

    /// The model `name` (a registered architecture, or `torchscript:FILE`)
    /// with default options.
    pub fn named(name: &str) -> Result<ModelSpec, ModelError> {
        let (arch, script) = split_model_name(name)?;
        Ok(ModelSpec {
            script,
            ..ModelSpec::of(arch)
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

    /// The MLP's hidden widths ([`DEFAULT_MLP_HIDDEN`] where none are given).
    pub fn hidden_widths(&self) -> Vec<i64> {
        let widths = self.mlp_hidden.as_deref().unwrap_or(&DEFAULT_MLP_HIDDEN);
        widths.iter().map(|&w| w as i64).collect()
    }

    /// Checks every option against its range and the architecture, with no
    /// file read: a field out of range or on an architecture that does not
    /// read it is [`ModelError::Option`], a parameter of the head, ensemble
    /// or posterior [`ModelError::Branch`]. Whether the `init` and `script`
    /// files exist is the run's check, made where it starts.
    pub fn validate(&self) -> Result<(), ModelError> {
        unit_interval("dropout", self.dropout)?;
        self.regulariser("drop_path", self.drop_path, StochasticDepth::DropPath)?;
        self.regulariser("shakedrop", self.shakedrop, StochasticDepth::ShakeDrop)?;
        branch("head", self.head.name(), self.head.validate())?;
        self.validate_ensemble()?;
        self.validate_bayesian()?;
        // PyTorch's `model.to(memory_format=torch.channels_last)` accepts
        // any module, but on the other architectures the layout would reach
        // at most one layer (a ViT's patch embedding) or none (the MLP
        // flattens its input; a TorchScript module's layers csam does not
        // know), so the option would promise a speed-up it cannot give.
        if self.memory_format != MemoryFormat::Contiguous {
            let name = self.memory_format.name();
            self.read_by_arch("memory_format", name, ModelTrait::Convolutional)?;
        }
        if self.sync_batch_norm {
            self.read_by_arch("sync_batch_norm", "true", ModelTrait::Convolutional)?;
        }
        self.validate_hidden_widths()?;
        self.validate_script()?;
        if self.init.is_none() && self.init_new_classifier {
            return Err(option(
                "init_new_classifier",
                true,
                "applies only with init, the initial weights whose classifier it replaces",
            ));
        }
        Ok(())
    }

    /// A TorchScript model has its file, no other model has one, and the
    /// module gives logits only: its classifier cannot be told apart from
    /// its other weights, and csam's dropout and heads cannot reach it.
    fn validate_script(&self) -> Result<(), ModelError> {
        let torchscript = self.arch.name() == "torchscript";
        let logits_only = |field, value: &str, what: &str| {
            let reason =
                format!("a TorchScript model gives logits only, so {what} cannot apply to it");
            Err(option(field, value, &reason))
        };
        match &self.script {
            None if torchscript => Err(option(
                "arch",
                self.arch,
                &format!("model torchscript needs its file: {TORCHSCRIPT_PREFIX}FILE"),
            )),
            Some(file) if !torchscript => Err(option(
                "script",
                file.display(),
                &format!("applies only to torchscript, not {}", self.arch),
            )),
            Some(_) if self.init_new_classifier => Err(option(
                "init_new_classifier",
                true,
                "a TorchScript model does not say which of its weights are the classifier",
            )),
            Some(_) if self.dropout != 0.0 => logits_only(
                "dropout",
                &self.dropout.to_string(),
                "csam's dropout (the module has its own layers)",
            ),
            Some(_) if !self.head.is_linear() => logits_only(
                "head",
                self.head.name(),
                &format!("the {} head (it reads features)", self.head.name()),
            ),
            _ => Ok(()),
        }
    }

    /// Refuses hidden widths on an architecture they do not shape, and an
    /// empty list or a width of 0.
    fn validate_hidden_widths(&self) -> Result<(), ModelError> {
        let Some(widths) = &self.mlp_hidden else {
            return Ok(());
        };
        let shown = format!("{widths:?}");
        if !self.arch.takes_hidden_widths() {
            let reason = format!("model {} has no hidden widths to set", self.arch);
            return Err(option("mlp_hidden", shown, &reason));
        }
        if widths.is_empty() || widths.contains(&0) {
            return Err(option(
                "mlp_hidden",
                shown,
                "every hidden width must be at least 1",
            ));
        }
        Ok(())
    }

    /// Refuses an ensemble's parameters outside its definition, on an
    /// architecture that does not build members, or with a head other than
    /// linear.
    fn validate_ensemble(&self) -> Result<(), ModelError> {
        if self.ensemble.is_single() {
            return Ok(());
        }
        let name = self.ensemble.name();
        branch("ensemble", name, self.ensemble.validate())?;
        self.read_by_arch("ensemble", name, ModelTrait::Members)?;
        if !self.head.is_linear() {
            let reason = format!(
                "gives each member its own linear classifier; head {} cannot apply to it",
                self.head.name()
            );
            return Err(option("ensemble", name, &reason));
        }
        Ok(())
    }

    /// Refuses a posterior's parameters outside its definition, on an
    /// architecture that does not build Gaussian layers, with members it
    /// does not apply to (or without those it needs) or with a head other
    /// than linear.
    fn validate_bayesian(&self) -> Result<(), ModelError> {
        if self.bayesian.is_none() {
            return Ok(());
        }
        let name = self.bayesian.name();
        branch("bayesian", name, self.bayesian.validate())?;
        self.read_by_arch("bayesian", name, ModelTrait::Members)?;
        if let Some(reason) = self.bayesian.ensemble_conflict(&self.ensemble) {
            return Err(option("bayesian", name, &reason));
        }
        if !self.head.is_linear() {
            let reason = format!(
                "samples the linear classifier's weights; head {} cannot apply to it",
                self.head.name()
            );
            return Err(option("bayesian", name, &reason));
        }
        Ok(())
    }

    /// Refuses a regulariser's rate outside `[0, 1)`, and a non-zero rate on
    /// an architecture whose blocks do not read it.
    fn regulariser(
        &self,
        field: &'static str,
        rate: f64,
        depth: StochasticDepth,
    ) -> Result<(), ModelError> {
        unit_interval(field, rate)?;
        if rate == 0.0 {
            return Ok(());
        }
        self.read_by_arch(field, rate, ModelTrait::Reads(depth))
    }

    /// Refuses `field`, set to `value`, unless the architecture has the
    /// trait of the models that read it.
    fn read_by_arch(
        &self,
        field: &'static str,
        value: impl ToString,
        readers: ModelTrait,
    ) -> Result<(), ModelError> {
        if readers.holds(self.arch) {
            return Ok(());
        }
        let reason = format!(
            "applies only to {}, not {}",
            readers.names().join(", "),
            self.arch
        );
        Err(option(field, value, &reason))
    }
}

/// The architecture a model name (`resnet20`, `torchscript:FILE`) names,
/// and the file where it names one.
pub fn split_model_name(name: &str) -> Result<(ModelKind, Option<PathBuf>), ModelError> {
    let (arch, script) = match name.strip_prefix(TORCHSCRIPT_PREFIX) {
        Some(file) => ("torchscript", Some(PathBuf::from(file))),
        None => (name, None),
    };
    Ok((arch.parse()?, script))
}

/// [`ModelError::Option`] for `field` holding `value`.
fn option(field: &'static str, value: impl ToString, reason: &str) -> ModelError {
    ModelError::Option {
        field,
        value: value.to_string(),
        reason: reason.to_string(),
    }
}

/// Refuses a rate outside `[0, 1)`.
fn unit_interval(field: &'static str, rate: f64) -> Result<(), ModelError> {
    match (0.0..1.0).contains(&rate) {
        true => Ok(()),
        false => Err(option(field, rate, "must lie in [0, 1)")),
    }
}

/// The check of the branch `field` (whose kind is `name`), its error kept
/// with the branch it comes from.
fn branch(
    field: &'static str,
    name: &'static str,
    checked: Result<(), crate::loss::LossError>,
) -> Result<(), ModelError> {
    checked.map_err(|source| ModelError::Branch {
        field,
        name,
        source,
    })
}
