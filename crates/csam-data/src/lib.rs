//! Datasets: loading, splitting, normalising, augmenting and batching.
//!
//! Pipeline: a [`DatasetSpec`] (parsed from the command line) is [`load`]ed
//! into a [`DataSource`] (train and test [`Dataset`]s of raw `u8` CHW
//! images); [`split`] takes a seeded, stratified validation set off the
//! training part; [`Normalization::fit`] learns per-channel mean and std on
//! the training split; a [`BatchLoader`] yields normalised (and, for
//! training, augmented) `tch` tensors, deterministically per (seed, epoch).
//!
//! Formats: IDX (MNIST family), CIFAR-10 / CIFAR-100 binary, `.npy` image
//! arrays (CIFAR-10-C), image folders, SVHN's MAT-files, Tiny-ImageNet-200's
//! JPEG tree, and the bundled datasets compiled into the library
//! ([`bundled`]). Every malformed file gives a [`DataError`] that
//! names the file and the byte offset.
//!
//! ```
//! use csam_data::{load, split, BatchLoader, DatasetSpec, LoaderOptions, Normalization};
//!
//! let spec: DatasetSpec = "digits".parse()?;
//! let splits = split(load(&spec)?, 200, 42)?;
//! let norm = Normalization::fit(&splits.train)?;
//! let augmentation = spec.standard_augmentation(splits.train.height, splits.train.width);
//! let device = tch::Device::Cpu;
//! let train = BatchLoader::new(&splits.train, &norm, LoaderOptions::training(128, augmentation, 42, device))?;
//! for epoch in 0..2 {
//!     for (xs, ys) in train.epoch(epoch) {
//!         assert_eq!(xs.size()[1..], [1, 8, 8]);
//!         assert_eq!(xs.size()[0], ys.size()[0]);
//!     }
//! }
//! let val = BatchLoader::new(&splits.val, &norm, LoaderOptions::evaluation(512, device))?;
//! assert_eq!(val.epoch(0).map(|(_, ys)| ys.size()[0]).sum::<i64>(), 200);
//! # Ok::<(), csam_data::DataError>(())
//! ```

mod augment;
pub mod bundled;
mod cifar;
pub mod corrupt;
mod dataset;
mod digits;
mod error;
mod folder;
mod idx;
mod loader;
mod mat;
mod normalize;
mod npy;
pub mod parse;
mod part;
pub mod pillow_resize;
mod resident;
pub(crate) mod rng;
mod spec;
mod split;
mod stream;
pub mod streaming;
mod svhn;
mod tiny_imagenet;

pub use augment::Augmentation;
pub use bundled::{BundledFile, BUNDLED_FILES};
pub use dataset::{chw_to_hwc, DataSource, Dataset, SampleShape};
pub use error::{DataError, Result};
pub use loader::{to_tensors, BatchLoader, Batches, LoaderOptions, Shard};
pub use normalize::Normalization;
pub use resident::{ResidentData, RESIDENT_DEVICE_LIMIT};
pub use spec::{load, DatasetSpec, BUNDLED_NAMES, DEFAULT_DATA};
pub use split::{split, Splits};
