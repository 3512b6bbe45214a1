//! The data of a run: its train / val / test parts and their normalisation,
//! held in memory or streamed from disk, behind one interface that the epoch
//! loop and the evaluation read.
//!
//! - In memory (every source but `imagenet:`): the splits of
//!   [`crate::spec::DataSpec::splits`], normalised with the mean and std
//!   fitted on the training split, batched by [`csam_data::BatchLoader`];
//!   with `resident_data` the training split is uploaded to the device once
//!   ([`csam_data::ResidentData`]) and every epoch's batches are built there.
//! - Streamed (`imagenet:DIR`): file lists only
//!   ([`csam_data::streaming::ImageNetSplits`]: `train/`, and `val/` split
//!   20 / 80 into validation and test by the split seed), decoded by worker
//!   threads at 224x224 with torchvision's reference transforms (random
//!   resized crop and flip when the run augments, resize 256 + centre crop
//!   otherwise and for evaluation) and normalised with the ImageNet mean and
//!   std ([`csam_data::Normalization::imagenet`]).
//!
//! Either way epoch `e`'s batches are a pure function of (seed, e); the
//! streamed ones do not depend on the number of workers.

use std::path::Path;
use std::sync::Arc;

use csam_data::streaming::{
    ImageFiles, ImageNetSplits, ImageTransform, StreamOptions, StreamingLoader,
};
use csam_data::{
    Augmentation, BatchLoader, Dataset, DatasetSpec, LoaderOptions, Normalization, ResidentData,
    Shard, Splits,
};
use csam_nn::model::{InputShape, Mode, Model};
use tch::{Device, Tensor};

use super::error::{Result, TrainError};
use super::evaluate::{predict_mode, Predictions};
use super::rundir::Split;
use super::session::{input_shape, predict_dataset};
use crate::spec::ConfigError;
use crate::spec::RunSpec;

/// Side of the square images of a streamed source (ImageNet's 224).
pub const STREAMED_IMAGE_SIZE: usize = 224;

/// The data of a run (see the module doc).
pub struct RunData {
    parts: Parts,
    normalization: Normalization,
    /// The training split on the device (`resident_data`).
    resident: Option<ResidentData>,
}

enum Parts {
    InMemory(Box<Splits>),
    Streamed {
        train: Arc<ImageFiles>,
        val: Arc<ImageFiles>,
        test: Arc<ImageFiles>,
        workers: usize,
    },
}

/// One epoch's training batches with the indices of their examples in the
/// training part, batch by batch.
pub struct TrainEpoch<'a> {
    /// The examples of the epoch in visiting order.
    pub order: Vec<usize>,
    /// The batches, in that order.
    pub batches: Box<dyn Iterator<Item = Result<(Tensor, Tensor)>> + 'a>,
}

impl RunData {
    /// Loads (or lists, for a streamed source) the data of `spec` and splits
    /// off its validation part; a streamed source decodes with `workers`
    /// threads. With `resident`, the training split is uploaded to that
    /// device (an in-memory source only).
    pub fn load(spec: &RunSpec, workers: usize, resident: Option<Device>) -> Result<RunData> {
        if let DatasetSpec::ImageNet(dir) = &spec.data.source {
            if resident.is_some() {
                return Err(ConfigError::invalid(
                    "resident_data",
                    true,
                    "an imagenet: source is streamed from disk batch by batch and never held \
                     in memory; resident_data keeps an in-memory data set on the device",
                )
                .into());
            }
            let name = spec.data.source.to_string();
            let splits = ImageNetSplits::open(dir, &name, spec.data.split_seed(spec.seed))?;
            return Ok(RunData {
                parts: Parts::Streamed {
                    train: Arc::new(splits.train),
                    val: Arc::new(splits.val),
                    test: Arc::new(splits.test),
                    workers,
                },
                normalization: Normalization::imagenet(),
                resident: None,
            });
        }
        let splits = spec.data.splits(spec.seed)?;
        let normalization = Normalization::fit(&splits.train)?;
        let resident = match resident {
            Some(device) => {
                let options = train_options(spec, &splits.train, device, Shard::WHOLE);
                Some(ResidentData::upload(
                    &splits.train,
                    &normalization,
                    &options,
                )?)
            }
            None => None,
        };
        Ok(RunData {
            parts: Parts::InMemory(Box::new(splits)),
            normalization,
            resident,
        })
    }

    /// Number of training examples.
    pub fn n_train(&self) -> usize {
        match &self.parts {
            Parts::InMemory(splits) => splits.train.n,
            Parts::Streamed { train, .. } => train.len(),
        }
    }

    /// Number of examples of a split.
    pub fn split_len(&self, split: Split) -> usize {
        match (&self.parts, split) {
            (Parts::InMemory(s), Split::Val) => s.val.n,
            (Parts::InMemory(s), Split::Test) => s.test.n,
            (Parts::Streamed { val, .. }, Split::Val) => val.len(),
            (Parts::Streamed { test, .. }, Split::Test) => test.len(),
        }
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        match &self.parts {
            Parts::InMemory(splits) => splits.train.n_classes,
            Parts::Streamed { train, .. } => train.n_classes(),
        }
    }

    /// The shape of one example as the model sees it.
    pub fn input_shape(&self) -> InputShape {
        match &self.parts {
            Parts::InMemory(splits) => input_shape(&splits.train),
            Parts::Streamed { .. } => InputShape {
                channels: 3,
                height: STREAMED_IMAGE_SIZE as i64,
                width: STREAMED_IMAGE_SIZE as i64,
            },
        }
    }

    /// The training batches of `epoch`, or `shard`'s part of each (data
    /// parallelism; in-memory sources only, [`super::replica::Replica::check_spec`]):
    /// order and augmentation are a pure function of (seed, epoch).
    pub fn train_epoch(
        &self,
        spec: &RunSpec,
        device: Device,
        epoch: u64,
        shard: Shard,
    ) -> Result<TrainEpoch<'_>> {
        match &self.parts {
            Parts::InMemory(splits) => {
                let train = &splits.train;
                let options = train_options(spec, train, device, shard);
                let normalization = &self.normalization;
                let loader = match &self.resident {
                    Some(resident) => {
                        BatchLoader::with_resident(train, normalization, options, resident)?
                    }
                    None => BatchLoader::new(train, normalization, options)?,
                };
                let order = loader.order(epoch);
                let batches = loader.epoch(epoch).map(Ok);
                Ok(TrainEpoch {
                    order,
                    batches: Box::new(batches),
                })
            }
            Parts::Streamed { .. } if shard != Shard::WHOLE => Err(TrainError::StreamedShard),
            Parts::Streamed { train, workers, .. } => {
                let transform = match spec.data.augment {
                    true => ImageTransform::training(STREAMED_IMAGE_SIZE),
                    false => ImageTransform::evaluation(STREAMED_IMAGE_SIZE),
                };
                let options = StreamOptions {
                    shuffle: spec.data.shuffle,
                    ..StreamOptions::training(
                        spec.batch_size,
                        transform,
                        spec.seed,
                        *workers,
                        device,
                    )
                };
                let loader = StreamingLoader::new(Arc::clone(train), &self.normalization, options)?;
                let order = loader.order(epoch);
                let batches = loader.epoch(epoch).map(|b| b.map_err(TrainError::from));
                Ok(TrainEpoch {
                    order,
                    batches: Box::new(batches),
                })
            }
        }
    }

    /// `model`'s predictions in `mode` on a split, in file order.
    pub fn predict(
        &self,
        model: &Model,
        split: Split,
        batch_size: usize,
        device: Device,
        mode: Mode,
    ) -> Result<Predictions> {
        match &self.parts {
            Parts::InMemory(splits) => {
                let dataset = match split {
                    Split::Val => &splits.val,
                    Split::Test => &splits.test,
                };
                predict_dataset(
                    model,
                    dataset,
                    &self.normalization,
                    batch_size,
                    device,
                    mode,
                )
            }
            Parts::Streamed {
                val, test, workers, ..
            } => {
                let files = match split {
                    Split::Val => val,
                    Split::Test => test,
                };
                let batches = StreamedBatches {
                    files,
                    batch_size,
                    workers: *workers,
                };
                predict_files(model, batches, &self.normalization, device, mode)
            }
        }
    }

    /// Writes the training split's normalisation as JSON (for `csam eval`).
    pub fn save_normalization(&self, path: &Path) -> Result<()> {
        let json =
            serde_json::to_vec_pretty(&self.normalization).map_err(|e| TrainError::Corrupt {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        super::atomic::write_atomic(path, &json)
    }

    /// Refuses settings that have no meaning for a streamed source.
    pub fn check_spec(spec: &RunSpec) -> Result<(), ConfigError> {
        if spec.data.source.is_streamed() && spec.data.val_size != Default::default() {
            return Err(ConfigError::invalid(
                "val_size",
                spec.data.val_size,
                "an imagenet: source holds out 20% of val/ for validation (the paper's \
                 protocol) and trains on all of train/; val_size does not apply",
            ));
        }
        Ok(())
    }
}

/// How the training split `train` of `spec` is batched on `device`, or
/// `shard`'s part of each batch: shuffled as the spec says, with the standard
/// augmentation of its image size when the spec augments.
fn train_options(spec: &RunSpec, train: &Dataset, device: Device, shard: Shard) -> LoaderOptions {
    let augmentation = train_augmentation(spec, train.height, train.width);
    LoaderOptions {
        shuffle: spec.data.shuffle,
        shard,
        ..LoaderOptions::training(spec.batch_size, augmentation, spec.seed, device)
    }
}

/// The training augmentation of `spec` for images of `height x width`: the
/// standard crop, and the mirror only where the data's labels survive it
/// (clothing and natural images, not digits: a mirrored 2 is no digit).
fn train_augmentation(spec: &RunSpec, height: usize, width: usize) -> Augmentation {
    match spec.data.augment {
        true => spec.data.source.standard_augmentation(height, width),
        false => Augmentation::NONE,
    }
}

/// How a streamed split is batched for evaluation.
#[derive(Debug, Clone, Copy)]
pub struct StreamedBatches<'a> {
    /// The image files.
    pub files: &'a Arc<ImageFiles>,
    /// Examples per forward pass.
    pub batch_size: usize,
    /// Decoding threads.
    pub workers: usize,
}

/// `model`'s predictions in `mode` on image files, in file order, with the
/// evaluation transform at [`STREAMED_IMAGE_SIZE`]; the first unreadable
/// file stops them with its error.
pub fn predict_files(
    model: &Model,
    batches: StreamedBatches<'_>,
    normalization: &Normalization,
    device: Device,
    mode: Mode,
) -> Result<Predictions> {
    let options = StreamOptions::evaluation(
        batches.batch_size,
        ImageTransform::evaluation(STREAMED_IMAGE_SIZE),
        batches.workers,
        device,
    );
    let loader = StreamingLoader::new(Arc::clone(batches.files), normalization, options)?;
    let mut failure = None;
    let batches = loader.epoch(0).map_while(|batch| match batch {
        Ok(batch) => Some(batch),
        Err(e) => {
            failure = Some(e);
            None
        }
    });
    let predictions = predict_mode(model, batches, model.n_classes() as usize, mode)?;
    match failure {
        Some(e) => Err(e.into()),
        None => Ok(predictions),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::DataSpec;

    #[test]
    fn digits_are_cropped_but_never_mirrored_and_clothing_is_both() {
        let augmented = |source: &str| {
            let spec = RunSpec::new(DataSpec::new(source.parse().unwrap()));
            train_augmentation(&spec, 8, 8)
        };
        for digits in ["digits", "mnist", "idx:some/dir", "svhn:some/dir"] {
            let augmentation = augmented(digits);
            assert!(!augmentation.horizontal_flip, "{digits} mirrored");
            assert_eq!(augmentation.crop_padding, 1, "{digits}");
        }
        assert!(augmented("fashion-mnist").horizontal_flip);
        let mut plain = RunSpec::new(DataSpec::new("fashion-mnist".parse().unwrap()));
        plain.data.augment = false;
        assert_eq!(train_augmentation(&plain, 8, 8), Augmentation::NONE);
    }
}
