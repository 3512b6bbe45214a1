//! Classifier architectures and their registry.
//!
//! Every architecture is a struct built from an [`nn::Path`] of a
//! [`tch::nn::VarStore`]; the device and the floating-point kind are those of the
//! store (a value, never a code path). Variable names equal the parameter and
//! buffer names of the PyTorch twin documented on each architecture, so
//! `VarStore::save("model.safetensors")` loads in PyTorch with
//! `load_state_dict(strict=True)` (PyTorch adds BatchNorm's `num_batches_tracked`
//! itself) and a PyTorch `safetensors.torch.save_file(model.state_dict(), ..)`
//! loads with `VarStore::load`. The twins live in
//! `crates/csam-nn/tests/fixtures/twins.py`.
//!
//! Adding an architecture: write its module (a struct implementing [`Network`]
//! and a `build` function) and add one line to the table in [`registry`].
//! Every architecture takes either classifier [`Head`] on its features.
//!
//! A model may hold several members in one network ([`Ensemble`]; the MLP,
//! the small CNN and the CIFAR ResNets as BatchEnsemble or MIMO): it trains
//! on each member's logits ([`Outputs::members`]) and predicts with the log
//! of their mean probabilities ([`ensemble`] says where each happens).
//!
//! A model may learn a posterior over its weights ([`Bayesian`]; the same
//! architectures, mean-field with Flipout, or rank-1 over a BatchEnsemble's
//! fast weights): its training objective adds the KL term the model gives
//! ([`TrainingPass::kl_divergence`]) and it predicts with the mean
//! probabilities of weight samples ([`bayesian`] says how), each the mean of
//! its members' for a rank-1 network.

pub mod balcal;
mod batch_ensemble;
pub mod batch_norm;
pub mod bayesian;
mod cnn;
pub mod ensemble;
pub mod flipout;
mod head;
mod imagenet_resnet;
mod layers;
mod macs;
pub mod memory_format;
mod mimo;
mod mlp;
mod noise;
pub mod precision;
mod pyramidnet;
pub mod rank1;
pub mod registry;
mod resnet;
mod size;
pub mod spec;
mod torchscript;
mod vit;
pub mod weights;
mod wrn;

pub use balcal::{BalcalHead, TwoHeads};
pub use batch_norm::{BatchNormSync, ReplicaSum, SyncBatchNormError};
pub use bayesian::Bayesian;
pub use cnn::SmallCnn;
pub use ensemble::{mixture_logits, Ensemble};
pub use head::Head;
pub use imagenet_resnet::{Blocks, ImageNetResNet, ResNetLayout, Stem};
pub use mlp::Mlp;
pub use pyramidnet::{PyramidNet, PyramidUnit};
pub use registry::{
    build_model, build_model_in, build_model_synced, build_model_with, ModelKind, ModelTrait,
    StochasticDepth,
};
pub use resnet::ResNet;
pub use spec::{ModelSpec, DEFAULT_MLP_HIDDEN};
pub use torchscript::TorchScriptNetwork;
pub use vit::{VisionTransformer, VitShape};
pub use wrn::WideResNet;

use std::sync::Arc;
use tch::{nn, nn::ModuleT, Tensor};

/// Errors raised while building a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The architecture name is not in the registry.
    #[error("unknown model '{name}'; known models: {known}")]
    UnknownKind { name: String, known: String },
    /// A shape or size argument is out of range.
    #[error("invalid model configuration: {0}")]
    InvalidConfig(String),
    /// An input batch does not fit the model.
    #[error("input does not fit the model: {0}")]
    Input(String),
    /// An option of the [`ModelSpec`] is out of its range or does not apply
    /// to the architecture (`field` names the spec's field).
    #[error("invalid model {field} = {value}: {reason}")]
    Option {
        field: &'static str,
        value: String,
        reason: String,
    },
    /// The weights the spec asks for would not fit in the machine's memory
    /// (checked before any is allocated, [`size`]).
    #[error("the model's weights would take {weights} ({sizes}), more than this machine's {memory} of memory")]
    TooLarge {
        weights: String,
        memory: String,
        sizes: String,
    },
    /// A parameter of the spec's head, ensemble or posterior (`field`, of
    /// kind `name`) is outside its definition.
    #[error("model {field} {name}: {source}")]
    Branch {
        field: &'static str,
        name: &'static str,
        source: crate::loss::LossError,
    },
}

/// Shape of one input example, channels first (`C x H x W`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct InputShape {
    pub channels: i64,
    pub height: i64,
    pub width: i64,
}

impl InputShape {
    /// Number of input features once flattened, `C * H * W`.
    pub fn features(&self) -> i64 {
        self.channels * self.height * self.width
    }

    fn validate(&self) -> Result<(), ModelError> {
        if self.channels < 1 || self.height < 1 || self.width < 1 {
            return Err(ModelError::InvalidConfig(format!(
                "input shape {}x{}x{} must have every dimension >= 1",
                self.channels, self.height, self.width
            )));
        }
        Ok(())
    }
}

/// How a forward pass treats BatchNorm and dropout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Training: BatchNorm uses (and updates) batch statistics, dropout is active.
    Train,
    /// Evaluation: BatchNorm uses its running statistics, dropout is off.
    Eval,
    /// MC-Dropout sampling: BatchNorm as in [`Mode::Eval`], dropout active.
    McDropout,
}

impl Mode {
    /// Whether BatchNorm layers normalise with batch statistics.
    pub fn batch_statistics(self) -> bool {
        self == Mode::Train
    }

    /// Whether dropout layers drop units.
    pub fn dropout_active(self) -> bool {
        self != Mode::Eval
    }

    /// Whether the residual branches are perturbed at random (stochastic
    /// depth of the ViTs, ShakeDrop of PyramidNet): in training only.
    /// MC-Dropout samples keep dropout alone random, so that they sample the
    /// dropout posterior of the network that is evaluated.
    pub fn perturb_residuals(self) -> bool {
        self == Mode::Train
    }

    /// Whether attention runs libtorch's fused kernel: in training, whose
    /// one backward pass it supports with less memory. Evaluation passes run
    /// the explicit product, which `csam sharpness` differentiates twice
    /// (Hessian-vector products); the two agree to rounding.
    pub fn fused_attention(self) -> bool {
        self == Mode::Train
    }
}

/// A network mapping a batch `[B, C, H, W]` to features `[B, d]` and those
/// to logits `[B, n_classes]` with its linear classifier.
pub trait Network: std::fmt::Debug + Send {
    /// The features the classifier reads (after pooling, or the MLP's last
    /// hidden layer, and dropout) in the given [`Mode`].
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor;

    /// The linear classifier's logits of `features`.
    fn classify(&self, features: &Tensor) -> Tensor;

    /// The width `d` of the features.
    fn feature_width(&self) -> i64;

    /// The name under which the linear classifier's variables live (`fc`;
    /// the MLP's output layer's index); `None` where the network cannot say
    /// (a TorchScript module).
    fn classifier_name(&self) -> Option<String> {
        Some("fc".to_string())
    }

    /// Whether the network has dropout layers of its own, which csam's
    /// `dropout` option does not describe (a TorchScript module's); `None`
    /// where that option is the network's only dropout.
    fn own_dropout(&self) -> Option<bool> {
        None
    }

    /// Whether its layers count their multiply-adds (see [`Model::forward_macs`]):
    /// csam's architectures do, a TorchScript module's layers are libtorch's.
    fn counts_macs(&self) -> bool {
        true
    }

    /// A stored weight of another shape fitted to the variable `name` of
    /// shape `wanted`, where the architecture defines how (a ViT's position
    /// embedding); `None` by default.
    fn resample_weight(&self, _name: &str, _stored: &Tensor, _wanted: &[i64]) -> Option<Tensor> {
        None
    }
}

impl weights::Resample for Model {
    fn resample(&self, name: &str, stored: &Tensor, wanted: &[i64]) -> Option<Tensor> {
        self.network.resample_weight(name, stored, wanted)
    }
}

/// A built classifier: the network, its [`Head`], and what it was built for.
///
/// Implements [`nn::ModuleT`] (`train = true` is [`Mode::Train`], `false` is
/// [`Mode::Eval`]); MC-Dropout sampling goes through [`Model::forward_mode`].
#[derive(Debug)]
pub struct Model {
    network: Box<dyn Network>,
    balcal: Option<BalcalHead>,
    kind: ModelKind,
    input: InputShape,
    n_classes: i64,
    /// The dropout rate of the [`ModelSpec`].
    dropout: f64,
    /// The members the network holds.
    ensemble: Ensemble,
    /// The posterior its Gaussian layers registered with, if any.
    posterior: Option<Arc<bayesian::Posterior>>,
    /// The precision of its forward passes; its logits are float32 whatever it is.
    precision: precision::Precision,
    /// The layout its forward passes give a 4-D input batch.
    memory_format: memory_format::MemoryFormat,
}

/// The outputs of a forward pass: the model's logits and, for a model with
/// two classifiers (BalCAL), each classifier's, or for a model of several
/// members (BatchEnsemble, MIMO), each member's.
#[derive(Debug)]
pub struct Outputs {
    /// The logits the model predicts with (a model of members: the log of
    /// their mean probabilities, [`mixture_logits`]).
    pub logits: Tensor,
    /// Each classifier's logits, for a two-headed model.
    pub heads: Option<TwoHeads>,
    /// Each member's logits `[M, B, K]`, for a model of members (also of
    /// one), which trains on each member's loss.
    pub members: Option<Tensor>,
}

/// A model a training pass runs: its train-mode [`Outputs`]. Models with one
/// classifier (any [`nn::ModuleT`], with the default method) give their
/// logits alone.
pub trait TrainingPass: ModuleT {
    /// A train-mode forward pass of `xs`.
    fn training_outputs(&self, xs: &Tensor) -> Outputs {
        Outputs {
            logits: self.forward_t(xs, true),
            heads: None,
            members: None,
        }
    }

    /// A train-mode forward pass of a model of members on its members' own
    /// inputs, stacked member after member (`[M N, ...]`, member `m`'s at
    /// rows `m N .. (m + 1) N`); `None` for a model without members.
    fn member_training_outputs(&self, _stacked: &Tensor) -> Option<Outputs> {
        None
    }

    /// `KL(q || p)` of the model's posterior over its weights (a scalar the
    /// objective differentiates), whatever its layers; `None` for point
    /// estimates.
    fn kl_divergence(&self) -> Option<Tensor> {
        None
    }
}

impl TrainingPass for nn::FuncT<'_> {}

impl TrainingPass for Model {
    fn training_outputs(&self, xs: &Tensor) -> Outputs {
        self.outputs(xs, Mode::Train)
    }

    fn member_training_outputs(&self, stacked: &Tensor) -> Option<Outputs> {
        let members = !self.ensemble.is_single();
        members.then(|| self.member_outputs(stacked, Mode::Train))
    }

    fn kl_divergence(&self) -> Option<Tensor> {
        self.posterior.as_ref().and_then(|posterior| posterior.kl())
    }
}

impl Model {
    /// The forward pass in an explicit [`Mode`].
    pub fn forward_mode(&self, xs: &Tensor, mode: Mode) -> Tensor {
        self.outputs(xs, mode).logits
    }

    /// The forward pass in `mode`, with each classifier's logits when the
    /// model has two, and each member's when it has members: every member
    /// reads the batch `[B, ...]` (stacked once per member, `[M B, ...]`,
    /// see [`ensemble`]), in every mode.
    ///
    /// With a posterior, a train-mode pass samples the weights of the seed
    /// [`Model::set_noise_seed`] set; the other modes give the log of the
    /// mean probabilities of its prediction samples ([`bayesian`]), each
    /// the members' mean for a rank-1 network: the mean over samples and
    /// members alike, `log((1 / S M) sum_s sum_m softmax(z_sm))`.
    pub fn outputs(&self, xs: &Tensor, mode: Mode) -> Outputs {
        if let (Some(posterior), false) = (&self.posterior, mode == Mode::Train) {
            let samples = posterior.predictive_samples(|| self.sampled_outputs(xs, mode).logits);
            return Outputs {
                logits: mixture_logits(&samples),
                heads: None,
                members: None,
            };
        }
        self.sampled_outputs(xs, mode)
    }

    /// The forward pass in `mode` of the network as it is (with a
    /// posterior, the weights of the current seed), on the batch laid out in
    /// the model's memory format.
    fn sampled_outputs(&self, xs: &Tensor, mode: Mode) -> Outputs {
        if !self.ensemble.is_single() {
            let m = self.ensemble.members();
            return self.member_outputs(&ensemble::tile_members(xs, m), mode);
        }
        let (linear, etf) = self.precision.autocast(xs.device(), || {
            let xs = self.memory_format.apply(xs);
            let features = self.network.features(&xs, mode);
            let etf = self.balcal.as_ref().map(|b| b.etf_logits(&features, mode));
            (self.network.classify(&features), etf)
        });
        let linear = precision::widened(linear);
        let (Some(balcal), Some(etf)) = (&self.balcal, etf) else {
            return Outputs {
                logits: linear,
                heads: None,
                members: None,
            };
        };
        let etf = precision::widened(etf);
        Outputs {
            logits: balcal.balance(&linear, &etf),
            heads: Some(TwoHeads {
                linear,
                etf,
                lambda: balcal.lambda(),
            }),
            members: None,
        }
    }

    /// The forward pass in `mode` of a model of members on its members'
    /// inputs stacked member after member, `[M N, ...]`: each member's
    /// logits `[M, N, K]` and the log of their mean probabilities. A
    /// BatchEnsemble's network runs the stacked rows as they are; MIMO's
    /// reads them side by side along channels and gives each member's head
    /// ([`mimo`]).
    pub fn member_outputs(&self, stacked: &Tensor, mode: Mode) -> Outputs {
        let m = self.ensemble.members();
        let members = self
            .precision
            .autocast(stacked.device(), || match self.ensemble {
                Ensemble::Mimo { .. } => {
                    let joined = self.memory_format.apply(&mimo::concat_members(stacked, m));
                    let logits = self.network.classify(&self.network.features(&joined, mode));
                    mimo::split_heads(&logits, m)
                }
                Ensemble::Single | Ensemble::BatchEnsemble { .. } => {
                    let stacked = self.memory_format.apply(stacked);
                    let logits = self
                        .network
                        .classify(&self.network.features(&stacked, mode));
                    logits.reshape([m, -1, logits.size()[1]])
                }
            });
        let members = precision::widened(members);
        Outputs {
            logits: mixture_logits(&members),
            heads: None,
            members: Some(members),
        }
    }

    /// The names under which the classifiers' variables live: the linear
    /// classifier's and, with BalCAL, `balcal` (what fine-tuning on other
    /// classes starts afresh); `None` where the network cannot say which of
    /// its variables are the classifier (a TorchScript module).
    pub fn classifier_names(&self) -> Option<Vec<String>> {
        let head = self.balcal.as_ref().map(|_| "balcal".to_string());
        let linear = self.network.classifier_name()?;
        Some(std::iter::once(linear).chain(head).collect())
    }

    /// Whether [`Mode::McDropout`] samples anything: the model has dropout
    /// (the `dropout` option above 0, or a TorchScript module's own layers).
    pub fn has_dropout(&self) -> bool {
        self.network.own_dropout().unwrap_or(self.dropout > 0.0)
    }

    /// The multiply-adds of the convolutions, linear layers and attention
    /// products of one example's evaluation-mode forward pass at the input
    /// shape the model was built for (`kind` and `device` those of its
    /// variables), counted as the pass runs; `None` for a TorchScript module.
    /// A BatchEnsemble of `M` members runs the example once per member, so
    /// it counts `M` times its network's (the fast weights' elementwise
    /// products are not counted, as BatchNorm's are not); a MIMO runs its
    /// one network once, whose first layer reads `M` times the channels and
    /// whose classifier gives `M` times the classes; a Bayesian model runs
    /// it once per prediction sample, each with the mean's and the Flipout
    /// perturbation's products (mean-field) or as its BatchEnsemble
    /// (rank-1).
    pub fn forward_macs(&self, (kind, device): (tch::Kind, tch::Device)) -> Option<u64> {
        if !self.network.counts_macs() {
            return None;
        }
        let InputShape {
            channels,
            height,
            width,
        } = self.input;
        let xs = Tensor::zeros([1, channels, height, width], (kind, device));
        Some(macs::count_macs(|| {
            let _logits = tch::no_grad(|| self.forward_mode(&xs, Mode::Eval));
        }))
    }

    /// The members the network holds.
    pub fn ensemble(&self) -> Ensemble {
        self.ensemble
    }

    /// Whether it learns a posterior over its weights.
    pub fn is_bayesian(&self) -> bool {
        self.posterior.is_some()
    }

    /// Makes the following train-mode passes sample the weights of `seed`
    /// (a training step sets one seed for all its passes, so SAM's two
    /// passes see one sampled network); nothing for point estimates.
    pub fn set_noise_seed(&self, seed: u64) {
        if let Some(posterior) = &self.posterior {
            posterior.set_seed(seed);
        }
    }

    /// BalCAL's ETF classifier, when the model's [`Head`] is BalCAL.
    pub fn balcal(&self) -> Option<&BalcalHead> {
        self.balcal.as_ref()
    }

    /// Checks that `xs` is a batch `[B >= 1, C, H, W]` this model accepts: the
    /// channels it was built for and, for architectures without global pooling
    /// (the MLP), the height and width too.
    pub fn check_input(&self, xs: &Tensor) -> Result<(), ModelError> {
        let size = xs.size();
        let fits = match *size.as_slice() {
            [b, c, h, w] => {
                b >= 1
                    && c == self.input.channels
                    && h >= 1
                    && w >= 1
                    && (self.kind.any_spatial_size()
                        || (h == self.input.height && w == self.input.width))
            }
            _ => false,
        };
        if fits {
            return Ok(());
        }
        let i = self.input;
        let expected = if self.kind.any_spatial_size() {
            format!("[B, {}, H, W]", i.channels)
        } else {
            format!("[B, {}, {}, {}]", i.channels, i.height, i.width)
        };
        Err(ModelError::Input(format!(
            "{} expects {expected}, got {size:?}",
            self.kind
        )))
    }

    /// [`Model::check_input`], then the forward pass in `mode`.
    pub fn try_forward(&self, xs: &Tensor, mode: Mode) -> Result<Tensor, ModelError> {
        self.check_input(xs)?;
        Ok(self.forward_mode(xs, mode))
    }

    /// The registry entry this model was built from.
    pub fn kind(&self) -> ModelKind {
        self.kind
    }

    /// The input shape the model was built for.
    pub fn input_shape(&self) -> InputShape {
        self.input
    }

    /// Number of output classes.
    pub fn n_classes(&self) -> i64 {
        self.n_classes
    }
}

impl nn::ModuleT for Model {
    fn forward_t(&self, xs: &Tensor, train: bool) -> Tensor {
        let mode = if train { Mode::Train } else { Mode::Eval };
        self.forward_mode(xs, mode)
    }
}
