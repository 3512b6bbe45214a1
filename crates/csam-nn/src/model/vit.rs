//! Vision transformers as timm defines them (Dosovitskiy et al. 2021).

use super::layers::{drop_path, dropout, linear_zero_bias, Conv2d, Linear, TORCH_DEFAULT_INIT};
use super::{macs, Mode, ModelError, Network};
use tch::nn::{self, Init, Module};
use tch::{Device, Kind, Tensor};

/// timm's weight initialisation of linear layers and the position
/// embedding: normal with standard deviation 0.02 (timm truncates at +-2,
/// a hundred standard deviations away).
const TIMM_INIT: Init = Init::Randn {
    mean: 0.0,
    stdev: 0.02,
};
/// LayerNorm's epsilon in timm's ViTs.
const LAYER_NORM_EPS: f64 = 1e-6;

/// The size of a ViT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VitShape {
    /// The side of a square patch.
    pub patch: i64,
    /// The embedding width.
    pub width: i64,
    /// The number of transformer blocks.
    pub depth: i64,
    /// The attention heads of each block.
    pub heads: i64,
}

/// A vision transformer (Dosovitskiy et al. 2021, "An image is worth 16x16
/// words", ICLR): the image cut into `patch x patch` patches, each embedded
/// linearly (a strided convolution), a class token prepended, a learned
/// position embedding added, `depth` pre-norm blocks (`x + attn(LN(x))`,
/// `x + MLP(LN(x))`, MLP width 4x with exact GELU, LayerNorm epsilon 1e-6),
/// a final LayerNorm, the class token's features (with optional dropout) and
/// a linear classifier. With a stochastic depth rate `r` > 0 (timm's
/// `drop_path_rate`), block `i` of `D` drops each of its two residual
/// branches (attention and MLP) per example with rate `r i / (D - 1)` in
/// training (see [`drop_path_rates`]).
///
/// As timm (`timm.models.vision_transformer.VisionTransformer`, class-token
/// pooling), with its key names: `cls_token`, `pos_embed`,
/// `patch_embed.proj`, `blocks.0.norm1`, `blocks.0.attn.qkv`,
/// `blocks.0.attn.proj`, `blocks.0.norm2`, `blocks.0.mlp.fc1`,
/// `blocks.0.mlp.fc2`, ..., `norm`, `head`; so `vit_small_patch16_224`'s
/// `state_dict()` loads as it is into `vit-s16` on 224x224 images. The position
/// embedding has one entry per patch of the image size the model is built
/// for, so a model takes only that size (timm's `img_size`); rows and
/// columns beyond a whole number of patches are dropped by the patch
/// convolution, as in timm. Initialisation: timm's (normal 0.02 for linear
/// layers and the position embedding, zero biases, class token normal 1e-6,
/// patch convolution PyTorch's default). ViT-S/16 has 22,050,664 parameters on
/// 224x224 images and 1000 classes.
#[derive(Debug)]
pub struct VisionTransformer {
    patch_embed: Conv2d,
    cls_token: Tensor,
    pos_embed: Tensor,
    blocks: Vec<EncoderBlock>,
    norm: nn::LayerNorm,
    head: Linear,
    dropout: f64,
    width: i64,
    /// Patches per column and per row of the image.
    grid: (i64, i64),
}

impl VisionTransformer {
    /// Builds `shape` under `p` for images of `channels x height x width`,
    /// with dropout before the classifier and stochastic depth rate
    /// `drop_path`.
    pub fn new(
        p: &nn::Path,
        shape: VitShape,
        (channels, height, width): (i64, i64, i64),
        n_classes: i64,
        (dropout, drop_path): (f64, f64),
    ) -> Result<Self, ModelError> {
        if height < shape.patch || width < shape.patch {
            return Err(ModelError::InvalidConfig(format!(
                "a ViT with {0}x{0} patches needs images of at least {0}x{0}, the data's are \
                 {height}x{width}",
                shape.patch
            )));
        }
        let grid = (height / shape.patch, width / shape.patch);
        let tokens = 1 + grid.0 * grid.1;
        let conv = nn::ConvConfig {
            stride: shape.patch,
            ws_init: TORCH_DEFAULT_INIT,
            ..Default::default()
        };
        let dim = shape.width;
        let blocks = drop_path_rates(drop_path, shape.depth)
            .into_iter()
            .enumerate()
            .map(|(i, rate)| EncoderBlock::new(&(p / "blocks" / i), dim, shape.heads, rate))
            .collect();
        let norm = nn::LayerNormConfig {
            eps: LAYER_NORM_EPS,
            ..Default::default()
        };
        Ok(Self {
            patch_embed: Conv2d::plain(nn::conv2d(
                p / "patch_embed" / "proj",
                channels,
                dim,
                shape.patch,
                conv,
            )),
            cls_token: p.var(
                "cls_token",
                &[1, 1, dim],
                Init::Randn {
                    mean: 0.0,
                    stdev: 1e-6,
                },
            ),
            pos_embed: p.var("pos_embed", &[1, tokens, dim], TIMM_INIT),
            blocks,
            norm: nn::layer_norm(p / "norm", vec![dim], norm),
            head: timm_linear(p / "head", dim, n_classes),
            dropout,
            width: dim,
            grid,
        })
    }
}

impl Network for VisionTransformer {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let patches = self.patch_embed.forward(xs).flatten(2, -1).transpose(1, 2);
        let batch = patches.size()[0];
        let cls = self.cls_token.expand([batch, 1, self.width], true);
        let tokens = Tensor::cat(&[cls, patches], 1) + &self.pos_embed;
        let tokens = self
            .blocks
            .iter()
            .fold(tokens, |x, block| block.forward(&x, mode));
        let class_token = self.norm.forward(&tokens).select(1, 0);
        dropout(class_token, self.dropout, mode.dropout_active())
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.head.forward(features)
    }

    fn feature_width(&self) -> i64 {
        self.width
    }

    fn classifier_name(&self) -> Option<String> {
        Some("head".to_string())
    }

    /// A position embedding of another square grid (weights trained on
    /// another image size) resampled to this model's grid: the class token's
    /// entry kept, the grid interpolated bicubically with antialiasing, as
    /// timm's `resample_abs_pos_embed` does when it loads such weights.
    fn resample_weight(&self, name: &str, stored: &Tensor, wanted: &[i64]) -> Option<Tensor> {
        let (&[1, tokens, dim], &[1, _, wanted_dim]) = (stored.size().as_slice(), wanted) else {
            return None;
        };
        let side = ((tokens - 1) as f64).sqrt().round() as i64;
        if name != "pos_embed" || dim != wanted_dim || side * side != tokens - 1 {
            return None;
        }
        let (rows, columns) = self.grid;
        let grid = stored
            .narrow(1, 1, tokens - 1)
            .reshape([1, side, side, dim])
            .permute([0, 3, 1, 2]);
        let resampled = grid
            .internal_upsample_bicubic2d_aa([rows, columns], false, None, None)
            .permute([0, 2, 3, 1])
            .reshape([1, rows * columns, dim]);
        Some(Tensor::cat(&[stored.narrow(1, 0, 1), resampled], 1))
    }
}

/// `nn.Linear` initialised as timm's ViT: weight normal 0.02, bias 0.
fn timm_linear(p: nn::Path, d_in: i64, d_out: i64) -> Linear {
    linear_zero_bias(p, d_in, d_out, TIMM_INIT)
}

/// timm's stochastic depth decay rule (`calculate_drop_path_rates`): block
/// `i` of `depth` drops its branches with rate `rate * i / (depth - 1)`,
/// from 0 at the first block to `rate` at the last. Computed as timm does,
/// `torch.linspace(0, rate, depth)` in float32 (PyTorch's default kind), so
/// that each block's rate, and with it the scale `1 / (1 - rate)`, equals
/// timm's to the last bit.
fn drop_path_rates(rate: f64, depth: i64) -> Vec<f64> {
    let rates = Tensor::linspace(0.0, rate, depth, (Kind::Float, Device::Cpu));
    (0..depth).map(|i| rates.double_value(&[i])).collect()
}

/// One pre-norm transformer block.
#[derive(Debug)]
struct EncoderBlock {
    norm1: nn::LayerNorm,
    qkv: Linear,
    proj: Linear,
    norm2: nn::LayerNorm,
    fc1: Linear,
    fc2: Linear,
    heads: i64,
    /// The stochastic depth rate of both residual branches.
    drop_path: f64,
}

impl EncoderBlock {
    fn new(p: &nn::Path, dim: i64, heads: i64, drop_path: f64) -> Self {
        let norm = nn::LayerNormConfig {
            eps: LAYER_NORM_EPS,
            ..Default::default()
        };
        let (attn, mlp) = (p / "attn", p / "mlp");
        Self {
            norm1: nn::layer_norm(p / "norm1", vec![dim], norm),
            qkv: timm_linear(&attn / "qkv", dim, 3 * dim),
            proj: timm_linear(&attn / "proj", dim, dim),
            norm2: nn::layer_norm(p / "norm2", vec![dim], norm),
            fc1: timm_linear(&mlp / "fc1", dim, 4 * dim),
            fc2: timm_linear(&mlp / "fc2", 4 * dim, dim),
            heads,
            drop_path,
        }
    }

    /// `x + drop_path(attn(LN(x)))`, then `x + drop_path(MLP(LN(x)))`, the
    /// branches dropped at random in training (timm's `Block.forward`: the
    /// attention branch's mask is drawn first).
    fn forward(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let perturb = mode.perturb_residuals();
        let attention = self.attention(&self.norm1.forward(xs), mode.fused_attention());
        let x = xs + drop_path(attention, self.drop_path, perturb);
        let mlp = self
            .fc2
            .forward(&self.fc1.forward(&self.norm2.forward(&x)).gelu("none"));
        x + drop_path(mlp, self.drop_path, perturb)
    }

    /// Multi-head self-attention: `softmax(q k^T / sqrt(d)) v` per head;
    /// with `fused`, libtorch's `scaled_dot_product_attention` (as timm's
    /// `fused_attn`), which keeps no `N x N` weights for the backward pass but
    /// cannot be differentiated twice on the CPU.
    fn attention(&self, xs: &Tensor, fused: bool) -> Tensor {
        let size = xs.size();
        let (batch, tokens, dim) = (size[0], size[1], size[2]);
        let head_dim = dim / self.heads;
        let qkv = self
            .qkv
            .forward(xs)
            .reshape([batch, tokens, 3, self.heads, head_dim])
            .permute([2, 0, 3, 1, 4]);
        let (q, k, v) = (qkv.get(0), qkv.get(1), qkv.get(2));
        let attended = if fused {
            Tensor::scaled_dot_product_attention(
                &q,
                &k,
                &v,
                None::<Tensor>,
                0.0,
                false,
                None,
                false,
            )
        } else {
            let scores = q.matmul(&k.transpose(-2, -1)) * (head_dim as f64).powf(-0.5);
            scores.softmax(-1, scores.kind()).matmul(&v)
        };
        // q k^T and the weights times v: B heads N N d_head multiply-adds each.
        macs::add(|| 2 * batch * tokens * tokens * dim);
        let merged = attended.transpose(1, 2).reshape([batch, tokens, dim]);
        self.proj.forward(&merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Training runs the fused kernel, evaluation the explicit product: the
    /// same function (without dropout or stochastic depth), and evaluation
    /// mode's is twice differentiable.
    #[test]
    fn fused_and_explicit_attention_agree_and_evaluation_differentiates_twice() {
        let mut vs = nn::VarStore::new(tch::Device::Cpu);
        let shape = VitShape {
            patch: 4,
            width: 24,
            depth: 2,
            heads: 3,
        };
        let vit = VisionTransformer::new(&vs.root(), shape, (1, 8, 8), 5, (0.0, 0.0)).unwrap();
        vs.double();
        let xs = Tensor::randn([3, 1, 8, 8], (Kind::Double, Device::Cpu));
        let train = vit.classify(&vit.features(&xs, Mode::Train));
        let eval = vit.classify(&vit.features(&xs, Mode::Eval));
        let gap = (&train - &eval).abs().max().double_value(&[]);
        // Float64, width 24, 5 tokens, reductions of <= 96 terms through 2
        // blocks on O(1) activations: K * 2.2e-16 per op, ~1e-13 in all.
        assert!(gap < 1e-12, "fused and explicit attention differ by {gap}");

        let params = vs.trainable_variables();
        let loss = eval.square().sum(Kind::Double);
        let grads = Tensor::run_backward(&[&loss], &params, true, true);
        let dot = grads
            .iter()
            .map(|g| g.sum(Kind::Double))
            .fold(Tensor::from(0.0f64), |a, b| a + b);
        let second = Tensor::run_backward(&[&dot], &params, false, false);
        assert!(second
            .iter()
            .any(|h| h.abs().sum(Kind::Double).double_value(&[]) > 0.0));
    }

    #[test]
    fn vit_s16_has_timms_parameter_count() {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        let shape = VitShape {
            patch: 16,
            width: 384,
            depth: 12,
            heads: 6,
        };
        VisionTransformer::new(&vs.root(), shape, (3, 224, 224), 1000, (0.0, 0.0)).unwrap();
        let count: usize = vs.trainable_variables().iter().map(Tensor::numel).sum();
        assert_eq!(count, 22_050_664);
    }

    #[test]
    fn drop_path_rates_rise_linearly_from_zero() {
        let rates = drop_path_rates(0.1, 12);
        assert_eq!(rates.len(), 12);
        assert_eq!((rates[0], rates[11]), (0.0, 0.1f32 as f64));
        // A float32 linspace: 0.1f32, step 0.1/11 and 5 * step each round by
        // <= 0.5 f32 ulp, at most ~5e-9 at 0.045; a wrong rate is off by >= 4e-3.
        assert!((rates[5] - 0.05 / 1.1).abs() < 1e-8);
        assert!(drop_path_rates(0.0, 12).iter().all(|&r| r == 0.0));
    }
}
