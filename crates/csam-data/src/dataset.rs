//! The in-memory dataset every loader produces.

use super::error::{DataError, Result};

/// A labelled image dataset held in memory as raw bytes.
///
/// `images` is `n x channels x height x width`, row-major (CHW per sample, the
/// layout of PyTorch tensors); loaders of HWC sources (PNG, `.npy` from
/// CIFAR-10-C) transpose on load. Pixel values are the source's `u8` values;
/// they become floats in `[0, 1]` (divided by 255) only when a batch is built.
/// `labels[i]` is in `0..n_classes` for every sample (checked by
/// [`Dataset::new`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub images: Vec<u8>,
    pub labels: Vec<usize>,
    pub n: usize,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
    pub n_classes: usize,
    pub name: String,
}

/// What a dataset spec loads: an optional training part and a test part.
///
/// `train` is `None` for evaluation-only sources (a CIFAR-10-C corruption
/// file, an image folder of `test/` alone): they can be evaluated but not
/// split for training.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataSource {
    pub train: Option<Dataset>,
    pub test: Dataset,
}

/// The shape of one sample, `(channels, height, width)`.
pub type SampleShape = (usize, usize, usize);

impl Dataset {
    /// Builds a dataset after checking that the byte count matches
    /// `labels.len() x channels x height x width`, that no dimension is zero
    /// and that every label is below `n_classes`.
    pub fn new(
        name: impl Into<String>,
        images: Vec<u8>,
        labels: Vec<usize>,
        (channels, height, width): SampleShape,
        n_classes: usize,
    ) -> Result<Self> {
        let name = name.into();
        if channels == 0 || height == 0 || width == 0 || n_classes == 0 {
            return Err(DataError::Invalid(format!(
                "{name}: empty sample shape {channels}x{height}x{width} or zero classes"
            )));
        }
        let n = labels.len();
        let expected = n
            .checked_mul(channels * height * width)
            .ok_or_else(|| DataError::Invalid(format!("{name}: {n} samples overflow memory")))?;
        if images.len() != expected {
            return Err(DataError::Invalid(format!(
                "{name}: {} image bytes for {n} samples of {channels}x{height}x{width} (expected {expected})",
                images.len()
            )));
        }
        if let Some((i, &label)) = labels.iter().enumerate().find(|(_, &l)| l >= n_classes) {
            return Err(DataError::Invalid(format!(
                "{name}: label {label} of sample {i} is outside 0..={}",
                n_classes.saturating_sub(1)
            )));
        }
        Ok(Dataset {
            images,
            labels,
            n,
            channels,
            height,
            width,
            n_classes,
            name,
        })
    }

    /// `(channels, height, width)` of every sample.
    pub fn sample_shape(&self) -> SampleShape {
        (self.channels, self.height, self.width)
    }

    /// Bytes per sample, `channels x height x width`.
    pub fn sample_len(&self) -> usize {
        self.channels * self.height * self.width
    }

    /// The CHW bytes of sample `i` (panics if `i >= n`, like slice indexing).
    pub fn image(&self, i: usize) -> &[u8] {
        let len = self.sample_len();
        &self.images[i * len..(i + 1) * len]
    }

    /// Number of samples of each class, indexed by label.
    pub fn class_counts(&self) -> Vec<usize> {
        let mut counts = vec![0; self.n_classes];
        for &label in &self.labels {
            counts[label] += 1;
        }
        counts
    }

    /// A new dataset holding the samples at `indices`, in that order, with
    /// the same shape, classes and name (panics on an index `>= n`).
    pub fn select(&self, indices: &[usize]) -> Dataset {
        let mut images = Vec::with_capacity(indices.len() * self.sample_len());
        for &i in indices {
            images.extend_from_slice(self.image(i));
        }
        Dataset {
            images,
            labels: indices.iter().map(|&i| self.labels[i]).collect(),
            n: indices.len(),
            ..self.empty_like()
        }
    }

    /// The same dataset renamed (e.g. `fashion-mnist/val`).
    pub fn renamed(mut self, name: impl Into<String>) -> Dataset {
        self.name = name.into();
        self
    }

    fn empty_like(&self) -> Dataset {
        Dataset {
            images: Vec::new(),
            labels: Vec::new(),
            n: 0,
            channels: self.channels,
            height: self.height,
            width: self.width,
            n_classes: self.n_classes,
            name: self.name.clone(),
        }
    }
}

impl DataSource {
    /// Checks that train and test (when both exist) agree on sample shape
    /// and class count, and returns the source.
    pub fn new(train: Option<Dataset>, test: Dataset) -> Result<Self> {
        if let Some(train) = &train {
            if train.sample_shape() != test.sample_shape() {
                return Err(DataError::Inconsistent {
                    name: test.name.clone(),
                    reason: format!(
                        "train samples are {:?} (CxHxW), test samples {:?}",
                        train.sample_shape(),
                        test.sample_shape()
                    ),
                });
            }
            if train.n_classes != test.n_classes {
                return Err(DataError::Inconsistent {
                    name: test.name.clone(),
                    reason: format!(
                        "train has {} classes, test {}",
                        train.n_classes, test.n_classes
                    ),
                });
            }
        }
        Ok(DataSource { train, test })
    }
}

/// Transposes samples stored `H x W x C` to `C x H x W`.
pub(crate) fn hwc_to_chw(hwc: &[u8], channels: usize, height: usize, width: usize) -> Vec<u8> {
    transpose_samples(hwc, channels, height * width, false)
}

/// Transposes samples stored `C x H x W` to `H x W x C` (the `.npy` image
/// layout of CIFAR-10-C), the inverse of the HWC-to-CHW transpose the loaders apply.
pub fn chw_to_hwc(chw: &[u8], channels: usize, height: usize, width: usize) -> Vec<u8> {
    transpose_samples(chw, channels, height * width, true)
}

/// Moves value `(c, pixel)` of every sample between its CHW position
/// `c * plane + pixel` and its HWC position `pixel * channels + c`.
fn transpose_samples(data: &[u8], channels: usize, plane: usize, to_hwc: bool) -> Vec<u8> {
    let mut out = vec![0u8; data.len()];
    for (sample_in, sample_out) in data
        .chunks_exact(plane * channels)
        .zip(out.chunks_exact_mut(plane * channels))
    {
        for c in 0..channels {
            for pixel in 0..plane {
                let (chw, hwc) = (c * plane + pixel, pixel * channels + c);
                let (from, to) = if to_hwc { (chw, hwc) } else { (hwc, chw) };
                sample_out[to] = sample_in[from];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Dataset {
        // 3 samples of 1x1x2, labels 0, 2, 1.
        Dataset::new("tiny", vec![1, 2, 3, 4, 5, 6], vec![0, 2, 1], (1, 1, 2), 3).unwrap()
    }

    #[test]
    fn new_rejects_wrong_byte_count_and_bad_labels() {
        assert!(Dataset::new("x", vec![0; 5], vec![0, 0, 0], (1, 1, 2), 3).is_err());
        assert!(Dataset::new("x", vec![0; 6], vec![0, 3, 0], (1, 1, 2), 3).is_err());
        assert!(Dataset::new("x", vec![], vec![], (0, 1, 2), 3).is_err());
    }

    #[test]
    fn select_copies_samples_in_order() {
        let d = tiny().select(&[2, 0]);
        assert_eq!(d.images, vec![5, 6, 1, 2]);
        assert_eq!(d.labels, vec![1, 0]);
        assert_eq!(d.n, 2);
        assert_eq!(d.class_counts(), vec![1, 1, 0]);
    }

    #[test]
    fn source_rejects_mismatched_parts() {
        let test = tiny();
        let other = Dataset::new("o", vec![0; 3], vec![0], (3, 1, 1), 3).unwrap();
        assert!(DataSource::new(Some(other), test.clone()).is_err());
        let fewer_classes = Dataset::new("o", vec![0; 2], vec![0], (1, 1, 2), 2).unwrap();
        assert!(DataSource::new(Some(fewer_classes), test.clone()).is_err());
        assert!(DataSource::new(Some(test.clone()), test).is_ok());
    }

    #[test]
    fn hwc_transposes_to_chw() {
        // One 1x2 image with 3 channels: pixels (1,2,3) and (4,5,6).
        assert_eq!(
            hwc_to_chw(&[1, 2, 3, 4, 5, 6], 3, 1, 2),
            vec![1, 4, 2, 5, 3, 6]
        );
        assert_eq!(
            chw_to_hwc(&[1, 4, 2, 5, 3, 6], 3, 1, 2),
            vec![1, 2, 3, 4, 5, 6]
        );
    }
}
