//! The noise family of Hendrycks & Dietterich (2019), with the CIFAR-10-C
//! parameters of their `make_cifar_c.py`. Every value (every channel of every
//! pixel) is perturbed independently.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal, Poisson};

use super::image::Image;

/// Standard deviation of the Gaussian noise per severity 1..5.
pub const GAUSSIAN_STD: [f64; 5] = [0.04, 0.06, 0.08, 0.09, 0.10];
/// Photon count scale of the shot noise per severity (fewer photons, more noise).
pub const SHOT_PHOTONS: [f64; 5] = [500.0, 250.0, 100.0, 75.0, 50.0];
/// Fraction of values replaced by salt or pepper per severity.
pub const IMPULSE_AMOUNT: [f64; 5] = [0.01, 0.02, 0.03, 0.05, 0.07];

/// `clip(x + N(0, std^2), 0, 1)`.
pub fn gaussian_noise(image: &Image, std: f64, rng: &mut ChaCha8Rng) -> Image {
    // Invariant: the table's deviations are positive and finite.
    let normal = Normal::new(0.0, std).expect("a positive, finite standard deviation");
    image.map(|x| (x + normal.sample(rng)).clamp(0.0, 1.0))
}

/// `clip(Poisson(x * photons) / photons, 0, 1)`: the photon noise of a
/// sensor that counts `photons` at full intensity. A black value (rate 0)
/// stays black, as numpy's `poisson(0)` always gives 0.
pub fn shot_noise(image: &Image, photons: f64, rng: &mut ChaCha8Rng) -> Image {
    image.map(|x| {
        let rate = x * photons;
        if rate <= 0.0 {
            return 0.0;
        }
        // Invariant: rate is positive and finite (x in [0, 1], photons <= 500).
        let poisson = Poisson::new(rate).expect("a positive, finite rate");
        (poisson.sample(rng) / photons).clamp(0.0, 1.0)
    })
}

/// Salt-and-pepper noise as scikit-image's `random_noise(mode='s&p')`: each
/// value is hit with probability `amount`; a hit value becomes 1 (salt) or 0
/// (pepper) with equal probability.
pub fn impulse_noise(image: &Image, amount: f64, rng: &mut ChaCha8Rng) -> Image {
    image.map(|x| {
        let hit = rng.random::<f64>() < amount;
        let salt = rng.random::<f64>() < 0.5;
        match (hit, salt) {
            (false, _) => x,
            (true, true) => 1.0,
            (true, false) => 0.0,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn grey(value: f64, n: usize) -> Image {
        Image {
            data: vec![value; n],
            channels: 1,
            height: 1,
            width: n,
        }
    }

    fn mean_and_std(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    }

    #[test]
    fn gaussian_noise_has_the_asked_spread_away_from_the_clip() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let noisy = gaussian_noise(&grey(0.5, 40_000), 0.1, &mut rng);
        let (mean, std) = mean_and_std(&noisy.data);
        // Sampling: SE(mean) = 0.1 / 200 = 5e-4, SE(std) = 0.1 / sqrt(2 n) = 3.5e-4, so
        // 0.003 is 6 and 8.5 standard errors; the clip is 5 std away.
        assert!((mean - 0.5).abs() < 0.003, "{mean}");
        assert!((std - 0.1).abs() < 0.003, "{std}");
    }

    #[test]
    fn shot_noise_is_poisson_scaled_and_keeps_black() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        // Rate 0.4 * 50 = 20: mean 0.4, std sqrt(20) / 50.
        let noisy = shot_noise(&grey(0.4, 40_000), 50.0, &mut rng);
        let (mean, std) = mean_and_std(&noisy.data);
        // Sampling: SE(mean) = 0.089 / 200 = 4.5e-4 (6.7 SE in 0.003); SE(std) =
        // sqrt(20 + 2 * 20^2) / (2 sqrt(20) 200) / 50 = 3.2e-4 (9 SE in 0.003).
        assert!((mean - 0.4).abs() < 0.003, "{mean}");
        assert!((std - 20f64.sqrt() / 50.0).abs() < 0.003, "{std}");
        // count / 50 * 50 is two roundings of a value <= 50: <= 2 ulp(50) ~ 1.4e-14.
        assert!(noisy
            .data
            .iter()
            .all(|v| (v * 50.0 - (v * 50.0).round()).abs() < 1e-9));
        let black = shot_noise(&grey(0.0, 100), 50.0, &mut rng);
        assert!(black.data.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn impulse_noise_hits_the_asked_fraction_half_salt_half_pepper() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let noisy = impulse_noise(&grey(0.5, 100_000), 0.07, &mut rng);
        let salt = noisy.data.iter().filter(|&&v| v == 1.0).count() as f64;
        let pepper = noisy.data.iter().filter(|&&v| v == 0.0).count() as f64;
        let kept = noisy.data.iter().filter(|&&v| v == 0.5).count() as f64;
        assert_eq!(salt + pepper + kept, 100_000.0);
        // Sampling: SE = sqrt(0.07 * 0.93 / 1e5) = 8.1e-4, so 0.003 is 3.7 standard
        // errors (fixed seed); the salt share of ~7000 hits has SE 0.006, 0.03 is 5 SE.
        assert!(((salt + pepper) / 1e5 - 0.07).abs() < 0.003);
        assert!((salt / (salt + pepper) - 0.5).abs() < 0.03);
    }
}
