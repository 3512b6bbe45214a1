//! Mini-batches as tensors.
//!
//! A batch is built in one `Vec<f32>` (augmentation and normalisation fused
//! in a table look-up per pixel) and becomes one tensor `[B, C, H, W]` on the
//! requested device; labels become one `i64` tensor `[B]`.
//!
//! Epoch `e` of a loader with seed `s` visits the samples in a permutation
//! drawn from the stream `(s, Order, e)` (a Fisher-Yates shuffle of
//! `0..n`), or in index order when `shuffle` is off; augmentation draws from
//! `(s, Augment, e)` in visiting order. Same `(seed, epoch)`, same batches.
//!
//! With [`LoaderOptions::resident`] the dataset is kept on the device and
//! each batch is built there from the same draws (module `resident`):
//! the same batches, bit for bit, without per-pixel work on the host.

use rand::seq::SliceRandom;
use tch::{Device, Tensor};

use super::augment::{Augmentation, Draw};
use super::dataset::Dataset;
use super::error::{DataError, Result};
use super::normalize::Normalization;
use super::resident::ResidentData;
use super::rng::{stream, Purpose};

/// How a [`BatchLoader`] walks a dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoaderOptions {
    pub batch_size: usize,
    /// Visit samples in a seeded random order per epoch (off: index order).
    pub shuffle: bool,
    /// Drop the last batch when smaller than `batch_size`.
    pub drop_last: bool,
    pub augmentation: Augmentation,
    pub seed: u64,
    pub device: Device,
    /// The part of every batch this process builds ([`Shard::WHOLE`]: all of it).
    pub shard: Shard,
    /// Keep the dataset on `device` (padded `u8` images, uploaded by
    /// [`BatchLoader::new`]; see [`BatchLoader::with_resident`] to upload
    /// once for many loaders) and build each batch there: the host only draws
    /// the augmentations and sends them with the sample indices. Meant for a
    /// GPU and data that fits in its memory (CIFAR-sized; refused above
    /// [`crate::RESIDENT_DEVICE_LIMIT`]); the batches are the same bits as
    /// without it, so on the CPU it changes nothing but where the gather runs
    /// (and is slower there: the gathers go through `i64` index tensors).
    pub resident: bool,
}

/// The part of every batch that one data-parallel replica trains on: of a
/// batch of `n` rows, rows `floor(index n / count) .. floor((index + 1) n /
/// count)`, contiguous, so that the `count` parts make up the batch a single
/// process would train on, in its order. Augmentations are still drawn for
/// every row of the batch, so a row's augmentation does not depend on how
/// many replicas there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This replica's part, `0..count`.
    pub index: usize,
    /// Number of replicas.
    pub count: usize,
}

impl Shard {
    /// One process, the whole batch.
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    /// This part's rows of a batch of `n`.
    pub fn rows(&self, n: usize) -> std::ops::Range<usize> {
        (self.index * n / self.count)..((self.index + 1) * n / self.count)
    }
}

impl LoaderOptions {
    /// Training: shuffled, last partial batch kept, the given augmentation.
    pub fn training(
        batch_size: usize,
        augmentation: Augmentation,
        seed: u64,
        device: Device,
    ) -> Self {
        LoaderOptions {
            batch_size,
            shuffle: true,
            drop_last: false,
            augmentation,
            seed,
            device,
            shard: Shard::WHOLE,
            resident: false,
        }
    }

    /// Evaluation: index order, no augmentation, every sample once.
    pub fn evaluation(batch_size: usize, device: Device) -> Self {
        LoaderOptions {
            batch_size,
            shuffle: false,
            drop_last: false,
            augmentation: Augmentation::NONE,
            seed: 0,
            device,
            shard: Shard::WHOLE,
            resident: false,
        }
    }
}

/// Yields normalised `(xs: f32 [B, C, H, W], ys: i64 [B])` batches of a
/// dataset, epoch by epoch (see the module doc for the order).
#[derive(Debug, Clone)]
pub struct BatchLoader<'a> {
    dataset: &'a Dataset,
    tables: Vec<[f32; 256]>,
    options: LoaderOptions,
    /// The dataset on the device, with `options.resident` or
    /// [`BatchLoader::with_resident`].
    resident: Option<ResidentData>,
}

impl<'a> BatchLoader<'a> {
    /// Checks that the normalisation has the dataset's channel count, finite
    /// means and positive finite stds, and that the batch size is positive;
    /// with `options.resident`, uploads the dataset to `options.device`
    /// ([`ResidentData::upload`]).
    pub fn new(
        dataset: &'a Dataset,
        normalization: &Normalization,
        options: LoaderOptions,
    ) -> Result<Self> {
        check(dataset, normalization, &options)?;
        let resident = match options.resident {
            true => Some(ResidentData::upload(dataset, normalization, &options)?),
            false => None,
        };
        Ok(BatchLoader {
            dataset,
            tables: normalization.lookup_tables(),
            options,
            resident,
        })
    }

    /// A loader that builds its batches on the device from `resident`, an
    /// upload of `dataset` made for these `normalization` and `options`
    /// (refused otherwise), whatever `options.resident` says: the loader of
    /// each epoch then uploads nothing.
    pub fn with_resident(
        dataset: &'a Dataset,
        normalization: &Normalization,
        options: LoaderOptions,
        resident: &ResidentData,
    ) -> Result<Self> {
        check(dataset, normalization, &options)?;
        resident.check_made_for(dataset, normalization, &options)?;
        Ok(BatchLoader {
            dataset,
            tables: normalization.lookup_tables(),
            options,
            resident: Some(resident.clone()),
        })
    }

    /// The dataset this loader reads.
    pub fn dataset(&self) -> &'a Dataset {
        self.dataset
    }

    /// Batches per epoch.
    pub fn n_batches(&self) -> usize {
        let options = &self.options;
        batches_per_epoch(self.dataset.n, options.batch_size, options.drop_last)
    }

    /// The sample indices of `epoch` in visiting order (a permutation of
    /// `0..n`).
    pub fn order(&self, epoch: u64) -> Vec<usize> {
        let options = &self.options;
        epoch_order(self.dataset.n, options.shuffle, options.seed, epoch)
    }

    /// The batches of `epoch`; they borrow the dataset, not the loader.
    pub fn epoch(&self, epoch: u64) -> Batches<'a> {
        Batches {
            loader: self.clone(),
            order: self.order(epoch),
            next: 0,
            rng: stream(self.options.seed, Purpose::Augment, epoch),
        }
    }

    /// The batch of `indices`, or this loader's shard of it. The
    /// augmentations of all of `indices` are drawn from `rng`, so a row's
    /// draw does not depend on the shard.
    fn batch(&self, indices: &[usize], rng: &mut impl rand::Rng) -> (Tensor, Tensor) {
        let augmentation = self.options.augmentation;
        let draws: Vec<Draw> = indices.iter().map(|_| augmentation.draw(rng)).collect();
        let rows = self.options.shard.rows(indices.len());
        let (indices, draws) = (&indices[rows.clone()], &draws[rows]);
        match &self.resident {
            Some(resident) => resident.batch(indices, draws),
            None => self.host_batch(indices, draws),
        }
    }

    /// The batch of `indices` augmented by `draws`, built in one `Vec<f32>`
    /// in `[B, C, H, W]` order and copied to the device.
    fn host_batch(&self, indices: &[usize], draws: &[Draw]) -> (Tensor, Tensor) {
        let (c, h, w) = self.dataset.sample_shape();
        let len = self.dataset.sample_len();
        let mut pixels = vec![0f32; indices.len() * len];
        let samples = indices.iter().zip(draws);
        for ((&i, &draw), out) in samples.zip(pixels.chunks_exact_mut(len)) {
            self.options.augmentation.apply(
                draw,
                self.dataset.image(i),
                self.dataset.sample_shape(),
                &self.tables,
                out,
            );
        }
        let labels: Vec<i64> = indices
            .iter()
            .map(|&i| self.dataset.labels[i] as i64)
            .collect();
        let b = labels.len() as i64;
        let xs = Tensor::from_slice(&pixels)
            .view([b, c as i64, h as i64, w as i64])
            .to_device(self.options.device);
        let ys = Tensor::from_slice(&labels).to_device(self.options.device);
        (xs, ys)
    }
}

/// Refuses a normalisation of another channel count (or with non-finite
/// means, or stds that are not positive and finite), a zero batch size and a
/// shard outside its count.
fn check(dataset: &Dataset, normalization: &Normalization, options: &LoaderOptions) -> Result<()> {
    normalization.validate(dataset.channels)?;
    if options.batch_size == 0 {
        return Err(DataError::Invalid("batch size must be positive".into()));
    }
    let Shard { index, count } = options.shard;
    if index >= count {
        return Err(DataError::Invalid(format!(
            "shard {index} of {count}: a shard index lies in 0..count"
        )));
    }
    Ok(())
}

/// Batches of `batch_size` in an epoch of `n` examples (the last one
/// smaller, or dropped when `drop_last`).
pub(crate) fn batches_per_epoch(n: usize, batch_size: usize, drop_last: bool) -> usize {
    if drop_last {
        n / batch_size
    } else {
        n.div_ceil(batch_size)
    }
}

/// The visiting order of `epoch` over `n` examples: the permutation drawn
/// from the stream `(seed, Order, epoch)` when shuffling, else `0..n`.
pub(crate) fn epoch_order(n: usize, shuffle: bool, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n).collect();
    if shuffle {
        order.shuffle(&mut stream(seed, Purpose::Order, epoch));
    }
    order
}

/// The batches of one epoch; see [`BatchLoader::epoch`].
pub struct Batches<'a> {
    loader: BatchLoader<'a>,
    order: Vec<usize>,
    next: usize,
    rng: rand_chacha::ChaCha8Rng,
}

impl Iterator for Batches<'_> {
    type Item = (Tensor, Tensor);

    fn next(&mut self) -> Option<Self::Item> {
        let remaining = self.order.len() - self.next;
        let size = remaining.min(self.loader.options.batch_size);
        if size == 0 || (self.loader.options.drop_last && size < self.loader.options.batch_size) {
            return None;
        }
        let indices = &self.order[self.next..self.next + size];
        self.next += size;
        Some(self.loader.batch(indices, &mut self.rng))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let b = self.loader.options.batch_size;
        let remaining = self.order.len() - self.next;
        let batches = if self.loader.options.drop_last {
            remaining / b
        } else {
            remaining.div_ceil(b)
        };
        (batches, Some(batches))
    }
}

impl ExactSizeIterator for Batches<'_> {}

/// The whole dataset as one normalised tensor `[N, C, H, W]` (f32) and its
/// labels `[N]` (i64) on `device`, without augmentation, in index order. For
/// evaluation; split it with `Tensor::split` to bound memory per forward pass.
pub fn to_tensors(
    dataset: &Dataset,
    normalization: &Normalization,
    device: Device,
) -> Result<(Tensor, Tensor)> {
    let loader = BatchLoader::new(
        dataset,
        normalization,
        LoaderOptions::evaluation(dataset.n.max(1), device),
    )?;
    let indices: Vec<usize> = (0..dataset.n).collect();
    let (xs, ys) = loader.batch(&indices, &mut stream(0, Purpose::Augment, 0));
    Ok((xs, ys))
}
