//! The corruptions on real images (bundled Fashion-MNIST, the CIFAR-10
//! sample PNGs) and on images whose corrupted values are known in closed form.
//! Frost runs on generated stand-ins for its photographs (see
//! [`frost_textures`]).

use std::sync::OnceLock;

use csam_data::corrupt::frost_textures::FROST_FILES;
use csam_data::corrupt::{Corruption, FrostTextures, Image, Severity, SEVERITIES};
use csam_data::{load, Dataset, DatasetSpec};
use rand::SeedableRng;

/// Five generated "frost photographs" of 240x200 pixels (48x40 once shrunk,
/// larger than the images here), written as the PNG and JPEG files that
/// [`FrostTextures::load`] reads: white crystals on a pale blue-grey ground
/// (frost is light, as in the real photographs), a different layout in each.
fn frost_textures() -> &'static FrostTextures {
    static TEXTURES: OnceLock<FrostTextures> = OnceLock::new();
    TEXTURES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for (k, name) in FROST_FILES.iter().enumerate() {
            let texture = image::RgbImage::from_fn(240, 200, |x, y| {
                let crystal =
                    (x * 7 + y * 13 + k as u32 * 31) % 17 < 3 || (x + 2 * y) % 23 == k as u32;
                if crystal {
                    image::Rgb([235, 245, 255])
                } else {
                    image::Rgb([150 + (y % 20) as u8, 165, 180 + (x % 30) as u8])
                }
            });
            texture.save(dir.path().join(name)).unwrap();
        }
        FrostTextures::load(dir.path()).unwrap()
    })
}

/// `corruption` of every image of `dataset` at `severity` with `seed`.
fn corrupt(corruption: Corruption, dataset: &Dataset, severity: Severity, seed: u64) -> Dataset {
    corruption
        .corrupt_dataset(dataset, severity, seed, Some(frost_textures()))
        .unwrap()
}

fn fashion(n: usize) -> Dataset {
    let test = load(&DatasetSpec::FashionMnist).unwrap().test;
    test.select(&(0..n).collect::<Vec<_>>())
}

fn cifar_samples() -> Dataset {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/cifar10-samples");
    // The flat folder is split 80/20 (see data::folder): the training part
    // holds 16 of the 20 images.
    load(&DatasetSpec::Folder(dir))
        .unwrap()
        .train
        .expect("a flat folder has a training part")
}

/// `n` copies of one image of `channels x height x width` whose channel `c` is `values[c]`.
fn constant(values: &[u8], height: usize, width: usize, n: usize) -> Dataset {
    let image: Vec<u8> = values
        .iter()
        .flat_map(|&v| std::iter::repeat_n(v, height * width))
        .collect();
    Dataset::new(
        "constant",
        image.repeat(n),
        vec![0; n],
        (values.len(), height, width),
        1,
    )
    .unwrap()
}

fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).abs())
        .sum::<f64>()
        / a.len() as f64
}

#[test]
fn every_corruption_keeps_shape_labels_and_classes_on_grey_colour_and_odd_sizes() {
    let odd = Dataset::new(
        "odd",
        (0..3 * 5 * 7 * 2).map(|v| (v * 7 % 256) as u8).collect(),
        vec![1, 0],
        (3, 5, 7),
        2,
    )
    .unwrap();
    for dataset in [fashion(3), cifar_samples(), odd] {
        for corruption in Corruption::ALL {
            for severity in SEVERITIES {
                let out = corrupt(corruption, &dataset, severity, 0);
                assert_eq!(out.sample_shape(), dataset.sample_shape());
                assert_eq!((out.n, out.n_classes), (dataset.n, dataset.n_classes));
                assert_eq!(out.labels, dataset.labels);
                assert_eq!(out.images.len(), dataset.images.len());
            }
        }
    }
}

#[test]
fn distortion_grows_with_severity_on_real_images() {
    // Mean absolute byte difference to the clean images, per severity. An
    // image meets the same random numbers at every severity, so only the
    // strength changes. Motion blur's severities 3 and 4 differ only by streak
    // taps of weight below 0.3% (radius 6 -> 8 at sigma 2): that step may
    // stay level, so it is allowed 1% of slack; every corruption must still
    // end far above where it starts. Two of CIFAR-10-C's parameter tables
    // do not grow this distance, and are checked for what they do instead:
    // - glass blur grows with its shuffle sweeps (one at severities 1-3, two
    //   at 4-5); at the same sweeps a wider Gaussian smooths the shuffled
    //   pixels back towards the clean ones as much as it blurs, so those
    //   steps get 5% of slack and the step to two sweeps must be large;
    // - frost from severity 3 on also darkens the image (weight 0.9, 0.85,
    //   0.75) as it adds more frost (0.4, 0.4, 0.45): whether that moves the
    //   image towards or away from the clean one depends on how light the
    //   frost is against the image, so only severities 1 -> 2 (more frost,
    //   the image kept) must grow; frost's own growth is checked on black
    //   images (`frost_grows_with_its_weight_on_a_black_image`);
    // - the elastic transform's affine anchor moves shrink from 8% to 3% of
    //   the side while its smooth displacement stays under a pixel, so its
    //   distance falls with severity.
    for dataset in [fashion(200), cifar_samples()] {
        for corruption in Corruption::ALL {
            let mad: Vec<f64> = SEVERITIES
                .iter()
                .map(|&s| {
                    mean_abs_diff(&corrupt(corruption, &dataset, s, 7).images, &dataset.images)
                })
                .collect();
            let context = format!("{corruption} on {}: {mad:?}", dataset.name);
            match corruption {
                Corruption::ElasticTransform => {
                    assert!(mad.windows(2).all(|p| p[1] < p[0]), "{context}");
                    assert!(mad[4] > 0.0, "{context}");
                }
                Corruption::GlassBlur => {
                    for (i, pair) in mad.windows(2).enumerate() {
                        let slack = if i == 2 { 1.3 } else { 0.95 };
                        assert!(pair[1] >= pair[0] * slack, "{context}");
                    }
                    assert!(mad[0] > 0.0 && mad[4] > 1.4 * mad[0], "{context}");
                }
                Corruption::Frost => {
                    assert!(mad[0] > 0.0 && mad[1] > 1.2 * mad[0], "{context}");
                    assert!(mad[4] > 1.2 * mad[0], "{context}");
                }
                _ => {
                    for pair in mad.windows(2) {
                        assert!(pair[1] >= pair[0] * 0.99, "{context}");
                    }
                    assert!(mad[0] > 0.0 && mad[4] > 1.5 * mad[0], "{context}");
                }
            }
        }
    }
}

#[test]
fn the_seed_fixes_the_noise_and_only_the_random_corruptions_depend_on_it() {
    let dataset = cifar_samples();
    for corruption in Corruption::ALL {
        let severity = Severity::new(3).unwrap();
        let a = corrupt(corruption, &dataset, severity, 11);
        let again = corrupt(corruption, &dataset, severity, 11);
        let other = corrupt(corruption, &dataset, severity, 12);
        assert_eq!(a.images, again.images, "{corruption}");
        let random = !matches!(
            corruption,
            Corruption::DefocusBlur
                | Corruption::ZoomBlur
                | Corruption::Contrast
                | Corruption::Brightness
                | Corruption::Pixelate
                | Corruption::JpegCompression
        );
        assert_eq!(a.images != other.images, random, "{corruption}");
        // A sample's corruption does not depend on the samples around it.
        let alone = corruption
            .corrupt_sample(&dataset, 5, severity, 11, Some(frost_textures()))
            .unwrap();
        assert_eq!(alone, a.image(5), "{corruption}");
    }
}

#[test]
fn brightness_and_contrast_of_constant_images_have_closed_forms() {
    // Grey 100: V' = min(100/255 + c, 1), c = 0.05, 0.1, 0.15, 0.2, 0.3, so
    // bytes floor(100 + 255 c) = 112, 125, 138, 151, 176.
    let grey = constant(&[100], 4, 3, 2);
    let bright: Vec<u8> = SEVERITIES
        .iter()
        .map(|&s| corrupt(Corruption::Brightness, &grey, s, 0).images[0])
        .collect();
    assert_eq!(bright, vec![112, 125, 138, 151, 176]);
    // RGB (40, 80, 160), severity 2 (c = 0.1): hue and saturation kept, each
    // channel scaled by (160 + 25.5) / 160: 46.375, 92.75, 185.5 -> 46, 92, 185.
    let colour = constant(&[40, 80, 160], 2, 2, 1);
    let out = corrupt(
        Corruption::Brightness,
        &colour,
        Severity::new(2).unwrap(),
        0,
    );
    assert_eq!([out.images[0], out.images[4], out.images[8]], [46, 92, 185]);
    // Black becomes grey 255 c; white stays white.
    let black = corrupt(
        Corruption::Brightness,
        &constant(&[0, 0, 0], 1, 1, 1),
        Severity::new(5).unwrap(),
        0,
    );
    assert_eq!(black.images, vec![76, 76, 76]);
    let white = corrupt(
        Corruption::Brightness,
        &constant(&[255], 3, 3, 1),
        Severity::new(5).unwrap(),
        0,
    );
    assert!(white.images.iter().all(|&v| v == 255));
    // Contrast pulls towards each channel's own mean: a constant image is unchanged.
    for s in SEVERITIES {
        let out = corrupt(Corruption::Contrast, &colour, s, 0);
        assert_eq!(out.images, colour.images);
    }
    // Two-valued channel 0 and 200 (mean 100), severity 5 (factor 0.15): 85 and 115.
    let mut halves = constant(&[0], 2, 2, 1);
    halves.images = vec![0, 0, 200, 200];
    let out = corrupt(Corruption::Contrast, &halves, Severity::new(5).unwrap(), 0);
    assert_eq!(out.images, vec![85, 85, 115, 115]);
}

#[test]
fn every_corruption_stays_in_range_before_the_bytes() {
    // The working values, before Image::to_bytes clips them: a corruption
    // must clip (or never leave [0, 1]) on its own, and give no NaN.
    let dataset = cifar_samples();
    for corruption in Corruption::ALL {
        for severity in SEVERITIES {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
            for i in 0..4 {
                let clean = Image::from_bytes(dataset.image(i), 3, dataset.height, dataset.width);
                let out = corruption
                    .apply(&clean, severity, &mut rng, Some(frost_textures()))
                    .unwrap();
                assert!(
                    out.data.iter().all(|v| (0.0..=1.0).contains(v)),
                    "{corruption} {severity:?}"
                );
            }
        }
    }
}

#[test]
fn frost_without_its_photographs_is_refused_and_says_why() {
    let dataset = fashion(1);
    let error = Corruption::Frost
        .corrupt_dataset(&dataset, Severity::new(1).unwrap(), 0, None)
        .unwrap_err()
        .to_string();
    assert!(error.contains("does not bundle"), "{error}");
    assert!(error.contains("hendrycks/robustness"), "{error}");
    assert!(Corruption::Frost.needs_frost_textures());
    assert!(!Corruption::Snow.needs_frost_textures());
}

#[test]
fn frost_grows_with_its_weight_on_a_black_image() {
    // On black the image term vanishes: the output is the frost crop times
    // its weight (0.2, 0.3, 0.4, 0.4, 0.45), the same crop at every severity.
    let black = constant(&[0, 0, 0], 8, 8, 3);
    let means: Vec<f64> = SEVERITIES
        .iter()
        .map(|&s| {
            let out = corrupt(Corruption::Frost, &black, s, 2);
            out.images.iter().map(|&v| f64::from(v)).sum::<f64>() / out.images.len() as f64
        })
        .collect();
    let weights = [0.2, 0.3, 0.4, 0.4, 0.45];
    for (mean, w) in means.iter().zip(weights) {
        // Truncation to bytes loses under one level per value, so with M the crop's
        // mean level both mean / w and means[0] / 0.2 lie in (M - 1 / 0.2, M].
        assert!((mean / w - means[0] / 0.2).abs() < 1.0 / 0.2, "{means:?}");
    }
    assert!(means[0] > 20.0, "{means:?}");
}
