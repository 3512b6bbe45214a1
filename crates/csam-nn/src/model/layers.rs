//! Layer constructors shared by the architectures, with PyTorch's defaults
//! (BatchNorm weight 1 / bias 0, eps 1e-5, momentum 0.1; `nn.Linear` / `nn.Conv2d`
//! weights uniform in +-1/sqrt(fan_in)) unless an architecture asks otherwise.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::sync::Arc;
use tch::nn::{self, init::FanInOut, init::NonLinearity, init::NormalOrUniform, Init};
use tch::nn::{Module, ModuleT};
use tch::Tensor;

pub(crate) use super::batch_norm::BatchNorm;
use super::batch_norm::BatchNormSync;
pub(crate) use super::macs::{Conv2d, Linear};

/// PyTorch's default weight initialisation of `nn.Linear` and `nn.Conv2d`
/// (`kaiming_uniform_(a = sqrt(5))`): uniform in +-1/sqrt(fan_in).
pub(crate) const TORCH_DEFAULT_INIT: Init = Init::Kaiming {
    dist: NormalOrUniform::Uniform,
    fan: FanInOut::FanIn,
    non_linearity: NonLinearity::ExplicitGain(0.577_350_269_189_625_8), // 1/sqrt(3)
};

/// He et al. (2015) normal initialisation, fan-in, ReLU gain.
pub(crate) const HE_NORMAL_INIT: Init = nn::init::DEFAULT_KAIMING_NORMAL;

/// He et al. (2015) normal initialisation, fan-out, ReLU gain:
/// `normal(0, sqrt(2 / (k * k * c_out)))` for a convolution, as torchvision's
/// ResNets (`kaiming_normal_(mode = "fan_out")`), the wide ResNet and the
/// PyramidNet reference code initialise theirs.
pub(crate) const HE_NORMAL_FAN_OUT_INIT: Init = Init::Kaiming {
    dist: NormalOrUniform::Normal,
    fan: FanInOut::FanOut,
    non_linearity: NonLinearity::ReLU,
};

/// A bias-free 2-D convolution with `padding = kernel / 2` (the twin's
/// `nn.Conv2d(c_in, c_out, kernel, stride, padding=kernel // 2, bias=False)`).
pub(crate) fn conv_no_bias<'a>(
    p: impl Borrow<nn::Path<'a>>,
    c_in: i64,
    c_out: i64,
    kernel: i64,
    stride: i64,
    init: Init,
) -> Conv2d {
    let config = nn::ConvConfig {
        stride,
        padding: kernel / 2,
        bias: false,
        ws_init: init,
        ..Default::default()
    };
    Conv2d::plain(nn::conv2d(p, c_in, c_out, kernel, config))
}

thread_local! {
    /// The synchronisation the BatchNorm layers built now take, and how many
    /// took it ([`SyncScope`]).
    static BUILD_SYNC: RefCell<Option<(Arc<BatchNormSync>, usize)>> = const { RefCell::new(None) };
}

/// While alive, the BatchNorm layers this thread builds are synchronised
/// over `sync` (`torch.nn.SyncBatchNorm.convert_sync_batchnorm` at build
/// time). The model builders reach their BatchNorms through many
/// constructors; a build scope reaches them all without a parameter in
/// each architecture's signature, as `ModelSpec::sync_batch_norm` asks.
pub(crate) struct SyncScope(());

impl SyncScope {
    /// Synchronises the layers built until the scope ends, when `sync` is given.
    pub(crate) fn enter(sync: Option<Arc<BatchNormSync>>) -> SyncScope {
        BUILD_SYNC.with(|slot| *slot.borrow_mut() = sync.map(|s| (s, 0)));
        SyncScope(())
    }

    /// How many BatchNorm layers took the synchronisation so far.
    pub(crate) fn layers(&self) -> usize {
        BUILD_SYNC.with(|slot| slot.borrow().as_ref().map_or(0, |(_, n)| *n))
    }
}

impl Drop for SyncScope {
    fn drop(&mut self) {
        BUILD_SYNC.with(|slot| *slot.borrow_mut() = None);
    }
}

/// The layer `build` makes with PyTorch's BatchNorm configuration,
/// synchronised when a [`SyncScope`] is active.
fn in_scope(build: impl FnOnce(nn::BatchNormConfig) -> nn::BatchNorm) -> BatchNorm {
    let config = batch_norm_config();
    let sync = BUILD_SYNC.with(|slot| {
        slot.borrow_mut().as_mut().map(|(sync, n)| {
            *n += 1;
            Arc::clone(sync)
        })
    });
    BatchNorm::new(build(config), &config, sync)
}

/// `nn.BatchNorm2d(channels)` with PyTorch's initialisation (`nn.SyncBatchNorm`
/// inside a [`SyncScope`]).
pub(crate) fn batch_norm2d(p: nn::Path, channels: i64) -> BatchNorm {
    in_scope(|config| nn::batch_norm2d(p, channels, config))
}

/// `nn.BatchNorm1d(features)` with PyTorch's initialisation (`nn.SyncBatchNorm`
/// inside a [`SyncScope`]).
pub(crate) fn batch_norm1d(p: nn::Path, features: i64) -> BatchNorm {
    in_scope(|config| nn::batch_norm1d(p, features, config))
}

fn batch_norm_config() -> nn::BatchNormConfig {
    nn::BatchNormConfig {
        ws_init: Init::Const(1.0),
        bs_init: Init::Const(0.0),
        ..Default::default()
    }
}

/// `nn.Linear(d_in, d_out)` with the given weight initialisation and PyTorch's
/// default bias initialisation (uniform in +-1/sqrt(d_in)).
pub(crate) fn linear<'a>(
    p: impl Borrow<nn::Path<'a>>,
    d_in: i64,
    d_out: i64,
    ws_init: Init,
) -> Linear {
    let config = nn::LinearConfig {
        ws_init,
        ..Default::default()
    };
    Linear::plain(nn::linear(p, d_in, d_out, config))
}

/// `nn.Linear(d_in, d_out)` with the given weight initialisation and a zero
/// bias (the classifiers of the wide ResNet, PyramidNet and timm's ViT).
pub(crate) fn linear_zero_bias(p: nn::Path, d_in: i64, d_out: i64, ws_init: Init) -> Linear {
    let config = nn::LinearConfig {
        ws_init,
        bs_init: Some(Init::Const(0.0)),
        bias: true,
    };
    Linear::plain(nn::linear(p, d_in, d_out, config))
}

/// Dropout with rate `rate` when `active` (inverted dropout, as `F.dropout`);
/// the identity when the rate is 0.
pub(crate) fn dropout(xs: Tensor, rate: f64, active: bool) -> Tensor {
    if rate > 0.0 && active {
        xs.dropout(rate, true)
    } else {
        xs
    }
}

/// Stochastic depth (Huang et al. 2016, "Deep networks with stochastic
/// depth", ECCV) of a residual branch `xs` with drop rate `rate`, as timm's
/// `drop_path` (`timm/layers/drop.py`, `scale_by_keep=True`) when `active`:
/// `xs * m / (1 - rate)` with one `m ~ Bernoulli(1 - rate)` per example (the
/// first dimension), so a kept branch keeps its expectation. The mask is
/// drawn as timm draws it (`xs.new_empty([B, 1, ..]).bernoulli_(1 - rate)`,
/// the kind and device of `xs`), so a run seeded alike draws the same masks.
/// The identity, drawing no random number, when the rate is 0 or not `active`.
pub(crate) fn drop_path(xs: Tensor, rate: f64, active: bool) -> Tensor {
    if rate == 0.0 || !active {
        return xs;
    }
    let keep = 1.0 - rate;
    let mut shape = vec![1; xs.dim()];
    shape[0] = xs.size()[0];
    let mask = Tensor::empty(shape, (xs.kind(), xs.device())).bernoulli_float_(keep) / keep;
    xs * mask
}

/// The residual branch of the ResNet family: convolutions, each followed by
/// BatchNorm, with a ReLU between two and none after the last.
#[derive(Debug)]
pub(crate) struct ConvBnChain(Vec<(Conv2d, BatchNorm)>);

impl ConvBnChain {
    /// One bias-free convolution per `(c_in, c_out, kernel, stride)` of
    /// `shapes`, named `conv1`, `conv2`, ... under `p`, each followed by a
    /// BatchNorm named `bn{first_bn}`, `bn{first_bn + 1}`, ...
    pub(crate) fn new(
        p: &nn::Path,
        shapes: &[(i64, i64, i64, i64)],
        first_bn: usize,
        init: Init,
    ) -> Self {
        let layers = shapes
            .iter()
            .enumerate()
            .map(|(i, &(c_in, c_out, kernel, stride))| {
                let conv = conv_no_bias(
                    p / format!("conv{}", i + 1),
                    c_in,
                    c_out,
                    kernel,
                    stride,
                    init,
                );
                (conv, batch_norm2d(p / format!("bn{}", i + first_bn), c_out))
            })
            .collect();
        Self(layers)
    }

    /// The branch on `xs`, BatchNorm with batch statistics when `train_bn`.
    pub(crate) fn forward(&self, xs: &Tensor, train_bn: bool) -> Tensor {
        let last = self.0.len() - 1;
        let mut h = xs.shallow_clone();
        for (i, (conv, bn)) in self.0.iter().enumerate() {
            h = bn.forward_t(&conv.forward(&h), train_bn);
            if i < last {
                h = h.relu();
            }
        }
        h
    }
}

/// Global average pooling `[B, C, H, W] -> [B, C]`.
pub(crate) fn global_avg_pool(xs: &Tensor) -> Tensor {
    xs.mean_dim(&[-2i64, -1][..], false, None)
}
