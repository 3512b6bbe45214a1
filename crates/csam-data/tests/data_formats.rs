//! The file-format loaders on real images, and their error cases.
//!
//! Real data: the 20 CIFAR-10 test images in `data/cifar10-samples` (see
//! data/README.md). Expected pixels were read independently with Pillow:
//! `np.asarray(Image.open('data/cifar10-samples/cat/cifar10_00_3.png'))[0, 0]`
//! is `[158, 112, 49]`, `[31, 31]` is `[21, 67, 110]`, `[5, 7]` is
//! `[167, 115, 41]`, and the sum of all its bytes is 332962. The `.npy`
//! fixtures were written by numpy (`tests/data_fixtures/make_fixtures.py`).
//! CIFAR binary batches and IDX directories are written here into temporary
//! directories from those real images.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use csam_data::{load, DataError, DataSource, Dataset, DatasetSpec};

fn repo_data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data")
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data_fixtures")
}

fn load_str(spec: &str) -> Result<DataSource, DataError> {
    load(&spec.parse::<DatasetSpec>()?)
}

/// All 20 sample images in file order: the class folders under `test/`
/// alone, an evaluation set (the flat layout would split them).
fn samples() -> Dataset {
    static SAMPLES: OnceLock<Dataset> = OnceLock::new();
    SAMPLES
        .get_or_init(|| {
            let tmp = tempfile::tempdir().unwrap();
            copy_tree(
                &repo_data().join("cifar10-samples"),
                &tmp.path().join("test"),
            );
            let source = load_str(&format!("folder:{}", tmp.path().display())).unwrap();
            assert!(
                source.train.is_none(),
                "a folder of test/ only is an evaluation set"
            );
            source.test
        })
        .clone()
}

/// CIFAR-10 label of each class folder present (alphabetical = CIFAR order;
/// bird (2) and deer (4) are absent from the first 20 test images).
const CIFAR_LABEL_OF_FOLDER: [u8; 8] = [0, 1, 3, 5, 6, 7, 8, 9];

// ---------------------------------------------------------------- folders

#[test]
fn folder_of_real_cifar_images() {
    let d = samples();
    assert_eq!(
        (d.n, d.channels, d.height, d.width, d.n_classes),
        (20, 3, 32, 32, 8)
    );
    assert_eq!(d.class_counts(), vec![2, 2, 2, 2, 4, 2, 4, 2]);
    // Sorted: airplane x2, automobile x2, then cat/cifar10_00_3.png.
    let cat = d.image(4);
    assert_eq!(d.labels[4], 2);
    let pixel = |y: usize, x: usize| {
        [
            cat[y * 32 + x],
            cat[1024 + y * 32 + x],
            cat[2048 + y * 32 + x],
        ]
    };
    assert_eq!(pixel(0, 0), [158, 112, 49]);
    assert_eq!(pixel(31, 31), [21, 67, 110]);
    assert_eq!(pixel(5, 7), [167, 115, 41]);
    assert_eq!(cat.iter().map(|&v| v as u64).sum::<u64>(), 332_962);
    // truck/cifar10_14_9.png is the last image: [0, 0] = [200, 169, 75].
    let truck = d.image(19);
    assert_eq!([truck[0], truck[1024], truck[2048]], [200, 169, 75]);
}

#[test]
fn per_channel_normalisation_of_real_rgb_images_matches_numpy() {
    // x = np.stack([np.asarray(Image.open(f)) for f in sorted(glob(
    //     'data/cifar10-samples/*/*.png'))]) / 255
    // x.mean(axis=(0, 1, 2)), x.std(axis=(0, 1, 2))
    let n = csam_data::Normalization::fit(&samples()).unwrap();
    let mean = [0.489736137, 0.474361596, 0.450473729];
    let std = [0.249301854, 0.247395911, 0.262300702];
    // Exact integer moments rounded once to f32 (half an ulp, <= 1.5e-8 below 0.5)
    // against numpy's f64 values printed to 9 places (5e-10): < 1.6e-8.
    for c in 0..3 {
        assert!((n.mean[c] as f64 - mean[c]).abs() < 1e-7, "{n:?}");
        assert!((n.std[c] as f64 - std[c]).abs() < 1e-7, "{n:?}");
    }
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        if path.is_dir() {
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).unwrap();
        }
    }
}

#[test]
fn folder_with_train_and_test() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &repo_data().join("cifar10-samples"),
        &tmp.path().join("train"),
    );
    copy_tree(
        &repo_data().join("cifar10-samples"),
        &tmp.path().join("test"),
    );
    // Non-image files and hidden entries are ignored.
    std::fs::write(tmp.path().join("train/cat/notes.txt"), "x").unwrap();
    std::fs::create_dir(tmp.path().join("test/.cache")).unwrap();
    std::fs::remove_file(tmp.path().join("test/frog/cifar10_04_6.png")).unwrap();
    let source = load_str(&format!("folder:{}", tmp.path().display())).unwrap();
    let train = source.train.unwrap();
    assert_eq!((train.n, source.test.n), (20, 19));
    assert_eq!(train.images, samples().images);
    assert!(train.name.ends_with("/train"));

    std::fs::create_dir(tmp.path().join("test/bird")).unwrap();
    assert!(matches!(
        load_str(&format!("folder:{}", tmp.path().display())),
        Err(DataError::Inconsistent { .. })
    ));
}

#[test]
fn flat_folder_is_split_80_20_per_class_with_a_fixed_seed() {
    let spec = format!("folder:{}", repo_data().join("cifar10-samples").display());
    let source = load_str(&spec).unwrap();
    let train = source.train.clone().unwrap();
    let test = &source.test;
    assert!(train.name.ends_with("/train") && test.name.ends_with("/test"));
    // floor(20 / 5) = 4 test images. Class sizes 2,2,2,2,4,2,4,2: shares
    // 0.4 or 0.8, all floored to 0; the 4 largest remainders (0.8: classes
    // 4 and 6, then 0.4: the lowest indices 0 and 1) get one image each.
    assert_eq!(test.class_counts(), vec![1, 1, 0, 0, 1, 0, 1, 0]);
    assert_eq!(train.class_counts(), vec![1, 1, 2, 2, 3, 2, 3, 2]);
    // Together they are the 20 images, each once, each part in file order.
    let all = samples();
    let position = |image: &[u8]| (0..all.n).find(|&i| all.image(i) == image).unwrap();
    let mut seen: Vec<usize> = (0..train.n).map(|i| position(train.image(i))).collect();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "{seen:?}");
    let in_test: Vec<usize> = (0..test.n).map(|i| position(test.image(i))).collect();
    assert!(in_test.windows(2).all(|w| w[0] < w[1]), "{in_test:?}");
    seen.extend(in_test);
    seen.sort_unstable();
    assert_eq!(seen, (0..20).collect::<Vec<_>>());
    // The same images every time: the draw's seed is fixed.
    assert_eq!(load_str(&spec).unwrap(), source);
}

#[test]
fn folder_layout_errors_say_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &repo_data().join("cifar10-samples"),
        &tmp.path().join("train"),
    );
    match load_str(&format!("folder:{}", tmp.path().display())) {
        Err(e @ DataError::Missing { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains("also needs test/") && text.contains("80/20"),
                "{text}"
            );
        }
        other => panic!("expected Missing, got {other:?}"),
    }
    let one = tempfile::tempdir().unwrap();
    std::fs::create_dir(one.path().join("a")).unwrap();
    image::GrayImage::new(4, 4)
        .save(one.path().join("a/0.png"))
        .unwrap();
    match load_str(&format!("folder:{}", one.path().display())) {
        Err(e @ DataError::Invalid(_)) => assert!(e.to_string().contains("at least 2"), "{e}"),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn folder_errors_name_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&repo_data().join("cifar10-samples"), tmp.path());
    let small = tmp.path().join("dog/small.png");
    image::RgbImage::new(16, 16).save(&small).unwrap();
    match load_str(&format!("folder:{}", tmp.path().display())) {
        Err(DataError::ShapeMismatch { path, .. }) => assert_eq!(path, small),
        other => panic!("expected ShapeMismatch, got {other:?}"),
    }
    std::fs::remove_file(&small).unwrap();
    let broken = tmp.path().join("cat/broken.png");
    std::fs::write(&broken, b"not a png").unwrap();
    match load_str(&format!("folder:{}", tmp.path().display())) {
        Err(e @ DataError::Decode { .. }) => assert!(e.to_string().contains("broken.png"), "{e}"),
        other => panic!("expected Decode, got {other:?}"),
    }
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        load_str(&format!("folder:{}", empty.path().display())),
        Err(DataError::Empty { .. })
    ));
    std::fs::create_dir(empty.path().join("a")).unwrap();
    assert!(matches!(
        load_str(&format!("folder:{}", empty.path().display())),
        Err(DataError::Empty { .. })
    ));
    assert!(matches!(
        load_str("folder:/nonexistent/csam"),
        Err(DataError::Missing { .. })
    ));
}

#[test]
fn grey_folder_has_one_channel_and_colour_wins_when_mixed() {
    let tmp = tempfile::tempdir().unwrap();
    for (class, value) in [("a", 10u8), ("b", 200u8)] {
        std::fs::create_dir_all(tmp.path().join("test").join(class)).unwrap();
        image::GrayImage::from_pixel(4, 3, image::Luma([value]))
            .save(tmp.path().join("test").join(class).join("0.png"))
            .unwrap();
    }
    let grey = load_str(&format!("folder:{}", tmp.path().display()))
        .unwrap()
        .test;
    assert_eq!((grey.channels, grey.height, grey.width), (1, 3, 4));
    assert_eq!(grey.images, [vec![10; 12], vec![200; 12]].concat());
    image::RgbImage::from_pixel(4, 3, image::Rgb([1, 2, 3]))
        .save(tmp.path().join("test/b/1.png"))
        .unwrap();
    let mixed = load_str(&format!("folder:{}", tmp.path().display()))
        .unwrap()
        .test;
    assert_eq!(mixed.channels, 3);
    assert_eq!(mixed.image(0), vec![10; 36].as_slice());
    assert_eq!(
        mixed.image(2),
        [vec![1; 12], vec![2; 12], vec![3; 12]].concat().as_slice()
    );
}

// ---------------------------------------------------------------- CIFAR binary

/// CIFAR records of `indices` of the samples: label byte(s), then CHW bytes.
fn cifar_records(d: &Dataset, indices: &[usize], labels: impl Fn(usize) -> Vec<u8>) -> Vec<u8> {
    let mut bytes = Vec::new();
    for &i in indices {
        bytes.extend(labels(i));
        bytes.extend_from_slice(d.image(i));
    }
    bytes
}

fn cifar10_label(d: &Dataset, i: usize) -> Vec<u8> {
    vec![CIFAR_LABEL_OF_FOLDER[d.labels[i]]]
}

fn write_cifar10(dir: &Path, d: &Dataset) {
    std::fs::create_dir_all(dir).unwrap();
    for batch in 0..5 {
        let indices: Vec<usize> = (batch * 4..batch * 4 + 4).collect();
        let bytes = cifar_records(d, &indices, |i| cifar10_label(d, i));
        std::fs::write(dir.join(format!("data_batch_{}.bin", batch + 1)), bytes).unwrap();
    }
    let reversed: Vec<usize> = (0..20).rev().collect();
    std::fs::write(
        dir.join("test_batch.bin"),
        cifar_records(d, &reversed, |i| cifar10_label(d, i)),
    )
    .unwrap();
}

#[test]
fn cifar10_batches_round_trip_real_images() {
    let d = samples();
    let tmp = tempfile::tempdir().unwrap();
    // In the archive's folder, to check that it is found.
    write_cifar10(&tmp.path().join("cifar-10-batches-bin"), &d);
    let source = load_str(&format!("cifar10:{}", tmp.path().display())).unwrap();
    let train = source.train.unwrap();
    assert_eq!(
        (train.n, train.n_classes, train.sample_shape()),
        (20, 10, (3, 32, 32))
    );
    assert_eq!(train.images, d.images);
    let expected: Vec<usize> = d
        .labels
        .iter()
        .map(|&l| CIFAR_LABEL_OF_FOLDER[l] as usize)
        .collect();
    assert_eq!(train.labels, expected);
    assert_eq!(source.test.image(0), d.image(19));
    assert_eq!(source.test.labels[0], 9);
}

#[test]
fn cifar10_errors_name_file_and_offset() {
    let d = samples();
    let tmp = tempfile::tempdir().unwrap();
    write_cifar10(tmp.path(), &d);
    let spec = format!("cifar10:{}", tmp.path().display());
    // Truncated: the last record of batch 3 loses its last byte.
    let batch3 = tmp.path().join("data_batch_3.bin");
    let mut bytes = std::fs::read(&batch3).unwrap();
    bytes.pop();
    std::fs::write(&batch3, &bytes).unwrap();
    match load_str(&spec) {
        Err(DataError::Truncated {
            path,
            offset,
            expected,
            ..
        }) => {
            assert_eq!(
                (path, offset, expected),
                (batch3.clone(), 4 * 3073 - 1, 4 * 3073)
            );
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    // Label 10 in the third record of batch 3.
    bytes.push(0);
    bytes[2 * 3073] = 10;
    std::fs::write(&batch3, &bytes).unwrap();
    match load_str(&spec) {
        Err(DataError::LabelOutOfRange {
            path,
            offset,
            label,
            n_classes,
        }) => {
            assert_eq!(
                (path, offset, label, n_classes),
                (batch3.clone(), 2 * 3073, 10, 10)
            );
        }
        other => panic!("expected LabelOutOfRange, got {other:?}"),
    }
    // Some train batches missing; then the test batch missing.
    std::fs::remove_file(&batch3).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::Missing { path, .. }) if path == batch3));
    for b in [1, 2, 4, 5] {
        std::fs::remove_file(tmp.path().join(format!("data_batch_{b}.bin"))).unwrap();
    }
    let test_only = load_str(&spec).unwrap();
    assert!(test_only.train.is_none());
    assert_eq!(test_only.test.n, 20);
    std::fs::remove_file(tmp.path().join("test_batch.bin")).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::Missing { .. })));
}

#[test]
fn cifar100_uses_fine_labels_and_checks_both() {
    let d = samples();
    let tmp = tempfile::tempdir().unwrap();
    let all: Vec<usize> = (0..20).collect();
    // coarse = i, fine = 5 * i (both in range).
    let records = |coarse_of: fn(usize) -> u8, fine_of: fn(usize) -> u8| {
        cifar_records(&d, &all, |i| vec![coarse_of(i), fine_of(i)])
    };
    std::fs::write(
        tmp.path().join("train.bin"),
        records(|i| i as u8, |i| 5 * i as u8),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("test.bin"),
        records(|i| i as u8, |i| 99 - i as u8),
    )
    .unwrap();
    let spec = format!("cifar100:{}", tmp.path().display());
    let source = load_str(&spec).unwrap();
    let train = source.train.unwrap();
    assert_eq!(train.n_classes, 100);
    assert_eq!(train.labels, (0..20).map(|i| 5 * i).collect::<Vec<_>>());
    assert_eq!(source.test.labels[0], 99);
    assert_eq!(train.images, d.images);

    let test = tmp.path().join("test.bin");
    std::fs::write(&test, records(|i| if i == 3 { 20 } else { 0 }, |_| 0)).unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::LabelOutOfRange { offset, label: 20, n_classes: 20, .. }) if offset == 3 * 3074
    ));
    std::fs::write(&test, records(|_| 0, |i| if i == 4 { 100 } else { 0 })).unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::LabelOutOfRange { offset, label: 100, n_classes: 100, .. }) if offset == 4 * 3074 + 1
    ));
}

// ---------------------------------------------------------------- .npy

fn npy_spec(images: &Path, labels: &Path, classes: &str) -> String {
    format!("npy:{},{}{classes}", images.display(), labels.display())
}

#[test]
fn numpy_written_cifar10c_pair_loads_as_chw() {
    let (images, labels) = (
        fixtures().join("cifar10c_images.npy"),
        fixtures().join("cifar10c_labels.npy"),
    );
    let source = load_str(&npy_spec(&images, &labels, "")).unwrap();
    assert!(source.train.is_none());
    let d = source.test;
    assert_eq!((d.n, d.sample_shape()), (4, (3, 32, 32)));
    assert_eq!(d.labels, vec![3, 8, 8, 0]);
    assert_eq!(d.n_classes, 9, "inferred: largest label + 1");
    // Same pixels as Pillow's decoding of the PNGs through our folder loader.
    let folder = samples();
    assert_eq!(d.image(0), folder.image(4)); // cat/cifar10_00_3.png
    assert_eq!(d.image(3), folder.image(0)); // airplane/cifar10_03_0.png
    let with_classes = load_str(&npy_spec(&images, &labels, ",10")).unwrap().test;
    assert_eq!(with_classes.n_classes, 10);
}

/// `file` (a numpy-written `.npy` whose data starts at `data_offset`) with
/// `from` replaced by `to` in the header; the header's space padding is
/// adjusted so that its length, and so the data offset, stay the same.
fn edit_header(file: &[u8], data_offset: usize, from: &str, to: &str) -> Vec<u8> {
    let header = std::str::from_utf8(&file[10..data_offset]).unwrap();
    assert!(header.contains(from), "{header}");
    let edited = header.replace(from, to);
    let body = edited.trim_end();
    let padded = format!("{body:<width$}\n", width = header.len() - 1);
    assert_eq!(padded.len(), header.len());
    [&file[..10], padded.as_bytes(), &file[data_offset..]].concat()
}

/// Byte offset of the data in the numpy-written label file (header: 10 +
/// 118 bytes; checked below).
const LABELS_DATA_OFFSET: usize = 128;

#[test]
fn npy_errors_name_file_and_offset() {
    let tmp = tempfile::tempdir().unwrap();
    let images = fixtures().join("cifar10c_images.npy");
    let labels_bytes = std::fs::read(fixtures().join("cifar10c_labels.npy")).unwrap();
    assert_eq!(labels_bytes.len(), LABELS_DATA_OFFSET + 4 * 8);
    let labels = tmp.path().join("labels.npy");
    let spec = npy_spec(&images, &labels, ",8");

    // Label 8 (= class count) at index 1, then -1 at index 2.
    let mut bytes = labels_bytes.clone();
    std::fs::write(&labels, &bytes).unwrap();
    match load_str(&spec) {
        Err(DataError::LabelOutOfRange {
            path,
            offset,
            label: 8,
            n_classes: 8,
        }) => {
            assert_eq!(
                (path, offset),
                (labels.clone(), (LABELS_DATA_OFFSET + 8) as u64)
            );
        }
        other => panic!("expected LabelOutOfRange, got {other:?}"),
    }
    bytes[LABELS_DATA_OFFSET + 16..LABELS_DATA_OFFSET + 24].copy_from_slice(&(-1i64).to_le_bytes());
    std::fs::write(&labels, &bytes).unwrap();
    assert!(matches!(
        load_str(&npy_spec(&images, &labels, "")),
        Err(DataError::NotAClassIndex { offset, label: -1, .. }) if offset == (LABELS_DATA_OFFSET + 16) as u64
    ));

    // Truncated data; trailing data.
    std::fs::write(&labels, &labels_bytes[..labels_bytes.len() - 3]).unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::Truncated { offset, .. }) if offset == (labels_bytes.len() - 3) as u64
    ));
    std::fs::write(&labels, [labels_bytes.as_slice(), &[0; 8]].concat()).unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::TrailingBytes { .. })
    ));

    // Float labels; 2-D labels; wrong magic.
    let with_header =
        |from: &str, to: &str| edit_header(&labels_bytes, LABELS_DATA_OFFSET, from, to);
    std::fs::write(&labels, with_header("<i8", "<f8")).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::BadHeader { .. })));
    std::fs::write(&labels, with_header("(4,)", "(2, 2)")).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::BadHeader { .. })));
    std::fs::write(&labels, [b"NUMPX".as_slice(), &labels_bytes[5..]].concat()).unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::BadMagic { offset: 0, .. })
    ));

    // Count mismatch: 3 labels for 4 images.
    std::fs::write(&labels, {
        let mut b = with_header("(4,)", "(3,)");
        b.truncate(LABELS_DATA_OFFSET + 24);
        b
    })
    .unwrap();
    assert!(matches!(
        load_str(&spec),
        Err(DataError::CountMismatch {
            n_images: 4,
            n_labels: 3,
            ..
        })
    ));
}

#[test]
fn npy_images_must_be_uint8_c_order_and_not_absurd() {
    let tmp = tempfile::tempdir().unwrap();
    let image_bytes = std::fs::read(fixtures().join("cifar10c_images.npy")).unwrap();
    let header_len = image_bytes.len() - 4 * 32 * 32 * 3;
    let labels = fixtures().join("cifar10c_labels.npy");
    let images = tmp.path().join("images.npy");
    let spec = npy_spec(&images, &labels, "");
    let with_header = |from: &str, to: &str| edit_header(&image_bytes, header_len, from, to);

    std::fs::write(&images, with_header("False", "True")).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::BadHeader { .. })));
    std::fs::write(&images, with_header("|u1", "<i2")).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::BadHeader { .. })));
    // A header claiming 4e12 images is refused from the file length alone.
    std::fs::write(&images, with_header("(4, ", "(4000000000000, ")).unwrap();
    match load_str(&spec) {
        Err(DataError::Truncated { path, found, .. }) => {
            assert_eq!((path, found), (images.clone(), image_bytes.len() as u64))
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
}

// ---------------------------------------------------------------- IDX

#[test]
fn idx_directory_plain_and_gzipped() {
    let tmp = tempfile::tempdir().unwrap();
    let fashion = repo_data().join("fashion-mnist");
    for name in ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"] {
        std::fs::copy(
            fashion.join(format!("{name}.gz")),
            tmp.path().join(format!("{name}.gz")),
        )
        .unwrap();
    }
    let spec = format!("idx:{}", tmp.path().display());
    let test_only = load_str(&spec).unwrap();
    assert!(test_only.train.is_none());
    assert_eq!((test_only.test.n, test_only.test.n_classes), (2_000, 10));

    // Train files uncompressed (gunzipped here with flate2).
    for name in ["train-images-idx3-ubyte", "train-labels-idx1-ubyte"] {
        let gz = std::fs::File::open(fashion.join(format!("{name}.gz"))).unwrap();
        let mut plain = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(gz), &mut plain).unwrap();
        std::fs::write(tmp.path().join(name), plain).unwrap();
    }
    let source = load_str(&spec).unwrap();
    let bundled = load_str("fashion-mnist").unwrap();
    assert_eq!(
        source.train.as_ref().unwrap().images,
        bundled.train.as_ref().unwrap().images
    );
    assert_eq!(source.test.labels, bundled.test.labels);

    // A label beyond the others changes the inferred class count; a missing
    // label file is named.
    let labels = tmp.path().join("train-labels-idx1-ubyte");
    let mut bytes = std::fs::read(&labels).unwrap();
    bytes[8 + 5] = 200;
    std::fs::write(&labels, &bytes).unwrap();
    assert_eq!(load_str(&spec).unwrap().test.n_classes, 201);
    std::fs::remove_file(&labels).unwrap();
    assert!(matches!(load_str(&spec), Err(DataError::Missing { path, .. }) if path == labels));
}

#[test]
fn idx_gzip_cut_short_is_an_error_with_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let fashion = repo_data().join("fashion-mnist");
    let images = tmp.path().join("t10k-images-idx3-ubyte.gz");
    let bytes = std::fs::read(fashion.join("t10k-images-idx3-ubyte.gz")).unwrap();
    std::fs::write(&images, &bytes[..bytes.len() / 2]).unwrap();
    std::fs::copy(
        fashion.join("t10k-labels-idx1-ubyte.gz"),
        tmp.path().join("t10k-labels-idx1-ubyte.gz"),
    )
    .unwrap();
    match load_str(&format!("idx:{}", tmp.path().display())) {
        Err(DataError::Compressed {
            path,
            offset,
            format: "gzip",
            ..
        }) => {
            assert_eq!(path, images);
            assert!(offset > 16 && offset < 2_000 * 784, "{offset}");
        }
        other => panic!("expected a broken gzip stream, got {other:?}"),
    }
}
