//! The random rank-1 factors of a rank-1 Bayesian neural network
//! (Dusenberry et al. 2020, ICML; [`super::Bayesian::Rank1`]).
//!
//! A BatchEnsemble layer ([`super::batch_ensemble`]) of shared weight `W`
//! gives member `m`'s rows `y = ((x * r) W) * s + b_m`. Here `r` and `s` are
//! samples of member `m`'s posterior, reparameterised (Kingma and Welling
//! 2014):
//!
//! `r = mu_r_m + sigma(rho_r_m) * eps_r`, `s = mu_s_m + sigma(rho_s_m) * eps_s`
//!
//! with `sigma(rho) = softplus(rho) + 1e-7` ([`super::bayesian::posterior_std`],
//! edward2's `softplus` constraint) and `eps ~ N(0, I)` drawn afresh for every example (the paper's
//! Section 3.1 and edward2's `DenseRank1` / `Conv2DRank1`, which sample the
//! factors once per example, `distribution.sample(examples_per_model)`), so
//! example `i` of member `m` sees the weight `W * (s_i r_i^T)`. The noise
//! of a pass is a function of the model's seed and the layer's name
//! ([`rank1_noise`], [`super::noise`]).
//!
//! Variables, under the layer's own name, besides BatchEnsemble's (whose
//! `r` `[M, d_in]` and `s` `[M, d_out]` are the means): `r_rho` and `s_rho`
//! of the same shapes, registered with the model's posterior against the
//! prior `N(1, prior_std^2)`.

use std::sync::Arc;

use tch::nn;
use tch::{Device, Kind, Tensor};

use super::bayesian::{posterior_std, Posterior};
use super::noise::{layer_name, layer_rng, standard_normal};

/// One pass's rank-1 noise for one layer.
#[derive(Debug)]
pub struct Rank1Noise {
    /// `eps_r` `[M, B, d_in]`: member `m`'s example `i`'s input factor noise.
    pub r: Tensor,
    /// `eps_s` `[M, B, d_out]`.
    pub s: Tensor,
}

/// The rank-1 noise of the layer named `layer` (`layer1.0.conv1`) with
/// factors `[members, d_in]` and `[members, d_out]` for `batch` examples per
/// member, drawn from seed `seed`: the layer's generator
/// ([`super::noise`]) draws `eps_r` then `eps_s`, each standard normal in
/// row-major order, as `options`' kind and device.
pub fn rank1_noise(
    seed: u64,
    layer: &str,
    (members, batch): (i64, i64),
    (d_in, d_out): (i64, i64),
    options: (Kind, Device),
) -> Rank1Noise {
    let mut rng = layer_rng(seed, layer);
    let r = standard_normal(&mut rng, &[members, batch, d_in], options);
    let s = standard_normal(&mut rng, &[members, batch, d_out], options);
    Rank1Noise { r, s }
}

/// A layer's rank-1 factor scales and what sampling needs: its name (the
/// noise's stream) and the posterior (the seed).
#[derive(Debug)]
pub(crate) struct Rank1Scales {
    name: String,
    r_rho: Tensor,
    s_rho: Tensor,
    posterior: Arc<Posterior>,
}

impl Rank1Scales {
    /// The scales `r_rho`, `s_rho` of the layer under `p` whose factors'
    /// means are `r` and `s`, registered with `posterior` (prior mean 1).
    pub(crate) fn new(p: &nn::Path, r: &Tensor, s: &Tensor, posterior: &Arc<Posterior>) -> Self {
        let init = posterior.rho_init();
        let r_rho = p.var("r_rho", &r.size(), init);
        let s_rho = p.var("s_rho", &s.size(), init);
        posterior.register(r, &r_rho);
        posterior.register(s, &s_rho);
        Rank1Scales {
            name: layer_name(p),
            r_rho,
            s_rho,
            posterior: Arc::clone(posterior),
        }
    }

    /// This pass's factors `r` `[M, B, d_in]` and `s` `[M, B, d_out]` for
    /// `batch` examples per member, of means `r` `[M, d_in]` and `s`
    /// `[M, d_out]`, as `options`' kind and device.
    pub(crate) fn sample(
        &self,
        (r, s): (&Tensor, &Tensor),
        batch: i64,
        options: (Kind, Device),
    ) -> (Tensor, Tensor) {
        let (members, d_in) = (r.size()[0], r.size()[1]);
        let dims = (d_in, s.size()[1]);
        let noise = rank1_noise(
            self.posterior.seed(),
            &self.name,
            (members, batch),
            dims,
            options,
        );
        let draw = |mu: &Tensor, rho: &Tensor, eps: Tensor| {
            mu.unsqueeze(1) + posterior_std(rho).unsqueeze(1) * eps
        };
        (draw(r, &self.r_rho, noise.r), draw(s, &self.s_rho, noise.s))
    }
}
