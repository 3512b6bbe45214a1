//! CIFAR ResNet of depth 6n + 2 (He et al. 2016, Section 4.2).

use super::batch_ensemble::Members;
use super::layers::{
    batch_norm2d, dropout, global_avg_pool, BatchNorm, Conv2d, Linear, HE_NORMAL_INIT,
};
use super::{Mode, ModelError, Network};
use tch::{nn, nn::Module, nn::ModuleT, Tensor};

/// Channels of the three stages.
const STAGE_WIDTHS: [i64; 3] = [16, 32, 64];

/// The CIFAR ResNet of He et al. (2016): a 3x3 convolution to 16 channels, three
/// stages of `n` basic blocks (16, 32, 64 channels; the first block of stages 2
/// and 3 has stride 2), global average pooling and a linear classifier;
/// `depth = 6n + 2` (20, 32, 44, 56, 110).
///
/// Shortcuts are **option A** of the paper (as in its CIFAR experiments): the
/// identity, and where the shape changes, the input subsampled with stride 2
/// (`x[:, :, ::2, ::2]`) and zero-padded with the missing channels, half before
/// and half after. Option A adds no parameters (ResNet-20: 0.27 M parameters).
/// Convolutions and the classifier weight use He-normal initialisation.
///
/// PyTorch twin (`twins.py::ResNet`): attributes `conv1`, `bn1`,
/// `layer1`..`layer3` (`nn.Sequential` of `BasicBlock` with `conv1`, `bn1`,
/// `conv2`, `bn2`), `fc`; keys such as `layer2.0.conv1.weight`,
/// `layer3.2.bn2.running_var`, `fc.bias`. Dropout (rate `r`, if any) is
/// `F.dropout` on the pooled features, so it adds no key.
///
/// With BatchEnsemble members every convolution and `fc` is a BatchEnsemble
/// layer (`conv1.r`, `layer2.0.conv1.s`, `fc.bias` `[M, n_classes]`, ...),
/// the BatchNorms shared, as the authors' ResNet-32 and WRN-28-10.
#[derive(Debug)]
pub struct ResNet {
    conv1: Conv2d,
    bn1: BatchNorm,
    blocks: Vec<BasicBlock>,
    fc: Linear,
    dropout: f64,
}

impl ResNet {
    /// Builds a ResNet of `depth = 6n + 2` under `p` for `channels` input channels.
    pub fn new(
        p: &nn::Path,
        depth: i64,
        channels: i64,
        n_classes: i64,
        dropout: f64,
    ) -> Result<Self, ModelError> {
        Self::with_members(p, depth, (channels, n_classes), dropout, Members::one())
    }

    /// [`ResNet::new`] with layers built as `members` says.
    pub(crate) fn with_members(
        p: &nn::Path,
        depth: i64,
        (channels, n_classes): (i64, i64),
        dropout: f64,
        members: Members,
    ) -> Result<Self, ModelError> {
        if depth < 8 || (depth - 2) % 6 != 0 {
            return Err(ModelError::InvalidConfig(format!(
                "ResNet depth must be 6n + 2 with n >= 1, got {depth}"
            )));
        }
        let n = (depth - 2) / 6;
        let mut blocks = Vec::with_capacity(3 * n as usize);
        let mut c_in = STAGE_WIDTHS[0];
        for (stage, &width) in STAGE_WIDTHS.iter().enumerate() {
            let stage_path = p / format!("layer{}", stage + 1);
            for i in 0..n {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                blocks.push(BasicBlock::new(
                    &stage_path / i,
                    (c_in, width, stride),
                    members,
                ));
                c_in = width;
            }
        }
        Ok(Self {
            conv1: members.conv_no_bias(
                &(p / "conv1"),
                (channels, STAGE_WIDTHS[0], 3, 1),
                HE_NORMAL_INIT,
            ),
            bn1: batch_norm2d(p / "bn1", STAGE_WIDTHS[0]),
            blocks,
            fc: members.linear(&(p / "fc"), c_in, n_classes, HE_NORMAL_INIT),
            dropout,
        })
    }
}

impl Network for ResNet {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let train_bn = mode.batch_statistics();
        let mut h = self.bn1.forward_t(&self.conv1.forward(xs), train_bn).relu();
        for block in &self.blocks {
            h = block.forward(&h, train_bn);
        }
        dropout(global_avg_pool(&h), self.dropout, mode.dropout_active())
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.fc.forward(features)
    }

    fn feature_width(&self) -> i64 {
        STAGE_WIDTHS[2]
    }
}

/// Two 3x3 convolutions with BatchNorm and an option-A shortcut.
#[derive(Debug)]
struct BasicBlock {
    conv1: Conv2d,
    bn1: BatchNorm,
    conv2: Conv2d,
    bn2: BatchNorm,
    stride: i64,
    /// Zero channels padded before and after the input on the shortcut.
    pad: (i64, i64),
}

impl BasicBlock {
    fn new(p: nn::Path, (c_in, c_out, stride): (i64, i64, i64), members: Members) -> Self {
        let extra = c_out - c_in;
        let conv1 = (c_in, c_out, 3, stride);
        let conv2 = (c_out, c_out, 3, 1);
        Self {
            conv1: members.conv_no_bias(&(&p / "conv1"), conv1, HE_NORMAL_INIT),
            bn1: batch_norm2d(&p / "bn1", c_out),
            conv2: members.conv_no_bias(&(&p / "conv2"), conv2, HE_NORMAL_INIT),
            bn2: batch_norm2d(&p / "bn2", c_out),
            stride,
            pad: (extra / 2, extra - extra / 2),
        }
    }

    fn forward(&self, xs: &Tensor, train_bn: bool) -> Tensor {
        let h = self.bn1.forward_t(&self.conv1.forward(xs), train_bn).relu();
        let h = self.bn2.forward_t(&self.conv2.forward(&h), train_bn);
        (h + self.shortcut(xs)).relu()
    }

    /// Option A: identity, or stride-`s` subsampling plus zero channels.
    fn shortcut(&self, xs: &Tensor) -> Tensor {
        if self.stride == 1 && self.pad == (0, 0) {
            return xs.shallow_clone();
        }
        let sub = xs
            .slice(2, 0, None, self.stride)
            .slice(3, 0, None, self.stride);
        sub.constant_pad_nd([0, 0, 0, 0, self.pad.0, self.pad.1])
    }
}
