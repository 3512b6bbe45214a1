//! The digital family of Hendrycks & Dietterich (2019): elastic transform
//! (a random affine warp, then a smooth random displacement), pixelate (a
//! box-filter shrink and regrow) and JPEG compression, with the CIFAR-10-C
//! parameters of their `make_cifar_c.py`. Contrast, also theirs "digital",
//! is in [`super::intensity`].

use std::io::Cursor;

use image::codecs::jpeg::JpegEncoder;
use image::{ExtendedColorType, ImageFormat};
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::border::Border;
use super::filter::gaussian_filter;
use super::image::Image;
use super::resample::remap;
use crate::error::{DataError, Result};
use crate::pillow_resize::{Filter, Pixels};

/// `(alpha, sigma, affine)` of the elastic transform per severity 1..5, as
/// fractions of the image side (the reference's `IMSIZE * (...)` with
/// `IMSIZE = 32`): displacement scale, displacement smoothness, and the
/// largest move of the affine warp's anchor points.
pub const ELASTIC: [(f64, f64, f64); 5] = [
    (0.0, 0.0, 0.08),
    (0.05, 0.2, 0.07),
    (0.08, 0.06, 0.06),
    (0.1, 0.04, 0.05),
    (0.1, 0.03, 0.03),
];
/// The fraction of each side kept by the pixelate shrink per severity 1..5.
pub const PIXELATE: [f64; 5] = [0.95, 0.9, 0.85, 0.75, 0.65];
/// JPEG quality per severity 1..5.
pub const JPEG_QUALITY: [u8; 5] = [80, 65, 58, 50, 40];

/// The elastic transform's random numbers, uniform in `[0, 1)` and drawn
/// in this order. numpy's `uniform(low, high)` is `low + (high - low) * u`:
/// [`elastic_transform`] makes its values from these `u` that way.
#[derive(Debug, Clone, PartialEq)]
pub struct ElasticDraws {
    /// The moves of the three anchor points, `x` then `y` of each.
    pub affine: [f64; 6],
    /// `height x width` each (row-major): the displacement fields `dx`,
    /// then `dy`, before smoothing.
    pub dx: Vec<f64>,
    pub dy: Vec<f64>,
}

impl ElasticDraws {
    /// The draws of the elastic transform of a `height x width` image.
    pub fn draw(height: usize, width: usize, rng: &mut ChaCha8Rng) -> ElasticDraws {
        let affine = std::array::from_fn(|_| rng.random());
        let mut field = || (0..height * width).map(|_| rng.random()).collect();
        let dx = field();
        ElasticDraws {
            affine,
            dx,
            dy: field(),
        }
    }
}

/// The elastic transform. With `s = min(height, width)` (32 for CIFAR-10,
/// where this is the reference's `IMSIZE`), the fractions become pixels:
/// `alpha * s`, `sigma * s`, `affine * s`.
///
/// 1. Affine warp: the anchor points `(cx + d, cy + d)`, `(cx + d, cy -
///    d)`, `(cx - d, cy - d)` (`cx = width / 2`, `cy = height / 2`, `d = s /
///    3`, integer divisions; `(x, y)` order) each move by `x` then `y`
///    uniform in `+-affine * s` (the draws' `affine`); [`affine_warp`] takes
///    the anchors to the moved points.
/// 2. Displacement: fields `dx` then `dy` of values uniform in `[-1, 1)`
///    (the draws' `dx` and `dy`), each smoothed by a Gaussian of deviation
///    `sigma * s` (scipy's filter, truncated at 3 deviations, `reflect`
///    borders) and scaled by `alpha * s`; output pixel `(y, x)` reads the
///    warped image at `(y + dy, x + dx)` bilinearly, `reflect` borders
///    (scipy's `map_coordinates`, order 1); clipped to `[0, 1]`.
///
/// The reference carries `x` on the first axis of the anchors, which is the
/// height; for square images the two agree.
pub fn elastic_transform(
    image: &Image,
    (alpha, sigma, affine): (f64, f64, f64),
    draws: &ElasticDraws,
) -> Image {
    let (h, w) = (image.height, image.width);
    let side = h.min(w) as f64;
    let (alpha, sigma, affine) = (alpha * side, sigma * side, affine * side);
    let (cx, cy, d) = ((w / 2) as f64, (h / 2) as f64, (h.min(w) / 3) as f64);
    let anchors = [(cx + d, cy + d), (cx + d, cy - d), (cx - d, cy - d)];
    let uniform = |half: f64, u: f64| -half + 2.0 * half * u;
    let moves = draws.affine.map(|u| uniform(affine, u));
    let moved: [(f64, f64); 3] =
        std::array::from_fn(|k| (anchors[k].0 + moves[2 * k], anchors[k].1 + moves[2 * k + 1]));
    let warped = affine_warp(image, &anchors, &moved);
    let field = |draws: &[f64]| {
        let noise: Vec<f64> = draws.iter().map(|&u| uniform(1.0, u)).collect();
        gaussian_filter(&noise, (h, w), sigma, 3.0, Border::Reflect)
            .into_iter()
            .map(|v| v * alpha)
            .collect::<Vec<f64>>()
    };
    let (dx, dy) = (field(&draws.dx), field(&draws.dy));
    let displaced = |y: usize, x: usize| (y as f64 + dy[y * w + x], x as f64 + dx[y * w + x]);
    remap(&warped, (h, w), displaced, Border::Reflect).map(|v| v.clamp(0.0, 1.0))
}

/// The affine map `[[a, b, c], [d, e, f]]` taking the three points `from`
/// to `to` (`(x, y)` each), as OpenCV's `getAffineTransform`; None when the
/// points of `from` are collinear.
pub fn affine_map(from: &[(f64, f64); 3], to: &[(f64, f64); 3]) -> Option<[[f64; 3]; 2]> {
    // Solve [x y 1] (a b c)^T = x' and = y' by Cramer's rule.
    let det3 = |m: [[f64; 3]; 3]| {
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    };
    let rows = from.map(|(x, y)| [x, y, 1.0]);
    let det = det3(rows);
    if det.abs() < 1e-9 {
        return None;
    }
    let solve = |rhs: [f64; 3]| {
        let mut out = [0.0; 3];
        for (col, value) in out.iter_mut().enumerate() {
            let mut m = rows;
            for (row, r) in m.iter_mut().enumerate() {
                r[col] = rhs[row];
            }
            *value = det3(m) / det;
        }
        out
    };
    Some([solve(to.map(|p| p.0)), solve(to.map(|p| p.1))])
}

/// OpenCV's `warpAffine(image, getAffineTransform(anchors, moved),
/// borderMode=BORDER_REFLECT_101)`: every channel resampled so that output
/// pixel `p = (x, y)` reads the input at `M^-1 p`, `M` the affine map taking
/// `anchors` to `moved` ([`affine_map`]), bilinearly with reflect-101
/// borders, at exact positions (OpenCV rounds them to 1/32 pixel). Collinear
/// anchors (images under 3 pixels a side) leave the image as it is.
pub fn affine_warp(image: &Image, anchors: &[(f64, f64); 3], moved: &[(f64, f64); 3]) -> Image {
    let Some(inverse) = affine_map(moved, anchors) else {
        return image.clone();
    };
    let position = |y: usize, x: usize| {
        let (x, y) = (x as f64, y as f64);
        (
            inverse[1][0] * x + inverse[1][1] * y + inverse[1][2],
            inverse[0][0] * x + inverse[0][1] * y + inverse[0][2],
        )
    };
    remap(
        image,
        (image.height, image.width),
        position,
        Border::Reflect101,
    )
}

/// Pixelate: each channel's bytes shrunk to `int(height * keep) x
/// int(width * keep)` (at least one pixel) and grown back, both with
/// Pillow's box filter ([`crate::pillow_resize`]), as the reference's two
/// `PIL.Image.resize(..., Image.BOX)`.
pub fn pixelate(image: &Image, keep: f64) -> Image {
    let (h, w) = (image.height, image.width);
    let small = |n: usize| ((n as f64 * keep) as usize).max(1);
    let (sh, sw) = (small(h), small(w));
    let bytes = image.to_bytes();
    let out: Vec<u8> = bytes
        .chunks_exact(image.plane_len())
        .flat_map(|plane| {
            let plane = Pixels {
                data: plane.to_vec(),
                width: w,
                height: h,
                channels: 1,
            };
            plane
                .resize(sw, sh, Filter::Box)
                .resize(w, h, Filter::Box)
                .data
        })
        .collect();
    Image::from_bytes(&out, image.channels, h, w)
}

/// JPEG compression: the image's bytes encoded at `quality` by the `image`
/// crate's baseline encoder (libjpeg's quality scaling of the standard
/// tables) and decoded back. Pillow, which the reference calls, subsamples
/// the chroma of colour images 2x2 (4:2:0); the `image` crate keeps full
/// chroma (4:4:4), so colours lose less than in CIFAR-10-C (the luma is
/// quantised the same). Fails only for images the format cannot hold
/// (sides above 65535).
pub fn jpeg_compression(image: &Image, quality: u8) -> Result<Image> {
    let (h, w, channels) = (image.height, image.width, image.channels);
    let bytes = &image.to_bytes();
    let plane = image.plane_len();
    let interleaved: Vec<u8> = (0..plane)
        .flat_map(|i| (0..channels).map(move |c| bytes[c * plane + i]))
        .collect();
    let colour = if channels == 3 {
        ExtendedColorType::Rgb8
    } else {
        ExtendedColorType::L8
    };
    let refused = |e: image::ImageError| {
        DataError::Invalid(format!("jpeg_compression of a {h}x{w} image: {e}"))
    };
    let mut encoded = Vec::new();
    JpegEncoder::new_with_quality(&mut encoded, quality)
        .encode(&interleaved, w as u32, h as u32, colour)
        .map_err(refused)?;
    let decoded = image::load(Cursor::new(&encoded), ImageFormat::Jpeg).map_err(refused)?;
    let pixels = if channels == 3 {
        decoded.to_rgb8().into_raw()
    } else {
        decoded.to_luma8().into_raw()
    };
    let chw: Vec<u8> = (0..channels)
        .flat_map(|c| pixels.iter().skip(c).step_by(channels).copied())
        .collect();
    Ok(Image::from_bytes(&chw, channels, h, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn the_affine_map_takes_the_anchors_to_the_moved_points() {
        let from = [(20.0, 20.0), (20.0, 12.0), (12.0, 12.0)];
        let to = [(21.5, 19.0), (19.25, 12.5), (12.0, 10.75)];
        let m = affine_map(&from, &to).unwrap();
        // Short dyadic inputs make the determinants exact; the quotients and this
        // evaluation add ~5 roundings of values < 64 (ulp 1.4e-14): < 1e-13.
        for (p, q) in from.iter().zip(&to) {
            let x = m[0][0] * p.0 + m[0][1] * p.1 + m[0][2];
            let y = m[1][0] * p.0 + m[1][1] * p.1 + m[1][2];
            assert!((x - q.0).abs() < 1e-12 && (y - q.1).abs() < 1e-12);
        }
        assert!(affine_map(&[(1.0, 1.0); 3], &to).is_none());
    }

    #[test]
    fn an_elastic_transform_without_moves_is_the_identity() {
        let image = Image {
            data: (0..2 * 6 * 5).map(|v| v as f64 / 60.0).collect(),
            channels: 2,
            height: 6,
            width: 5,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let draws = ElasticDraws::draw(6, 5, &mut rng);
        let out = elastic_transform(&image, (0.0, 0.0, 0.0), &draws);
        // Zero moves sample each pixel at itself, up to the identity affine's round-off
        // (< 1e-14 in position) times a neighbour step of <= 1/6: < 2e-15.
        for (a, b) in out.data.iter().zip(&image.data) {
            assert!((a - b).abs() < 1e-12);
        }
    }

    #[test]
    fn jpeg_keeps_a_flat_image_and_pixelate_a_flat_one_too() {
        let flat = Image::from_bytes(&[90; 3 * 16 * 16], 3, 16, 16);
        let out = jpeg_compression(&flat, 40).unwrap();
        // Flat 90: DC 8 * (90 - 128) = -304, quantised with quality 40's step 20 to -300,
        // 90.5 after the inverse DCT: 90 or 91 under any IDCT path's rounding.
        assert!(out.to_bytes().iter().all(|&v| v.abs_diff(90) <= 1));
        assert_eq!(pixelate(&flat, 0.65), flat);
    }
}
