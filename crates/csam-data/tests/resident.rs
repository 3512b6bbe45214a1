//! Resident batches (the dataset kept on the device, batches gathered there)
//! against the host's: the same bits for every augmentation setting, channel
//! count, shard and partial last batch. The host path is the reference; its
//! own augmentation is checked against hand-computed cases in `augment.rs`.

use csam_data::{
    load, Augmentation, BatchLoader, Dataset, DatasetSpec, LoaderOptions, Normalization,
    ResidentData, Shard,
};
use rand::{Rng, SeedableRng};
use tch::{Device, Tensor};

/// The first `n` digits (1 x 8 x 8).
fn digits(n: usize) -> Dataset {
    let test = load(&DatasetSpec::Digits).unwrap().test;
    test.select(&(0..n).collect::<Vec<_>>())
}

/// `n` random 3 x 5 x 7 images: non-square, so that a crop or flip along
/// the wrong axis shows, and with random bytes, so that no image is its own
/// mirror.
fn rgb(n: usize) -> Dataset {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let images = (0..n * 3 * 5 * 7).map(|_| rng.random::<u8>()).collect();
    let labels = (0..n).map(|i| i % 4).collect();
    Dataset::new("rgb", images, labels, (3, 5, 7), 4).unwrap()
}

/// Every batch of `epochs`: `(xs, ys)` on the CPU.
fn batches(loader: &BatchLoader<'_>, epochs: u64) -> Vec<(Tensor, Tensor)> {
    (0..epochs)
        .flat_map(|epoch| loader.epoch(epoch))
        .map(|(xs, ys)| (xs.to_device(Device::Cpu), ys.to_device(Device::Cpu)))
        .collect()
}

/// Asserts that `options` with `resident` on `device` yields the host's
/// batches, bit for bit, over three epochs; returns the host's.
fn assert_resident_is_host(
    dataset: &Dataset,
    options: LoaderOptions,
    device: Device,
) -> Vec<(Tensor, Tensor)> {
    let norm = Normalization::fit(dataset).unwrap();
    let host = BatchLoader::new(dataset, &norm, options).unwrap();
    let resident_options = LoaderOptions {
        resident: true,
        device,
        ..options
    };
    let resident = BatchLoader::new(dataset, &norm, resident_options).unwrap();
    let (host, resident) = (batches(&host, 3), batches(&resident, 3));
    assert_eq!(host.len(), resident.len(), "{options:?}");
    for (step, ((hx, hy), (rx, ry))) in host.iter().zip(&resident).enumerate() {
        assert_eq!(hx.size(), rx.size(), "{options:?}, batch {step}");
        assert_eq!(hx.kind(), rx.kind(), "{options:?}, batch {step}");
        assert!(hx.equal(rx), "{options:?}, batch {step}: pixels differ");
        assert!(hy.equal(ry), "{options:?}, batch {step}: labels differ");
    }
    host
}

/// Every augmentation setting on both datasets, three shards and their
/// whole, two seeds; 70 samples in batches of 32 leave a partial last batch
/// of 6 (whose shards of 3 have 2 rows each).
fn check_every_setting(device: Device) {
    for dataset in [digits(70), rgb(70)] {
        for crop_padding in [0, 1, 2, 4] {
            for horizontal_flip in [false, true] {
                let augmentation = Augmentation {
                    crop_padding,
                    horizontal_flip,
                };
                let shards = [
                    Shard::WHOLE,
                    Shard { index: 0, count: 3 },
                    Shard { index: 2, count: 3 },
                ];
                for (shard, seed) in shards.into_iter().zip([0, 7, 11]) {
                    let options = LoaderOptions {
                        shard,
                        ..LoaderOptions::training(32, augmentation, seed, Device::Cpu)
                    };
                    let augmented = assert_resident_is_host(&dataset, options, device);
                    let plain = LoaderOptions {
                        augmentation: Augmentation::NONE,
                        ..options
                    };
                    let plain = assert_resident_is_host(&dataset, plain, device);
                    // The comparison saw augmented pixels, not only the
                    // untouched images.
                    if !augmentation.is_none() {
                        assert!(augmented.iter().zip(&plain).any(|(a, p)| !a.0.equal(&p.0)));
                    }
                }
            }
        }
    }
}

#[test]
fn resident_batches_on_the_cpu_are_the_host_batches() {
    check_every_setting(Device::Cpu);
}

#[test]
fn resident_batches_without_shuffle_and_with_drop_last_are_the_host_batches() {
    let dataset = rgb(45);
    let options = LoaderOptions {
        shuffle: false,
        drop_last: true,
        ..LoaderOptions::training(20, Augmentation::standard(5, 7), 3, Device::Cpu)
    };
    let host = assert_resident_is_host(&dataset, options, Device::Cpu);
    assert_eq!(host.len(), 3 * 2);
}

#[test]
fn one_upload_serves_the_loader_of_every_epoch_and_no_other() {
    let dataset = rgb(50);
    let norm = Normalization::fit(&dataset).unwrap();
    let options = LoaderOptions::training(16, Augmentation::standard(5, 7), 9, Device::Cpu);
    let upload = ResidentData::upload(&dataset, &norm, &options).unwrap();
    let host = BatchLoader::new(&dataset, &norm, options).unwrap();
    for epoch in 0..3 {
        let loader = BatchLoader::with_resident(&dataset, &norm, options, &upload).unwrap();
        for ((hx, hy), (rx, ry)) in host.epoch(epoch).zip(loader.epoch(epoch)) {
            assert!(hx.equal(&rx) && hy.equal(&ry), "epoch {epoch}");
        }
    }
    let other_padding = LoaderOptions {
        augmentation: Augmentation::NONE,
        ..options
    };
    let other_norm = Normalization::identity(3);
    let other_data = rgb(49);
    let refused = [
        BatchLoader::with_resident(&dataset, &norm, other_padding, &upload),
        BatchLoader::with_resident(&dataset, &other_norm, options, &upload),
        BatchLoader::with_resident(&other_data, &norm, options, &upload),
    ];
    for (case, loader) in refused.into_iter().enumerate() {
        let message = loader.unwrap_err().to_string();
        assert!(message.contains("uploaded for"), "case {case}: {message}");
    }
}

#[test]
fn resident_batches_on_cuda_are_the_host_batches() {
    if !tch::Cuda::is_available() {
        eprintln!("SKIPPED: no CUDA device; resident batches were compared on the CPU only");
        return;
    }
    check_every_setting(Device::Cuda(0));
}
