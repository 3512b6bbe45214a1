//! Wide residual networks for CIFAR-sized images (Zagoruyko and Komodakis
//! 2016), with pre-activation blocks.

use super::layers::{
    batch_norm2d, conv_no_bias, dropout, global_avg_pool, linear_zero_bias, BatchNorm, Conv2d,
    Linear, HE_NORMAL_FAN_OUT_INIT, TORCH_DEFAULT_INIT,
};
use super::{Mode, ModelError, Network};
use tch::nn::{self, Module, ModuleT};
use tch::Tensor;

/// WRN-`depth`-`widen` (Zagoruyko and Komodakis 2016, "Wide residual
/// networks", BMVC): a 3x3 convolution to 16 channels, three groups of
/// `n = (depth - 4) / 6` pre-activation blocks with `16 k`, `32 k`, `64 k`
/// channels (`k` the widen factor; the first block of groups 2 and 3 has
/// stride 2), BatchNorm and ReLU, global average pooling and a linear
/// classifier.
///
/// A block is `BN-ReLU-conv3x3-BN-ReLU-[dropout]-conv3x3` plus a shortcut:
/// the identity when the block keeps its width, else a 1x1 convolution (with
/// the block's stride) of the pre-activated input. Dropout (the rate of the
/// model options) sits between the two convolutions, as in the paper. No
/// convolution has a bias; convolutions take He-normal fan-out weights,
/// BatchNorm weight 1 and bias 0, the classifier a zero bias. WRN-28-10 on
/// 10 classes has 36,479,194 parameters.
///
/// As the reference implementation most CIFAR papers train
/// (xternalz/WideResNet-pytorch, `wideresnet.py`), whose key names csam
/// keeps: `conv1`, `block1.layer.0.bn1`, `block1.layer.0.conv1`,
/// `block1.layer.0.bn2`, `block1.layer.0.conv2`, `block1.layer.0.convShortcut`,
/// ..., `bn1`, `fc` (PyTorch twin `twins.py::WideResNet`). Its `avg_pool2d(8)`
/// assumes 32x32 inputs; csam pools globally, the same on 32x32 and any size
/// on others.
#[derive(Debug)]
pub struct WideResNet {
    conv1: Conv2d,
    blocks: Vec<PreActBlock>,
    bn: BatchNorm,
    fc: Linear,
    width: i64,
}

impl WideResNet {
    /// Builds WRN-`depth`-`widen` under `p` for `channels` input channels;
    /// `dropout` is the rate between each block's convolutions.
    pub fn new(
        p: &nn::Path,
        (depth, widen): (i64, i64),
        channels: i64,
        n_classes: i64,
        dropout: f64,
    ) -> Result<Self, ModelError> {
        if depth < 10 || (depth - 4) % 6 != 0 || widen < 1 {
            return Err(ModelError::InvalidConfig(format!(
                "a wide ResNet needs depth 6n + 4 with n >= 1 and a widen factor >= 1, got \
                 depth {depth}, widen factor {widen}"
            )));
        }
        let n = (depth - 4) / 6;
        let mut blocks = Vec::new();
        let mut c_in = 16;
        for (group, base) in [16, 32, 64].into_iter().enumerate() {
            let layer = p / format!("block{}", group + 1) / "layer";
            for i in 0..n {
                let stride = if group > 0 && i == 0 { 2 } else { 1 };
                let c_out = base * widen;
                blocks.push(PreActBlock::new(&layer / i, (c_in, c_out), stride, dropout));
                c_in = c_out;
            }
        }
        Ok(Self {
            conv1: conv_no_bias(p / "conv1", channels, 16, 3, 1, HE_NORMAL_FAN_OUT_INIT),
            blocks,
            bn: batch_norm2d(p / "bn1", c_in),
            fc: linear_zero_bias(p / "fc", c_in, n_classes, TORCH_DEFAULT_INIT),
            width: c_in,
        })
    }
}

impl Network for WideResNet {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let h = self
            .blocks
            .iter()
            .fold(self.conv1.forward(xs), |h, block| block.forward(&h, mode));
        let h = self.bn.forward_t(&h, mode.batch_statistics()).relu();
        global_avg_pool(&h)
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.fc.forward(features)
    }

    fn feature_width(&self) -> i64 {
        self.width
    }
}

/// One pre-activation block of a wide ResNet.
#[derive(Debug)]
struct PreActBlock {
    bn1: BatchNorm,
    conv1: Conv2d,
    bn2: BatchNorm,
    conv2: Conv2d,
    /// The 1x1 convolution of a block that changes the width.
    shortcut: Option<Conv2d>,
    dropout: f64,
}

impl PreActBlock {
    fn new(p: nn::Path, (c_in, c_out): (i64, i64), stride: i64, dropout: f64) -> Self {
        let shortcut = (c_in != c_out).then(|| {
            conv_no_bias(
                &p / "convShortcut",
                c_in,
                c_out,
                1,
                stride,
                HE_NORMAL_FAN_OUT_INIT,
            )
        });
        Self {
            bn1: batch_norm2d(&p / "bn1", c_in),
            conv1: conv_no_bias(&p / "conv1", c_in, c_out, 3, stride, HE_NORMAL_FAN_OUT_INIT),
            bn2: batch_norm2d(&p / "bn2", c_out),
            conv2: conv_no_bias(&p / "conv2", c_out, c_out, 3, 1, HE_NORMAL_FAN_OUT_INIT),
            shortcut,
            dropout,
        }
    }

    fn forward(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let train_bn = mode.batch_statistics();
        let activated = self.bn1.forward_t(xs, train_bn).relu();
        let h = self
            .bn2
            .forward_t(&self.conv1.forward(&activated), train_bn)
            .relu();
        let h = self
            .conv2
            .forward(&dropout(h, self.dropout, mode.dropout_active()));
        match &self.shortcut {
            Some(conv) => h + conv.forward(&activated),
            None => h + xs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters(depth: i64, widen: i64, classes: i64) -> i64 {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        WideResNet::new(&vs.root(), (depth, widen), 3, classes, 0.0).unwrap();
        vs.trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    #[test]
    fn wrn_28_10_has_the_reference_parameter_count() {
        // The count of the reference implementation on CIFAR-10 (and of the
        // paper's Table: 36.5 M).
        assert_eq!(parameters(28, 10, 10), 36_479_194);
    }
}
