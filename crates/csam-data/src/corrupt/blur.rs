//! The blur family of Hendrycks & Dietterich (2019): defocus blur (a disk
//! kernel), glass blur (Gaussian blurs around a local pixel shuffle), motion
//! blur (a one-sided Gaussian streak at a random angle) and zoom blur (the
//! mean of central zooms), with the CIFAR-10-C parameters of their
//! `make_cifar_c.py`. Each channel is filtered on its own; glass blur's
//! shuffle moves whole pixels.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use super::border::Border;
use super::filter::gaussian_filter;
use super::image::Image;
use super::resample::clipped_zoom;

/// `(radius, alias_blur)` of the defocus disk per severity 1..5.
pub const DEFOCUS: [(f64, f64); 5] = [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1.0, 0.2), (1.5, 0.1)];
/// `(radius, sigma)` of the motion streak per severity 1..5 (ImageMagick's
/// `MotionBlurImage` arguments in the reference code).
pub const MOTION: [(usize, f64); 5] = [(6, 1.0), (6, 1.5), (6, 2.0), (8, 2.0), (9, 2.5)];
/// The streak's angle is uniform in `+-MOTION_MAX_ANGLE` degrees, drawn per image.
pub const MOTION_MAX_ANGLE: f64 = 45.0;
/// `(sigma, max_delta, iterations)` of the glass blur per severity 1..5.
pub const GLASS: [(f64, usize, usize); 5] = [
    (0.05, 1, 1),
    (0.25, 1, 1),
    (0.4, 1, 1),
    (0.25, 1, 2),
    (0.4, 1, 2),
];
/// The zoom blur's largest step `n` per severity 1..5: it averages the
/// zooms by [`zoom_factor`]`(0..=n)`, `1, 1.01, ..., 1 + n / 100`. The
/// reference writes `np.arange(1, 1.06, 0.01)`, ..., `np.arange(1, 1.26,
/// 0.01)`, whose floating-point end points include 1.06 and 1.11 but not
/// 1.16, 1.21 and 1.26: these are the factors numpy gives.
pub const ZOOM_STEPS: [usize; 5] = [6, 11, 15, 20, 25];

/// The step between zoom blur's factors as numpy's `arange(1, stop, 0.01)`
/// takes it: the difference of its first two values, `(1 + 0.01) - 1 =
/// 0.010000000000000009`, not `0.01`.
const ZOOM_STEP: f64 = (1.0 + 0.01) - 1.0;

/// Zoom blur's `i`-th factor, numpy's `arange` value `1 + i * ZOOM_STEP`
/// (numpy fills an `arange` from its first two values). From `i = 13` on
/// some factors are one ulp above `1 + i * 0.01`, and that matters:
/// `1.2500000000000002` (not `1.25`) grows a 32-pixel image's 26-pixel
/// crop to `round(32.500000000000004) = 33` pixels in scipy's `zoom`,
/// where `1.25` gives 32 (ties to even), and so samples it at other
/// positions.
pub fn zoom_factor(i: usize) -> f64 {
    1.0 + i as f64 * ZOOM_STEP
}

/// A square filter of odd side, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub side: usize,
    pub weights: Vec<f64>,
}

/// The reference code's `disk(radius, alias_blur)`: the indicator of
/// `x^2 + y^2 <= radius^2` on the grid `-8..=8` (radii up to 8), normalised
/// to sum 1, then smoothed by a 3x3 Gaussian of standard deviation
/// `alias_blur` (OpenCV's `GaussianBlur`, borders reflected without
/// repeating the edge). Rows and columns that are zero all through are
/// dropped; they would add nothing to the filter.
pub fn disk_kernel(radius: f64, alias_blur: f64) -> Kernel {
    const HALF: i64 = 8;
    let side = (2 * HALF + 1) as usize;
    let mut disk: Vec<f64> = (-HALF..=HALF)
        .flat_map(|y| {
            (-HALF..=HALF).map(move |x| ((x * x + y * y) as f64 <= radius * radius) as u8 as f64)
        })
        .collect();
    let total: f64 = disk.iter().sum();
    disk.iter_mut().for_each(|v| *v /= total);
    let gauss = gaussian_taps3(alias_blur);
    let horizontal = separable_pass(&disk, side, side, &gauss, true);
    let smoothed = separable_pass(&horizontal, side, side, &gauss, false);
    trim_zero_border(Kernel {
        side,
        weights: smoothed,
    })
}

/// OpenCV's `getGaussianKernel(3, sigma)`: `exp(-i^2 / (2 sigma^2))` for
/// `i = -1, 0, 1`, normalised.
fn gaussian_taps3(sigma: f64) -> [f64; 3] {
    let side = (-1.0 / (2.0 * sigma * sigma)).exp();
    let total = 1.0 + 2.0 * side;
    [side / total, 1.0 / total, side / total]
}

/// One 3-tap pass along rows (`along_x`) or columns with reflect-101 borders.
fn separable_pass(
    data: &[f64],
    height: usize,
    width: usize,
    taps: &[f64; 3],
    along_x: bool,
) -> Vec<f64> {
    let mut out = vec![0.0; data.len()];
    for y in 0..height {
        for x in 0..width {
            out[y * width + x] = (-1i64..=1)
                .zip(taps)
                .map(|(d, w)| {
                    let (sy, sx) = if along_x {
                        (y, Border::Reflect101.index(x as i64 + d, width))
                    } else {
                        (Border::Reflect101.index(y as i64 + d, height), x)
                    };
                    w * data[sy * width + sx]
                })
                .sum();
        }
    }
    out
}

/// The kernel with its all-zero outer rings removed (it stays square and
/// centred because the disk is symmetric).
fn trim_zero_border(kernel: Kernel) -> Kernel {
    let side = kernel.side;
    let ring_is_zero = |r: usize| {
        (0..side).all(|i| {
            [(r, i), (side - 1 - r, i), (i, r), (i, side - 1 - r)]
                .iter()
                .all(|&(y, x)| kernel.weights[y * side + x] == 0.0)
        })
    };
    let rings = (0..side / 2).take_while(|&r| ring_is_zero(r)).count();
    let new_side = side - 2 * rings;
    let weights = (rings..rings + new_side)
        .flat_map(|y| (rings..rings + new_side).map(move |x| (y, x)))
        .map(|(y, x)| kernel.weights[y * side + x])
        .collect();
    Kernel {
        side: new_side,
        weights,
    }
}

/// Defocus blur: every channel correlated with [`disk_kernel`] (OpenCV's
/// `filter2D`, reflect-101 borders), then clipped to `[0, 1]`.
pub fn defocus_blur(image: &Image, radius: f64, alias_blur: f64) -> Image {
    let kernel = disk_kernel(radius, alias_blur);
    let half = (kernel.side / 2) as i64;
    let (h, w) = (image.height, image.width);
    let mut out = vec![0.0; image.data.len()];
    for (plane_in, plane_out) in image
        .data
        .chunks_exact(image.plane_len())
        .zip(out.chunks_exact_mut(image.plane_len()))
    {
        for y in 0..h {
            for x in 0..w {
                let mut sum = 0.0;
                for (ky, row) in kernel.weights.chunks_exact(kernel.side).enumerate() {
                    let sy = Border::Reflect101.index(y as i64 + ky as i64 - half, h);
                    for (kx, &weight) in row.iter().enumerate() {
                        let sx = Border::Reflect101.index(x as i64 + kx as i64 - half, w);
                        sum += weight * plane_in[sy * w + sx];
                    }
                }
                plane_out[y * w + x] = sum.clamp(0.0, 1.0);
            }
        }
    }
    image.with_data(out)
}

/// The streak of [`motion_blur`]: `2 * radius + 1` weights
/// `exp(-i^2 / (2 sigma^2))`, normalised, and the pixel offset `(dy, dx)` of
/// tap `i` along `angle` degrees (`-ceil(i sin a - 0.5)` and
/// `-ceil(i cos a - 0.5)`), as the numpy re-implementation of ImageMagick's
/// motion blur in the `imagecorruptions` package. Taps stop where the offset
/// leaves an image of `height x width`; the weights of the taps kept are then
/// normalised to sum one. That last step is ours: the reference does not,
/// which darkens images narrower than the streak (`2 * radius + 1`, at most
/// 19 pixels; never the case for 28x28 or 32x32 images).
pub fn motion_taps(
    radius: usize,
    sigma: f64,
    angle: f64,
    height: usize,
    width: usize,
) -> Vec<(f64, i64, i64)> {
    let (sin, cos) = angle.to_radians().sin_cos();
    let taps: Vec<(f64, i64, i64)> = (0..2 * radius + 1)
        .map(|i| {
            let weight = (-((i * i) as f64) / (2.0 * sigma * sigma)).exp();
            let dy = -((i as f64 * sin) - 0.5).ceil() as i64;
            let dx = -((i as f64 * cos) - 0.5).ceil() as i64;
            (weight, dy, dx)
        })
        .take_while(|&(_, dy, dx)| {
            dy.unsigned_abs() < height as u64 && dx.unsigned_abs() < width as u64
        })
        .collect();
    let total: f64 = taps.iter().map(|t| t.0).sum();
    taps.into_iter()
        .map(|(w, dy, dx)| (w / total, dy, dx))
        .collect()
}

/// Motion blur: [`motion_blur_at`] an angle uniform in `+-45` degrees drawn
/// from `rng`.
pub fn motion_blur(image: &Image, radius: usize, sigma: f64, rng: &mut ChaCha8Rng) -> Image {
    let angle = rng.random_range(-MOTION_MAX_ANGLE..MOTION_MAX_ANGLE);
    motion_blur_at(image, radius, sigma, angle)
}

/// The sum over [`motion_taps`] of the image shifted by each tap's offset
/// (edge pixels repeated), clipped to `[0, 1]`: ImageMagick's
/// `MotionBlurImage(radius, sigma, angle)` as the reference code calls it.
pub fn motion_blur_at(image: &Image, radius: usize, sigma: f64, angle: f64) -> Image {
    let (h, w) = (image.height, image.width);
    let taps = motion_taps(radius, sigma, angle, h, w);
    let clamp = |i: i64, len: usize| i.clamp(0, len as i64 - 1) as usize;
    let mut out = vec![0.0; image.data.len()];
    for (plane_in, plane_out) in image
        .data
        .chunks_exact(image.plane_len())
        .zip(out.chunks_exact_mut(image.plane_len()))
    {
        for &(weight, dy, dx) in &taps {
            for y in 0..h {
                let sy = clamp(y as i64 - dy, h);
                for x in 0..w {
                    plane_out[y * w + x] += weight * plane_in[sy * w + clamp(x as i64 - dx, w)];
                }
            }
        }
    }
    image.with_data(out.into_iter().map(|v| v.clamp(0.0, 1.0)).collect())
}

/// Glass blur's random numbers: for each of `iterations` sweeps over the
/// pixels [`glass_blur`] visits, in its order, the offset
/// `(dx, dy)` of the pixel whose value the visited one takes, `dx` then `dy`
/// drawn uniform in `-max_delta..max_delta` (numpy's `randint`, which
/// excludes the upper end: values come from above and from the left only).
pub fn glass_moves(
    height: usize,
    width: usize,
    max_delta: usize,
    iterations: usize,
    rng: &mut ChaCha8Rng,
) -> Vec<(i64, i64)> {
    let d = max_delta as i64;
    let sweep = glass_visits(height, width, max_delta).count();
    (0..iterations * sweep)
        .map(|_| {
            let dx = rng.random_range(-d..d);
            (dx, rng.random_range(-d..d))
        })
        .collect()
}

/// The pixels `(y, x)` one sweep of the glass blur visits, from the
/// bottom-right to the top-left: rows `max_delta + 1..=height - max_delta`
/// and columns likewise (the reference's `range(32 - max_delta, max_delta,
/// -1)` for 32 pixels).
fn glass_visits(
    height: usize,
    width: usize,
    max_delta: usize,
) -> impl Iterator<Item = (usize, usize)> + Clone {
    let columns = (max_delta + 1..=width.saturating_sub(max_delta)).rev();
    (max_delta + 1..=height.saturating_sub(max_delta))
        .rev()
        .flat_map(move |y| columns.clone().map(move |x| (y, x)))
}

/// Glass blur: a Gaussian blur of deviation `sigma` (scikit-image's
/// `gaussian`: scipy's filter, truncated at 4 deviations, edges repeated),
/// quantised to bytes as the reference's `np.uint8(... * 255)` (truncating,
/// with [`Image::to_bytes`]'s round-off guard); then sweeps over the
/// pixels, from the bottom-right to the top-left, rows `max_delta +
/// 1..=height - max_delta` and columns likewise, each visited pixel taking
/// the value (all channels) of the pixel its move `(dx, dy)` away, the moves
/// taken in order from `moves` ([`glass_moves`]; their number sets the
/// number of sweeps); then the same Gaussian blur again, clipped to `[0,
/// 1]`.
///
/// The reference means to swap the two pixels, `x[h, w], x[h', w'] = x[h',
/// w'], x[h, w]`, but on an `H x W x 3` array those are numpy views: the
/// first assignment overwrites what the second would copy back, so pixel
/// `(h', w')` keeps its value (numpy/numpy#14428). CIFAR-10-C was made that
/// way, so this copies too, for any number of channels.
pub fn glass_blur(image: &Image, sigma: f64, max_delta: usize, moves: &[(i64, i64)]) -> Image {
    let (h, w) = (image.height, image.width);
    let blurred = gaussian_blur(image, sigma);
    let mut shuffled = Image::from_bytes(&blurred.to_bytes(), image.channels, h, w);
    let plane = image.plane_len();
    for ((y, x), &(dx, dy)) in glass_visits(h, w, max_delta).cycle().zip(moves) {
        let here = y * w + x;
        let there = (y as i64 + dy) as usize * w + (x as i64 + dx) as usize;
        for c in 0..image.channels {
            shuffled.data[c * plane + here] = shuffled.data[c * plane + there];
        }
    }
    let out = gaussian_blur(&shuffled, sigma);
    out.map(|v| v.clamp(0.0, 1.0))
}

/// Every channel through [`gaussian_filter`] with scikit-image's defaults
/// (truncated at 4 deviations, edges repeated).
fn gaussian_blur(image: &Image, sigma: f64) -> Image {
    let size = (image.height, image.width);
    let data = image
        .data
        .chunks_exact(image.plane_len())
        .flat_map(|p| gaussian_filter(p, size, sigma, 4.0, Border::Nearest))
        .collect();
    image.with_data(data)
}

/// Zoom blur: the mean of the image and its [`clipped_zoom`]s by
/// [`zoom_factor`]`(i)` for `i` in `0..=steps` (`1, 1.01, ..., 1 + steps /
/// 100`, as numpy's `arange` computes them), clipped to `[0, 1]`.
pub fn zoom_blur(image: &Image, steps: usize) -> Image {
    let size = (image.height, image.width);
    let mut out = image.data.clone();
    for i in 0..=steps {
        let factor = zoom_factor(i);
        for (sum, plane) in out
            .chunks_exact_mut(image.plane_len())
            .zip(image.data.chunks_exact(image.plane_len()))
        {
            for (s, z) in sum.iter_mut().zip(clipped_zoom(plane, size, factor)) {
                *s += z;
            }
        }
    }
    let n = (steps + 2) as f64;
    image.with_data(out.into_iter().map(|v| (v / n).clamp(0.0, 1.0)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn small_disks_are_normalised_symmetric_and_trimmed() {
        for &(radius, alias) in &DEFOCUS {
            let k = disk_kernel(radius, alias);
            // <= 289 weights of a normalised disk through two 3-tap passes: their sum is
            // 1 within ~300 * 2.2e-16 ~ 7e-14; mirrored weights take <= 6 roundings of
            // values <= 1 in another order, < 7e-16.
            assert!((k.weights.iter().sum::<f64>() - 1.0).abs() < 1e-12);
            assert!(k.side % 2 == 1 && k.side < 17, "side {}", k.side);
            let s = k.side;
            for y in 0..s {
                for x in 0..s {
                    assert!((k.weights[y * s + x] - k.weights[x * s + y]).abs() < 1e-15);
                    assert!((k.weights[y * s + x] - k.weights[(s - 1 - y) * s + x]).abs() < 1e-15);
                }
            }
        }
        // Radius 0.3: the disk is the centre alone; a 3x3 Gaussian of it.
        let k = disk_kernel(0.3, 0.4);
        let g = gaussian_taps3(0.4);
        assert_eq!(k.side, 3);
        // Products of one nonzero tap with 1 plus zeros: the expected's single rounding.
        assert!((k.weights[0] - g[0] * g[0]).abs() < 1e-15);
        assert!((k.weights[4] - g[1] * g[1]).abs() < 1e-15);
    }

    #[test]
    fn motion_taps_follow_the_angle() {
        // Angle 0: a horizontal streak to the left of each pixel's source.
        let taps = motion_taps(2, 1.0, 0.0, 32, 32);
        let offsets: Vec<(i64, i64)> = taps.iter().map(|t| (t.1, t.2)).collect();
        assert_eq!(offsets, vec![(0, 0), (0, -1), (0, -2), (0, -3), (0, -4)]);
        // Five taps divided by their sum and summed again: < 3 * 5 * 2.2e-16 off 1.
        assert!((taps.iter().map(|t| t.0).sum::<f64>() - 1.0).abs() < 1e-12);
        // A tiny image stops the streak at its border.
        assert_eq!(motion_taps(9, 2.5, 0.0, 4, 4).len(), 4);
    }

    #[test]
    fn zoom_factors_are_numpys_arange_values() {
        // numpy 2.4: np.arange(1, 1.26, 0.01)[[6, 12, 13, 25]], printed with repr.
        let numpy = [
            (6, 1.06),
            (12, 1.12),
            (13, 1.130_000_000_000_000_1),
            (25, 1.250_000_000_000_000_2),
        ];
        for (i, value) in numpy {
            assert_eq!(zoom_factor(i), value, "{i}");
        }
        assert_eq!(zoom_factor(0), 1.0);
    }

    #[test]
    fn blurs_keep_a_flat_image_flat() {
        let flat = Image {
            data: vec![0.25; 3 * 7 * 5],
            channels: 3,
            height: 7,
            width: 5,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        for out in [
            defocus_blur(&flat, 1.5, 0.1),
            motion_blur(&flat, 9, 2.5, &mut rng),
        ] {
            // Weights summing to 1 within ~7e-14 (above) times 0.25, summed over <= 289
            // terms: < 2e-14; a lost or doubled tap moves a pixel by > 1e-3.
            assert!(out.data.iter().all(|v| (v - 0.25).abs() < 1e-12));
        }
    }
}
