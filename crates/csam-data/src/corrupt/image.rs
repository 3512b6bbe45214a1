//! The working form of one image while it is corrupted: channel planes of
//! `f64` in `[0, 1]`, as the reference code's `np.array(x) / 255.`.

/// One image, channels first (`C x H x W`, row-major), values in `[0, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    /// `channels * height * width` values.
    pub data: Vec<f64>,
    pub channels: usize,
    pub height: usize,
    pub width: usize,
}

impl Image {
    /// The image of `C x H x W` bytes, each divided by 255.
    pub fn from_bytes(chw: &[u8], channels: usize, height: usize, width: usize) -> Image {
        debug_assert_eq!(chw.len(), channels * height * width);
        Image {
            data: chw.iter().map(|&v| f64::from(v) / 255.0).collect(),
            channels,
            height,
            width,
        }
    }

    /// Back to bytes as the reference code does (`np.uint8(np.clip(x, 0, 1) *
    /// 255)`: clip, scale, truncate). `1e-9` is added before truncating so
    /// that a value that is a byte up to floating-point round-off (`k / 255 *
    /// 255`) comes back as that byte rather than one below it.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.data
            .iter()
            .map(|&v| (v.clamp(0.0, 1.0) * 255.0 + 1e-9).floor() as u8)
            .collect()
    }

    /// Pixels per channel, `height * width`.
    pub fn plane_len(&self) -> usize {
        self.height * self.width
    }

    /// The same shape with `f` applied to every value.
    pub fn map(&self, f: impl FnMut(f64) -> f64) -> Image {
        self.with_data(self.data.iter().copied().map(f).collect())
    }

    /// The same shape with `f(channel, pixel, value)` applied to every
    /// value, `pixel` its row-major index in its channel's plane.
    pub fn map_pixels(&self, mut f: impl FnMut(usize, usize, f64) -> f64) -> Image {
        let plane = self.plane_len();
        let data = self
            .data
            .iter()
            .enumerate()
            .map(|(k, &v)| f(k / plane, k % plane, v))
            .collect();
        self.with_data(data)
    }

    /// An image of this shape whose data is `data` (same length).
    pub fn with_data(&self, data: Vec<f64>) -> Image {
        debug_assert_eq!(data.len(), self.data.len());
        Image {
            data,
            channels: self.channels,
            height: self.height,
            width: self.width,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_survives_the_round_trip() {
        let bytes: Vec<u8> = (0..=255).collect();
        let image = Image::from_bytes(&bytes, 1, 16, 16);
        assert_eq!(image.to_bytes(), bytes);
    }

    #[test]
    fn out_of_range_values_are_clipped_and_fractions_truncated() {
        let image = Image {
            data: vec![-0.5, 1.5, 0.5, 10.9 / 255.0],
            channels: 1,
            height: 2,
            width: 2,
        };
        assert_eq!(image.to_bytes(), vec![0, 255, 127, 10]);
    }
}
