//! A small convolutional network for quick experiments (MNIST-sized inputs).

use super::batch_ensemble::Members;
use super::layers::{
    batch_norm2d, dropout, global_avg_pool, BatchNorm, Conv2d, Linear, TORCH_DEFAULT_INIT,
};
use super::{Mode, Network};
use tch::{nn, nn::Module, nn::ModuleT, Tensor};

/// Output channels and strides of the three convolution stages.
const STAGES: [(i64, i64); 3] = [(32, 1), (64, 2), (128, 2)];

/// Three `3x3 conv (no bias) -> BatchNorm -> ReLU` stages with 32, 64 and 128
/// channels and strides 1, 2, 2 (strided convolutions instead of pooling, so
/// any input size >= 1x1 works), global average pooling, optional dropout and a
/// linear classifier. Initialisation is PyTorch's default.
///
/// PyTorch twin (`twins.py::SmallCnn`): attributes `conv1`, `bn1`, `conv2`, `bn2`,
/// `conv3`, `bn3`, `fc`; dropout is `F.dropout` on the pooled features.
/// With BatchEnsemble members the convolutions and `fc` are BatchEnsemble
/// layers (`conv1.r`, `conv1.s`, `fc.bias` `[M, n_classes]`, ...), the
/// BatchNorms shared.
#[derive(Debug)]
pub struct SmallCnn {
    stages: Vec<(Conv2d, BatchNorm)>,
    fc: Linear,
    dropout: f64,
}

impl SmallCnn {
    /// Builds the network under `p` for `channels` input channels.
    pub fn new(p: &nn::Path, channels: i64, n_classes: i64, dropout: f64) -> Self {
        Self::with_members(p, (channels, n_classes), dropout, Members::one())
    }

    /// [`SmallCnn::new`] with layers built as `members` says.
    pub(crate) fn with_members(
        p: &nn::Path,
        (channels, n_classes): (i64, i64),
        dropout: f64,
        members: Members,
    ) -> Self {
        let mut c_in = channels;
        let mut stages = Vec::with_capacity(STAGES.len());
        for (i, &(c_out, stride)) in STAGES.iter().enumerate() {
            let conv = members.conv_no_bias(
                &(p / format!("conv{}", i + 1)),
                (c_in, c_out, 3, stride),
                TORCH_DEFAULT_INIT,
            );
            stages.push((conv, batch_norm2d(p / format!("bn{}", i + 1), c_out)));
            c_in = c_out;
        }
        Self {
            stages,
            fc: members.linear(&(p / "fc"), c_in, n_classes, TORCH_DEFAULT_INIT),
            dropout,
        }
    }
}

impl Network for SmallCnn {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let mut h = xs.shallow_clone();
        for (conv, bn) in &self.stages {
            h = bn
                .forward_t(&conv.forward(&h), mode.batch_statistics())
                .relu();
        }
        dropout(global_avg_pool(&h), self.dropout, mode.dropout_active())
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.fc.forward(features)
    }

    fn feature_width(&self) -> i64 {
        STAGES[STAGES.len() - 1].0
    }
}
