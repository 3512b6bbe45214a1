//! Training-time augmentation: random crop with zero padding, then random
//! horizontal flip (torchvision's `RandomCrop(size, padding=p)` followed by
//! `RandomHorizontalFlip()`, both before normalisation, so padding is black).
//!
//! For a sample, the crop offsets `dy, dx` are drawn uniformly from `0..=2p`
//! and the flip with probability 1/2, in that order, from the epoch's
//! augmentation stream. Output pixel `(c, y, x)` is input pixel
//! `(c, y + dy - p, x' + dx - p)` with `x' = W - 1 - x` if flipped else `x`,
//! or 0 where that falls outside the image.

use rand::Rng;
use serde::{Deserialize, Serialize};

use super::dataset::SampleShape;

/// Which augmentations to apply; `Augmentation::NONE` for evaluation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Augmentation {
    /// Zero padding `p` of the random crop; 0 turns cropping off.
    pub crop_padding: usize,
    /// Mirror left-right with probability 1/2. Wrong for data whose classes
    /// are not mirror-symmetric (digits, letters): leave it off there.
    pub horizontal_flip: bool,
}

/// The random choices for one sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Draw {
    pub dy: usize,
    pub dx: usize,
    pub flip: bool,
}

impl Augmentation {
    /// No augmentation.
    pub const NONE: Augmentation = Augmentation {
        crop_padding: 0,
        horizontal_flip: false,
    };

    /// The usual recipe for an image of this size: padding 4 when the
    /// smaller side is at least 32 (CIFAR), 2 when at least 16 (28x28
    /// Fashion-MNIST), 1 below (8x8 digits); flip on.
    pub fn standard(height: usize, width: usize) -> Augmentation {
        let side = height.min(width);
        let crop_padding = match side {
            32.. => 4,
            16.. => 2,
            _ => 1,
        };
        Augmentation {
            crop_padding,
            horizontal_flip: true,
        }
    }

    /// Whether this does anything.
    pub fn is_none(&self) -> bool {
        *self == Augmentation::NONE
    }

    /// Draws the choices for one sample (nothing is drawn for a disabled
    /// augmentation).
    pub(crate) fn draw(&self, rng: &mut impl Rng) -> Draw {
        let p = self.crop_padding;
        let (dy, dx) = if p > 0 {
            (rng.random_range(0..=2 * p), rng.random_range(0..=2 * p))
        } else {
            (0, 0)
        };
        let flip = self.horizontal_flip && rng.random_bool(0.5);
        Draw { dy, dx, flip }
    }

    /// Writes the augmented CHW sample `src` into `out`, mapping each byte
    /// through its channel's table (`tables[c][byte]`); padding maps byte 0.
    pub(crate) fn apply<T: Copy>(
        &self,
        draw: Draw,
        src: &[u8],
        (channels, height, width): SampleShape,
        tables: &[[T; 256]],
        out: &mut [T],
    ) {
        let p = self.crop_padding as isize;
        let plane = height * width;
        for c in 0..channels {
            let table = &tables[c];
            let src = &src[c * plane..(c + 1) * plane];
            let out = &mut out[c * plane..(c + 1) * plane];
            for y in 0..height {
                let sy = y as isize + draw.dy as isize - p;
                for x in 0..width {
                    let xf = if draw.flip { width - 1 - x } else { x };
                    let sx = xf as isize + draw.dx as isize - p;
                    let inside =
                        (0..height as isize).contains(&sy) && (0..width as isize).contains(&sx);
                    let byte = if inside {
                        src[sy as usize * width + sx as usize]
                    } else {
                        0
                    };
                    out[y * width + x] = table[byte as usize];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{stream, Purpose};
    use proptest::prelude::*;

    fn identity_table() -> Vec<[u8; 256]> {
        vec![std::array::from_fn(|v| v as u8)]
    }

    fn at(dy: usize, dx: usize, flip: bool) -> Draw {
        Draw { dy, dx, flip }
    }

    fn run(aug: Augmentation, draw: Draw, src: &[u8], h: usize, w: usize) -> Vec<u8> {
        let mut out = vec![99; h * w];
        aug.apply(draw, src, (1, h, w), &identity_table(), &mut out);
        out
    }

    // 3x3 image 1..=9, row-major.
    const IMG: [u8; 9] = [1, 2, 3, 4, 5, 6, 7, 8, 9];

    #[test]
    fn centred_crop_without_flip_is_identity() {
        let aug = Augmentation {
            crop_padding: 1,
            horizontal_flip: true,
        };
        let out = run(aug, at(1, 1, false), &IMG, 3, 3);
        assert_eq!(out, IMG.to_vec());
    }

    #[test]
    fn crop_shifts_in_zeros() {
        let aug = Augmentation {
            crop_padding: 1,
            horizontal_flip: false,
        };
        // dy = dx = 0: window starts one pixel above and left of the image.
        let out = run(aug, at(0, 0, false), &IMG, 3, 3);
        assert_eq!(out, vec![0, 0, 0, 0, 1, 2, 0, 4, 5]);
        // dy = 2, dx = 1: one row down.
        let out = run(aug, at(2, 1, false), &IMG, 3, 3);
        assert_eq!(out, vec![4, 5, 6, 7, 8, 9, 0, 0, 0]);
    }

    #[test]
    fn flip_mirrors_rows_after_the_crop() {
        let aug = Augmentation {
            crop_padding: 1,
            horizontal_flip: true,
        };
        let out = run(aug, at(1, 1, true), &IMG, 3, 3);
        assert_eq!(out, vec![3, 2, 1, 6, 5, 4, 9, 8, 7]);
        // Crop window shifted right by one (dx = 2), then mirrored.
        let out = run(aug, at(1, 2, true), &IMG, 3, 3);
        assert_eq!(out, vec![0, 3, 2, 0, 6, 5, 0, 9, 8]);
    }

    #[test]
    fn standard_padding_follows_image_size() {
        assert_eq!(Augmentation::standard(32, 32).crop_padding, 4);
        assert_eq!(Augmentation::standard(28, 28).crop_padding, 2);
        assert_eq!(Augmentation::standard(8, 8).crop_padding, 1);
    }

    #[test]
    fn disabled_augmentation_draws_nothing() {
        let mut rng = stream(1, Purpose::Augment, 0);
        let draw = Augmentation::NONE.draw(&mut rng);
        assert_eq!(draw, at(0, 0, false));
    }

    proptest! {
        /// Every output pixel is an input pixel of the same channel or
        /// padding; with no padding the output is the input, up to a mirror.
        #[test]
        fn output_pixels_come_from_the_input_or_padding(
            (c, h, w, pixels) in (1usize..4, 1usize..7, 1usize..7).prop_flat_map(|(c, h, w)| {
                (Just(c), Just(h), Just(w), proptest::collection::vec(1u8..=255, c * h * w))
            }),
            p in 0usize..4,
            seed in any::<u64>(),
        ) {
            let aug = Augmentation { crop_padding: p, horizontal_flip: true };
            let mut rng = stream(seed, Purpose::Augment, 0);
            let draw = aug.draw(&mut rng);
            prop_assert!(draw.dy <= 2 * p && draw.dx <= 2 * p);
            let tables = vec![std::array::from_fn(|v| v as u8); c];
            let mut out = vec![0u8; c * h * w];
            aug.apply(draw, &pixels, (c, h, w), &tables, &mut out);
            let plane = h * w;
            for ch in 0..c {
                let input = &pixels[ch * plane..(ch + 1) * plane];
                for &v in &out[ch * plane..(ch + 1) * plane] {
                    prop_assert!(v == 0 || input.contains(&v));
                }
            }
            if p == 0 {
                let mut expected = pixels.clone();
                if draw.flip {
                    for row in expected.chunks_exact_mut(w) {
                        row.reverse();
                    }
                }
                prop_assert_eq!(out, expected);
            }
        }
    }
}
