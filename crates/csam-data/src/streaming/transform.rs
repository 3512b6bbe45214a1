//! The image transforms of torchvision's ImageNet reference recipe
//! (`references/classification/presets.py`), on decoded 8-bit images:
//!
//! - training: `RandomResizedCrop(size, scale=(0.08, 1), ratio=(3/4, 4/3),
//!   bilinear, antialias)` then `RandomHorizontalFlip(0.5)`;
//! - evaluation: `Resize(resize)` of the shorter side, then
//!   `CenterCrop(size)`.
//!
//! The crop box follows torchvision's `RandomResizedCrop.get_params` (up to 10
//! tries of an area fraction uniform in `scale` and a log-uniform aspect
//! ratio, then a central crop with the ratio clamped) and
//! `CenterCrop`'s rounding (Python's `round`, half to even); the resize is
//! Pillow's bilinear filter ([`super::resample`]). The random numbers are
//! ours (a ChaCha8 stream per sample), so the crops follow torchvision's
//! distribution, not its samples.

use rand::Rng;

use crate::pillow_resize::{Filter, Pixels};

/// How a decoded image becomes a square sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ImageTransform {
    /// Training: a random box of `scale` (fraction of the area) and `ratio`
    /// (width / height), resized to `size x size`, mirrored with
    /// probability 1/2 when `flip`.
    RandomResizedCrop {
        size: usize,
        scale: (f64, f64),
        ratio: (f64, f64),
        flip: bool,
    },
    /// Evaluation: the shorter side resized to `resize` (the longer one in
    /// proportion, truncated), then the central `size x size` box.
    ResizeCenterCrop { resize: usize, size: usize },
}

/// A box of the source image, `left..left + width`, `top..top + height`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CropBox {
    pub left: usize,
    pub top: usize,
    pub width: usize,
    pub height: usize,
}

impl ImageTransform {
    /// The reference recipe's training transform at `size` (224 for
    /// ImageNet).
    pub fn training(size: usize) -> ImageTransform {
        ImageTransform::RandomResizedCrop {
            size,
            scale: (0.08, 1.0),
            ratio: (3.0 / 4.0, 4.0 / 3.0),
            flip: true,
        }
    }

    /// The reference recipe's evaluation transform at `size`: resize to
    /// `size * 256 / 224` (256 for 224), then the central crop.
    pub fn evaluation(size: usize) -> ImageTransform {
        ImageTransform::ResizeCenterCrop {
            resize: size * 256 / 224,
            size,
        }
    }

    /// Side of the square output.
    pub fn size(&self) -> usize {
        match *self {
            ImageTransform::RandomResizedCrop { size, .. }
            | ImageTransform::ResizeCenterCrop { size, .. } => size,
        }
    }

    /// Transforms `image` into a `size x size` image with the same channels,
    /// drawing the random choices (none for evaluation) from `rng`.
    pub fn apply(&self, image: &Pixels, rng: &mut impl Rng) -> Pixels {
        match *self {
            ImageTransform::RandomResizedCrop {
                size,
                scale,
                ratio,
                flip,
            } => {
                let b = random_resized_crop_box(image.width, image.height, scale, ratio, rng);
                let out = resized_crop(image, b, size);
                if flip && rng.random_bool(0.5) {
                    mirror(out)
                } else {
                    out
                }
            }
            ImageTransform::ResizeCenterCrop { resize, size } => {
                let (width, height) = shorter_side_to(image.width, image.height, resize);
                let resized = image.resize(width, height, Filter::Bilinear);
                let b = center_crop_box(width, height, size);
                if b.width == width && b.height == height {
                    resized
                } else {
                    resized.crop(b.left, b.top, b.width, b.height)
                }
            }
        }
    }
}

/// The box `b` of `image` resized to `size x size`: torchvision's
/// `F.resized_crop(img, b.top, b.left, b.height, b.width, [size, size])` on a
/// PIL image (bilinear, antialiased).
pub fn resized_crop(image: &Pixels, b: CropBox, size: usize) -> Pixels {
    image
        .crop(b.left, b.top, b.width, b.height)
        .resize(size, size, Filter::Bilinear)
}

/// torchvision's `RandomResizedCrop.get_params` for a `width x height`
/// image (see the module doc).
pub fn random_resized_crop_box(
    width: usize,
    height: usize,
    scale: (f64, f64),
    ratio: (f64, f64),
    rng: &mut impl Rng,
) -> CropBox {
    let area = (width * height) as f64;
    let log_ratio = (ratio.0.ln(), ratio.1.ln());
    for _ in 0..10 {
        let target_area = area * rng.random_range(scale.0..=scale.1);
        let aspect = rng.random_range(log_ratio.0..=log_ratio.1).exp();
        let w = round_half_even((target_area * aspect).sqrt());
        let h = round_half_even((target_area / aspect).sqrt());
        if w > 0 && h > 0 && w as usize <= width && h as usize <= height {
            let (w, h) = (w as usize, h as usize);
            let top = rng.random_range(0..=height - h);
            let left = rng.random_range(0..=width - w);
            return CropBox {
                left,
                top,
                width: w,
                height: h,
            };
        }
    }
    let in_ratio = width as f64 / height as f64;
    let (w, h) = if in_ratio < ratio.0 {
        (width, round_half_even(width as f64 / ratio.0) as usize)
    } else if in_ratio > ratio.1 {
        (round_half_even(height as f64 * ratio.1) as usize, height)
    } else {
        (width, height)
    };
    CropBox {
        left: (width - w) / 2,
        top: (height - h) / 2,
        width: w,
        height: h,
    }
}

/// torchvision's `Resize(resize)` output size for an int size: the shorter
/// side becomes `resize`, the longer `trunc(resize * long / short)`.
pub fn shorter_side_to(width: usize, height: usize, resize: usize) -> (usize, usize) {
    if width <= height {
        (resize, (resize * height) / width)
    } else {
        ((resize * width) / height, resize)
    }
}

/// torchvision's `CenterCrop(size)` box on a `width x height` image at
/// least `size` on each side: offsets `round((side - size) / 2)`, half to
/// even as Python rounds.
pub fn center_crop_box(width: usize, height: usize, size: usize) -> CropBox {
    let offset = |side: usize| round_half_even((side - size) as f64 / 2.0) as usize;
    CropBox {
        left: offset(width),
        top: offset(height),
        width: size,
        height: size,
    }
}

/// Python's `round(x)`: to the nearest integer, halves to the even one.
fn round_half_even(x: f64) -> i64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 && r as i64 % 2 != 0 {
        (r - x.signum()) as i64
    } else {
        r as i64
    }
}

/// The image mirrored left-right (torchvision's `hflip`).
pub fn mirror(mut image: Pixels) -> Pixels {
    let c = image.channels;
    for row in image.data.chunks_exact_mut(image.width * c) {
        let w = row.len() / c;
        for x in 0..w / 2 {
            for ch in 0..c {
                row.swap(x * c + ch, (w - 1 - x) * c + ch);
            }
        }
    }
    image
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn python_rounding() {
        for (x, r) in [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (2.4, 2),
            (2.6, 3),
            (-0.5, 0),
            (3.0, 3),
        ] {
            assert_eq!(round_half_even(x), r, "{x}");
        }
    }

    #[test]
    fn eval_sizes_follow_torchvision() {
        assert_eq!(shorter_side_to(500, 375, 256), (341, 256));
        assert_eq!(shorter_side_to(375, 500, 256), (256, 341));
        // (341 - 224) / 2 = 58.5 rounds to 58; (257 - 224) / 2 = 16.5 to 16.
        assert_eq!(center_crop_box(341, 257, 224).left, 58);
        assert_eq!(center_crop_box(341, 257, 224).top, 16);
        let t = ImageTransform::evaluation(224);
        assert_eq!(
            t,
            ImageTransform::ResizeCenterCrop {
                resize: 256,
                size: 224
            }
        );
    }

    #[test]
    fn random_boxes_lie_inside_with_the_allowed_area_and_ratio() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let (w, h) = (500, 375);
        for _ in 0..2000 {
            let b = random_resized_crop_box(w, h, (0.08, 1.0), (0.75, 4.0 / 3.0), &mut rng);
            assert!(b.left + b.width <= w && b.top + b.height <= h);
            let frac = (b.width * b.height) as f64 / (w * h) as f64;
            assert!((0.07..=1.0).contains(&frac), "{frac}");
        }
        // A thin image admits no box of the ratio range at most tries: the
        // fallback crops the centre with the ratio clamped.
        let mut never = ChaCha8Rng::seed_from_u64(0);
        let b = random_resized_crop_box(1000, 10, (1.0, 1.0), (0.75, 4.0 / 3.0), &mut never);
        assert_eq!((b.width, b.height, b.top), (13, 10, 0));
        assert_eq!(b.left, (1000 - 13) / 2);
    }

    #[test]
    fn mirror_reverses_pixels_not_channels() {
        let img = Pixels {
            data: vec![1, 2, 3, 4, 5, 6],
            width: 2,
            height: 1,
            channels: 3,
        };
        assert_eq!(mirror(img).data, vec![4, 5, 6, 1, 2, 3]);
    }
}
