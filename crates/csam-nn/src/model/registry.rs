//! The architecture registry: names, builders and [`build_model`].
//!
//! Adding an architecture is a new module and one line in `ARCHITECTURES`.

use super::batch_ensemble::Members;
use super::bayesian::Posterior;
use super::mimo;
use super::{
    BalcalHead, Blocks, Ensemble, Head, ImageNetResNet, InputShape, Mlp, Model, ModelError,
    ModelSpec, Network, PyramidNet, PyramidUnit, ResNet, ResNetLayout, SmallCnn, Stem,
    TorchScriptNetwork, VisionTransformer, VitShape, WideResNet,
};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use tch::nn;

use super::batch_norm::BatchNormSync;
use super::layers::SyncScope;

/// What a builder receives.
struct BuildArgs<'a> {
    input: InputShape,
    n_classes: i64,
    spec: &'a ModelSpec,
    /// The posterior whose Gaussian layers it builds, if any.
    posterior: Option<&'a Arc<Posterior>>,
}

impl BuildArgs<'_> {
    /// The layers the options ask for: members, or Gaussian layers.
    fn members(&self) -> Members<'_> {
        Members::of(&self.spec.ensemble).with_posterior(self.posterior)
    }
}

type Builder = fn(&nn::Path, &BuildArgs) -> Result<Box<dyn Network>, ModelError>;

/// One registered architecture.
struct Architecture {
    name: &'static str,
    /// One line for help texts.
    summary: &'static str,
    /// Whether inputs of any height and width work (global pooling), or only
    /// the shape the model was built for.
    any_spatial_size: bool,
    /// Whether the hidden widths (`mlp_hidden`) shape it.
    hidden_widths: bool,
    /// Whether it builds several members in one network when
    /// [`ModelSpec::ensemble`] asks (its layers as BatchEnsemble layers,
    /// or its input and output layers `M` times wider for MIMO), and its
    /// layers as mean-field Gaussian layers when [`ModelSpec::bayesian`]
    /// does (the architectures the papers and their reference code use
    /// them on: MLPs, small CNNs, CIFAR ResNets).
    members: bool,
    /// Whether its layers are convolutions over `[B, C, H, W]` feature maps,
    /// which [`MemoryFormat::ChannelsLast`] lays out: every architecture
    /// but the MLP (no convolution), the ViTs (one convolution, the patch
    /// embedding, whose output becomes `[B, N, D]` tokens at once) and a
    /// TorchScript module (layers csam does not know).
    convolutional: bool,
    /// The stochastic-depth regulariser its blocks read, if any.
    stochastic_depth: StochasticDepth,
    build: Builder,
}

/// The stochastic-depth regulariser of an architecture's residual blocks:
/// the option of [`ModelSpec`] it reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StochasticDepth {
    /// None.
    None,
    /// Stochastic depth over the blocks ([`ModelSpec::drop_path`]: the ViTs).
    DropPath,
    /// ShakeDrop ([`ModelSpec::shakedrop`]: the PyramidNets).
    ShakeDrop,
}

fn resnet(p: &nn::Path, a: &BuildArgs, depth: i64) -> Result<Box<dyn Network>, ModelError> {
    let shape = (a.input.channels, a.n_classes);
    let net = ResNet::with_members(p, depth, shape, a.spec.dropout, a.members())?;
    Ok(Box::new(net))
}

fn wide_resnet(
    p: &nn::Path,
    a: &BuildArgs,
    shape: (i64, i64),
) -> Result<Box<dyn Network>, ModelError> {
    let net = WideResNet::new(p, shape, a.input.channels, a.n_classes, a.spec.dropout)?;
    Ok(Box::new(net))
}

fn torchvision_resnet(
    p: &nn::Path,
    a: &BuildArgs,
    (blocks, counts, stem): (Blocks, [i64; 4], Stem),
) -> Result<Box<dyn Network>, ModelError> {
    let layout = ResNetLayout {
        blocks,
        counts,
        stem,
    };
    let net = ImageNetResNet::new(p, layout, a.input.channels, a.n_classes, a.spec.dropout)?;
    Ok(Box::new(net))
}

fn pyramidnet(
    p: &nn::Path,
    a: &BuildArgs,
    shape: (i64, f64, PyramidUnit),
) -> Result<Box<dyn Network>, ModelError> {
    let o = a.spec;
    let net = PyramidNet::new(
        p,
        shape,
        a.input.channels,
        a.n_classes,
        (o.dropout, o.shakedrop),
    )?;
    Ok(Box::new(net))
}

fn vit(
    p: &nn::Path,
    a: &BuildArgs,
    (patch, width, heads): (i64, i64, i64),
) -> Result<Box<dyn Network>, ModelError> {
    let shape = VitShape {
        patch,
        width,
        depth: 12,
        heads,
    };
    let image = (a.input.channels, a.input.height, a.input.width);
    let rates = (a.spec.dropout, a.spec.drop_path);
    let net = VisionTransformer::new(p, shape, image, a.n_classes, rates)?;
    Ok(Box::new(net))
}

/// A module saved with `torch.jit.script` / `torch.jit.trace`, as it comes:
/// no dropout or head of csam's on it ([`ModelSpec::validate`] refuses them).
fn torchscript(p: &nn::Path, a: &BuildArgs) -> Result<Box<dyn Network>, ModelError> {
    let file = a.spec.script.as_ref().ok_or_else(|| ModelError::Option {
        field: "script",
        value: String::new(),
        reason: "model torchscript needs its file".to_string(),
    })?;
    let net = TorchScriptNetwork::load(p, file, a.input, a.n_classes)?;
    Ok(Box::new(net))
}

/// Blocks per stage of ResNet-18, and of ResNet-34 and -50.
const RESNET18: [i64; 4] = [2, 2, 2, 2];
const RESNET34: [i64; 4] = [3, 4, 6, 3];

/// The registry. Names are what [`ModelKind::from_str`] accepts.
static ARCHITECTURES: &[Architecture] = &[
    Architecture {
        name: "mlp",
        summary: "fully connected ReLU network on the flattened input (hidden sizes: mlp_hidden)",
        any_spatial_size: false,
        hidden_widths: true,
        members: true,
        convolutional: false,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| {
            let o = a.spec;
            let hidden = o.hidden_widths();
            let shape = (a.input.features(), hidden.as_slice(), a.n_classes);
            let net = Mlp::with_members(p, shape, o.dropout, a.members())?;
            Ok(Box::new(net))
        },
    },
    Architecture {
        name: "cnn",
        summary: "small 3-stage convolutional network with BatchNorm (32/64/128 channels)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| {
            let o = a.spec;
            let shape = (a.input.channels, a.n_classes);
            let net = SmallCnn::with_members(p, shape, o.dropout, a.members());
            Ok(Box::new(net))
        },
    },
    Architecture {
        name: "resnet20",
        summary: "CIFAR ResNet-20 (He et al. 2016, option-A shortcuts, 0.27 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| resnet(p, a, 20),
    },
    Architecture {
        name: "resnet32",
        summary: "CIFAR ResNet-32 (He et al. 2016, option-A shortcuts, 0.46 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| resnet(p, a, 32),
    },
    Architecture {
        name: "resnet44",
        summary: "CIFAR ResNet-44 (He et al. 2016, option-A shortcuts, 0.66 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| resnet(p, a, 44),
    },
    Architecture {
        name: "resnet56",
        summary: "CIFAR ResNet-56 (He et al. 2016, option-A shortcuts, 0.85 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| resnet(p, a, 56),
    },
    Architecture {
        name: "resnet110",
        summary: "CIFAR ResNet-110 (He et al. 2016, option-A shortcuts, 1.7 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: true,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| resnet(p, a, 110),
    },
    Architecture {
        name: "resnet18",
        summary: "ResNet-18 as torchvision (ImageNet stem, 11.7 M parameters on 1000 classes)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Basic, RESNET18, Stem::ImageNet)),
    },
    Architecture {
        name: "resnet34",
        summary: "ResNet-34 as torchvision (ImageNet stem, 21.8 M parameters on 1000 classes)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Basic, RESNET34, Stem::ImageNet)),
    },
    Architecture {
        name: "resnet50",
        summary: "ResNet-50 as torchvision (ImageNet stem, bottlenecks, 25.6 M parameters on 1000 classes)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Bottleneck, RESNET34, Stem::ImageNet)),
    },
    Architecture {
        name: "resnet18-cifar",
        summary: "ResNet-18 with the CIFAR stem (3x3 convolution, no pooling; torchvision's keys)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Basic, RESNET18, Stem::Cifar)),
    },
    Architecture {
        name: "resnet34-cifar",
        summary: "ResNet-34 with the CIFAR stem (3x3 convolution, no pooling; torchvision's keys)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Basic, RESNET34, Stem::Cifar)),
    },
    Architecture {
        name: "resnet50-cifar",
        summary: "ResNet-50 with the CIFAR stem (3x3 convolution, no pooling; torchvision's keys)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| torchvision_resnet(p, a, (Blocks::Bottleneck, RESNET34, Stem::Cifar)),
    },
    Architecture {
        name: "pyramidnet110-a48",
        summary: "PyramidNet-110, alpha 48 (Han et al. 2017, basic units, 1.8 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::ShakeDrop,
        build: |p, a| pyramidnet(p, a, (110, 48.0, PyramidUnit::Basic)),
    },
    Architecture {
        name: "pyramidnet110-a270",
        summary: "PyramidNet-110, alpha 270 (Han et al. 2017, basic units, 28.5 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::ShakeDrop,
        build: |p, a| pyramidnet(p, a, (110, 270.0, PyramidUnit::Basic)),
    },
    Architecture {
        name: "pyramidnet272-a200",
        summary: "PyramidNet-272, alpha 200 (Han et al. 2017, bottleneck units, 26.2 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::ShakeDrop,
        build: |p, a| pyramidnet(p, a, (272, 200.0, PyramidUnit::Bottleneck)),
    },
    Architecture {
        name: "vit-ti16",
        summary: "ViT-Ti/16 as timm (vit_tiny_patch16_224: width 192, 12 blocks, 3 heads)",
        any_spatial_size: false,
        hidden_widths: false,
        members: false,
        convolutional: false,
        stochastic_depth: StochasticDepth::DropPath,
        build: |p, a| vit(p, a, (16, 192, 3)),
    },
    Architecture {
        name: "vit-s16",
        summary: "ViT-S/16 as timm (vit_small_patch16_224: width 384, 12 blocks, 6 heads, 22 M parameters at 224)",
        any_spatial_size: false,
        hidden_widths: false,
        members: false,
        convolutional: false,
        stochastic_depth: StochasticDepth::DropPath,
        build: |p, a| vit(p, a, (16, 384, 6)),
    },
    Architecture {
        name: "vit-s32",
        summary: "ViT-S/32 as timm (vit_small_patch32_224: width 384, 12 blocks, 6 heads)",
        any_spatial_size: false,
        hidden_widths: false,
        members: false,
        convolutional: false,
        stochastic_depth: StochasticDepth::DropPath,
        build: |p, a| vit(p, a, (32, 384, 6)),
    },
    Architecture {
        name: "vit-b16",
        summary: "ViT-B/16 as timm (vit_base_patch16_224: width 768, 12 blocks, 12 heads, 86 M parameters at 224)",
        any_spatial_size: false,
        hidden_widths: false,
        members: false,
        convolutional: false,
        stochastic_depth: StochasticDepth::DropPath,
        build: |p, a| vit(p, a, (16, 768, 12)),
    },
    Architecture {
        name: "wrn-16-4",
        summary:
            "Wide ResNet-16-4 (Zagoruyko and Komodakis 2016, pre-activation, 2.7 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| wide_resnet(p, a, (16, 4)),
    },
    Architecture {
        name: "wrn-16-8",
        summary: "Wide ResNet-16-8 (Zagoruyko and Komodakis 2016, pre-activation, 11 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| wide_resnet(p, a, (16, 8)),
    },
    Architecture {
        name: "wrn-28-10",
        summary:
            "Wide ResNet-28-10 (Zagoruyko and Komodakis 2016, pre-activation, 36.5 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| wide_resnet(p, a, (28, 10)),
    },
    Architecture {
        name: "wrn-40-2",
        summary:
            "Wide ResNet-40-2 (Zagoruyko and Komodakis 2016, pre-activation, 2.2 M parameters)",
        any_spatial_size: true,
        hidden_widths: false,
        members: false,
        convolutional: true,
        stochastic_depth: StochasticDepth::None,
        build: |p, a| wide_resnet(p, a, (40, 2)),
    },
    Architecture {
        name: "torchscript",
        summary: "any PyTorch model saved with torch.jit.script or torch.jit.trace (torchscript:FILE)",
        any_spatial_size: false,
        hidden_widths: false,
        members: false,
        convolutional: false,
        stochastic_depth: StochasticDepth::None,
        build: torchscript,
    },
];

/// What the registry answers about an architecture: which options it reads
/// beyond those every architecture reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelTrait {
    /// Made of convolutions over feature maps (channels_last lays them out;
    /// they are also those with BatchNorm layers, which sync_batch_norm
    /// synchronises): [`ModelKind::is_convolutional`].
    Convolutional,
    /// Built with members (BatchEnsemble, MIMO) or mean-field Gaussian
    /// layers: [`ModelKind::takes_members`].
    Members,
    /// Reads a stochastic-depth regulariser: [`ModelKind::stochastic_depth`].
    Reads(StochasticDepth),
}

impl ModelTrait {
    /// Whether `kind` has the trait.
    pub fn holds(self, kind: ModelKind) -> bool {
        match self {
            ModelTrait::Convolutional => kind.is_convolutional(),
            ModelTrait::Members => kind.takes_members(),
            ModelTrait::Reads(depth) => kind.stochastic_depth() == depth,
        }
    }

    /// The architectures with the trait, in registry order.
    pub fn names(self) -> Vec<&'static str> {
        ModelKind::all()
            .filter(|&kind| self.holds(kind))
            .map(|kind| kind.name())
            .collect()
    }
}

/// A registered architecture, parsed from its name (`mlp`, `cnn`, `resnet20`,
/// `resnet32`, `resnet44`, `resnet56`, `resnet110`, `resnet18`, `resnet34`,
/// `resnet50`, `resnet18-cifar`, `resnet34-cifar`, `resnet50-cifar`,
/// `pyramidnet110-a48`, `pyramidnet110-a270`, `pyramidnet272-a200`,
/// `vit-ti16`, `vit-s16`, `vit-s32`, `vit-b16`, `wrn-16-4`, `wrn-16-8`,
/// `wrn-28-10`, `wrn-40-2`, `torchscript`); serialises as that name.
#[derive(Clone, Copy)]
pub struct ModelKind(&'static Architecture);

impl ModelKind {
    /// The registry name.
    pub fn name(&self) -> &'static str {
        self.0.name
    }

    /// A one-line description for help texts.
    pub fn summary(&self) -> &'static str {
        self.0.summary
    }

    /// Whether the architecture accepts inputs of any height and width.
    pub fn any_spatial_size(&self) -> bool {
        self.0.any_spatial_size
    }

    /// Whether the hidden widths (`mlp_hidden`) shape the architecture.
    pub fn takes_hidden_widths(&self) -> bool {
        self.0.hidden_widths
    }

    /// Whether the architecture builds members, BatchEnsemble or MIMO
    /// ([`ModelSpec::ensemble`]), and Gaussian layers
    /// ([`ModelSpec::bayesian`]).
    pub fn takes_members(&self) -> bool {
        self.0.members
    }

    /// Whether the architecture is made of convolutions over feature maps,
    /// which [`ModelSpec::memory_format`] can lay out in channels_last.
    pub fn is_convolutional(&self) -> bool {
        self.0.convolutional
    }

    /// The stochastic-depth regulariser the architecture reads.
    pub fn stochastic_depth(&self) -> StochasticDepth {
        self.0.stochastic_depth
    }

    /// Every registered architecture, in registry order.
    pub fn all() -> impl Iterator<Item = ModelKind> {
        ARCHITECTURES.iter().map(ModelKind)
    }
}

impl PartialEq for ModelKind {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ModelKind {}

impl fmt::Debug for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelKind({})", self.name())
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ModelKind {
    type Err = ModelError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        ModelKind::all()
            .find(|kind| kind.name() == wanted)
            .ok_or_else(|| ModelError::UnknownKind {
                name: s.to_string(),
                known: ModelKind::all()
                    .map(|k| k.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl serde::Serialize for ModelKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for ModelKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// Builds `kind` with its default options ([`ModelSpec::of`]: MLP hidden
/// `[256, 256]`, no dropout).
pub fn build_model(
    kind: ModelKind,
    p: &nn::Path,
    input: InputShape,
    n_classes: i64,
) -> Result<Model, ModelError> {
    build_model_with(&ModelSpec::of(kind), p, input, n_classes)
}

/// Builds the model `spec` describes under `p`, for inputs of shape `input`
/// and `n_classes` outputs, after [`ModelSpec::validate`]. The variables are
/// created on the device and kind of `p`'s `VarStore`. `spec.init` is not
/// read here: loading initial weights is [`super::weights`]' job.
pub fn build_model_with(
    spec: &ModelSpec,
    p: &nn::Path,
    input: InputShape,
    n_classes: i64,
) -> Result<Model, ModelError> {
    build(spec, p, (input, n_classes), None)
}

/// [`build_model_with`] on the root of `vs`, with the 4-D weights then laid
/// out in [`ModelSpec::memory_format`] ([`super::memory_format::MemoryFormat::convert_variables`]).
/// The way to build a model in channels_last: [`build_model_with`] alone
/// leaves the weights contiguous (its forward passes still convert the
/// inputs, and give the same values, more slowly).
pub fn build_model_in(
    spec: &ModelSpec,
    vs: &nn::VarStore,
    input: InputShape,
    n_classes: i64,
) -> Result<Model, ModelError> {
    build_model_synced(spec, vs, (input, n_classes), None)
}

/// [`build_model_in`] whose BatchNorm layers, in training, normalise with the
/// statistics of the global batch of the replicas `sync` joins
/// (`nn.SyncBatchNorm`, [`super::batch_norm`]); `None`: each process's own
/// batch. The handle belongs to the running job, so it is an argument here
/// rather than an option of the spec, whose `sync_batch_norm` asks for it.
pub fn build_model_synced(
    spec: &ModelSpec,
    vs: &nn::VarStore,
    (input, n_classes): (InputShape, i64),
    sync: Option<Arc<BatchNormSync>>,
) -> Result<Model, ModelError> {
    let model = build(spec, &vs.root(), (input, n_classes), sync)?;
    spec.memory_format.convert_variables(vs);
    Ok(model)
}

fn build(
    spec: &ModelSpec,
    p: &nn::Path,
    (input, n_classes): (InputShape, i64),
    sync: Option<Arc<BatchNormSync>>,
) -> Result<Model, ModelError> {
    input.validate()?;
    if n_classes < 2 {
        return Err(ModelError::InvalidConfig(format!(
            "a classifier needs at least 2 classes, got {n_classes}"
        )));
    }
    spec.validate()?;
    super::size::check_fits(spec, input, n_classes)?;
    let kind = spec.arch;
    // MIMO's network is the plain one for M images and M heads.
    let (network_input, network_classes) = match spec.ensemble {
        Ensemble::Mimo { size, .. } => mimo::network_shape(input, n_classes, size),
        Ensemble::Single | Ensemble::BatchEnsemble { .. } => (input, n_classes),
    };
    let posterior = Posterior::of(&spec.bayesian).map(Arc::new);
    let args = BuildArgs {
        input: network_input,
        n_classes: network_classes,
        spec,
        posterior: posterior.as_ref(),
    };
    let synced = sync.is_some();
    let scope = SyncScope::enter(sync);
    let network = (kind.0.build)(p, &args)?;
    if synced && scope.layers() == 0 {
        return Err(ModelError::InvalidConfig(format!(
            "sync_batch_norm synchronises BatchNorm layers, and {kind} has none"
        )));
    }
    let balcal = match spec.head {
        Head::Linear => None,
        Head::Balcal { lambda, .. } => Some(BalcalHead::new(
            &(p / "balcal"),
            network.feature_width(),
            n_classes,
            lambda,
        )?),
    };
    drop(scope);
    Ok(Model {
        network,
        balcal,
        kind,
        input,
        n_classes,
        dropout: spec.dropout,
        ensemble: spec.ensemble,
        posterior,
        precision: spec.precision,
        memory_format: spec.memory_format,
    })
}
