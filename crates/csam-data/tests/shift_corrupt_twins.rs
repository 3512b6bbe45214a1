//! The corruptions' building blocks against the libraries the reference
//! code calls: Pillow (pixelate, JPEG), scipy.ndimage (the bilinear
//! sampler of the elastic transform, the zoom of zoom blur and snow, the
//! Gaussian filter of glass blur and the elastic transform) and OpenCV (the
//! elastic transform's affine warp, frost's shrinking of its photographs),
//! and fog's plasma fractal against make_cifar_c.py's, run by
//! `tests/shift_fixtures/corrupt_twins.py` in the project venv. The
//! reference holds make_cifar_c.py's parameters per severity itself
//! (pixelate's sizes, JPEG's qualities, fog's decay): each twin passes a
//! severity, never one of csam's values, so that a wrong entry in csam's
//! tables fails. The whole corruptions that draw random numbers or chain
//! these blocks are checked in `shift_corrupt_whole_twins.rs`.
//!
//! Needs the project venv's python with numpy, scipy, Pillow and OpenCV
//! (`cargo xtask setup`), or `CSAM_PYTHON`; each twin is skipped with a
//! notice when python is absent.

mod support;

use csam_data::corrupt::blur::zoom_factor;
use csam_data::corrupt::border::Border;
use csam_data::corrupt::digital::{
    affine_warp, jpeg_compression, pixelate, JPEG_QUALITY, PIXELATE,
};
use csam_data::corrupt::filter::gaussian_filter;
use csam_data::corrupt::frost_textures::FROST_FILES;
use csam_data::corrupt::plasma::{plasma_draws, plasma_fractal};
use csam_data::corrupt::resample::{bilinear, clipped_zoom};
use csam_data::corrupt::weather::FOG;
use csam_data::corrupt::FrostTextures;
use csam_data::corrupt::Image;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use support::{
    args, f64_bytes, f64_values, hwc, python, random_images, real_images, run_reference,
};

const SCRIPT: &str = "corrupt_twins.py";

#[test]
fn pixelate_is_pillows_box_resize_byte_for_byte() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for image in real_images().iter().chain(&random_images()) {
        let extra = [image.channels.to_string()];
        let want = run_reference(
            &python,
            SCRIPT,
            dir.path(),
            "pixelate",
            &hwc(image),
            &args(image.height, image.width, extra),
        );
        assert_eq!(
            want.len(),
            PIXELATE.len() * image.data.len(),
            "one per severity"
        );
        for (keep, want) in PIXELATE.iter().zip(want.chunks_exact(image.data.len())) {
            assert_eq!(
                hwc(&pixelate(image, *keep)),
                want,
                "{}x{}x{} at {keep}",
                image.channels,
                image.height,
                image.width
            );
        }
    }
}

/// Mean absolute byte difference.
fn byte_gap(a: &[u8], b: &[u8]) -> f64 {
    let total: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(x.abs_diff(*y)))
        .sum();
    total / a.len() as f64
}

/// JPEG against Pillow at the same quality, on the real images (random
/// noise is every codec's worst case and says little). The two encoders
/// share libjpeg's quality-scaled tables but not their DCT round-off, so a
/// coefficient near the middle between two quantisation steps can land on
/// the other step: bytes differ by 0.1 to 1.4 on average (up to about 20 in
/// single pixels) at 4:4:4, against 2 to 9 between the clean image and
/// Pillow's JPEG. So the test asks for a mean gap of at most 1.5 and under
/// 40% of the JPEG's own change. Pillow's default, which the reference
/// uses, subsamples colour chroma 4:2:0 where the `image` crate keeps it
/// whole: there colour images differ by 3 to 6.5 on average (one channel is
/// the same either way), so that gap is only bounded by 7.5.
#[test]
fn jpeg_is_close_to_pillows_at_the_same_quality() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for image in real_images() {
        let clean = hwc(&image);
        let reference = |subsampling: i32| {
            let extra = [image.channels.to_string(), subsampling.to_string()];
            let all = run_reference(
                &python,
                SCRIPT,
                dir.path(),
                "jpeg",
                &clean,
                &args(image.height, image.width, extra),
            );
            all.chunks_exact(clean.len())
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>()
        };
        let (full_chroma, default) = (reference(0), reference(-1));
        for (k, quality) in JPEG_QUALITY.into_iter().enumerate() {
            let got = hwc(&jpeg_compression(&image, quality).unwrap());
            let context = format!(
                "{}x{}x{} at quality {quality}",
                image.channels, image.height, image.width
            );
            let gap = byte_gap(&got, &full_chroma[k]);
            let change = byte_gap(&clean, &full_chroma[k]);
            // Empirical bars (see above), not round-off: another decoder path (zune-jpeg's
            // scalar or AVX2 IDCT) moves a mean gap by at most the share of bytes it
            // rounds one level apart. The 40% of the JPEG's own change is what a wrong
            // table or quality mapping fails.
            assert!(
                gap <= 1.5 && gap < 0.4 * change,
                "{context}: {gap} against {change}"
            );
            let gap_default = byte_gap(&got, &default[k]);
            assert!(gap_default <= 7.5, "{context}: {gap_default}");
        }
    }
}

#[test]
fn the_bilinear_sampler_is_scipys_map_coordinates_with_reflect() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for (h, w) in [(8, 9), (1, 5), (32, 32)] {
        let plane: Vec<f64> = (0..h * w).map(|_| rng.random()).collect();
        // Points inside, near and far outside (several folds away).
        let points: Vec<(f64, f64)> = (0..600)
            .map(|_| {
                let y = rng.random_range(-3.0 * h as f64 - 2.0..4.0 * h as f64 + 2.0);
                (y, rng.random_range(-3.0 * w as f64..4.0 * w as f64))
            })
            .chain([(0.0, 0.0), (h as f64 - 1.0, w as f64 - 1.0), (-0.5, -0.5)])
            .collect();
        let mut input = plane.clone();
        input.extend(points.iter().flat_map(|&(y, x)| [y, x]));
        let want = f64_values(&run_reference(
            &python,
            SCRIPT,
            dir.path(),
            "map_coordinates",
            &f64_bytes(&input),
            &args(h, w, []),
        ));
        assert_eq!(want.len(), points.len());
        for (&(y, x), want) in points.iter().zip(want) {
            let got = bilinear(&plane, (h, w), (y, x), Border::Reflect);
            // Folding positions |p| < 130 rounds them by <= ulp(128) = 2.8e-14, which moves
            // a read of values in [0, 1] by no more; 4 products summed add ~4.4e-16.
            assert!(
                (got - want).abs() < 1e-12,
                "{h}x{w} at ({y}, {x}): {got} vs {want}"
            );
        }
    }
}

#[test]
fn the_clipped_zoom_is_scipys_zoom_of_the_central_crop() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    // Zoom blur's factors (numpy's arange: 1.2500000000000002 grows a 26-pixel
    // crop to 33 pixels) and snow's 1.75, 2.25 and 1.25 (which grows it to 32).
    let factors: Vec<f64> = (0..=25)
        .map(zoom_factor)
        .chain([1.75, 2.25, 1.25])
        .collect();
    for (h, w) in [(32, 32), (28, 28), (5, 7), (13, 20)] {
        let plane: Vec<f64> = (0..h * w).map(|_| rng.random()).collect();
        let extra = factors.iter().map(|f| format!("{f:?}"));
        let want = f64_values(&run_reference(
            &python,
            SCRIPT,
            dir.path(),
            "clipped_zoom",
            &f64_bytes(&plane),
            &args(h, w, extra),
        ));
        assert_eq!(want.len(), factors.len() * h * w);
        for (&factor, want) in factors.iter().zip(want.chunks_exact(h * w)) {
            let got = clipped_zoom(&plane, (h, w), factor);
            // Positions < 32 from a quotient and a product: ~2 ulp(32) = 1.4e-14 each,
            // times neighbour steps <= 1, plus 4 products summed: < 3e-14.
            for (a, b) in got.iter().zip(want) {
                assert!((a - b).abs() < 1e-12, "{h}x{w} by {factor}: {a} vs {b}");
            }
        }
    }
}

#[test]
fn the_gaussian_filter_is_scipys() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    // Glass blur: truncate 4, nearest; the elastic field: truncate 3, reflect
    // (sigma 6.4 on 32 pixels, 19 taps a side: they reach beyond small
    // planes and fold more than once).
    let cases = [
        (0.25, 4.0, Border::Nearest, "nearest"),
        (0.4, 4.0, Border::Nearest, "nearest"),
        (0.96, 3.0, Border::Reflect, "reflect"),
        (6.4, 3.0, Border::Reflect, "reflect"),
    ];
    for (h, w) in [(32, 32), (5, 7)] {
        let plane: Vec<f64> = (0..h * w).map(|_| rng.random_range(-1.0..1.0)).collect();
        let extra = cases.map(|(s, t, _, mode)| format!("{s:?}:{t:?}:{mode}"));
        let want = f64_values(&run_reference(
            &python,
            SCRIPT,
            dir.path(),
            "gaussian",
            &f64_bytes(&plane),
            &args(h, w, extra),
        ));
        assert_eq!(want.len(), cases.len() * h * w);
        for ((sigma, truncate, border, mode), want) in cases.iter().zip(want.chunks_exact(h * w)) {
            let got = gaussian_filter(&plane, (h, w), *sigma, *truncate, *border);
            // Two passes of <= 39 taps over values in [-1, 1], any summation order:
            // <= 2 * 39 * 2.2e-16 ~ 1.7e-14; numpy's exp (a few ulps on its AVX-512
            // path) moves the taps by ~1e-15 relative. A wrong tap or fold is > 1e-3.
            for (a, b) in got.iter().zip(want) {
                assert!(
                    (a - b).abs() < 1e-12,
                    "{h}x{w} sigma {sigma} {mode}: {a} vs {b}"
                );
            }
        }
    }
}

/// The elastic transform's warp against OpenCV's. OpenCV reads each output
/// pixel at its position rounded to 1/32 pixel; a bilinear read of values in
/// `[0, 1]` moves by at most 1 per pixel along each axis, so the two agree
/// to `2 / 64` at worst, and far closer on average. The anchors move by
/// multiples of 1/64, which OpenCV's `float32` points hold exactly.
#[test]
fn the_affine_warp_is_opencvs_up_to_its_position_grid() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    for (h, w) in [(32, 32), (28, 28), (13, 20)] {
        let plane: Vec<f64> = (0..h * w).map(|_| rng.random()).collect();
        let (cx, cy, d) = ((w / 2) as f64, (h / 2) as f64, (h.min(w) / 3) as f64);
        let anchors = [(cx + d, cy + d), (cx + d, cy - d), (cx - d, cy - d)];
        for reach in [0.5, 2.5, 8.0] {
            let mut step = || f64::from(rng.random_range(-64..=64)) / 64.0 * reach;
            let moved = anchors.map(|(x, y)| (x + step(), y + step()));
            let mut input = plane.clone();
            input.extend(anchors.iter().chain(&moved).flat_map(|&(x, y)| [x, y]));
            let want = f64_values(&run_reference(
                &python,
                SCRIPT,
                dir.path(),
                "warp_affine",
                &f64_bytes(&input),
                &args(h, w, []),
            ));
            let image = Image {
                data: plane.clone(),
                channels: 1,
                height: h,
                width: w,
            };
            let got = affine_warp(&image, &anchors, &moved).data;
            let gaps: Vec<f64> = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let max = gaps.iter().copied().fold(0.0, f64::max);
            // The 1/32 grid moves each coordinate by a uniform +-1/64 (mean 1/128);
            // neighbours of uniform values differ by 1/3 on average: mean gap ~ 2 *
            // 1/128 * 1/3 ~ 0.005, max 2/64 (1e-9 for the f64 round-off).
            assert!(
                max <= 2.0 / 64.0 + 1e-9 && mean < 0.01,
                "{h}x{w}, moves up to {reach}: mean {mean}, max {max}"
            );
        }
    }
}

/// Frost's photographs shrink as OpenCV's `resize(fx=0.2, fy=0.2)`, byte
/// for byte, on the pixels the `image` crate decodes (sizes that are not
/// multiples of 5, PNG and JPEG as the reference's files).
#[test]
fn frost_photographs_shrink_as_opencvs_resize() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let sizes = [(243, 201), (200, 200), (57, 88), (104, 61), (33, 47)];
    for (name, (w, h)) in FROST_FILES.iter().zip(sizes) {
        let photo = image::RgbImage::from_fn(w, h, |_, _| image::Rgb(rng.random()));
        photo.save(dir.path().join(name)).unwrap();
    }
    let textures = FrostTextures::load(dir.path()).unwrap();
    for (name, texture) in FROST_FILES.iter().zip(textures.textures()) {
        let decoded = image::open(dir.path().join(name)).unwrap().to_rgb8();
        let (w, h) = (decoded.width() as usize, decoded.height() as usize);
        let want = run_reference(
            &python,
            SCRIPT,
            dir.path(),
            "resize_fifth",
            decoded.as_raw(),
            &args(h, w, []),
        );
        assert_eq!(hwc(texture), want, "{name} ({h}x{w})");
    }
}

/// Fog's plasma fractal against make_cifar_c.py's diamond-square, written
/// with `np.roll`, fed the uniform draws ours takes ([`plasma_draws`]).
/// The sums of four neighbours are added in another order, hence 1e-12,
/// not equality.
#[test]
fn the_plasma_fractal_is_the_references_diamond_square() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for side in [2usize, 4, 32, 64] {
        let draws = plasma_draws(side, &mut ChaCha8Rng::seed_from_u64(9));
        for (severity, (_, decay)) in (1usize..).zip(FOG) {
            let got = plasma_fractal(side, decay, &draws);
            let want = f64_values(&run_reference(
                &python,
                SCRIPT,
                dir.path(),
                "plasma",
                &f64_bytes(&draws),
                &args(side, side, [severity.to_string()]),
            ));
            // <= 6 levels of 4-neighbour sums (< 800, wibble starts at 100) in another
            // order: <= 6 * 3 * 0.5 ulp(800) ~ 2e-13, over the map's range (~1e2): ~1e-15.
            for (a, b) in got.iter().zip(&want) {
                assert!(
                    (a - b).abs() < 1e-12,
                    "side {side}, decay {decay}: {a} vs {b}"
                );
            }
        }
    }
}
