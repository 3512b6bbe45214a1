//! The random streams of a sampled forward pass: one per layer and seed.
//!
//! A Bayesian layer draws its noise from a ChaCha8 generator seeded with the
//! pass's seed ([`super::bayesian::Posterior::set_seed`]), on the stream of
//! the 64-bit FNV-1a hash of the layer's name (its variables' path,
//! `layer1.0.conv1`). So the noise is a function of (seed, layer), the same
//! on every device and kind: passes with one seed see one sampled network,
//! and a resumed run draws what the interrupted one drew.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::StandardNormal;
use tch::{nn, Device, Kind, Tensor};

/// The generator of layer `layer`'s noise under seed `seed`.
pub(crate) fn layer_rng(seed: u64, layer: &str) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(fnv1a(layer));
    rng
}

/// The name of the layer whose variables live under `p` (`layer1.0.conv1`).
pub(crate) fn layer_name(p: &nn::Path) -> String {
    p.components().collect::<Vec<_>>().join(".")
}

/// A tensor of `shape` whose elements, in row-major order, are the next
/// standard normal draws of `rng`, as `options`' kind and device.
pub(crate) fn standard_normal(
    rng: &mut ChaCha8Rng,
    shape: &[i64],
    options: (Kind, Device),
) -> Tensor {
    let count = shape.iter().product::<i64>() as usize;
    let values: Vec<f64> = (0..count).map(|_| rng.sample(StandardNormal)).collect();
    Tensor::from_slice(&values)
        .reshape(shape)
        .to_kind(options.0)
        .to_device(options.1)
}

/// The 64-bit FNV-1a hash of `text`.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
