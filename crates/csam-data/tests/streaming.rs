//! The streamed image-folder source: the same batches for the same seed
//! whatever the number of workers and the queue depth, other batches for
//! another seed or epoch, a clear error for a broken file, workers that stop
//! when the consumer does, and the ImageNet protocol's validation hold-out.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use csam_testkit::deadline::within;

use csam_data::streaming::{
    ImageFiles, ImageNetSplits, ImageTransform, StreamOptions, StreamingLoader,
};
use csam_data::{DataError, Normalization};

/// `root/<class>/<k>.jpg` for 3 classes of `per_class` JPEGs each, of
/// varied sizes.
fn jpeg_tree(root: &Path, per_class: u32) {
    for (c, class) in ["n01", "n02", "n03"].iter().enumerate() {
        for k in 0..per_class {
            let (w, h) = (40 + 7 * k, 30 + 5 * (k + c as u32));
            support::save_image(
                &root.join(class).join(format!("{k:03}.jpg")),
                w,
                h,
                3,
                k * 3 + c as u32,
            );
        }
    }
}

fn loader(files: &Arc<ImageFiles>, seed: u64, workers: usize, prefetch: usize) -> StreamingLoader {
    let options = StreamOptions {
        prefetch,
        ..StreamOptions::training(
            4,
            ImageTransform::training(16),
            seed,
            workers,
            tch::Device::Cpu,
        )
    };
    StreamingLoader::new(Arc::clone(files), &Normalization::imagenet(), options).unwrap()
}

/// Every batch of `epoch`, flattened.
fn epoch(loader: &StreamingLoader, epoch: u64) -> Vec<(Vec<f32>, Vec<i64>)> {
    loader
        .epoch(epoch)
        .map(|batch| {
            let (xs, ys) = batch.unwrap();
            assert_eq!(xs.size()[1..], [3, 16, 16]);
            (
                Vec::<f32>::try_from(xs.view([-1])).unwrap(),
                Vec::<i64>::try_from(ys).unwrap(),
            )
        })
        .collect()
}

#[test]
fn batches_depend_on_seed_and_epoch_only() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(dir.path(), 7);
    let files = Arc::new(ImageFiles::list(dir.path(), "tree", None).unwrap());
    assert_eq!((files.len(), files.n_classes()), (21, 3));
    let reference = epoch(&loader(&files, 9, 1, 1), 2);
    assert_eq!(reference.len(), 6, "21 images in batches of 4");
    for (workers, prefetch) in [(2, 1), (3, 6), (4, 2), (8, 16)] {
        assert!(
            epoch(&loader(&files, 9, workers, prefetch), 2) == reference,
            "{workers} workers, prefetch {prefetch}"
        );
    }
    let labels: Vec<i64> = reference.iter().flat_map(|(_, ys)| ys.clone()).collect();
    let mut sorted = labels.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [0; 7]
            .iter()
            .chain(&[1; 7])
            .chain(&[2; 7])
            .copied()
            .collect::<Vec<i64>>()
    );
    assert_ne!(labels, sorted, "shuffled");
    assert!(
        epoch(&loader(&files, 9, 2, 2), 3) != reference,
        "another epoch"
    );
    assert!(
        epoch(&loader(&files, 10, 2, 2), 2) != reference,
        "another seed"
    );
}

#[test]
fn a_broken_file_ends_the_epoch_with_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(dir.path(), 3);
    let broken = dir.path().join("n02").join("001.jpg");
    let bytes = std::fs::read(&broken).unwrap();
    std::fs::write(&broken, &bytes[..bytes.len() / 3]).unwrap();
    let files = Arc::new(ImageFiles::list(dir.path(), "tree", None).unwrap());
    let options = StreamOptions::evaluation(2, ImageTransform::evaluation(16), 2, tch::Device::Cpu);
    let loader = StreamingLoader::new(files, &Normalization::imagenet(), options).unwrap();
    let results: Vec<_> = loader.epoch(0).collect();
    let errors: Vec<&DataError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(errors.len(), 1, "the epoch stops at the first error");
    assert!(results.last().unwrap().is_err());
    let message = errors[0].to_string();
    assert!(message.contains("001.jpg"), "{message}");
}

#[test]
fn dropping_an_epoch_early_stops_its_workers() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(dir.path(), 10);
    let files = Arc::new(ImageFiles::list(dir.path(), "tree", None).unwrap());
    let loader = loader(&files, 1, 2, 2);
    // Dropping an epoch joins its workers, blocked on their full queues: a
    // missed wake-up would deadlock, which the deadline turns into a failure.
    within(
        Duration::from_secs(60),
        "dropping 5 epochs early",
        move || {
            for _ in 0..5 {
                let mut batches = loader.epoch(0);
                assert!(batches.next().unwrap().is_ok());
                drop(batches);
            }
        },
    );
}

#[test]
fn bad_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(dir.path(), 1);
    let files = Arc::new(ImageFiles::list(dir.path(), "tree", None).unwrap());
    let base = StreamOptions::training(4, ImageTransform::training(16), 0, 2, tch::Device::Cpu);
    for options in [
        StreamOptions {
            batch_size: 0,
            ..base
        },
        StreamOptions { workers: 0, ..base },
        StreamOptions {
            prefetch: 0,
            ..base
        },
    ] {
        let e = StreamingLoader::new(Arc::clone(&files), &Normalization::imagenet(), options)
            .unwrap_err();
        assert!(e.to_string().contains("must be positive"), "{e}");
    }
    let grey = Normalization::identity(1);
    assert!(
        StreamingLoader::new(files, &grey, base).is_err(),
        "images are RGB"
    );
}

fn names(files: &ImageFiles) -> Vec<PathBuf> {
    files
        .files
        .iter()
        .map(|p| {
            p.strip_prefix(p.parent().unwrap().parent().unwrap())
                .unwrap()
                .to_path_buf()
        })
        .collect()
}

#[test]
fn imagenet_holds_out_a_seeded_stratified_fifth_of_val() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(&dir.path().join("train"), 2);
    jpeg_tree(&dir.path().join("val"), 10);
    let a = ImageNetSplits::open(dir.path(), "imagenet:x", 4).unwrap();
    assert_eq!((a.train.len(), a.val.len(), a.test.len()), (6, 6, 24));
    assert_eq!(a.val.name, "imagenet:x/val");
    for class in 0..3 {
        assert_eq!(
            a.val.labels.iter().filter(|&&l| l == class).count(),
            2,
            "stratified"
        );
    }
    let (val, test) = (names(&a.val), names(&a.test));
    assert!(val.iter().all(|v| !test.contains(v)), "disjoint");
    assert_eq!(
        ImageNetSplits::open(dir.path(), "imagenet:x", 4).unwrap(),
        a,
        "seeded"
    );
    let b = ImageNetSplits::open(dir.path(), "imagenet:x", 5).unwrap();
    assert_ne!(names(&b.val), val, "another seed, another hold-out");

    // ImageNet-C keeps the validation file names: a severity folder less the
    // held-out images is the test part.
    let severity = dir.path().join("c/fog/3");
    jpeg_tree(&severity, 10);
    let corrupted = ImageFiles::list(&severity, "fog-3", Some(&a.train.classes)).unwrap();
    assert_eq!(names(&corrupted.without(&a.val)), test);
}

#[test]
fn imagenet_layout_errors_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    jpeg_tree(&dir.path().join("train"), 2);
    let e = ImageNetSplits::open(dir.path(), "imagenet:x", 0).unwrap_err();
    assert!(
        matches!(e, DataError::Missing { .. }) && e.to_string().contains("val"),
        "{e}"
    );
    jpeg_tree(&dir.path().join("val"), 2);
    std::fs::create_dir_all(dir.path().join("val/n99")).unwrap();
    let e = ImageNetSplits::open(dir.path(), "imagenet:x", 0).unwrap_err();
    assert!(e.to_string().contains("class folders"), "{e}");
    std::fs::remove_dir(dir.path().join("val/n99")).unwrap();
    std::fs::remove_dir_all(dir.path().join("val/n02")).unwrap();
    let e = ImageNetSplits::open(dir.path(), "imagenet:x", 0).unwrap_err();
    assert!(e.to_string().contains("n02"), "{e}");
}
