//! PyramidNet for CIFAR-sized images (Han, Kim and Kim 2017): residual units
//! whose width grows a little at every block.

use super::layers::{
    batch_norm2d, conv_no_bias, dropout, global_avg_pool, linear_zero_bias, BatchNorm, Conv2d,
    ConvBnChain, Linear, HE_NORMAL_FAN_OUT_INIT, TORCH_DEFAULT_INIT,
};
use super::{Mode, ModelError, Network};
use tch::nn::{self, Module, ModuleT};
use tch::Tensor;

/// The residual unit of a PyramidNet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyramidUnit {
    /// `BN-conv3x3-BN-ReLU-conv3x3-BN`; output width = the unit's width.
    Basic,
    /// `BN-conv1x1-BN-ReLU-conv3x3-BN-ReLU-conv1x1-BN`; output width = 4 times
    /// the unit's width.
    Bottleneck,
}

impl PyramidUnit {
    fn expansion(self) -> i64 {
        match self {
            PyramidUnit::Basic => 1,
            PyramidUnit::Bottleneck => 4,
        }
    }

    /// Units per group of a network of `depth` layers (2 or 3 convolutions
    /// per unit, three groups, the stem and the classifier).
    fn per_group(self, depth: i64) -> Option<i64> {
        let layers = match self {
            PyramidUnit::Basic => 6,
            PyramidUnit::Bottleneck => 9,
        };
        (depth > 2 && (depth - 2) % layers == 0).then_some((depth - 2) / layers)
    }
}

/// PyramidNet-`depth` with widening factor `alpha` (Han, Kim and Kim 2017,
/// "Deep pyramidal residual networks", CVPR), CIFAR layout: a 3x3
/// convolution to 16 channels and BatchNorm, three groups of `n` units
/// (`n = (depth - 2) / 6` basic, `(depth - 2) / 9` bottleneck units; the
/// first unit of groups 2 and 3 has stride 2), the unit widths growing by
/// `alpha / 3n` per unit from 16 (rounded), BatchNorm and ReLU, global
/// average pooling, optional dropout on the pooled features and a linear
/// classifier.
///
/// The shortcut carries no parameters: the identity, 2x2 average pooling
/// (ceil mode) where the unit has stride 2, and zero channels appended where
/// the unit widens. No convolution has a bias; convolutions take He-normal
/// fan-out weights, BatchNorm weight 1 and bias 0, the classifier a zero
/// bias. On 10 classes PyramidNet-110 has 1.77 M parameters with alpha 48
/// and 28.5 M with alpha 270, PyramidNet-272 (bottleneck, alpha 200) 26.2 M
/// (the paper's Table 4 rounds them to 1.7, 28.3 and 26.0 M).
///
/// As the authors' code (dyhan0920/PyramidNet-PyTorch, `PyramidNet.py`),
/// with its key names: `conv1`, `bn1`, `layer1.0.bn1`, `layer1.0.conv1`,
/// `layer1.0.bn2`, `layer1.0.conv2`, `layer1.0.bn3` (and `conv3`, `bn4` in
/// bottleneck units), ..., `bn_final`, `fc` (PyTorch twin
/// `twins.py::PyramidNet`). Their `AvgPool2d(8)` assumes 32x32 inputs; csam
/// pools globally.
///
/// ShakeDrop (Yamada, Iwamura, Akiba and Kise 2019, "ShakeDrop
/// regularization for deep residual learning", IEEE Access 7) perturbs
/// the residual branch of unit `l` of `L` with probability
/// `p_l = (l / L) p_L` (the paper's linear decay rule; it trains with
/// `p_L = 0.5`); see [`shake_drop`]. `p_L = 0` is the plain PyramidNet.
#[derive(Debug)]
pub struct PyramidNet {
    conv1: Conv2d,
    bn1: BatchNorm,
    units: Vec<Unit>,
    bn_final: BatchNorm,
    fc: Linear,
    dropout: f64,
    width: i64,
}

impl PyramidNet {
    /// Builds PyramidNet-`depth` of widening `alpha` with `unit`s under `p`
    /// for `channels` input channels, with dropout before the classifier and
    /// ShakeDrop's last-unit probability `shakedrop` (`p_L`).
    pub fn new(
        p: &nn::Path,
        (depth, alpha, unit): (i64, f64, PyramidUnit),
        channels: i64,
        n_classes: i64,
        (dropout, shakedrop): (f64, f64),
    ) -> Result<Self, ModelError> {
        let n = unit.per_group(depth).ok_or_else(|| {
            ModelError::InvalidConfig(format!(
                "a PyramidNet of {unit:?} units needs depth 6n + 2 (basic) or 9n + 2 \
                 (bottleneck), got {depth}"
            ))
        })?;
        let step = alpha / (3 * n) as f64;
        let n_units = (3 * n) as f64;
        let mut width = 16.0;
        let mut c_in = 16;
        let mut units = Vec::new();
        for group in 0..3 {
            let path = p / format!("layer{}", group + 1);
            for i in 0..n {
                width += step;
                let stride = if group > 0 && i == 0 { 2 } else { 1 };
                let planes = width.round() as i64;
                // Unit l = units.len() + 1 of 3n perturbs with p_l = (l / 3n) p_L.
                let p_l = (units.len() + 1) as f64 / n_units * shakedrop;
                units.push(Unit::new(&path / i, unit, (c_in, planes), (stride, p_l)));
                c_in = planes * unit.expansion();
            }
        }
        Ok(Self {
            conv1: conv_no_bias(p / "conv1", channels, 16, 3, 1, HE_NORMAL_FAN_OUT_INIT),
            bn1: batch_norm2d(p / "bn1", 16),
            units,
            bn_final: batch_norm2d(p / "bn_final", c_in),
            fc: linear_zero_bias(p / "fc", c_in, n_classes, TORCH_DEFAULT_INIT),
            dropout,
            width: c_in,
        })
    }
}

impl Network for PyramidNet {
    fn features(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let train_bn = mode.batch_statistics();
        let h = self.bn1.forward_t(&self.conv1.forward(xs), train_bn);
        let h = self.units.iter().fold(h, |h, unit| unit.forward(&h, mode));
        let h = self.bn_final.forward_t(&h, train_bn).relu();
        dropout(global_avg_pool(&h), self.dropout, mode.dropout_active())
    }

    fn classify(&self, features: &Tensor) -> Tensor {
        self.fc.forward(features)
    }

    fn feature_width(&self) -> i64 {
        self.width
    }
}

/// One residual unit: BatchNorm, then convolutions each followed by
/// BatchNorm (ReLU between them, none after the last), ShakeDrop on that
/// branch.
#[derive(Debug)]
struct Unit {
    bn_in: BatchNorm,
    branch: ConvBnChain,
    stride: i64,
    /// ShakeDrop's probability `p_l` of perturbing the branch.
    shakedrop: f64,
}

impl Unit {
    fn new(
        p: nn::Path,
        unit: PyramidUnit,
        (c_in, planes): (i64, i64),
        (stride, shakedrop): (i64, f64),
    ) -> Self {
        // (input channels, output channels, kernel, stride) of each convolution.
        let shapes = match unit {
            PyramidUnit::Basic => vec![(c_in, planes, 3, stride), (planes, planes, 3, 1)],
            PyramidUnit::Bottleneck => vec![
                (c_in, planes, 1, 1),
                (planes, planes, 3, stride),
                (planes, planes * 4, 1, 1),
            ],
        };
        Self {
            bn_in: batch_norm2d(&p / "bn1", c_in),
            branch: ConvBnChain::new(&p, &shapes, 2, HE_NORMAL_FAN_OUT_INIT),
            stride,
            shakedrop,
        }
    }

    fn forward(&self, xs: &Tensor, mode: Mode) -> Tensor {
        let train_bn = mode.batch_statistics();
        let h = self
            .branch
            .forward(&self.bn_in.forward_t(xs, train_bn), train_bn);
        let h = shake_drop(h, self.shakedrop, mode.perturb_residuals());
        let shortcut = match self.stride {
            1 => xs.shallow_clone(),
            s => xs.avg_pool2d([2, 2], [s, s], [0, 0], true, true, None::<i64>),
        };
        let extra = h.size()[1] - shortcut.size()[1];
        h + shortcut.constant_pad_nd([0, 0, 0, 0, 0, extra])
    }
}

/// ShakeDrop of a residual branch `h` `[B, C, H, W]` perturbed with
/// probability `p` (Yamada et al. 2019, eq. 7 and 8). In training
/// (`perturb`) the forward pass gives `G(alpha) h` and the backward pass
/// `G(beta) dL/dy`, with the gate `G(m) = b + m - b m` (written `b + (1 - b)
/// m`, the same number and exactly 1 where `b = 1`), `b ~ Bernoulli(1 - p)`,
/// `alpha ~ U[-1, 1]`, `beta ~ U[0, 1]`: a branch is left alone with
/// probability `1 - p` and otherwise scaled by `alpha` forward, `beta`
/// backward. Otherwise the branch is scaled by its expectation `1 - p`. The
/// identity, drawing no random number, when `p = 0`.
///
/// Granularity as the widely used PyTorch implementation
/// (owruby/shake-drop_pytorch, `models/shakedrop.py`, which
/// kakaobrain/fast-autoaugment copies): one `b` per mini-batch, one `alpha`
/// and one `beta` per example. The authors' Torch code (imenurok/ShakeDrop,
/// `ShakeDrop.lua`) also draws one `b` per batch, but `alpha` and `beta` per
/// element ("pixel level"). Unlike both, which draw `alpha` only where `b =
/// 0` and `beta` in the backward pass, all three are drawn here, in that
/// order, in the forward pass: the same distribution without reading `b`
/// back from the device each unit.
fn shake_drop(h: Tensor, p: f64, perturb: bool) -> Tensor {
    if p == 0.0 {
        return h;
    }
    if !perturb {
        return h * (1.0 - p);
    }
    let options = (h.kind(), h.device());
    let per_example = [h.size()[0], 1, 1, 1];
    let b = Tensor::empty([1, 1, 1, 1], options).bernoulli_float_(1.0 - p);
    let alpha = Tensor::empty(per_example, options).uniform_(-1.0, 1.0);
    let beta = Tensor::empty(per_example, options).uniform_(0.0, 1.0);
    let gate = |m: Tensor| &b + (1.0 - &b) * m;
    let (forward, backward) = (gate(alpha), gate(beta));
    // tch has no custom autograd functions: `G(beta) h` carries the
    // gradient (d/dh = G(beta)), and the detached `(G(alpha) - G(beta)) h`,
    // which autograd sees as a constant, turns the value into `G(alpha) h`.
    // The gates hold no gradient, so detaching `h` is detaching the product
    // (`G(beta) h + ((G(alpha) - G(beta)) h).detach()`) without recording
    // the product. The differentiable part is linear in `h`, so double
    // backward (Hessian-vector products) goes through it like any product.
    &backward * &h + (forward - &backward) * h.detach()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parameters(depth: i64, alpha: f64, unit: PyramidUnit) -> i64 {
        let vs = nn::VarStore::new(tch::Device::Cpu);
        PyramidNet::new(&vs.root(), (depth, alpha, unit), 3, 10, (0.0, 0.0)).unwrap();
        vs.trainable_variables()
            .iter()
            .map(Tensor::numel)
            .sum::<usize>() as i64
    }

    #[test]
    fn parameter_counts_are_near_the_papers() {
        // Han et al. 2017, Table 4: 1.7 M and 28.3 M (basic units, alpha 48 and 270), 26.0 M
        // (bottleneck, depth 272, alpha 200). The authors' PyTorch code builds 1,772,706,
        // 28,485,477 and 26,210,842 (its BatchNorm layers), which the twin test matches
        // tensor by tensor.
        for (depth, alpha, unit, paper) in [
            (110, 48.0, PyramidUnit::Basic, 1.7e6),
            (110, 270.0, PyramidUnit::Basic, 28.3e6),
            (272, 200.0, PyramidUnit::Bottleneck, 26.0e6),
        ] {
            let count = parameters(depth, alpha, unit) as f64;
            assert!(
                (count / paper - 1.0).abs() < 0.05,
                "{depth} {alpha}: {count}"
            );
        }
    }
}
