//! The weather family of Hendrycks & Dietterich (2019): snow (a blurred,
//! zoomed noise layer over a brightened image), frost (a crop of a frost
//! photograph blended in) and fog (a plasma fractal added), with the
//! CIFAR-10-C parameters of their `make_cifar_c.py`. Brightness, also theirs
//! "weather", is in [`super::intensity`].

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, StandardNormal};

use super::blur::motion_blur_at;
use super::frost_textures::FrostTextures;
use super::image::Image;
use super::plasma::{plasma_draws, plasma_fractal, plasma_side};
use super::resample::clipped_zoom;

/// The snow corruption's parameters at one severity (the reference's tuple
/// `c`, in its order).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snow {
    /// Mean and deviation of the Gaussian snow layer (`c[0]`, `c[1]`).
    pub mean: f64,
    pub std: f64,
    /// Zoom of the layer's centre (`c[2]`): larger flakes.
    pub zoom: f64,
    /// Layer values below this are cleared (`c[3]`).
    pub threshold: f64,
    /// Radius and deviation of the flakes' motion streak (`c[4]`, `c[5]`).
    pub streak_radius: usize,
    pub streak_sigma: f64,
    /// Weight of the image against its brightened copy (`c[6]`).
    pub keep: f64,
}

const fn snow(
    (mean, std, zoom, threshold): (f64, f64, f64, f64),
    (streak_radius, streak_sigma, keep): (usize, f64, f64),
) -> Snow {
    Snow {
        mean,
        std,
        zoom,
        threshold,
        streak_radius,
        streak_sigma,
        keep,
    }
}

/// Snow per severity 1..5.
pub const SNOW: [Snow; 5] = [
    snow((0.1, 0.2, 1.0, 0.6), (8, 3.0, 0.95)),
    snow((0.1, 0.2, 1.0, 0.5), (10, 4.0, 0.9)),
    snow((0.15, 0.3, 1.75, 0.55), (10, 4.0, 0.9)),
    snow((0.25, 0.3, 2.25, 0.6), (12, 6.0, 0.85)),
    snow((0.3, 0.3, 1.25, 0.65), (14, 12.0, 0.8)),
];
/// The flakes' streak angle is uniform in `SNOW_ANGLE` degrees (falling
/// downwards, up to 45 degrees off vertical).
pub const SNOW_ANGLE: (f64, f64) = (-135.0, -45.0);
/// `(image weight, frost weight)` per severity 1..5.
pub const FROST: [(f64, f64); 5] = [
    (1.0, 0.2),
    (1.0, 0.3),
    (0.9, 0.4),
    (0.85, 0.4),
    (0.75, 0.45),
];
/// `(fog amount, plasma decay)` per severity 1..5.
pub const FOG: [(f64, f64); 5] = [(0.2, 3.0), (0.5, 3.0), (0.75, 2.5), (1.0, 2.0), (1.5, 1.75)];

/// Snow's random numbers, drawn in this order.
#[derive(Debug, Clone, PartialEq)]
pub struct SnowDraws {
    /// `height x width` standard normal values (row-major): the layer is
    /// `mean + std * z`, as numpy's `normal(loc, scale)` makes it.
    pub normals: Vec<f64>,
    /// The flakes' streak angle in degrees, uniform in [`SNOW_ANGLE`].
    pub angle: f64,
}

impl SnowDraws {
    /// The draws of the snow on a `height x width` image.
    pub fn draw(height: usize, width: usize, rng: &mut ChaCha8Rng) -> SnowDraws {
        let normals = (0..height * width)
            .map(|_| StandardNormal.sample(rng))
            .collect();
        let angle = rng.random_range(SNOW_ANGLE.0..SNOW_ANGLE.1);
        SnowDraws { normals, angle }
    }
}

/// Snow. A layer of `height x width` Gaussian values (`mean + std * z`, `z`
/// the draws' normals) is [`clipped_zoom`]ed by `zoom`, cleared below
/// `threshold`, clipped to `[0, 1]` and quantised to bytes (the reference
/// makes it an 8-bit PIL image); then streaked by the motion blur
/// ([`motion_blur_at`], our rendering of ImageMagick's `MotionBlurImage`
/// that the reference calls) at the draws' angle, and quantised again,
/// rounding (ImageMagick writes it back as an 8-bit PNG). The image is mixed
/// with a brightened copy, `keep * x + (1 - keep) * max(x, 1.5 * grey +
/// 0.5)` (`grey` the pixel's [`luma`]; the value itself for one channel),
/// and the layer is added twice, as it is and turned by 180 degrees;
/// clipped to `[0, 1]`.
pub fn snow_corruption(image: &Image, p: &Snow, draws: &SnowDraws) -> Image {
    let (h, w) = (image.height, image.width);
    let noise: Vec<f64> = draws.normals.iter().map(|z| p.mean + p.std * z).collect();
    let layer: Vec<f64> = clipped_zoom(&noise, (h, w), p.zoom)
        .into_iter()
        .map(|v| if v < p.threshold { 0.0 } else { v })
        .collect();
    let layer = Image {
        data: layer,
        channels: 1,
        height: h,
        width: w,
    };
    let layer = Image::from_bytes(&layer.to_bytes(), 1, h, w);
    let streaked = motion_blur_at(&layer, p.streak_radius, p.streak_sigma, draws.angle)
        .map(|v| (v * 255.0).round() / 255.0);
    let plane = image.plane_len();
    let grey: Vec<f64> = (0..plane)
        .map(|i| match image.channels {
            3 => luma(
                image.data[i],
                image.data[plane + i],
                image.data[2 * plane + i],
            ),
            _ => image.data[i],
        })
        .collect();
    image.map_pixels(|_, i, x| {
        let brightened = x.max(grey[i] * 1.5 + 0.5);
        let mixed = p.keep * x + (1.0 - p.keep) * brightened;
        (mixed + streaked.data[i] + streaked.data[plane - 1 - i]).clamp(0.0, 1.0)
    })
}

/// A pixel's luma, `0.299 R + 0.587 G + 0.114 B` (ITU-R BT.601, OpenCV's
/// `RGB2GRAY`).
pub fn luma(r: f64, g: f64, b: f64) -> f64 {
    0.299 * r + 0.587 * g + 0.114 * b
}

/// Frost's random numbers: which photograph, then the crop's top-left
/// corner in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrostCrop {
    /// Index into [`FrostTextures::textures`].
    pub texture: usize,
    pub top: usize,
    pub left: usize,
}

impl FrostCrop {
    /// The photograph drawn uniformly, then the crop's top and left offsets
    /// uniform in `0..texture side - image side` (numpy's `randint`, upper
    /// end excluded), for a `height x width` image; 0 where the texture is
    /// no larger than the image (see [`frost`]).
    pub fn draw(
        height: usize,
        width: usize,
        textures: &FrostTextures,
        rng: &mut ChaCha8Rng,
    ) -> FrostCrop {
        let texture = rng.random_range(0..textures.textures().len());
        let chosen = &textures.textures()[texture];
        let top = rng.random_range(0..chosen.height.saturating_sub(height).max(1));
        let left = rng.random_range(0..chosen.width.saturating_sub(width).max(1));
        FrostCrop { texture, top, left }
    }
}

/// Frost: `clip(keep * x + weight * f, 0, 1)` with `f` the crop of the
/// frost photograph ([`FrostTextures`]) that `crop` names. A texture no
/// larger than the image (offset 0) is repeated (tiled) past its edges,
/// where the reference would fail. One-channel images blend the texture's
/// [`luma`]; the reference has colour images only.
pub fn frost(
    image: &Image,
    textures: &FrostTextures,
    (keep, weight): (f64, f64),
    crop: &FrostCrop,
) -> Image {
    let w = image.width;
    let texture = &textures.textures()[crop.texture];
    let (th, tw) = (texture.height, texture.width);
    let tplane = texture.plane_len();
    let at = |c: usize, y: usize, x: usize| {
        texture.data[c * tplane + ((crop.top + y) % th) * tw + (crop.left + x) % tw]
    };
    image.map_pixels(|c, i, x| {
        let (y, xx) = (i / w, i % w);
        let f = match image.channels {
            3 => at(c, y, xx),
            _ => luma(at(0, y, xx), at(1, y, xx), at(2, y, xx)),
        };
        (keep * x + weight * f).clamp(0.0, 1.0)
    })
}

/// Fog's random numbers: the [`plasma_draws`] of a map of side
/// [`plasma_side`] for a `height x width` image.
pub fn fog_draws(height: usize, width: usize, rng: &mut ChaCha8Rng) -> Vec<f64> {
    plasma_draws(plasma_side(height, width), rng)
}

/// Fog: `clip((x + amount * p) * m / (m + amount), 0, 1)` with `p` the
/// top-left `height x width` of a [`plasma_fractal`] of side [`plasma_side`]
/// and decay `decay` made from `draws` ([`fog_draws`]; the same for every
/// channel), and `m` the image's largest value, so the fog lightens without
/// overexposing.
pub fn fog(image: &Image, (amount, decay): (f64, f64), draws: &[f64]) -> Image {
    let side = plasma_side(image.height, image.width);
    let map = plasma_fractal(side, decay, draws);
    let max = image.data.iter().copied().fold(0.0, f64::max);
    let w = image.width;
    image.map_pixels(|_, i, x| {
        let p = map[(i / w) * side + i % w];
        ((x + amount * p) * max / (max + amount)).clamp(0.0, 1.0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn grey(value: f64, h: usize, w: usize) -> Image {
        Image {
            data: vec![value; h * w],
            channels: 1,
            height: h,
            width: w,
        }
    }

    #[test]
    fn fog_of_a_flat_image_is_the_plasma_map_rescaled() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let draws = fog_draws(8, 8, &mut rng);
        let out = fog(&grey(0.5, 8, 8), (1.0, 2.0), &draws);
        let map = plasma_fractal(32, 2.0, &draws);
        for y in 0..8 {
            for x in 0..8 {
                let expected = (0.5 + map[y * 32 + x]) * 0.5 / 1.5;
                // The same f64 operations in the same order (amount 1 multiplies exactly).
                assert!((out.data[y * 8 + x] - expected).abs() < 1e-15);
            }
        }
        // Black stays black: its largest value is 0.
        let black = fog(&grey(0.0, 4, 4), (1.5, 1.75), &fog_draws(4, 4, &mut rng));
        assert!(black.data.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn snow_only_brightens_and_its_layer_is_symmetric() {
        let image = grey(0.3, 16, 16);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let out = snow_corruption(&image, &SNOW[4], &SnowDraws::draw(16, 16, &mut rng));
        // keep * x + (1 - keep) * max(x, ..) >= x up to 3 roundings of values <= 1
        // (< 4e-16); the mirrored pixel adds the same two streaks in the other order
        // (2 roundings). A streak off its mirror moves a pixel by >= 1/255.
        assert!(out.data.iter().all(|&v| v >= 0.3 - 1e-12));
        // Flat image: the layer plus its 180 degree turn is symmetric too.
        for i in 0..256 {
            assert!((out.data[i] - out.data[255 - i]).abs() < 1e-12);
        }
        assert!(out.data.iter().any(|&v| v > 0.5));
    }

    #[test]
    fn frost_blends_a_crop_of_a_texture() {
        // One 4x6 texture whose value is its column / 10 in every channel.
        let texture = Image {
            data: (0..3 * 24).map(|k| (k % 6) as f64 / 10.0).collect(),
            channels: 3,
            height: 4,
            width: 6,
        };
        let textures = FrostTextures::from_scaled(vec![texture]);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let crop = FrostCrop::draw(2, 3, &textures, &mut rng);
        // Offsets are 0..2 and 0..3.
        assert!(
            crop.texture == 0 && crop.top < 2 && crop.left < 3,
            "{crop:?}"
        );
        let out = frost(&grey(0.5, 2, 3), &textures, (0.8, 0.5), &crop);
        // Grey luma of a grey texture is the texture.
        for (i, v) in out.data.iter().enumerate() {
            let f = (crop.left + i % 3) as f64 / 10.0;
            // Luma of three equal values and a blend: <= 6 roundings of values <= 1, < 7e-16.
            assert!((v - (0.4 + 0.5 * f)).abs() < 1e-12, "{:?}", out.data);
        }
        // A texture narrower than the image is read from 0 and repeated.
        let crop = FrostCrop::draw(2, 9, &textures, &mut rng);
        assert_eq!(crop.left, 0);
        let out = frost(&grey(0.5, 2, 9), &textures, (0.8, 0.5), &crop);
        for (i, v) in out.data.iter().enumerate() {
            let f = (i % 9 % 6) as f64 / 10.0;
            assert!((v - (0.4 + 0.5 * f)).abs() < 1e-12, "{:?}", out.data);
        }
    }
}
