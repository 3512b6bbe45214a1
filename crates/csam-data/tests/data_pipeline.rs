//! Split, normalisation, augmentation and batching on the bundled digits.

use std::collections::BTreeSet;

use csam_data::{
    load, split, to_tensors, Augmentation, BatchLoader, DatasetSpec, LoaderOptions, Normalization,
    Shard, Splits,
};
use tch::{Device, Kind};

fn digits_splits(val_size: usize, seed: u64) -> Splits {
    split(load(&DatasetSpec::Digits).unwrap(), val_size, seed).unwrap()
}

/// Each sample's bytes and label, to compare sets of samples.
fn samples(d: &csam_data::Dataset) -> Vec<(Vec<u8>, usize)> {
    (0..d.n)
        .map(|i| (d.image(i).to_vec(), d.labels[i]))
        .collect()
}

#[test]
fn split_is_deterministic_disjoint_stratified_and_complete() {
    let source = load(&DatasetSpec::Digits).unwrap();
    let all_train = source.train.clone().unwrap();
    let a = split(source.clone(), 300, 7).unwrap();
    let b = split(source.clone(), 300, 7).unwrap();
    let c = split(source, 300, 8).unwrap();
    assert_eq!(a, b);
    assert_ne!(a.val.labels, c.val.labels);
    assert_eq!((a.train.n, a.val.n, a.test.n), (1_142, 300, 355));
    assert_eq!(a.val.name, "digits/val");
    // Together they are the source's training part, each sample once.
    let mut union = samples(&a.train);
    union.extend(samples(&a.val));
    union.sort();
    let mut expected = samples(&all_train);
    expected.sort();
    assert_eq!(union, expected);
    // Stratified: 300/1442 of each class, within one sample.
    for (c, (&v, &n)) in a
        .val
        .class_counts()
        .iter()
        .zip(&all_train.class_counts())
        .enumerate()
    {
        let share = 300.0 * n as f64 / 1442.0;
        // Quotas are floor(share) or floor(share) + 1; share's f64 round-off is ~1e-14.
        assert!((v as f64 - share).abs() < 1.0, "class {c}: {v} vs {share}");
    }
}

#[test]
fn split_refuses_impossible_requests() {
    let source = load(&DatasetSpec::Digits).unwrap();
    assert!(split(source.clone(), 1_442, 0).is_err());
    let test_only = csam_data::DataSource {
        train: None,
        test: source.test,
    };
    assert!(split(test_only, 10, 0).is_err());
}

fn loader_options(shuffle: bool, augmentation: Augmentation, seed: u64) -> LoaderOptions {
    LoaderOptions {
        batch_size: 100,
        shuffle,
        drop_last: false,
        augmentation,
        seed,
        device: Device::Cpu,
        shard: Shard::WHOLE,
        resident: false,
    }
}

fn collect(loader: &BatchLoader<'_>, epoch: u64) -> (Vec<f32>, Vec<i64>, Vec<i64>) {
    let (mut xs_all, mut ys_all, mut sizes) = (Vec::new(), Vec::new(), Vec::new());
    for (xs, ys) in loader.epoch(epoch) {
        assert_eq!(xs.kind(), Kind::Float);
        assert_eq!(ys.kind(), Kind::Int64);
        let size = xs.size();
        assert_eq!(&size[1..], &[1, 8, 8]);
        assert_eq!(ys.size(), vec![size[0]]);
        sizes.push(size[0]);
        xs_all.extend(Vec::<f32>::try_from(xs.flatten(0, -1)).unwrap());
        ys_all.extend(Vec::<i64>::try_from(ys).unwrap());
    }
    (xs_all, ys_all, sizes)
}

#[test]
fn batch_order_is_a_deterministic_permutation_per_seed_and_epoch() {
    let s = digits_splits(200, 1);
    let norm = Normalization::fit(&s.train).unwrap();
    let loader =
        BatchLoader::new(&s.train, &norm, loader_options(true, Augmentation::NONE, 3)).unwrap();
    let order = loader.order(0);
    assert_eq!(order, loader.order(0));
    assert_ne!(order, loader.order(1));
    let other_seed =
        BatchLoader::new(&s.train, &norm, loader_options(true, Augmentation::NONE, 4)).unwrap();
    assert_ne!(order, other_seed.order(0));
    let as_set: BTreeSet<usize> = order.iter().copied().collect();
    assert_eq!(as_set, (0..s.train.n).collect());
    assert_ne!(order, (0..s.train.n).collect::<Vec<_>>());

    assert_eq!(loader.epoch(0).len(), loader.n_batches());
    let (xs, ys, sizes) = collect(&loader, 0);
    assert_eq!(sizes.iter().sum::<i64>() as usize, s.train.n);
    assert_eq!(loader.n_batches(), sizes.len());
    assert_eq!(*sizes.last().unwrap(), (s.train.n % 100) as i64);
    let expected: Vec<i64> = order.iter().map(|&i| s.train.labels[i] as i64).collect();
    assert_eq!(ys, expected);
    assert_eq!((xs, ys), {
        let (x2, y2, _) = collect(&loader, 0);
        (x2, y2)
    });

    let unshuffled = BatchLoader::new(
        &s.train,
        &norm,
        loader_options(false, Augmentation::NONE, 3),
    )
    .unwrap();
    assert_eq!(unshuffled.order(5), (0..s.train.n).collect::<Vec<_>>());
}

#[test]
fn batches_are_normalised_pixels() {
    let s = digits_splits(200, 1);
    let norm = Normalization::fit(&s.train).unwrap();
    let loader =
        BatchLoader::new(&s.val, &norm, LoaderOptions::evaluation(64, Device::Cpu)).unwrap();
    let (xs, ys, _) = collect(&loader, 0);
    let (mean, std) = (norm.mean[0] as f64, norm.std[0] as f64);
    for (i, &x) in xs.iter().enumerate() {
        let byte = s.val.images[i] as f64;
        // The table holds this f64 formula rounded once to f32: <= 0.5 ulp at |x| < 4,
        // 2.4e-7; a wrong byte or channel is off by >= 1 / (255 std) ~ 1e-2.
        assert!((x as f64 - (byte / 255.0 - mean) / std).abs() < 1e-5);
    }
    assert_eq!(
        ys,
        s.val.labels.iter().map(|&l| l as i64).collect::<Vec<_>>()
    );
    // On the training split the normalised pixels have mean 0 and std 1.
    let (all, _) = to_tensors(&s.train, &norm, Device::Cpu).unwrap();
    let all = all.to_kind(Kind::Double);
    // Exactly 0 and 1 but for the f32 roundings of mean and std (<= 6e-8 relative)
    // and of each pixel (<= 2.4e-7); libtorch's f64 reductions of 73k values add
    // <= 73k * 1.1e-16 in any order. A wrong split or formula is off by > 1e-2.
    assert!(all.mean(Kind::Double).double_value(&[]).abs() < 1e-5);
    let std = all.std(false).double_value(&[]);
    assert!((std - 1.0).abs() < 1e-5, "{std}");
}

#[test]
fn augmentation_keeps_shapes_and_is_deterministic_per_seed() {
    let s = digits_splits(200, 1);
    let norm = Normalization::fit(&s.train).unwrap();
    let aug = Augmentation::standard(8, 8);
    let a = BatchLoader::new(&s.train, &norm, loader_options(true, aug, 9)).unwrap();
    let b = BatchLoader::new(&s.train, &norm, loader_options(true, aug, 9)).unwrap();
    let plain =
        BatchLoader::new(&s.train, &norm, loader_options(true, Augmentation::NONE, 9)).unwrap();
    let (xa, ya, sa) = collect(&a, 2);
    let (xb, yb, _) = collect(&b, 2);
    let (xp, yp, sp) = collect(&plain, 2);
    assert_eq!((&xa, &ya), (&xb, &yb));
    // Same order (same seed), same shapes, different pixels.
    assert_eq!((ya, sa), (yp, sp));
    assert_ne!(xa, xp);
    let (xa3, _, _) = collect(&a, 3);
    assert_ne!(xa3[..64], xa[..64]);
    // Padding is a black (byte 0) pixel after normalisation.
    let black = (0.0 - norm.mean[0]) / norm.std[0];
    // f32 arithmetic here, f64 rounded to f32 in the table: <= 2 f32 ulps of |x| < 2.
    assert!(xa.iter().any(|&x| (x - black).abs() < 1e-6));
}

#[test]
fn loader_refuses_mismatched_normalisation_and_zero_batches() {
    let s = digits_splits(200, 1);
    let rgb = Normalization::identity(3);
    assert!(BatchLoader::new(&s.train, &rgb, LoaderOptions::evaluation(8, Device::Cpu)).is_err());
    let norm = Normalization::identity(1);
    assert!(BatchLoader::new(&s.train, &norm, LoaderOptions::evaluation(0, Device::Cpu)).is_err());
}

#[test]
fn drop_last_drops_the_partial_batch() {
    let s = digits_splits(200, 1);
    let norm = Normalization::identity(1);
    let mut options = LoaderOptions::evaluation(100, Device::Cpu);
    options.drop_last = true;
    let loader = BatchLoader::new(&s.train, &norm, options).unwrap();
    assert_eq!(loader.epoch(0).len(), s.train.n / 100);
    let sizes: Vec<i64> = loader.epoch(0).map(|(xs, _)| xs.size()[0]).collect();
    assert_eq!(sizes, vec![100; s.train.n / 100]);
}

/// Data parallelism: the shards of a batch, in replica order, are the
/// whole batch with the same augmentation, also for a last batch that does
/// not divide evenly; a shard outside its count is refused.
#[test]
fn shards_of_every_batch_make_up_the_whole_batch() {
    let s = digits_splits(200, 1);
    let norm = Normalization::fit(&s.train).unwrap();
    let aug = Augmentation::standard(8, 8);
    let whole = BatchLoader::new(&s.train, &norm, loader_options(true, aug, 4)).unwrap();
    assert_ne!(
        s.train.n % 100,
        0,
        "the last batch must be partial for this test"
    );
    for count in [2, 3, 7] {
        let shards: Vec<Vec<(tch::Tensor, tch::Tensor)>> = (0..count)
            .map(|index| {
                let options = LoaderOptions {
                    shard: Shard { index, count },
                    ..loader_options(true, aug, 4)
                };
                let loader = BatchLoader::new(&s.train, &norm, options).unwrap();
                loader.epoch(3).collect()
            })
            .collect();
        for (step, (xs, ys)) in whole.epoch(3).enumerate() {
            let parts: Vec<_> = shards.iter().map(|shard| &shard[step]).collect();
            let n = ys.size()[0] as usize;
            for (index, (_, part_ys)) in parts.iter().enumerate() {
                assert_eq!(
                    part_ys.size()[0] as usize,
                    Shard { index, count }.rows(n).len()
                );
            }
            let joined_xs = tch::Tensor::cat(&parts.iter().map(|p| &p.0).collect::<Vec<_>>(), 0);
            let joined_ys = tch::Tensor::cat(&parts.iter().map(|p| &p.1).collect::<Vec<_>>(), 0);
            assert!(
                joined_xs.equal(&xs),
                "count {count}, step {step}: pixels differ"
            );
            assert!(
                joined_ys.equal(&ys),
                "count {count}, step {step}: labels differ"
            );
        }
    }
    let outside = LoaderOptions {
        shard: Shard { index: 2, count: 2 },
        ..loader_options(true, aug, 4)
    };
    assert!(BatchLoader::new(&s.train, &norm, outside).is_err());
}
