//! A run's live objects, built from its configuration: the data splits with
//! their normalisation ([`RunData`]) and the model with its optimizer, SAM
//! family step and learning-rate schedule ([`Trainer`]). This is the one
//! place where the training loop meets the `data`, `model` and `optim`
//! modules. The two halves are separate so that a batch loader can borrow
//! the data while the trainer steps.

use std::path::Path;

use tch::{nn::VarStore, Device, Tensor};

use super::checkpoint::{self, epoch_seed, TrainState};
use super::error::{Result, TrainError};
use super::evaluate::{predict_mode, Predictions};
use super::rundir::{RunDir, Split};
use crate::spec::{BaseSpec, LossSpec, ModelSpec, OptimSpec, RunSpec, Schedule};
use csam_data::{
    self as data, Augmentation, BatchLoader, Dataset, LoaderOptions, Normalization, Splits,
};
use csam_nn::model::weights::WeightsError;
use csam_nn::model::{build_model_with, InputShape, Mode, Model, ModelKind, ModelOptions};
use csam_nn::optim::{
    plain_step, AdamW, AdamWConfig, BaseOptimizer, LrSchedule, OptimError, SamConfig, SamStep, Sgd,
    SgdConfig, StepStats,
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
    /// The training loss of the plain steps (the SAM step holds its own copy).
    loss: LossSpec,
    schedule: LrSchedule,
    sam_every: usize,
    clip: Option<f64>,
}

/// The live objects of a run.
pub struct Session {
    /// The run's specification.
    pub spec: RunSpec,
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
    /// the spec's init weights) and the optimizer. A resumed run then
    /// overwrites the weights with its checkpoint's.
    pub fn prepare(spec: &RunSpec, device: Device) -> Result<Session> {
        let source = data::load(&spec.data.source)?;
        let n_train = source.train.as_ref().map_or(0, |train| train.n);
        let splits = data::split(source, spec.data.val_size.count(n_train), spec.seed)?;
        let normalization = Normalization::fit(&splits.train)?;
        tch::manual_seed(epoch_seed(spec.seed, 0));
        let steps_per_epoch = splits.train.n.div_ceil(spec.batch_size);
        let mut trainer = Trainer::new(
            &spec.model,
            &spec.loss,
            &spec.optim,
            spec.epochs,
            (input_shape(&splits.train), splits.train.n_classes),
            device,
            steps_per_epoch,
        )?;
        if let Some(init) = &spec.model.init {
            trainer
                .load_weights(init)
                .map_err(|source| TrainError::InitWeights {
                    path: init.clone(),
                    source: Box::new(source),
                })?;
        }
        Ok(Session {
            spec: spec.clone(),
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
        self.data.splits.train.n.div_ceil(self.spec.batch_size)
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
            self.spec.batch_size,
            self.device,
            Mode::Eval,
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
    pub fn train_loader(&self, spec: &RunSpec, device: Device) -> Result<BatchLoader<'_>> {
        let train = &self.splits.train;
        let augmentation = if spec.data.augment {
            Augmentation::standard(train.height, train.width)
        } else {
            Augmentation::NONE
        };
        let options = LoaderOptions {
            shuffle: spec.data.shuffle,
            ..LoaderOptions::training(spec.batch_size, augmentation, spec.seed, device)
        };
        Ok(BatchLoader::new(train, &self.normalization, options)?)
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
    /// Builds `model` for `input` and `n_classes` on `device` (initialised
    /// from libtorch's current random state), with the base optimizer, SAM
    /// family step and schedule of `optim`. The schedule spans `epochs`
    /// epochs of `steps_per_epoch` steps.
    pub fn new(
        model: &ModelSpec,
        loss: &LossSpec,
        optim: &OptimSpec,
        epochs: usize,
        (input, n_classes): (InputShape, usize),
        device: Device,
        steps_per_epoch: usize,
    ) -> Result<Trainer> {
        let vs = VarStore::new(device);
        let network = build_network(model.arch, &vs, input, n_classes, &model.options())?;
        Ok(Trainer {
            optimizer: build_optimizer(&vs, optim)?,
            sam: build_sam(optim, loss, &vs)?,
            loss: *loss,
            schedule: build_schedule(optim, epochs, steps_per_epoch)?,
            sam_every: optim.rule.sharpness().map_or(1, |s| s.every),
            clip: optim.clip,
            vs,
            model: network,
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
            _ => plain_step(
                &self.model,
                xs,
                ys,
                self.optimizer.as_mut(),
                &self.loss,
                self.clip,
            ),
        };
        match stats {
            Ok(stats) => Ok(Ok(stats)),
            Err(OptimError::Diverged(message)) => Ok(Err(message)),
            Err(e) => Err(e.into()),
        }
    }

    /// The optimizer's state tensors, for the checkpoint: the base
    /// optimizer's and the SAM family step's (VASSO's average direction).
    pub fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        let mut state = self.optimizer.state();
        if let Some(sam) = &self.sam {
            state.extend(sam.state());
        }
        state
    }

    /// Restores the run's checkpoint (weights and optimizer state); None when
    /// the run has none.
    pub fn restore(&mut self, run_dir: &RunDir) -> Result<Option<TrainState>> {
        let Some(restored) = checkpoint::load(run_dir, &mut self.vs)? else {
            return Ok(None);
        };
        let (step_state, base_state): (Vec<_>, Vec<_>) = restored
            .optimizer
            .into_iter()
            .partition(|(name, _)| SamStep::owns_state(name));
        if let Some(sam) = &mut self.sam {
            sam.load_state(&step_state);
        }
        self.optimizer
            .load_state(&base_state)
            .map_err(|e| TrainError::OptimizerState(Box::new(e)))?;
        Ok(Some(restored.state))
    }

    /// Loads saved weights (e.g. the best checkpoint) into the model.
    pub fn load_weights(&mut self, path: &Path) -> Result<(), WeightsError> {
        csam_nn::model::weights::load_safetensors_file(&self.vs, path)
    }
}

/// The input shape of a data set's examples.
pub fn input_shape(dataset: &Dataset) -> InputShape {
    InputShape {
        channels: dataset.channels as i64,
        height: dataset.height as i64,
        width: dataset.width as i64,
    }
}

/// Builds model `kind` in `vs`.
pub fn build_network(
    kind: ModelKind,
    vs: &VarStore,
    input: InputShape,
    n_classes: usize,
    options: &ModelOptions,
) -> Result<Model> {
    Ok(build_model_with(
        kind,
        &vs.root(),
        input,
        n_classes as i64,
        options,
    )?)
}

/// A model's predictions in `mode` on a whole data set, in file order, one
/// column per class of the model (the data set's labels may come from
/// another label space, as an out-of-distribution set's do).
pub fn predict_dataset(
    model: &Model,
    dataset: &Dataset,
    normalization: &Normalization,
    batch_size: usize,
    device: Device,
    mode: Mode,
) -> Result<Predictions> {
    let loader = BatchLoader::new(
        dataset,
        normalization,
        LoaderOptions::evaluation(batch_size, device),
    )?;
    predict_mode(model, loader.epoch(0), model.n_classes() as usize, mode)
}

fn build_optimizer(vs: &VarStore, optim: &OptimSpec) -> Result<Box<dyn BaseOptimizer>> {
    Ok(match optim.base {
        BaseSpec::Sgd { momentum, nesterov } => Box::new(Sgd::new(
            vs,
            SgdConfig {
                lr: optim.lr,
                momentum,
                nesterov,
                weight_decay: optim.weight_decay,
            },
        )?),
        BaseSpec::Adamw { momentum } => Box::new(AdamW::new(
            vs,
            AdamWConfig {
                lr: optim.lr,
                beta1: momentum,
                weight_decay: optim.weight_decay,
                ..AdamWConfig::default()
            },
        )?),
    })
}

/// The SAM family step of the spec's rule (None for plain SGD). Its own
/// `sam_every` counter is left at 1: [`Trainer::step`] decides from the
/// global step, which the checkpoint restores, so resumed runs skip the same
/// steps.
fn build_sam(optim: &OptimSpec, loss: &LossSpec, vs: &VarStore) -> Result<Option<SamStep>> {
    let rule = &optim.rule;
    let (Some(sharpness), Some(perturbation)) = (rule.sharpness(), rule.perturbation()) else {
        return Ok(None);
    };
    let sam = SamStep::new(
        SamConfig {
            rho: sharpness.rho,
            perturbation,
            loss: *loss,
            second_loss: rule.second_loss(),
            m: sharpness.m,
            sam_every: 1,
            clip_grad_norm: optim.clip,
        },
        vs,
    )?;
    Ok(Some(sam))
}

fn build_schedule(optim: &OptimSpec, epochs: usize, steps_per_epoch: usize) -> Result<LrSchedule> {
    let steps = |epochs: usize| (epochs * steps_per_epoch) as u64;
    let base_lr = optim.lr;
    let schedule = match optim.schedule {
        Schedule::Cosine {
            warmup_epochs,
            min_lr,
        } => LrSchedule::Cosine {
            base_lr,
            min_lr,
            warmup_steps: steps(warmup_epochs),
            total_steps: steps(epochs),
        },
        Schedule::Step {
            step_size,
            decay_factor,
        } => LrSchedule::Step {
            base_lr,
            step_size: steps(step_size),
            gamma: decay_factor,
        },
    };
    schedule.validate()?;
    Ok(schedule)
}
