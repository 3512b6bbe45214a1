//! The corruptions on real images (bundled Fashion-MNIST, the CIFAR-10
//! sample PNGs) and on images whose corrupted values are known in closed form.

use csam_data::corrupt::{Corruption, Severity, SEVERITIES};
use csam_data::{load, Dataset, DatasetSpec};

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
                let out = corruption.corrupt_dataset(&dataset, severity, 0);
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
    // end far above where it starts.
    for dataset in [fashion(200), cifar_samples()] {
        for corruption in Corruption::ALL {
            let mad: Vec<f64> = SEVERITIES
                .iter()
                .map(|&s| {
                    mean_abs_diff(
                        &corruption.corrupt_dataset(&dataset, s, 7).images,
                        &dataset.images,
                    )
                })
                .collect();
            for pair in mad.windows(2) {
                assert!(
                    pair[1] >= pair[0] * 0.99,
                    "{corruption} on {}: {mad:?}",
                    dataset.name
                );
            }
            assert!(
                mad[0] > 0.0 && mad[4] > 1.5 * mad[0],
                "{corruption} on {}: {mad:?}",
                dataset.name
            );
        }
    }
}

#[test]
fn the_seed_fixes_the_noise_and_only_the_random_corruptions_depend_on_it() {
    let dataset = cifar_samples();
    for corruption in Corruption::ALL {
        let severity = Severity::new(3).unwrap();
        let a = corruption.corrupt_dataset(&dataset, severity, 11);
        let again = corruption.corrupt_dataset(&dataset, severity, 11);
        let other = corruption.corrupt_dataset(&dataset, severity, 12);
        assert_eq!(a.images, again.images, "{corruption}");
        let random = !matches!(
            corruption,
            Corruption::DefocusBlur | Corruption::Contrast | Corruption::Brightness
        );
        assert_eq!(a.images != other.images, random, "{corruption}");
        // A sample's corruption does not depend on the samples around it.
        let alone = corruption.corrupt_sample(&dataset, 5, severity, 11);
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
        .map(|&s| Corruption::Brightness.corrupt_dataset(&grey, s, 0).images[0])
        .collect();
    assert_eq!(bright, vec![112, 125, 138, 151, 176]);
    // RGB (40, 80, 160), severity 2 (c = 0.1): hue and saturation kept, each
    // channel scaled by (160 + 25.5) / 160: 46.375, 92.75, 185.5 -> 46, 92, 185.
    let colour = constant(&[40, 80, 160], 2, 2, 1);
    let out = Corruption::Brightness.corrupt_dataset(&colour, Severity::new(2).unwrap(), 0);
    assert_eq!([out.images[0], out.images[4], out.images[8]], [46, 92, 185]);
    // Black becomes grey 255 c; white stays white.
    let black = Corruption::Brightness.corrupt_dataset(
        &constant(&[0, 0, 0], 1, 1, 1),
        Severity::new(5).unwrap(),
        0,
    );
    assert_eq!(black.images, vec![76, 76, 76]);
    let white = Corruption::Brightness.corrupt_dataset(
        &constant(&[255], 3, 3, 1),
        Severity::new(5).unwrap(),
        0,
    );
    assert!(white.images.iter().all(|&v| v == 255));
    // Contrast pulls towards each channel's own mean: a constant image is unchanged.
    for s in SEVERITIES {
        let out = Corruption::Contrast.corrupt_dataset(&colour, s, 0);
        assert_eq!(out.images, colour.images);
    }
    // Two-valued channel 0 and 200 (mean 100), severity 5 (factor 0.15): 85 and 115.
    let mut halves = constant(&[0], 2, 2, 1);
    halves.images = vec![0, 0, 200, 200];
    let out = Corruption::Contrast.corrupt_dataset(&halves, Severity::new(5).unwrap(), 0);
    assert_eq!(out.images, vec![85, 85, 115, 115]);
}
