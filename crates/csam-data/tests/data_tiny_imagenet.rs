//! `tiny-imagenet:DIR` on a Tiny-ImageNet-200 tree written by Pillow at test
//! time (`tests/data_fixtures/make_tiny_imagenet.py`): the pixels equal what
//! Pillow decodes from the same JPEGs (converted to RGB, greyscale ones
//! included) up to the decoders' rounding, the labels follow `wnids.txt`'s
//! order and the annotations; and the layout errors.
//!
//! Decoder tolerance: the `image` crate (zune-jpeg) and Pillow (libjpeg-turbo)
//! round the inverse DCT and upsample the chroma planes differently. On this
//! fixture (quality 85, 4:2:0) the bytes differ by at most 4 and by 0.25 on
//! average (82% equal); the test allows [`TOLERANCE`] per byte and a mean
//! below 0.5. A wrong transpose, channel order, image order or grey
//! conversion differs by tens.
//!
//! Needs the project venv's python with Pillow; skips with a notice without it.

mod support;

use std::path::Path;

use csam_data::{load, DataError, DataSource, Dataset, DatasetSpec};
use support::{expected, python, run_fixture_script};

/// Largest difference allowed between a byte we decode and Pillow's. Each
/// decoder's integer IDCT is within 1 level of the exact one, and chroma
/// upsampling adds up to 1 more, so Y planes differ by <= 1 and Cb, Cr by
/// <= 2; RGB = Y + 1.772 (Cb - 128) (the largest coefficient) then rounds:
/// <= 1 + 1.772 * 2 + 1 ~ 5.5, under any SIMD or scalar path of either.
const TOLERANCE: u8 = 6;

/// A fresh copy of the fixture tree (tests edit theirs); None without python.
fn fixture_tree() -> Option<tempfile::TempDir> {
    let python = python()?;
    let dir = tempfile::tempdir().unwrap();
    run_fixture_script(&python, "make_tiny_imagenet.py", &[dir.path()]);
    Some(dir)
}

fn load_tiny(dir: &Path) -> Result<DataSource, DataError> {
    load(&DatasetSpec::TinyImagenet(dir.to_path_buf()))
}

fn assert_close_to_pillow(loaded: &Dataset, reference: &Dataset, what: &str) {
    assert_eq!(loaded.images.len(), reference.images.len(), "{what}");
    let differences: Vec<u8> = loaded
        .images
        .iter()
        .zip(&reference.images)
        .map(|(&a, &b)| a.abs_diff(b))
        .collect();
    let largest = differences.iter().copied().max().unwrap_or(0);
    let mean = differences.iter().map(|&d| f64::from(d)).sum::<f64>() / differences.len() as f64;
    let exact = differences.iter().filter(|&&d| d == 0).count() as f64 / differences.len() as f64;
    eprintln!(
        "{what}: |ours - Pillow| largest {largest}, mean {mean:.4}, {:.1}% equal",
        100.0 * exact
    );
    assert!(largest <= TOLERANCE, "{what}: a byte differs by {largest}");
    // Differences are rounding disagreements of the same exact values, mostly one
    // level: a mean of 0.5 would be every other byte off. A layout bug gives tens.
    assert!(mean < 0.5, "{what}: mean difference {mean}");
}

#[test]
fn tree_loads_as_pillow_decodes_it_in_wnids_order() {
    let Some(tree) = fixture_tree() else { return };
    let source = load_tiny(tree.path()).unwrap();
    let train = source.train.expect("train/ is there");
    for (part, loaded) in [("train", &train), ("test", &source.test)] {
        let reference = expected(tree.path(), part, 3);
        assert_eq!(
            (
                loaded.channels,
                loaded.height,
                loaded.width,
                loaded.n_classes
            ),
            (3, 64, 64, 3),
            "{part}"
        );
        assert_eq!(loaded.labels, reference.labels, "{part} labels");
        assert_close_to_pillow(loaded, &reference, part);
    }
    // wnids.txt is not sorted: its first line is label 0.
    assert_eq!(train.labels, vec![0, 0, 1, 1, 2, 2]);
    assert_eq!(source.test.labels, vec![2, 0, 1, 1], "annotation order");
}

#[test]
fn greyscale_jpegs_become_three_equal_channels() {
    let Some(tree) = fixture_tree() else { return };
    let train = load_tiny(tree.path()).unwrap().train.unwrap();
    // Train image 3 (second of the second class) is the greyscale JPEG.
    let image = train.image(3);
    let plane = 64 * 64;
    assert_eq!(image[..plane], image[plane..2 * plane]);
    assert_eq!(image[..plane], image[2 * plane..]);
    // The others have colour.
    let colour = train.image(2);
    assert_ne!(colour[..plane], colour[plane..2 * plane]);
}

#[test]
fn without_train_the_source_is_test_only() {
    let Some(tree) = fixture_tree() else { return };
    std::fs::remove_dir_all(tree.path().join("train")).unwrap();
    let source = load_tiny(tree.path()).unwrap();
    assert!(source.train.is_none());
    assert_eq!(source.test.n, 4);
}

fn edit(path: &Path, from: &str, to: &str) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.contains(from), "{from} in {}", path.display());
    std::fs::write(path, text.replacen(from, to, 1)).unwrap();
}

#[test]
fn layout_errors_name_the_file() {
    let Some(tree) = fixture_tree() else { return };
    let root = tree.path();
    let annotations = root.join("val/val_annotations.txt");

    // A wnid in the annotations that wnids.txt does not list.
    edit(&annotations, "n05555555", "n00000001");
    match load_tiny(root) {
        Err(DataError::BadRecord { path, line, reason }) => {
            assert_eq!((path, line), (annotations.clone(), 1));
            assert!(reason.contains("n00000001"), "{reason}");
        }
        other => panic!("expected BadRecord, got {other:?}"),
    }
    edit(&annotations, "n00000001", "n05555555");

    // An annotated file that is missing.
    let val_0 = root.join("val/images/val_0.JPEG");
    let kept = std::fs::read(&val_0).unwrap();
    std::fs::remove_file(&val_0).unwrap();
    match load_tiny(root) {
        Err(DataError::Missing { path, .. }) => assert_eq!(path, val_0),
        other => panic!("expected Missing, got {other:?}"),
    }
    std::fs::write(&val_0, &kept).unwrap();

    // A validation image without an annotation.
    let stray = root.join("val/images/val_9.JPEG");
    std::fs::write(&stray, &kept).unwrap();
    let error = load_tiny(root).unwrap_err().to_string();
    assert!(error.contains("val_9.JPEG"), "{error}");
    std::fs::remove_file(&stray).unwrap();

    // An image of another size.
    let wrong_size = image::RgbImage::new(32, 64);
    let path = root.join("train/n01443537/images/n01443537_0.JPEG");
    wrong_size
        .save_with_format(&path, image::ImageFormat::Jpeg)
        .unwrap();
    match load_tiny(root) {
        Err(DataError::ShapeMismatch {
            path: at, found, ..
        }) => {
            assert_eq!(at, path);
            assert_eq!(found, "32x64 pixels");
        }
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    std::fs::remove_dir_all(root.join("train")).unwrap();

    // wnids.txt missing.
    std::fs::remove_file(root.join("wnids.txt")).unwrap();
    match load_tiny(root) {
        Err(DataError::Missing { path, .. }) => assert!(path.ends_with("wnids.txt")),
        other => panic!("expected Missing, got {other:?}"),
    }
}

#[test]
fn a_class_folder_not_in_wnids_is_refused() {
    let Some(tree) = fixture_tree() else { return };
    let root = tree.path();
    edit(&root.join("wnids.txt"), "n05555555\n", "");
    let error = load_tiny(root).unwrap_err().to_string();
    assert!(
        error.contains("n05555555") && error.contains("wnids.txt"),
        "{error}"
    );
}
