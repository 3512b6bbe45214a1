//! Image corruptions at 5 severities, after Hendrycks & Dietterich,
//! "Benchmarking Neural Network Robustness to Common Corruptions and
//! Perturbations" (ICLR 2019), with the CIFAR-10-C parameters of their
//! `make_cifar_c.py` (repository `hendrycks/robustness`).
//!
//! Written in Rust from those definitions, for any image size and 1 or 3
//! channels (the formulas are per channel or per pixel; brightness uses the
//! pixel's maximum over its channels, the HSV value). The random draws come
//! from ChaCha8 streams keyed by `(seed, corruption, image index)`, so an
//! image's corruption does not depend on which other images or corruptions
//! were made, and the same seed gives the same bytes on every machine. The
//! severity is not part of the key: an image meets the same random numbers
//! at every severity (the same motion angle, the same Gaussian draws scaled
//! by a larger deviation, impulse hits that grow into a superset), so its
//! severities differ in strength only. numpy's random streams are not reproduced: the noise is the same
//! distribution as CIFAR-10-C's, not the same samples.
//!
//! Families: [`noise`] (Gaussian, shot, impulse), [`blur`] (defocus, motion),
//! [`intensity`] (contrast, brightness).

pub mod blur;
pub mod image;
pub mod intensity;
pub mod noise;

use std::fmt;
use std::str::FromStr;

use rand_chacha::ChaCha8Rng;

use crate::rng::{stream, Purpose};
use crate::Dataset;
pub use image::Image;

/// One corruption of the benchmark. The names are CIFAR-10-C's file names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Corruption {
    GaussianNoise,
    ShotNoise,
    ImpulseNoise,
    DefocusBlur,
    MotionBlur,
    Contrast,
    Brightness,
}

/// A severity level, 1 (mildest) to 5.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Severity(u8);

/// Severities 1 to 5.
pub const SEVERITIES: [Severity; 5] = [
    Severity(1),
    Severity(2),
    Severity(3),
    Severity(4),
    Severity(5),
];

impl Severity {
    /// The severity `level` (1..=5), None outside.
    pub fn new(level: u8) -> Option<Severity> {
        (1..=5).contains(&level).then_some(Severity(level))
    }

    /// The level, 1..=5.
    pub fn level(self) -> u8 {
        self.0
    }

    /// Parses `1-5` (a range), `3` or `1,3,5` into severities in the order
    /// given; each level must be 1..=5 and appear once.
    pub fn parse_list(text: &str) -> Result<Vec<Severity>, String> {
        let level = |t: &str| {
            t.trim()
                .parse::<u8>()
                .ok()
                .and_then(Severity::new)
                .ok_or_else(|| format!("severity '{t}' is not 1, 2, 3, 4 or 5"))
        };
        let mut out = Vec::new();
        for part in text.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (level(lo)?, level(hi)?);
                    out.extend(SEVERITIES.into_iter().filter(|s| (lo..=hi).contains(s)));
                }
                None => out.push(level(part)?),
            }
        }
        let mut sorted = out.clone();
        sorted.sort();
        sorted.dedup();
        if out.is_empty() || sorted.len() != out.len() {
            return Err(format!(
                "severities '{text}': expected distinct levels such as 1-5 or 1,3,5"
            ));
        }
        Ok(out)
    }

    /// Index into the parameter tables, 0..=4.
    fn index(self) -> usize {
        usize::from(self.0 - 1)
    }
}

impl Corruption {
    /// Every corruption, in CIFAR-10-C's order.
    pub const ALL: [Corruption; 7] = [
        Corruption::GaussianNoise,
        Corruption::ShotNoise,
        Corruption::ImpulseNoise,
        Corruption::DefocusBlur,
        Corruption::MotionBlur,
        Corruption::Contrast,
        Corruption::Brightness,
    ];

    /// The CIFAR-10-C file stem (`gaussian_noise` for `gaussian_noise.npy`).
    pub fn name(self) -> &'static str {
        match self {
            Corruption::GaussianNoise => "gaussian_noise",
            Corruption::ShotNoise => "shot_noise",
            Corruption::ImpulseNoise => "impulse_noise",
            Corruption::DefocusBlur => "defocus_blur",
            Corruption::MotionBlur => "motion_blur",
            Corruption::Contrast => "contrast",
            Corruption::Brightness => "brightness",
        }
    }

    /// Corrupts one clean image (the reference code's function of this
    /// name at `severity`), drawing randomness from `rng`.
    pub fn apply(self, image: &Image, severity: Severity, rng: &mut ChaCha8Rng) -> Image {
        let s = severity.index();
        match self {
            Corruption::GaussianNoise => noise::gaussian_noise(image, noise::GAUSSIAN_STD[s], rng),
            Corruption::ShotNoise => noise::shot_noise(image, noise::SHOT_PHOTONS[s], rng),
            Corruption::ImpulseNoise => noise::impulse_noise(image, noise::IMPULSE_AMOUNT[s], rng),
            Corruption::DefocusBlur => {
                let (radius, alias) = blur::DEFOCUS[s];
                blur::defocus_blur(image, radius, alias)
            }
            Corruption::MotionBlur => {
                let (radius, sigma) = blur::MOTION[s];
                blur::motion_blur(image, radius, sigma, rng)
            }
            Corruption::Contrast => intensity::contrast(image, intensity::CONTRAST[s]),
            Corruption::Brightness => intensity::brightness(image, intensity::BRIGHTNESS[s]),
        }
    }

    /// Sample `index` of `dataset` corrupted at `severity`, as CHW bytes.
    /// The random stream is keyed by `(seed, self, index)` (see the module doc).
    pub fn corrupt_sample(
        self,
        dataset: &Dataset,
        index: usize,
        severity: Severity,
        seed: u64,
    ) -> Vec<u8> {
        let clean = Image::from_bytes(
            dataset.image(index),
            dataset.channels,
            dataset.height,
            dataset.width,
        );
        let key = (self as u64) << 56 | index as u64;
        let mut rng = stream(seed, Purpose::Corrupt, key);
        self.apply(&clean, severity, &mut rng).to_bytes()
    }

    /// The whole `dataset` corrupted at `severity` (same labels, shape and
    /// classes; named `<dataset>/<corruption>-<severity>`).
    pub fn corrupt_dataset(self, dataset: &Dataset, severity: Severity, seed: u64) -> Dataset {
        let mut images = Vec::with_capacity(dataset.images.len());
        for i in 0..dataset.n {
            images.extend(self.corrupt_sample(dataset, i, severity, seed));
        }
        Dataset {
            images,
            name: format!("{}/{}-{}", dataset.name, self.name(), severity.level()),
            ..dataset.clone()
        }
    }
}

impl fmt::Display for Corruption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Corruption {
    type Err = String;

    /// A CIFAR-10-C name (`gaussian_noise`; `gaussian-noise` also accepted).
    fn from_str(text: &str) -> Result<Self, String> {
        let wanted = text.replace('-', "_");
        Corruption::ALL
            .into_iter()
            .find(|c| c.name() == wanted)
            .ok_or_else(|| {
                let known: Vec<&str> = Corruption::ALL.iter().map(|c| c.name()).collect();
                format!("unknown corruption '{text}'; known: {}", known.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_list_the_known_ones() {
        for c in Corruption::ALL {
            assert_eq!(c.name().parse::<Corruption>(), Ok(c));
        }
        assert_eq!("motion-blur".parse(), Ok(Corruption::MotionBlur));
        let e = "fog".parse::<Corruption>().unwrap_err();
        assert!(e.contains("fog") && e.contains("brightness"), "{e}");
    }

    #[test]
    fn severities_are_one_to_five() {
        assert!(Severity::new(0).is_none() && Severity::new(6).is_none());
        assert_eq!(SEVERITIES.map(Severity::level), [1, 2, 3, 4, 5]);
        let levels = |t: &str| {
            Severity::parse_list(t).map(|v| v.iter().map(|s| s.level()).collect::<Vec<_>>())
        };
        assert_eq!(levels("1-5"), Ok(vec![1, 2, 3, 4, 5]));
        assert_eq!(levels("2,4-5"), Ok(vec![2, 4, 5]));
        assert_eq!(levels("3"), Ok(vec![3]));
        for bad in ["0", "6", "1,1", "", "5-3", "x"] {
            assert!(levels(bad).is_err(), "{bad}");
        }
    }
}
