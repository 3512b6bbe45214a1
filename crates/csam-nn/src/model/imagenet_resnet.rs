//! ResNet-18, -34 and -50 as torchvision defines them, with the ImageNet
//! stem or the CIFAR stem.

use super::layers::{
    batch_norm2d, conv_no_bias, dropout, global_avg_pool, linear, BatchNorm, Conv2d, ConvBnChain,
    Linear, HE_NORMAL_FAN_OUT_INIT, TORCH_DEFAULT_INIT,
};
use super::{Mode, ModelError, Network};
use tch::nn::{self, Module, ModuleT};
use tch::Tensor;

/// The first layers, before the four stages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stem {
    /// ImageNet's: 7x7 convolution with stride 2, BatchNorm, ReLU, 3x3 max
    /// pooling with stride 2 (a 224x224 image reaches the stages at 56x56).
    ImageNet,
    /// The CIFAR variant (He et al. 2016's CIFAR setting, used for CIFAR and
    /// Tiny-ImageNet by most SAM papers): 3x3 convolution with stride 1, no
    /// pooling.
    Cifar,
}

/// The blocks of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Blocks {
    /// Two 3x3 convolutions (ResNet-18, -34); expansion 1.
    Basic,
    /// 1x1, 3x3 (carrying the stride), 1x1 convolutions (ResNet-50, torchvision's
    /// "v1.5"); expansion 4.
    Bottleneck,
}

impl Blocks {
    fn expansion(self) -> i64 {
        match self {
            Blocks::Basic => 1,
            Blocks::Bottleneck => 4,
        }
    }
}

/// A ResNet of four stages of `counts` blocks (64, 128, 256, 512 channels
/// times the blocks' expansion; stages 2-4 start with stride 2), global
/// average pooling, optional dropout on the pooled features, and a linear
/// classifier: `resnet18` is `[2, 2, 2, 2]` basic blocks, `resnet34`
/// `[3, 4, 6, 3]` basic, `resnet50` `[3, 4, 6, 3]` bottleneck (He et al. 2016).
///
/// As torchvision (`torchvision.models.resnet`), with its key names
/// (`conv1`, `bn1`, `layer1.0.conv1`, `layer1.0.bn1`, ...,
/// `layer2.0.downsample.0` (1x1 convolution) and `.1` (BatchNorm), `fc`),
/// layouts and initialisation (convolutions He-normal fan-out, BatchNorm 1 and
/// 0, the classifier PyTorch's default), so `state_dict()`s of
/// `torchvision.models.resnet50()` load as they are. The projection shortcut
/// is used where a block changes shape. With the CIFAR stem the keys are the
/// same, `conv1` being 3x3. Parameters: ResNet-18 11,689,512, ResNet-34
/// 21,797,672, ResNet-50 25,557,032 on 1000 classes.
#[derive(Debug)]
pub struct ImageNetResNet {
    conv1: Conv2d,
    bn1: BatchNorm,
    stem: Stem,
    blocks: Vec<Block>,
    fc: Linear,
    dropout: f64,
    width: i64,
}

/// The shape of a torchvision ResNet.
#[derive(Debug, Clone, Copy)]
pub struct ResNetLayout {
    /// The blocks of every stage.
    pub blocks: Blocks,
    /// Blocks per stage.
    pub counts: [i64; 4],
    /// The first layers.
    pub stem: Stem,
}

impl ImageNetResNet {
    /// Builds `layout` under `p` for `channels` input channels.
    pub fn new(
        p: &nn::Path,
        layout: ResNetLayout,
        channels: i64,
        n_classes: i64,
        dropout: f64,
    ) -> Result<Self, ModelError> {
        let (kernel, stride) = match layout.stem {
            Stem::ImageNet => (7, 2),
            Stem::Cifar => (3, 1),
        };
        if layout.counts.contains(&0) {
            return Err(ModelError::InvalidConfig(
                "every stage of a ResNet needs at least one block".into(),
            ));
        }
        let expansion = layout.blocks.expansion();
        let mut c_in = 64;
        let mut blocks = Vec::new();
        for (stage, (&count, width)) in layout.counts.iter().zip([64, 128, 256, 512]).enumerate() {
            let path = p / format!("layer{}", stage + 1);
            for i in 0..count {
                let stride = if stage > 0 && i == 0 { 2 } else { 1 };
                blocks.push(Block::new(&path / i, layout.blocks, (c_in, width), stride));
                c_in = width * expansion;
            }
        }
        Ok(Self {
            conv1: conv_no_bias(
                p / "conv1",
                channels,
                64,
                kernel,
                stride,
                HE_NORMAL_FAN_OUT_INIT,
            ),
            bn1: batch_norm2d(p / "bn1", 64),
            stem: layout.stem,
            blocks,
            fc: linear(p / "fc", c_in, n_classes, TORCH_DEFAULT_INIT),
            dropout,
            width: c_in,
        })
    }
}

impl Network for ImageNetResNet {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let train_bn = mode.batch_statistics();
        let mut h = self.bn1.forward_t(&self.conv1.forward(xs), train_bn).relu();
        if self.stem == Stem::ImageNet {
            h = h.max_pool2d([3, 3], [2, 2], [1, 1], [1, 1], false);
        }
        let h = self
            .blocks
            .iter()
            .fold(h, |h, block| block.forward(&h, train_bn));
        dropout(global_avg_pool(&h), self.dropout, mode.dropout_active())
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.fc.forward(features)
    }

    fn feature_width(&self) -> i64 {
        self.width
    }
}

/// A basic or bottleneck block with its shortcut.
#[derive(Debug)]
struct Block {
    branch: ConvBnChain,
    /// The projection `(1x1 conv, bn)` where the block changes shape.
    downsample: Option<(Conv2d, BatchNorm)>,
}

impl Block {
    fn new(p: nn::Path, blocks: Blocks, (c_in, width): (i64, i64), stride: i64) -> Self {
        let c_out = width * blocks.expansion();
        // (input channels, output channels, kernel, stride) of each convolution.
        let shapes = match blocks {
            Blocks::Basic => vec![(c_in, width, 3, stride), (width, width, 3, 1)],
            Blocks::Bottleneck => vec![
                (c_in, width, 1, 1),
                (width, width, 3, stride),
                (width, c_out, 1, 1),
            ],
        };
        let downsample = (stride != 1 || c_in != c_out).then(|| {
            let path = &p / "downsample";
            (
                conv_no_bias(&path / 0, c_in, c_out, 1, stride, HE_NORMAL_FAN_OUT_INIT),
                batch_norm2d(&path / 1, c_out),
            )
        });
        Self {
            branch: ConvBnChain::new(&p, &shapes, 1, HE_NORMAL_FAN_OUT_INIT),
            downsample,
        }
    }

    fn forward(&self, xs: &Tensor, train_bn: bool) -> Tensor {
        let shortcut = match &self.downsample {
            Some((conv, bn)) => bn.forward_t(&conv.forward(xs), train_bn),
            None => xs.shallow_clone(),
        };
        (self.branch.forward(xs, train_bn) + shortcut).relu()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters(blocks: Blocks, counts: [i64; 4]) -> i64 {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let layout = ResNetLayout {
            blocks,
            counts,
            stem: Stem::ImageNet,
        };
        ImageNetResNet::new(&vs.root(), layout, 3, 1000, 0.0).unwrap();
        vs.trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    #[test]
    fn parameter_counts_are_torchvisions() {
        assert_eq!(parameters(Blocks::Basic, [2, 2, 2, 2]), 11_689_512);
        assert_eq!(parameters(Blocks::Basic, [3, 4, 6, 3]), 21_797_672);
        assert_eq!(parameters(Blocks::Bottleneck, [3, 4, 6, 3]), 25_557_032);
    }
}
