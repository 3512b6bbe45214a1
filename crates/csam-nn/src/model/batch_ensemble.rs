//! BatchEnsemble layers (Wen, Tran and Ba 2020, ICLR): a shared layer and,
//! per member, rank-1 fast weights and a bias.
//!
//! A network built with [`Members`] of `M` members reads batches stacked
//! member after member (`[M B, ...]`, see [`super::ensemble`]); each of its
//! convolutions and linear layers computes, for member `m`'s rows,
//!
//! `y_m = ((x * r_m) W) * s_m + b_m`
//!
//! with `W` the shared weight (`nn.Linear` / `nn.Conv2d` without bias), `r_m`
//! one factor per input feature or channel, `s_m` one per output feature or
//! channel (broadcast over the spatial positions) and `b_m` the member's bias
//! where the plain layer has one. This is the layer of weight
//! `W * (s_m r_m^T)` (elementwise) for member `m`: the paper's equation (2),
//! edward2's `DenseBatchEnsemble` and `Conv2DBatchEnsemble`.
//!
//! Variables, under the layer's own name (`fc`, `layer1.0.conv1`, `1`):
//! `weight` as the plain layer's, `r` `[M, d_in]`, `s` `[M, d_out]` and,
//! where the plain layer has a bias, `bias` `[M, d_out]`. They are ordinary
//! variables of the `VarStore`: trained, saved in checkpoints and loaded by
//! `--init` as the others.
//!
//! In a rank-1 Bayesian network ([`super::Bayesian::Rank1`]) `r` and `s` are
//! the means of random factors, sampled per example ([`super::rank1`]).

use std::sync::Arc;

use super::bayesian::Posterior;
use super::ensemble::Ensemble;
use super::flipout::Flipout;
use super::layers::{self, Conv2d, Linear};
use super::rank1::Rank1Scales;
use tch::nn::{self, Init};
use tch::Tensor;

/// One layer's per-member fast weights `r` `[M, d_in]`, `s` `[M, d_out]` and
/// bias `b` `[M, d_out]`; with scales, `r` and `s` are the means of a
/// rank-1 posterior.
#[derive(Debug)]
pub(crate) struct FastWeights {
    r: Tensor,
    s: Tensor,
    bias: Option<Tensor>,
    scales: Option<Rank1Scales>,
}

impl FastWeights {
    /// The fast weights `r` `[size, d_in]` and `s` `[size, d_out]` of the
    /// layer under `p`, drawn as `init` says ([`fast_weight`]), with `bias`,
    /// and with scales registered with `posterior` when there is one.
    fn new(
        p: &nn::Path,
        (size, d_in, d_out): (i64, i64, i64),
        init: f64,
        bias: Option<Tensor>,
        posterior: Option<&Arc<Posterior>>,
    ) -> Self {
        let r = fast_weight(p, "r", [size, d_in], init);
        let s = fast_weight(p, "s", [size, d_out], init);
        let scales = posterior.map(|posterior| Rank1Scales::new(p, &r, &s, posterior));
        FastWeights { r, s, bias, scales }
    }

    /// `y_m = shared(x_m * r_m) * s_m + b_m` for `xs` `[M B, d_in, ...]`,
    /// member `m`'s rows `m B .. (m + 1) B`; with scales, `r_m` and `s_m`
    /// are this pass's samples, one per row.
    pub(crate) fn forward(&self, xs: &Tensor, shared: impl FnOnce(&Tensor) -> Tensor) -> Tensor {
        let (r, s) = match &self.scales {
            None => (self.r.shallow_clone(), self.s.shallow_clone()),
            Some(scales) => {
                let batch = xs.size()[0] / self.r.size()[0];
                scales.sample((&self.r, &self.s), batch, (xs.kind(), xs.device()))
            }
        };
        let inputs = per_member(xs, &r);
        let outputs = per_member(&shared(&inputs), &s);
        match &self.bias {
            None => outputs,
            Some(bias) => {
                let shift = per_member_shift(&outputs, bias);
                outputs + shift
            }
        }
    }
}

/// `xs` `[M B, d, ...]` with member `m`'s rows multiplied by `factors[m]`
/// `[d]` (or row `i` of them by `factors[m, i]`, for factors `[M, B, d]`)
/// along the second dimension.
fn per_member(xs: &Tensor, factors: &Tensor) -> Tensor {
    let shape = xs.size();
    let m = factors.size()[0];
    let mut split = vec![m, shape[0] / m];
    split.extend_from_slice(&shape[1..]);
    (xs.reshape(split.as_slice()) * factors.reshape(broadcast_shape(factors, xs.dim())))
        .reshape(shape.as_slice())
}

/// Member `m`'s bias `[d]` for each of its rows of `ys` `[M B, d, ...]`:
/// `[M, 1, d, 1, ..]` broadcast against `ys` split by member, as `ys`.
fn per_member_shift(ys: &Tensor, bias: &Tensor) -> Tensor {
    let shape = ys.size();
    let m = bias.size()[0];
    let mut split = vec![m, shape[0] / m];
    split.extend_from_slice(&shape[1..]);
    bias.reshape(broadcast_shape(bias, ys.dim()))
        .expand(split.as_slice(), false)
        .reshape(shape.as_slice())
}

/// `[M, 1, d, 1, ..]` for per-member values `[M, d]` (`[M, B, d, 1, ..]`
/// for per-row values `[M, B, d]`) against a batch of `dim` dimensions
/// `[M B, d, ..]`.
fn broadcast_shape(values: &Tensor, dim: usize) -> Vec<i64> {
    let mut shape = values.size();
    if shape.len() == 2 {
        shape.insert(1, 1);
    }
    shape.resize(dim + 1, 1);
    shape
}

/// How a network's convolutions and linear layers are built: plain, as
/// BatchEnsemble layers of `size` members whose fast weights start as
/// `random_sign_init` says ([`Ensemble::BatchEnsemble`]), as mean-field
/// Gaussian layers of a posterior ([`super::flipout`]), or, members with a
/// posterior, as BatchEnsemble layers whose fast weights are random
/// ([`super::rank1`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Members<'a>(Option<(i64, f64)>, Option<&'a Arc<Posterior>>);

impl<'a> Members<'a> {
    /// Plain layers.
    pub(crate) fn one() -> Self {
        Members(None, None)
    }

    /// The layers `ensemble` asks for (MIMO's are plain).
    pub(crate) fn of(ensemble: &Ensemble) -> Self {
        match *ensemble {
            Ensemble::Single | Ensemble::Mimo { .. } => Members(None, None),
            Ensemble::BatchEnsemble {
                size,
                random_sign_init,
            } => Members(Some((size, random_sign_init)), None),
        }
    }

    /// The same layers as Gaussian ones of `posterior`, when there is one:
    /// over the weights of one network, over the fast weights of members
    /// (the model refuses every other pairing,
    /// [`super::Bayesian::ensemble_conflict`]).
    pub(crate) fn with_posterior(self, posterior: Option<&'a Arc<Posterior>>) -> Self {
        Members(self.0, posterior)
    }

    /// A bias-free convolution under `p` as [`layers::conv_no_bias`],
    /// with fast weights `r` `[M, c_in]` and `s` `[M, c_out]` when this
    /// builds members (random ones with a posterior), its weight the mean of
    /// a Gaussian one with a posterior alone.
    pub(crate) fn conv_no_bias(
        &self,
        p: &nn::Path,
        (c_in, c_out, kernel, stride): (i64, i64, i64, i64),
        init: Init,
    ) -> Conv2d {
        let conv = layers::conv_no_bias(p, c_in, c_out, kernel, stride, init);
        match (self.0, self.1) {
            (None, None) => conv,
            (None, Some(posterior)) => {
                let flipout = Flipout::new(p, conv.weight(), posterior, Some((stride, kernel / 2)));
                conv.with_flipout(flipout)
            }
            (Some((size, fast_init)), posterior) => conv.with_fast_weights(FastWeights::new(
                p,
                (size, c_in, c_out),
                fast_init,
                None,
                posterior,
            )),
        }
    }

    /// A linear layer under `p` as [`layers::linear`] (PyTorch's default
    /// bias, uniform in +-1/sqrt(d_in)); with members, its weight is shared,
    /// its bias is one per member, `bias` `[M, d_out]`, each drawn as the
    /// plain layer's, and it has fast weights `r` `[M, d_in]` and `s`
    /// `[M, d_out]` (random ones with a posterior); with a posterior alone,
    /// its weight is the mean of a Gaussian one.
    pub(crate) fn linear(&self, p: &nn::Path, d_in: i64, d_out: i64, ws_init: Init) -> Linear {
        let Some((size, fast_init)) = self.0 else {
            let linear = layers::linear(p, d_in, d_out, ws_init);
            let Some(posterior) = self.1 else {
                return linear;
            };
            let flipout = Flipout::new(p, linear.weight(), posterior, None);
            return linear.with_flipout(flipout);
        };
        let config = nn::LinearConfig {
            ws_init,
            bs_init: None,
            bias: false,
        };
        let shared = Linear::plain(nn::linear(p, d_in, d_out, config));
        let bound = 1.0 / (d_in as f64).sqrt();
        let bias = p.var(
            "bias",
            &[size, d_out],
            Init::Uniform {
                lo: -bound,
                up: bound,
            },
        );
        let fast = FastWeights::new(p, (size, d_in, d_out), fast_init, Some(bias), self.1);
        shared.with_fast_weights(fast)
    }
}

/// A fast-weight variable `name` of `shape` under `p`, drawn as
/// uncertainty-baselines' `make_sign_initializer(init)`: random signs, `+1`
/// with probability `init`, when `init > 0`; `N(1, init^2)` otherwise.
fn fast_weight(p: &nn::Path, name: &str, shape: [i64; 2], init: f64) -> Tensor {
    if init <= 0.0 {
        return p.var(
            name,
            &shape,
            Init::Randn {
                mean: 1.0,
                stdev: -init,
            },
        );
    }
    let signs = tch::no_grad(|| {
        Tensor::empty(shape, (p.kind(), p.device())).bernoulli_float_(init) * 2.0 - 1.0
    });
    p.var_copy(name, &signs)
}
