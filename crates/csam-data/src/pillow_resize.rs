//! Resampling of 8-bit images exactly as Pillow does it
//! (`Image.resize(size, filter)`, `libImaging/Resample.c`), for the two
//! filters csam needs: bilinear, which torchvision's `Resize` and
//! `RandomResizedCrop` call on PIL images ([`crate::streaming`]), and box,
//! which the pixelate corruption calls ([`crate::corrupt::digital`]).
//!
//! Pillow's filters are antialiased: when shrinking by a factor `s > 1` the
//! kernel is stretched to `s` times its support, so every input pixel
//! contributes. Per output coordinate `o` of an axis of `in` pixels resized
//! to `out`, with `scale = in / out`, `filterscale = max(scale, 1)` and
//! `support = filter support * filterscale` (bilinear: the triangle
//! `max(0, 1 - |x|)`, support 1; box: 1 on `(-0.5, 0.5]`, support 0.5):
//!
//! - `center = (o + 0.5) * scale`,
//! - inputs `xmin = max(0, trunc(center - support + 0.5))` up to
//!   `xmax = min(in, trunc(center + support + 0.5))` (exclusive),
//! - weight of input `x`: `kernel((x - center + 0.5) * (1 / filterscale))`,
//!   normalised to sum 1, then rounded to a fixed-point integer with 22
//!   fraction bits.
//!
//! Each pass accumulates `2^21 + sum(weight * pixel)` in integers and keeps
//! `clamp(acc >> 22, 0, 255)`, and the second pass reads the first one's
//! 8-bit result. The horizontal pass runs first, then the vertical one; an
//! axis whose size does not change is not resampled. That is Pillow's
//! `ImagingResampleInner` up to release 12, byte for byte. Pillow 13 runs
//! the vertical pass first for some sizes (always when the image grows
//! wider and shrinks in height, sometimes when it shrinks both ways); the
//! intermediate rounding then differs, so a pixel may differ from Pillow
//! 13's by one level.

/// A Pillow resampling filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter {
    /// `Image.BOX`: 1 on `(-0.5, 0.5]`.
    Box,
    /// `Image.BILINEAR`: the triangle `max(0, 1 - |x|)`.
    Bilinear,
}

impl Filter {
    /// Half-width of the kernel at scale 1.
    fn support(self) -> f64 {
        match self {
            Filter::Box => 0.5,
            Filter::Bilinear => 1.0,
        }
    }

    /// The kernel at `x`.
    fn kernel(self, x: f64) -> f64 {
        match self {
            Filter::Box => f64::from(u8::from(x > -0.5 && x <= 0.5)),
            Filter::Bilinear => (1.0 - x.abs()).max(0.0),
        }
    }
}

/// Fraction bits of the fixed-point weights (Pillow's `PRECISION_BITS`).
const PRECISION_BITS: u32 = 32 - 8 - 2;

/// The weights of one axis: for output `o`, inputs `start[o]..start[o] +
/// len[o]` with weights `weights[o * kernel_size..][..len[o]]`.
struct AxisWeights {
    kernel_size: usize,
    start: Vec<usize>,
    len: Vec<usize>,
    weights: Vec<i32>,
}

impl AxisWeights {
    /// Pillow's `precompute_coeffs` for `filter` and
    /// `normalize_coeffs_8bpc` (see the module doc).
    fn new(filter: Filter, in_size: usize, out_size: usize) -> AxisWeights {
        let scale = in_size as f64 / out_size as f64;
        let filterscale = scale.max(1.0);
        let support = filter.support() * filterscale;
        let kernel_size = support.ceil() as usize * 2 + 1;
        let mut start = Vec::with_capacity(out_size);
        let mut len = Vec::with_capacity(out_size);
        let mut weights = vec![0i32; out_size * kernel_size];
        let mut row = vec![0f64; kernel_size];
        // Pillow multiplies by the reciprocal; dividing rounds differently.
        let reciprocal = 1.0 / filterscale;
        for o in 0..out_size {
            let center = (o as f64 + 0.5) * scale;
            // `as` truncates toward zero, as C's `(int)` cast does.
            let xmin = ((center - support + 0.5) as i64).max(0) as usize;
            let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
            let n = xmax.saturating_sub(xmin).min(kernel_size);
            let mut total = 0.0;
            for (x, w) in row.iter_mut().enumerate().take(n) {
                let t = ((x + xmin) as f64 - center + 0.5) * reciprocal;
                *w = filter.kernel(t);
                total += *w;
            }
            for (x, &w) in row.iter().enumerate().take(n) {
                let w = if total != 0.0 { w / total } else { w };
                let fixed = w * f64::from(1u32 << PRECISION_BITS);
                weights[o * kernel_size + x] = if fixed < 0.0 {
                    (fixed - 0.5) as i32
                } else {
                    (fixed + 0.5) as i32
                };
            }
            start.push(xmin);
            len.push(n);
        }
        AxisWeights {
            kernel_size,
            start,
            len,
            weights,
        }
    }

    /// Output `o`'s first input and weights.
    #[inline]
    fn taps(&self, o: usize) -> (usize, &[i32]) {
        (
            self.start[o],
            &self.weights[o * self.kernel_size..][..self.len[o]],
        )
    }
}

/// The rounding offset every accumulator starts from, `2^21`.
const HALF: i32 = 1 << (PRECISION_BITS - 1);

/// `clamp(acc >> 22, 0, 255)`: Pillow's `clip8`.
#[inline]
fn clip8(acc: i32) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// An 8-bit image with interleaved channels (`H x W x C`, as decoders
/// produce it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pixels {
    pub data: Vec<u8>,
    pub width: usize,
    pub height: usize,
    pub channels: usize,
}

impl Pixels {
    /// The rectangle `left..left + width`, `top..top + height` (inside the
    /// image) as a new image: Pillow's `Image.crop` for a box inside.
    pub fn crop(&self, left: usize, top: usize, width: usize, height: usize) -> Pixels {
        let c = self.channels;
        let mut data = Vec::with_capacity(width * height * c);
        for y in top..top + height {
            let row = (y * self.width + left) * c;
            data.extend_from_slice(&self.data[row..row + width * c]);
        }
        Pixels {
            data,
            width,
            height,
            channels: c,
        }
    }

    /// Resized to `width x height` with Pillow's `filter` (see the module
    /// doc). Both target sides must be positive.
    pub fn resize(&self, width: usize, height: usize, filter: Filter) -> Pixels {
        let horizontal = match width != self.width {
            true => self.resize_horizontal(width, filter),
            false => self.clone(),
        };
        match height != horizontal.height {
            true => horizontal.resize_vertical(height, filter),
            false => horizontal,
        }
    }

    /// Each row resampled on its own; every output pixel accumulates all
    /// its channels in one walk over its inputs.
    fn resize_horizontal(&self, width: usize, filter: Filter) -> Pixels {
        let axis = AxisWeights::new(filter, self.width, width);
        let data = match self.channels {
            3 => self.horizontal_pass::<3>(&axis, width),
            1 => self.horizontal_pass::<1>(&axis, width),
            c => {
                // Any other channel count: one channel at a time.
                let planes: Vec<Pixels> = (0..c).map(|ch| self.channel(ch)).collect();
                let resized: Vec<Vec<u8>> = planes
                    .iter()
                    .map(|p| p.horizontal_pass::<1>(&axis, width))
                    .collect();
                (0..width * self.height)
                    .flat_map(|i| resized.iter().map(move |plane| plane[i]))
                    .collect()
            }
        };
        Pixels {
            data,
            width,
            height: self.height,
            channels: self.channels,
        }
    }

    /// The horizontal pass for `C` interleaved channels.
    fn horizontal_pass<const C: usize>(&self, axis: &AxisWeights, width: usize) -> Vec<u8> {
        let mut data = vec![0u8; width * self.height * C];
        for (row, out) in self
            .data
            .chunks_exact(self.width * C)
            .zip(data.chunks_exact_mut(width * C))
        {
            for (x, pixel) in out.chunks_exact_mut(C).enumerate() {
                let (start, weights) = axis.taps(x);
                let mut acc = [HALF; C];
                for (input, &w) in row[start * C..].chunks_exact(C).zip(weights) {
                    for k in 0..C {
                        acc[k] += i32::from(input[k]) * w;
                    }
                }
                for k in 0..C {
                    pixel[k] = clip8(acc[k]);
                }
            }
        }
        data
    }

    /// Channel `ch` alone, as a one-channel image.
    fn channel(&self, ch: usize) -> Pixels {
        Pixels {
            data: self
                .data
                .iter()
                .skip(ch)
                .step_by(self.channels)
                .copied()
                .collect(),
            width: self.width,
            height: self.height,
            channels: 1,
        }
    }

    /// Each output row accumulates whole input rows, one weight at a time
    /// (a loop the compiler vectorises).
    fn resize_vertical(&self, height: usize, filter: Filter) -> Pixels {
        let stride = self.width * self.channels;
        let axis = AxisWeights::new(filter, self.height, height);
        let mut data = vec![0u8; stride * height];
        let mut acc = vec![0i32; stride];
        for (y, out) in data.chunks_exact_mut(stride).enumerate() {
            let (start, weights) = axis.taps(y);
            acc.fill(HALF);
            for (input, &w) in self.data[start * stride..]
                .chunks_exact(stride)
                .zip(weights)
            {
                for (a, &v) in acc.iter_mut().zip(input) {
                    *a += i32::from(v) * w;
                }
            }
            for (p, &a) in out.iter_mut().zip(&acc) {
                *p = clip8(a);
            }
        }
        Pixels {
            data,
            width: self.width,
            height,
            channels: self.channels,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image(width: usize, height: usize, channels: usize) -> Pixels {
        let data = (0..width * height * channels)
            .map(|i| (i * 37 % 251) as u8)
            .collect();
        Pixels {
            data,
            width,
            height,
            channels,
        }
    }

    #[test]
    fn weights_sum_to_one_in_fixed_point() {
        for (i, o) in [(500, 224), (224, 500), (7, 3), (3, 7), (256, 256)] {
            let axis = AxisWeights::new(Filter::Bilinear, i, o);
            for k in 0..o {
                let sum: i64 = axis.weights[k * axis.kernel_size..][..axis.len[k]]
                    .iter()
                    .map(|&w| i64::from(w))
                    .sum();
                // Each normalised weight is rounded to an integer (off by <= 0.5), so
                // the sum is off by <= len / 2; len allows for the f64 normalisation.
                assert!(
                    (sum - (1 << PRECISION_BITS)).abs() <= axis.len[k] as i64,
                    "{i}->{o}"
                );
                assert!(axis.start[k] + axis.len[k] <= i);
            }
        }
    }

    #[test]
    fn a_constant_image_stays_constant_and_same_size_is_identity() {
        let flat = Pixels {
            data: vec![173; 40 * 30 * 3],
            width: 40,
            height: 30,
            channels: 3,
        };
        let small = flat.resize(13, 9, Filter::Bilinear);
        assert!(small.data.iter().all(|&v| v == 173));
        let big = flat.resize(97, 61, Filter::Bilinear);
        assert!(big.data.iter().all(|&v| v == 173));
        let same = image(20, 10, 3);
        assert_eq!(same.resize(20, 10, Filter::Bilinear), same);
    }

    #[test]
    fn halving_averages_pixel_pairs_in_the_interior() {
        // Scale 2: center (o + 0.5) * 2 = 2o + 1, support 2, weights of
        // inputs 2o - 1 .. 2o + 2 are tri((x - 2o - 0.5) / 2) = 1/8, 3/8, 3/8, 1/8.
        let row = Pixels {
            data: vec![0, 80, 160, 240, 40, 120, 200, 8],
            width: 8,
            height: 1,
            channels: 1,
        };
        let half = row.resize(4, 1, Filter::Bilinear);
        let expected: f64 = 0.125 * 80.0 + 0.375 * 160.0 + 0.375 * 240.0 + 0.125 * 40.0;
        assert_eq!(half.data[1], expected.round() as u8);
    }

    #[test]
    fn channels_are_resampled_independently() {
        let two = image(31, 17, 2);
        let both = two.resize(12, 40, Filter::Bilinear);
        for ch in 0..2 {
            let alone = two.channel(ch).resize(12, 40, Filter::Bilinear);
            assert_eq!(both.channel(ch), alone, "channel {ch}");
        }
        let three = image(31, 17, 3);
        let rgb = three.resize(50, 9, Filter::Bilinear);
        assert_eq!(
            rgb.channel(1),
            three.channel(1).resize(50, 9, Filter::Bilinear)
        );
    }

    /// A one-channel `height x width` plane resized with the box filter.
    fn boxed(plane: &[u8], (height, width): (usize, usize), (h, w): (usize, usize)) -> Vec<u8> {
        let pixels = Pixels {
            data: plane.to_vec(),
            width,
            height,
            channels: 1,
        };
        pixels.resize(w, h, Filter::Box).data
    }

    #[test]
    fn box_halving_averages_pairs_and_doubling_repeats() {
        // 4 -> 2: each output is the mean of a pair, rounded half up.
        assert_eq!(boxed(&[0, 3, 10, 20], (1, 4), (1, 2)), vec![2, 15]);
        // 2 -> 4: each input covers two outputs.
        assert_eq!(boxed(&[7, 9], (1, 2), (1, 4)), vec![7, 7, 9, 9]);
        // Vertically the same.
        assert_eq!(boxed(&[0, 3, 10, 20], (4, 1), (2, 1)), vec![2, 15]);
        // Same size: untouched.
        assert_eq!(boxed(&[1, 2, 3], (1, 3), (1, 3)), vec![1, 2, 3]);
    }

    #[test]
    fn crop_takes_the_box() {
        let img = image(5, 4, 2);
        let c = img.crop(1, 2, 3, 2);
        assert_eq!((c.width, c.height), (3, 2));
        assert_eq!(&c.data[..2], &img.data[(2 * 5 + 1) * 2..][..2]);
        assert_eq!(
            &c.data[c.data.len() - 2..],
            &img.data[(3 * 5 + 3) * 2..][..2]
        );
    }
}
