//! A run's live objects, built from its configuration: the data splits with
//! their normalisation ([`RunData`]) and the model with its optimizer, SAM
//! family step and learning-rate schedule ([`Trainer`]). This is the one
//! place where the training loop meets the `data`, `model` and `optim`
//! modules. The two halves are separate so that a batch loader can borrow
//! the data while the trainer steps.

use std::path::Path;

use tch::{nn::VarStore, Device, Tensor};

use super::checkpoint::{self, epoch_seed, TrainState};
use super::config::{BaseOptimizer as BaseKind, OptimizerFamily, ScheduleKind, TrainConfig};
use super::error::{ConfigError, Result, TrainError};
use super::evaluate::{predict, Predictions};
use super::rundir::{RunDir, Split};
use crate::data::{
    self, Augmentation, BatchLoader, Dataset, DatasetSpec, LoaderOptions, Normalization, Splits,
};
use crate::device::parse_device;
use crate::model::{build_model_with, InputShape, Model, ModelKind, ModelOptions};
use crate::optim::{
    plain_step, AdamW, AdamWConfig, BaseOptimizer, LrSchedule, OptimError, Perturbation, SamConfig,
    SamStep, SecondLoss, Sgd, SgdConfig, StepStats,
};

/// The data of a run: train / val / test splits and the normalisation
/// fitted on the training split.
pub struct RunData {
    splits: Splits,
    normalization: Normalization,
}

/// The model and everything that updates it.
pub struct Trainer {
    vs: VarStore,
    model: Model,
    optimizer: Box<dyn BaseOptimizer>,
    sam: Option<SamStep>,
    schedule: LrSchedule,
    sam_every: usize,
    clip: Option<f64>,
}

/// The names of a configuration, parsed: data set spec, model, device.
/// Parsing them first rejects a typo before any data is loaded.
pub struct Names {
    /// The data set spec.
    pub spec: DatasetSpec,
    /// The architecture.
    pub kind: ModelKind,
    /// The device.
    pub device: Device,
}

impl Names {
    /// Parses `config.data`, `config.model` and `config.device`.
    pub fn parse(config: &TrainConfig) -> Result<Names> {
        Ok(Names {
            spec: config
                .data
                .parse()
                .map_err(|e| invalid("data", &config.data, e))?,
            kind: config
                .model
                .parse()
                .map_err(|e| invalid("model", &config.model, e))?,
            device: parse_device(config.device.as_deref())
                .map_err(|e| TrainError::Device(e.text, e.reason))?,
        })
    }
}

/// The live objects of a run.
pub struct Session {
    /// The run's configuration.
    pub config: TrainConfig,
    /// The device tensors live on.
    pub device: Device,
    /// Splits and normalisation.
    pub data: RunData,
    /// Model and optimizer.
    pub trainer: Trainer,
}

impl Session {
    /// Loads and splits the data, fits the normalisation on the training
    /// split and builds the model (initialised from the run's seed, or from
    /// `config.init`) and the optimizer. A resumed run then overwrites the
    /// weights with its checkpoint's.
    pub fn prepare(config: &TrainConfig, names: Names) -> Result<Session> {
        let Names { spec, kind, device } = names;
        if let Some(threads) = config.threads {
            tch::set_num_threads(threads as i32);
        }
        let source = data::load(&spec).map_err(|e| TrainError::Data(e.to_string()))?;
        let splits = data::split(source, config.val_size, config.seed)
            .map_err(|e| TrainError::Data(e.to_string()))?;
        let normalization =
            Normalization::fit(&splits.train).map_err(|e| TrainError::Data(e.to_string()))?;
        tch::manual_seed(epoch_seed(config.seed, 0));
        let steps_per_epoch = splits.train.n.div_ceil(config.batch_size);
        let mut trainer = Trainer::new(
            config,
            kind,
            shape_of(&splits.train),
            splits.train.n_classes,
            device,
            steps_per_epoch,
        )?;
        if let Some(init) = &config.init {
            trainer
                .load_weights(Path::new(init))
                .map_err(|e| TrainError::Engine(format!("--init {init}: {e}")))?;
        }
        Ok(Session {
            config: config.clone(),
            device,
            data: RunData {
                splits,
                normalization,
            },
            trainer,
        })
    }

    /// Optimizer steps per epoch (the last batch may be smaller).
    pub fn steps_per_epoch(&self) -> usize {
        self.data.splits.train.n.div_ceil(self.config.batch_size)
    }

    /// An upper estimate of the bytes the run writes into its directory
    /// (see [`super::preflight::estimate_run_bytes`]).
    pub fn estimated_output_bytes(&self) -> u64 {
        let splits = &self.data.splits;
        let predictions = (splits.val.n + splits.test.n) as u64;
        super::preflight::estimate_run_bytes(
            super::preflight::weight_bytes(self.trainer.var_store()),
            predictions * splits.train.n_classes as u64,
            predictions,
        )
    }

    /// The model's predictions on a split, in eval mode.
    pub fn predict_split(&self, split: Split) -> Result<Predictions> {
        predict_dataset(
            &self.trainer.model,
            self.data.split(split),
            &self.data.normalization,
            self.config.batch_size,
            self.device,
        )
    }
}

impl RunData {
    /// The dataset of a split.
    pub fn split(&self, split: Split) -> &Dataset {
        match split {
            Split::Val => &self.splits.val,
            Split::Test => &self.splits.test,
        }
    }

    /// The loader of the training split: order and augmentation of epoch e
    /// are a pure function of (seed, e).
    pub fn train_loader(&self, config: &TrainConfig, device: Device) -> Result<BatchLoader<'_>> {
        let train = &self.splits.train;
        let augmentation = if config.augment {
            Augmentation::standard(train.height, train.width)
        } else {
            Augmentation::NONE
        };
        let options = LoaderOptions {
            shuffle: config.shuffle,
            ..LoaderOptions::training(config.batch_size, augmentation, config.seed, device)
        };
        BatchLoader::new(train, &self.normalization, options)
            .map_err(|e| TrainError::Data(e.to_string()))
    }

    /// Number of training examples.
    pub fn n_train(&self) -> usize {
        self.splits.train.n
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
}

impl Trainer {
    /// Builds model `kind` for `input` and `n_classes` on `device` (initialised
    /// from libtorch's current random state), with the base optimizer, SAM
    /// family step and schedule that `config` names. The schedule spans
    /// `config.epochs` epochs of `steps_per_epoch` steps.
    pub fn new(
        config: &TrainConfig,
        kind: ModelKind,
        input: InputShape,
        n_classes: usize,
        device: Device,
        steps_per_epoch: usize,
    ) -> Result<Trainer> {
        let vs = VarStore::new(device);
        let model = build_network(kind, &vs, input, n_classes, &config.model_options())?;
        Ok(Trainer {
            optimizer: build_optimizer(&vs, config)?,
            sam: build_sam(config, &vs)?,
            schedule: build_schedule(config, steps_per_epoch)?,
            sam_every: config.sam_every,
            clip: config.clip,
            vs,
            model,
        })
    }

    /// The model's variables.
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// Sets the learning rate of `global_step` (0-based) and returns it.
    pub fn set_learning_rate(&mut self, global_step: usize) -> f64 {
        let lr = self.schedule.lr(global_step as u64);
        self.optimizer.set_learning_rate(lr);
        lr
    }

    /// One optimizer step on a batch: the SAM family's two passes on every
    /// `sam_every`-th global step, a plain step otherwise. A non-finite loss
    /// comes back as `Ok(Err(message))` so the loop can name the epoch.
    pub fn step(
        &mut self,
        xs: &Tensor,
        ys: &Tensor,
        global_step: usize,
    ) -> Result<std::result::Result<StepStats, String>> {
        let sharpness_aware = global_step.is_multiple_of(self.sam_every);
        let stats = match (&mut self.sam, sharpness_aware) {
            (Some(sam), true) => sam.step(&self.model, xs, ys, self.optimizer.as_mut()),
            _ => plain_step(&self.model, xs, ys, self.optimizer.as_mut(), self.clip),
        };
        match stats {
            Ok(stats) => Ok(Ok(stats)),
            Err(OptimError::Diverged(message)) => Ok(Err(message)),
            Err(e) => Err(TrainError::Engine(e.to_string())),
        }
    }

    /// The optimizer's state tensors, for the checkpoint.
    pub fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        self.optimizer.state()
    }

    /// Restores the run's checkpoint (weights and optimizer state); None when
    /// the run has none.
    pub fn restore(&mut self, run_dir: &RunDir) -> Result<Option<TrainState>> {
        let Some(restored) = checkpoint::load(run_dir, &mut self.vs)? else {
            return Ok(None);
        };
        self.optimizer
            .load_state(&restored.optimizer)
            .map_err(|e| TrainError::Engine(format!("restoring the optimizer: {e}")))?;
        Ok(Some(restored.state))
    }

    /// Loads saved weights (e.g. the best checkpoint) into the model.
    pub fn load_weights(&mut self, path: &Path) -> Result<()> {
        self.vs.load(path).map_err(TrainError::from)
    }
}

/// The input shape of a data set's examples.
pub(crate) fn shape_of(dataset: &Dataset) -> InputShape {
    InputShape {
        channels: dataset.channels as i64,
        height: dataset.height as i64,
        width: dataset.width as i64,
    }
}

/// Builds model `kind` in `vs`.
pub(crate) fn build_network(
    kind: ModelKind,
    vs: &VarStore,
    input: InputShape,
    n_classes: usize,
    options: &ModelOptions,
) -> Result<Model> {
    build_model_with(kind, &vs.root(), input, n_classes as i64, options)
        .map_err(|e| TrainError::Engine(e.to_string()))
}

/// A model's eval-mode predictions on a whole data set, in file order.
pub(crate) fn predict_dataset(
    model: &Model,
    dataset: &Dataset,
    normalization: &Normalization,
    batch_size: usize,
    device: Device,
) -> Result<Predictions> {
    let loader = BatchLoader::new(
        dataset,
        normalization,
        LoaderOptions::evaluation(batch_size, device),
    )
    .map_err(|e| TrainError::Data(e.to_string()))?;
    predict(model, loader.epoch(0), dataset.n_classes)
}

/// A configuration error for a name that did not parse.
pub(crate) fn invalid(key: &'static str, value: &str, error: impl std::fmt::Display) -> TrainError {
    TrainError::Config(ConfigError::Invalid {
        key,
        value: value.to_string(),
        reason: error.to_string(),
    })
}

fn build_optimizer(vs: &VarStore, config: &TrainConfig) -> Result<Box<dyn BaseOptimizer>> {
    let engine = |e: crate::optim::OptimError| TrainError::Engine(e.to_string());
    Ok(match config.base_optimizer {
        BaseKind::Sgd => Box::new(
            Sgd::new(
                vs,
                SgdConfig {
                    lr: config.lr,
                    momentum: config.momentum,
                    nesterov: config.nesterov,
                    weight_decay: config.weight_decay,
                },
            )
            .map_err(engine)?,
        ),
        BaseKind::Adamw => Box::new(
            AdamW::new(
                vs,
                AdamWConfig {
                    lr: config.lr,
                    beta1: config.momentum,
                    weight_decay: config.weight_decay,
                    ..AdamWConfig::default()
                },
            )
            .map_err(engine)?,
        ),
    })
}

/// The SAM family step of `config` (None for plain SGD). Its own `sam_every`
/// counter is left at 1: [`Trainer::step`] decides from the global step,
/// which the checkpoint restores, so resumed runs skip the same steps.
fn build_sam(config: &TrainConfig, vs: &VarStore) -> Result<Option<SamStep>> {
    let perturbation = match config.optimizer {
        OptimizerFamily::Sgd => return Ok(None),
        OptimizerFamily::Sam | OptimizerFamily::Csam => Perturbation::Sam,
        OptimizerFamily::Asam => Perturbation::Asam { eta: config.eta },
    };
    let second_loss = match config.optimizer {
        OptimizerFamily::Csam => SecondLoss::Csam {
            gamma: config.gamma,
            detach: config.csam_detach,
        },
        _ => SecondLoss::CrossEntropy,
    };
    let sam = SamStep::new(
        SamConfig {
            rho: config.rho,
            perturbation,
            second_loss,
            m: config.m,
            sam_every: 1,
            clip_grad_norm: config.clip,
        },
        vs,
    )
    .map_err(|e| TrainError::Engine(e.to_string()))?;
    Ok(Some(sam))
}

fn build_schedule(config: &TrainConfig, steps_per_epoch: usize) -> Result<LrSchedule> {
    let steps = |epochs: usize| (epochs * steps_per_epoch) as u64;
    let schedule = match config.schedule {
        ScheduleKind::Cosine => LrSchedule::Cosine {
            base_lr: config.lr,
            min_lr: config.min_lr,
            warmup_steps: steps(config.warmup_epochs),
            total_steps: steps(config.epochs),
        },
        ScheduleKind::Step => LrSchedule::Step {
            base_lr: config.lr,
            step_size: steps(config.step_size),
            gamma: config.decay_factor,
        },
    };
    schedule
        .validate()
        .map_err(|e| TrainError::Engine(e.to_string()))?;
    Ok(schedule)
}
