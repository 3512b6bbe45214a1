//! Per-channel standardisation of pixels, fitted on the training split.
//!
//! A byte `v` of channel `c` becomes `x = (v / 255 - mean[c]) / std[c]`, where
//! `mean[c]` and `std[c]` are the mean and the population standard deviation
//! (divisor `N`, like `torch.std(unbiased=False)` and `np.std`) of `v / 255`
//! over every pixel of channel `c` of every training image. This is
//! torchvision's `ToTensor()` followed by `Normalize(mean, std)`.

use serde::{Deserialize, Serialize};

use super::dataset::Dataset;
use super::error::{DataError, Result};

/// Per-channel mean and standard deviation of pixels in `[0, 1]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

impl Normalization {
    /// The normalisation of torchvision's ImageNet reference recipe and of
    /// every pretrained ImageNet model in torchvision and timm: mean
    /// `(0.485, 0.456, 0.406)`, std `(0.229, 0.224, 0.225)`, RGB. Streamed
    /// ImageNet-sized sets use it instead of a fit over every training pixel,
    /// which would read the whole set once more.
    pub fn imagenet() -> Self {
        Normalization {
            mean: vec![0.485, 0.456, 0.406],
            std: vec![0.229, 0.224, 0.225],
        }
    }

    /// Fits mean and population std per channel on `train` (see the module
    /// doc). Sums are exact integers (u128), so the result does not depend on
    /// the sample order. A channel with a single value (std 0) is an error,
    /// as is an empty dataset.
    pub fn fit(train: &Dataset) -> Result<Self> {
        let plane = train.height * train.width;
        let count = (train.n * plane) as u128;
        if count == 0 {
            return Err(DataError::Invalid(format!(
                "{}: cannot fit a normalisation on an empty dataset",
                train.name
            )));
        }
        let mut sums = vec![0u128; train.channels];
        let mut squares = vec![0u128; train.channels];
        for image in train.images.chunks_exact(train.sample_len()) {
            for (c, channel) in image.chunks_exact(plane).enumerate() {
                let (s, q) = channel.iter().fold((0u64, 0u64), |(s, q), &v| {
                    let v = v as u64;
                    (s + v, q + v * v)
                });
                sums[c] += s as u128;
                squares[c] += q as u128;
            }
        }
        let mut mean = Vec::with_capacity(train.channels);
        let mut std = Vec::with_capacity(train.channels);
        for (c, (&s, &q)) in sums.iter().zip(&squares).enumerate() {
            // count * sum(v^2) - (sum v)^2 = count^2 * var(v), exactly.
            let scaled_variance = count * q - s * s;
            if scaled_variance == 0 {
                return Err(DataError::Invalid(format!(
                    "{}: channel {c} has the same value in every pixel; it cannot be standardised",
                    train.name
                )));
            }
            let count = count as f64;
            mean.push((s as f64 / count / 255.0) as f32);
            std.push(((scaled_variance as f64).sqrt() / count / 255.0) as f32);
        }
        Ok(Normalization { mean, std })
    }

    /// Mean 0 and std 1 for every channel: plain `v / 255`.
    pub fn identity(channels: usize) -> Self {
        Normalization {
            mean: vec![0.0; channels],
            std: vec![1.0; channels],
        }
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.mean.len()
    }

    /// Checks that there are `channels` means and stds, the means finite and
    /// the stds finite and positive (a loaded checkpoint may hold anything).
    pub fn validate(&self, channels: usize) -> Result<()> {
        if self.mean.len() != channels || self.std.len() != channels {
            return Err(DataError::Invalid(format!(
                "normalisation has {} means and {} stds for {channels} channels",
                self.mean.len(),
                self.std.len()
            )));
        }
        let bad_mean = self.mean.iter().position(|m| !m.is_finite());
        let bad_std = self.std.iter().position(|s| !(s.is_finite() && *s > 0.0));
        match (bad_mean, bad_std) {
            (Some(c), _) => Err(DataError::Invalid(format!(
                "normalisation mean of channel {c} is {}",
                self.mean[c]
            ))),
            (_, Some(c)) => Err(DataError::Invalid(format!(
                "normalisation std of channel {c} is {}, not a positive number",
                self.std[c]
            ))),
            (None, None) => Ok(()),
        }
    }

    /// For each channel, the normalised value of each of the 256 bytes, so
    /// that building a batch is a table look-up per pixel.
    pub(crate) fn lookup_tables(&self) -> Vec<[f32; 256]> {
        self.mean
            .iter()
            .zip(&self.std)
            .map(|(&mean, &std)| {
                let (mean, std) = (mean as f64, std as f64);
                std::array::from_fn(|v| ((v as f64 / 255.0 - mean) / std) as f32)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_by_hand() {
        // Two 2-channel 1x2 images. Channel 0: 0, 255, 255, 255 -> v/255 =
        // 0,1,1,1: mean 0.75, var 0.1875. Channel 1: 51 everywhere but one
        // 102 -> 0.2,0.2,0.2,0.4: mean 0.25, var 0.0075.
        let d = Dataset::new(
            "t",
            vec![0, 255, 51, 51, 255, 255, 51, 102],
            vec![0, 0],
            (2, 1, 2),
            1,
        )
        .unwrap();
        let n = Normalization::fit(&d).unwrap();
        // Exact integer moments, a few f64 roundings, then one f32 rounding: within
        // ~1 f32 ulp (<= 3e-8 at values < 0.5) of the f32 references, below 1e-7.
        assert!((n.mean[0] - 0.75).abs() < 1e-7);
        assert!((n.std[0] - 0.1875f32.sqrt()).abs() < 1e-7);
        assert!((n.mean[1] - 0.25).abs() < 1e-7);
        assert!((n.std[1] - 0.0075f32.sqrt()).abs() < 1e-7);
        let table = n.lookup_tables();
        // f64 from those f32 parameters, rounded to f32; the references are f32 formulas.
        // Both are within a few f32 ulps (6e-8 at 0.58, relative 1.2e-7 in all) of
        // +-0.577: < 4e-7; a wrong channel or byte is off by > 1e-2.
        assert!((table[0][255] - (0.25 / 0.1875f32.sqrt())).abs() < 1e-6);
        assert!((table[1][51] - (-0.05 / 0.0075f32.sqrt())).abs() < 1e-6);
    }

    #[test]
    fn validate_refuses_wrong_lengths_and_non_finite_values() {
        assert!(Normalization::identity(3).validate(3).is_ok());
        assert!(Normalization::identity(3).validate(1).is_err());
        let zero_std = Normalization {
            mean: vec![0.5],
            std: vec![0.0],
        };
        assert!(zero_std.validate(1).is_err());
        let nan_mean = Normalization {
            mean: vec![f32::NAN],
            std: vec![1.0],
        };
        assert!(nan_mean.validate(1).is_err());
    }

    #[test]
    fn constant_channel_and_empty_set_are_refused() {
        let d = Dataset::new("t", vec![7, 7, 7, 7], vec![0, 0], (1, 1, 2), 1).unwrap();
        assert!(Normalization::fit(&d).is_err());
        let empty = Dataset::new("t", vec![], vec![], (1, 1, 2), 1).unwrap();
        assert!(Normalization::fit(&empty).is_err());
    }
}
