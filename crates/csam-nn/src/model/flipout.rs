//! Mean-field Gaussian convolutions and linear layers sampled with Flipout
//! (Wen, Vicol, Ba, Tran and Grosse 2018, ICLR).
//!
//! A layer of weight `W ~ N(mu, sigma^2)`, `sigma = softplus(rho) + 1e-7`
//! ([`super::bayesian::posterior_std`]), samples
//! one perturbation `dW = sigma * eps`, `eps ~ N(0, I)`, per pass and
//! decorrelates it across the batch with random signs: for example `i`,
//!
//! `y_i = x_i W_mu + ((x_i * s_i) dW) * r_i`
//!
//! with `s_i` one sign per input feature (channel) and `r_i` one per output
//! feature (channel), each `+-1` with probability 1/2 (the paper's eq. 4,
//! TensorFlow Probability's `DenseFlipout` and `Convolution2DFlipout`, whose
//! signs of a convolution are per channel, shared by the spatial
//! positions). Each example thus sees the weights `W_mu + dW * (r_i s_i^T)`,
//! a sample of `q(W)` (the perturbation is symmetric).
//!
//! The noise of a pass is a function of the model's current seed and the
//! layer's name ([`flipout_noise`], [`super::noise`]), so passes with one
//! seed see one sampled network, and a resumed run draws what the
//! interrupted one drew.
//!
//! Variables, under the layer's own name (`fc`, `layer1.0.conv1`, `1`):
//! `weight`, the mean `mu` (initialised as the plain layer's weight), and
//! `weight_rho`, `rho` of the same shape; a bias where the plain layer has
//! one, deterministic (TFP's default).

use std::sync::Arc;

use rand::Rng;
use tch::nn;
use tch::{Device, Kind, Tensor};

use super::bayesian::{posterior_std, Posterior};
use super::noise::{layer_name, layer_rng, standard_normal};

/// One pass's Flipout noise for one layer.
#[derive(Debug)]
pub struct FlipoutNoise {
    /// `eps ~ N(0, I)`, the weight's shape.
    pub eps: Tensor,
    /// The input signs `s` `[B, d_in]` (`d_in` the weight's second
    /// dimension: input features or channels).
    pub input_signs: Tensor,
    /// The output signs `r` `[B, d_out]` (the weight's first dimension).
    pub output_signs: Tensor,
}

/// The Flipout noise of the layer named `layer` (its variables' path,
/// `layer1.0.conv1`) of weight shape `weight` for a batch of `batch`
/// examples, drawn from seed `seed`: the layer's generator
/// ([`super::noise`]) draws `eps` (the weight's elements in row-major order,
/// standard normal), then `s` and `r`
/// (row-major, `+1` for a `true` bit, `-1` otherwise); as `options`' kind
/// and device.
pub fn flipout_noise(
    seed: u64,
    layer: &str,
    weight: &[i64],
    batch: i64,
    options: (Kind, Device),
) -> FlipoutNoise {
    let mut rng = layer_rng(seed, layer);
    let eps = standard_normal(&mut rng, weight, options);
    let mut signs = |width: i64| -> Tensor {
        let values: Vec<f64> = (0..(batch * width) as usize)
            .map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 })
            .collect();
        Tensor::from_slice(&values)
            .reshape([batch, width])
            .to_kind(options.0)
            .to_device(options.1)
    };
    let input_signs = signs(weight[1]);
    let output_signs = signs(weight[0]);
    FlipoutNoise {
        eps,
        input_signs,
        output_signs,
    }
}

/// A layer's variational scale and what its perturbation needs: its name
/// (the noise's stream), the posterior (the seed) and, for a convolution,
/// its stride and padding.
#[derive(Debug)]
pub(crate) struct Flipout {
    name: String,
    rho: Tensor,
    posterior: Arc<Posterior>,
    /// `(stride, padding)` of a convolution; `None` for a linear layer.
    conv: Option<(i64, i64)>,
}

impl Flipout {
    /// The scale `weight_rho` of the layer under `p` whose mean is `mu`,
    /// registered with `posterior` (its prior and where `rho` starts).
    pub(crate) fn new(
        p: &nn::Path,
        mu: &Tensor,
        posterior: &Arc<Posterior>,
        conv: Option<(i64, i64)>,
    ) -> Flipout {
        let rho = p.var("weight_rho", &mu.size(), posterior.rho_init());
        posterior.register(mu, &rho);
        Flipout {
            name: layer_name(p),
            rho,
            posterior: Arc::clone(posterior),
            conv,
        }
    }

    /// The perturbation `((x * s) dW) * r` of `xs` `[B, d_in, ...]` for the
    /// layer of mean `mu`, this pass's noise.
    pub(crate) fn perturbation(&self, xs: &Tensor, mu: &Tensor) -> Tensor {
        let batch = xs.size()[0];
        let noise = flipout_noise(
            self.posterior.seed(),
            &self.name,
            &mu.size(),
            batch,
            (xs.kind(), xs.device()),
        );
        let dw = posterior_std(&self.rho) * noise.eps;
        match self.conv {
            None => (xs * noise.input_signs).matmul(&dw.tr()) * noise.output_signs,
            Some((stride, padding)) => {
                let channels = |signs: Tensor| signs.unsqueeze(-1).unsqueeze(-1);
                let flipped = xs * channels(noise.input_signs);
                let out = flipped.conv2d(&dw, None::<Tensor>, [stride], [padding], [1], 1);
                out * channels(noise.output_signs)
            }
        }
    }
}
