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
use super::plasma::{plasma_fractal, plasma_side};
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

/// Snow. A layer of `height x width` Gaussian values (`mean`, `std`) is
/// [`clipped_zoom`]ed by `zoom`, cleared below `threshold`, clipped to `[0,
/// 1]` and quantised to bytes (the reference makes it an 8-bit PIL image);
/// then streaked by the motion blur ([`motion_blur_at`], our rendering of
/// ImageMagick's `MotionBlurImage` that the reference calls) at an angle
/// uniform in [`SNOW_ANGLE`], and quantised again, rounding (ImageMagick
/// writes it back as an 8-bit PNG). The image is mixed with a brightened
/// copy, `keep * x + (1 - keep) * max(x, 1.5 * grey + 0.5)` (`grey` the
/// pixel's [`luma`]; the value itself for one channel), and the layer is
/// added twice, as it is and turned by 180 degrees; clipped to `[0, 1]`.
/// The Gaussian values are drawn first, then the angle.
pub fn snow_corruption(image: &Image, p: &Snow, rng: &mut ChaCha8Rng) -> Image {
    let (h, w) = (image.height, image.width);
    let noise: Vec<f64> = (0..h * w)
        .map(|_| {
            let z: f64 = StandardNormal.sample(rng);
            p.mean + p.std * z
        })
        .collect();
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
    let angle = rng.random_range(SNOW_ANGLE.0..SNOW_ANGLE.1);
    let streaked = motion_blur_at(&layer, p.streak_radius, p.streak_sigma, angle)
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

/// Frost: `clip(keep * x + weight * f, 0, 1)` with `f` a crop of one of the
/// frost photographs ([`FrostTextures`]), the photograph drawn uniformly,
/// then the crop's top and left offsets uniform in `0..texture side - image
/// side` (numpy's `randint`, upper end excluded). A texture no larger than
/// the image is read with offset 0 and repeated (tiled) past its edges,
/// where the reference would fail. One-channel images blend the texture's
/// [`luma`]; the reference has colour images only.
pub fn frost(
    image: &Image,
    textures: &FrostTextures,
    (keep, weight): (f64, f64),
    rng: &mut ChaCha8Rng,
) -> Image {
    let (h, w) = (image.height, image.width);
    let texture = &textures.textures()[rng.random_range(0..textures.textures().len())];
    let (th, tw) = (texture.height, texture.width);
    let top = rng.random_range(0..th.saturating_sub(h).max(1));
    let left = rng.random_range(0..tw.saturating_sub(w).max(1));
    let tplane = texture.plane_len();
    let at = |c: usize, y: usize, x: usize| {
        texture.data[c * tplane + ((top + y) % th) * tw + (left + x) % tw]
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

/// Fog: `clip((x + amount * p) * m / (m + amount), 0, 1)` with `p` the
/// top-left `height x width` of a [`plasma_fractal`] of side [`plasma_side`]
/// and decay `decay` (the same for every channel), and `m` the image's
/// largest value, so the fog lightens without overexposing.
pub fn fog(image: &Image, (amount, decay): (f64, f64), rng: &mut ChaCha8Rng) -> Image {
    let side = plasma_side(image.height, image.width);
    let map = plasma_fractal(side, decay, rng);
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
        let out = fog(&grey(0.5, 8, 8), (1.0, 2.0), &mut rng);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let map = plasma_fractal(32, 2.0, &mut rng);
        for y in 0..8 {
            for x in 0..8 {
                let expected = (0.5 + map[y * 32 + x]) * 0.5 / 1.5;
                // The same f64 operations in the same order (amount 1 multiplies exactly).
                assert!((out.data[y * 8 + x] - expected).abs() < 1e-15);
            }
        }
        // Black stays black: its largest value is 0.
        let black = fog(&grey(0.0, 4, 4), (1.5, 1.75), &mut rng);
        assert!(black.data.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn snow_only_brightens_and_its_layer_is_symmetric() {
        let image = grey(0.3, 16, 16);
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let out = snow_corruption(&image, &SNOW[4], &mut rng);
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
        let out = frost(&grey(0.5, 2, 3), &textures, (0.8, 0.5), &mut rng);
        // Grey luma of a grey texture is the texture; offsets are 0..2 and 0..3.
        let left = ((out.data[0] - 0.4) / 0.5 * 10.0).round() as usize;
        assert!(left < 3, "{:?}", out.data);
        for (i, v) in out.data.iter().enumerate() {
            let f = ((left + i % 3) % 6) as f64 / 10.0;
            // Luma of three equal values and a blend: <= 6 roundings of values <= 1, < 7e-16.
            assert!((v - (0.4 + 0.5 * f)).abs() < 1e-12, "{:?}", out.data);
        }
    }
}
