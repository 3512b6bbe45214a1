//! A run's live objects, built from its configuration: the data splits with
//! their normalisation ([`RunData`], in memory or streamed) and the model with its optimizer, SAM
//! family step and learning-rate schedule ([`Trainer`]). This is the one
//! place where the training loop meets the `data`, `model` and `optim`
//! modules. The two halves are separate so that a batch loader can borrow
//! the data while the trainer steps.

use std::path::Path;
use std::sync::Arc;

use tch::{nn::VarStore, Device, Tensor};

use super::checkpoint::{self, epoch_seed, TrainState};
use super::error::{Result, TrainError};
use super::evaluate::{predict_mode, Predictions};
use super::replica::Replica;
use super::run_data::RunData;
use super::rundir::{RunDir, Split};
use crate::spec::ConfigError;
use crate::spec::{
    BaseSpec, LossSpec, MixingSpec, ModelSpec, OptimSpec, RunSpec, Runtime, Schedule, UpdateRule,
};
use csam_data::{BatchLoader, Dataset, LoaderOptions, Normalization};
use csam_nn::loss::{AdaFocal, AdaFocalBins, CorrectnessHistory, TrainingLoss};
use csam_nn::mixing::TrainBatch;
use csam_nn::model::balcal::HeadLogits;
use csam_nn::model::bayesian::kl_weight;
use csam_nn::model::precision::Precision;
use csam_nn::model::weights::{load_safetensors_file_with, LoadOptions, WeightsError};
use csam_nn::model::{build_model_synced, BatchNormSync, Head, InputShape, Mode, Model};
use csam_nn::optim::{
    plain_step, AdamW, AdamWConfig, BaseOptimizer, BsamConfig, BsamStep, Horizon, LossScaleConfig,
    LossScaled, LrSchedule, OptimError, SamRun, SamState, SamStep, Sgd, SgdConfig, StepStats,
};

/// What a run's steps minimise: the training loss on each batch, fed to the
/// model as its mixing says, with the mixing's draws derived from the run's
/// seed.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// The training loss.
    pub loss: LossSpec,
    /// The input mixing.
    pub mixing: MixingSpec,
    /// The run's seed.
    pub seed: u64,
}

impl Objective {
    /// The objective of `spec`.
    pub fn of(spec: &RunSpec) -> Objective {
        Objective {
            loss: spec.loss.clone(),
            mixing: spec.mixing,
            seed: spec.seed,
        }
    }
}

/// The model and everything that updates it.
pub struct Trainer {
    vs: VarStore,
    model: Model,
    updater: Updater,
    /// The plain steps' loss (the SAM step holds its own copy) and the
    /// mixing of every step's batch.
    objective: Objective,
    /// Each training example's correct predictions so far, for a loss that
    /// ranks by them (CRL); part of the checkpoint.
    history: Option<CorrectnessHistory>,
    /// BalCAL's `delta` and the epoch's training logits of both classifiers,
    /// from which the epoch's end sets their balance.
    balcal: Option<(f64, HeadLogits)>,
    schedule: LrSchedule,
    clip: Option<f64>,
    /// The KL term of a model that learns a posterior.
    kl: Option<KlTerm>,
}

/// The KL term `kl_weight(t) KL(q || p) / N` of a Bayesian model's
/// objective ([`csam_nn::model::bayesian`]).
#[derive(Debug, Clone, Copy)]
struct KlTerm {
    /// The steps of the KL weight's linear warm-up (0: none).
    annealing_steps: u64,
    /// `N`, the training split's size.
    n_train: f64,
}

/// What updates the weights.
enum Updater {
    /// A base optimizer, with the SAM family's two passes when the rule has them.
    Base {
        optimizer: Box<dyn BaseOptimizer>,
        sam: Option<SamStep>,
    },
    /// bSAM, an optimizer of its own.
    Bsam(BsamStep),
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
    /// This process's place in a data-parallel run (None: the run's only process).
    pub replica: Option<Replica>,
}

impl Session {
    /// Loads and splits the data, fits the normalisation on the training
    /// split and builds the model (initialised from the run's seed, or from
    /// the spec's init weights) and the optimizer. A resumed run then
    /// overwrites the weights with its checkpoint's. A data-parallel
    /// `replica` trains its part of every batch and averages its gradients
    /// with the other replicas' ([`super::replica`]). `runtime` says how the
    /// data is read: decoding threads of a streamed source, the training
    /// split kept on `device` with `resident_data`.
    pub fn prepare(
        spec: &RunSpec,
        device: Device,
        runtime: &Runtime,
        replica: Option<Replica>,
    ) -> Result<Session> {
        RunData::check_spec(spec)?;
        let resident = runtime.resident_data.then_some(device);
        // A source without a training part is refused by the split, which names it.
        let data = RunData::load(spec, runtime.data_workers(), resident)?;
        if let Some(replica) = &replica {
            replica.check_spec(spec, data.n_train())?;
        }
        let (classes, needed) = (data.n_classes(), spec.loss.min_classes());
        if classes < needed {
            return Err(ConfigError::invalid(
                "loss",
                spec.loss.name(),
                format!("needs at least {needed} classes; the data has {classes}"),
            )
            .into());
        }
        tch::manual_seed(epoch_seed(spec.seed, 0));
        let n_train = data.n_train();
        let mut trainer = Trainer::new(
            &spec.model,
            Objective::of(spec),
            &spec.optim,
            spec.epochs,
            (data.input_shape(), classes),
            device,
            (n_train.div_ceil(spec.batch_size), n_train),
            replica.as_ref(),
        )?;
        if spec.loss.needs_correctness_history() {
            trainer.history = Some(CorrectnessHistory::new(n_train));
        }
        if let Some(init) = &spec.model.init {
            let kept = match spec.model.init_new_classifier {
                true => trainer.model.classifier_names().ok_or_else(|| {
                    ConfigError::invalid(
                        "init_new_classifier",
                        true,
                        format!(
                            "model {} does not say which of its weights are the classifier",
                            spec.model.arch
                        ),
                    )
                })?,
                false => Vec::new(),
            };
            let options = LoadOptions {
                kept: &kept,
                resample: Some(&trainer.model),
            };
            load_safetensors_file_with(&trainer.vs, init, options)
                .map_err(|source| TrainError::InitWeights(Box::new(source)))?;
        }
        Ok(Session {
            spec: spec.clone(),
            device,
            data,
            trainer,
            replica,
        })
    }

    /// Optimizer steps per epoch (the last batch may be smaller).
    pub fn steps_per_epoch(&self) -> usize {
        self.data.n_train().div_ceil(self.spec.batch_size)
    }

    /// An upper estimate of the bytes the run writes into its directory
    /// (see [`super::preflight::estimate_run_bytes`]).
    pub fn estimated_output_bytes(&self) -> u64 {
        let predictions =
            (self.data.split_len(Split::Val) + self.data.split_len(Split::Test)) as u64;
        super::preflight::estimate_run_bytes(
            super::preflight::weight_bytes(self.trainer.var_store()),
            predictions * self.data.n_classes() as u64,
            predictions,
        )
    }

    /// The model's predictions on a split, in eval mode.
    pub fn predict_split(&self, split: Split) -> Result<Predictions> {
        self.data.predict(
            &self.trainer.model,
            split,
            self.spec.batch_size,
            self.device,
            Mode::Eval,
        )
    }
}

impl Trainer {
    /// Builds `model` for `input` and `n_classes` on `device` (initialised
    /// from libtorch's current random state), with the base optimizer, SAM
    /// family step and schedule of `optim` (or bSAM, whose `N` is
    /// `n_train` times its data factor), minimising `objective`. The
    /// schedule spans `epochs` epochs of `steps_per_epoch` steps. A
    /// data-parallel `replica`'s base optimizer averages the replicas'
    /// gradients.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        model: &ModelSpec,
        objective: Objective,
        optim: &OptimSpec,
        epochs: usize,
        (input, n_classes): (InputShape, usize),
        device: Device,
        (steps_per_epoch, n_train): (usize, usize),
        replica: Option<&Replica>,
    ) -> Result<Trainer> {
        let vs = VarStore::new(device);
        let sync = match (model.sync_batch_norm, replica) {
            (false, _) => None,
            (true, Some(replica)) => Some(replica.batch_norm_sync()),
            (true, None) => {
                return Err(ConfigError::invalid(
                    "sync_batch_norm",
                    true,
                    "synchronises BatchNorm over the processes of a data-parallel run \
                     (csam launch, torchrun); this run has one process",
                )
                .into())
            }
        };
        let network = build_network(model, &vs, (input, n_classes), sync)?;
        let updater = match build_bsam(optim, &objective.loss, &vs, n_train)? {
            Some(bsam) => Updater::Bsam(bsam),
            None => Updater::Base {
                optimizer: {
                    let base = build_optimizer(&vs, optim, model.precision)?;
                    match replica {
                        Some(replica) => replica.wrap(base)?,
                        None => base,
                    }
                },
                sam: build_sam(optim, &objective, &vs, (epochs * steps_per_epoch) as u64)?,
            },
        };
        Ok(Trainer {
            updater,
            objective,
            history: None,
            balcal: match model.head {
                Head::Balcal { delta, .. } => Some((delta, HeadLogits::default())),
                Head::Linear => None,
            },
            schedule: build_schedule(optim, epochs, steps_per_epoch)?,
            clip: optim.clip,
            kl: network.is_bayesian().then(|| KlTerm {
                annealing_steps: (model.bayesian.kl_annealing_epochs() * steps_per_epoch) as u64,
                n_train: n_train as f64,
            }),
            vs,
            model: network,
        })
    }

    /// The model's variables.
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Sets the learning rate of `global_step` (0-based) and returns it.
    pub fn set_learning_rate(&mut self, global_step: usize) -> f64 {
        let lr = self.schedule.lr(global_step as u64);
        match &mut self.updater {
            Updater::Base { optimizer, .. } => optimizer.set_learning_rate(lr),
            Updater::Bsam(bsam) => bsam.set_learning_rate(lr),
        }
        lr
    }

    /// One optimizer step on a batch: the SAM family's two passes on the
    /// steps its policy picks, a plain step otherwise. `examples` are the
    /// batch's indices in the training split (what a correctness history is
    /// kept by; may be empty when the run keeps none). A non-finite loss
    /// comes back as `Ok(Err(message))` so the loop can name the epoch.
    pub fn step(
        &mut self,
        (xs, ys): (&Tensor, &Tensor),
        global_step: usize,
        examples: &[usize],
    ) -> Result<std::result::Result<StepStats, String>> {
        let mut batch = self.batch(xs, ys, global_step)?;
        if let Some(history) = &self.history {
            if examples.len() as i64 != ys.size()[0] {
                return Err(TrainError::HistoryIndices {
                    batch: ys.size()[0] as usize,
                    indices: examples.len(),
                });
            }
            let ranks = Tensor::from_slice(&history.normalised(examples)).to_device(xs.device());
            batch = batch.with_correctness(ranks);
        }
        let stats = match &mut self.updater {
            // The noise comes from libtorch's generator, which the loop seeds
            // from (run seed, epoch) at each epoch's start: checkpoints fall
            // on epochs' ends, so a resumed run draws the same noise.
            Updater::Bsam(bsam) => bsam.step_batch(&self.model, &batch),
            // The policy reads the global step, which the checkpoint
            // restores, so resumed runs take the same steps.
            Updater::Base {
                optimizer,
                sam: Some(sam),
            } => {
                sam.set_steps_taken(global_step as u64);
                sam.step_batch(&self.model, &batch, optimizer.as_mut())
            }
            Updater::Base { optimizer, .. } => plain_step(
                &self.model,
                &batch,
                optimizer.as_mut(),
                &self.objective.loss,
                self.clip,
            ),
        };
        match stats {
            Ok(mut stats) => {
                if let Some(history) = &mut self.history {
                    history.record(examples, &stats.hits);
                }
                if let (Some((_, epoch)), Some(heads)) = (&mut self.balcal, stats.heads.take()) {
                    epoch.extend(heads);
                }
                Ok(Ok(stats))
            }
            Err(OptimError::Diverged(message)) => Ok(Err(message)),
            Err(e) => Err(e.into()),
        }
    }

    /// The batch of `global_step` as the step feeds it to the model: mixed
    /// with the draw of (run seed, step), or with each MIMO member's rows
    /// drawn from them, so a resumed run draws the same; for a Bayesian
    /// model, with the step's KL weight, and the model set to sample the
    /// weights of (run seed, step) in every pass of the step (SAM's two
    /// passes perturb one sampled network; a resumed run samples the same).
    fn batch(&self, xs: &Tensor, ys: &Tensor, global_step: usize) -> Result<TrainBatch> {
        let (mixing, seed) = (self.objective.mixing, self.objective.seed);
        if let Some(kl) = self.kl {
            self.model
                .set_noise_seed(epoch_seed(seed ^ FLIPOUT_SALT, global_step + 1) as u64);
            let weight = kl_weight(global_step as u64, kl.annealing_steps) / kl.n_train;
            return Ok(TrainBatch::plain(xs, ys).with_kl_weight(weight));
        }
        let batch = ys.size()[0] as usize;
        let rows_seed = epoch_seed(seed ^ MEMBER_ROWS_SALT, global_step + 1) as u64;
        if let Some(rows) = self.model.ensemble().member_rows(batch, rows_seed) {
            let rows = rows.to_device(xs.device());
            return Ok(TrainBatch::drawn_per_member(xs, ys, rows));
        }
        if mixing.is_none() {
            return Ok(TrainBatch::plain(xs, ys));
        }
        let draw_seed = epoch_seed(seed ^ MIXING_SALT, global_step + 1) as u64;
        let draw = mixing.draw(batch, draw_seed);
        Ok(TrainBatch::mixed(xs, ys, &draw)?)
    }

    /// After an epoch's last step, before it is validated: BalCAL's balance
    /// `lambda` of its two classifiers, from the epoch's training logits
    /// ([`csam_nn::model::balcal::balanced_lambda`]); returns it. The
    /// authors' loop validates first and then updates `lambda`; csam updates
    /// first, so that the epoch's validation, test and saved weights share
    /// one `lambda`. Nothing for a model with one classifier.
    pub fn end_epoch_steps(&mut self) -> Result<Option<f64>> {
        let (Some((delta, epoch)), Some(head)) = (&mut self.balcal, self.model.balcal()) else {
            return Ok(None);
        };
        if let Some(lambda) = std::mem::take(epoch).balanced_lambda(*delta)? {
            head.set_lambda(lambda);
        }
        Ok(Some(head.lambda()))
    }

    /// What the loss learns at the end of the 1-based `epoch`: AdaFocal's
    /// bins and exponents from the validation predictions (made after the
    /// epoch's last step); CRL's history, one more possible right
    /// prediction. Other losses learn nothing.
    pub fn end_epoch(&mut self, epoch: usize, val: &Predictions) -> Result<()> {
        if let Some(history) = &mut self.history {
            history.end_epoch(epoch);
        }
        let TrainingLoss::AdaFocal(adafocal) = &self.objective.loss else {
            return Ok(());
        };
        let (confidence, correct) = val.confidence_and_correctness()?;
        let updated = TrainingLoss::AdaFocal(adafocal.updated(&confidence, &correct)?);
        self.set_loss(updated);
        Ok(())
    }

    /// Uses `loss` from the next step on, in plain and SAM steps alike.
    fn set_loss(&mut self, loss: TrainingLoss) {
        match &mut self.updater {
            Updater::Base { sam: Some(sam), .. } => sam.set_loss(loss.clone()),
            Updater::Bsam(bsam) => bsam.set_loss(loss.clone()),
            Updater::Base { sam: None, .. } => {}
        }
        self.objective.loss = loss;
    }

    /// The optimizer's state tensors, for the checkpoint: the base
    /// optimizer's and the SAM family step's (VASSO's average direction), or
    /// bSAM's (momentum and precision), and the loss's (AdaFocal's bins,
    /// CRL's correctness history).
    pub fn optimizer_state(&self) -> Vec<(String, Tensor)> {
        let mut state = match &self.updater {
            Updater::Base { optimizer, sam } => {
                let mut state = optimizer.state();
                if let Some(sam) = sam {
                    state.extend(sam.state().to_named());
                }
                state
            }
            Updater::Bsam(bsam) => bsam.state(),
        };
        if let TrainingLoss::AdaFocal(AdaFocal {
            state: Some(bins), ..
        }) = &self.objective.loss
        {
            state.push((ADAFOCAL_STATE.to_string(), bins.to_tensor()));
        }
        if let Some(history) = &self.history {
            state.push((HISTORY_STATE.to_string(), history.to_tensor()));
        }
        state
    }

    /// Restores the run's checkpoint (weights and optimizer state); None when
    /// the run has none.
    pub fn restore(&mut self, run_dir: &RunDir) -> Result<Option<TrainState>> {
        let Some(restored) = checkpoint::load(run_dir, &mut self.vs)? else {
            return Ok(None);
        };
        let (loss_state, others): (Vec<_>, Vec<_>) = restored
            .optimizer
            .into_iter()
            .partition(|(name, _)| name == ADAFOCAL_STATE || name == HISTORY_STATE);
        let saved = |wanted: &str| loss_state.iter().find(|(name, _)| name == wanted);
        if let (Some(history), Some((_, tensor))) = (&mut self.history, saved(HISTORY_STATE)) {
            history.load(tensor)?;
        }
        if let (TrainingLoss::AdaFocal(adafocal), Some((_, bins))) =
            (&self.objective.loss, saved(ADAFOCAL_STATE))
        {
            let bins = AdaFocalBins::from_tensor(bins, adafocal.bins)?;
            self.set_loss(TrainingLoss::AdaFocal(AdaFocal {
                state: Some(bins),
                ..adafocal.clone()
            }));
        }
        let (step_state, base_state) =
            SamState::split_from(others).map_err(|e| TrainError::OptimizerState(Box::new(e)))?;
        let loaded = match &mut self.updater {
            Updater::Base { optimizer, sam } => {
                if let Some(sam) = sam {
                    sam.load_state(step_state);
                }
                optimizer.load_state(&base_state)
            }
            Updater::Bsam(bsam) => bsam.load_state(&base_state),
        };
        loaded.map_err(|e| TrainError::OptimizerState(Box::new(e)))?;
        Ok(Some(restored.state))
    }

    /// Loads saved weights (e.g. the best checkpoint) into the model.
    pub fn load_weights(&mut self, path: &Path) -> Result<(), WeightsError> {
        csam_nn::model::weights::load_safetensors_file(&self.vs, path)
    }
}

/// The name of AdaFocal's bins in a checkpoint's optimizer state.
const ADAFOCAL_STATE: &str = "loss.adafocal";
/// The name of CRL's correctness history in a checkpoint's optimizer state.
const HISTORY_STATE: &str = "loss.correctness_history";

/// Sets the mixing draws' stream apart from the epochs' (same SplitMix64).
const MIXING_SALT: u64 = 0x6d69_7875_7073;
/// Sets the MIMO members' rows' stream apart from the epochs' and the
/// mixing draws'.
const MEMBER_ROWS_SALT: u64 = 0x6d69_6d6f_726f;
/// Sets the Flipout noise's seeds apart from the epochs' and the mixing's.
const FLIPOUT_SALT: u64 = 0x0066_6c69_706f_7574;

/// The input shape of a data set's examples.
pub fn input_shape(dataset: &Dataset) -> InputShape {
    InputShape {
        channels: dataset.channels as i64,
        height: dataset.height as i64,
        width: dataset.width as i64,
    }
}

/// Builds the model `spec` describes in `vs`, its weights in the spec's
/// memory format, its BatchNorm layers synchronised over `sync` when given.
pub fn build_network(
    spec: &ModelSpec,
    vs: &VarStore,
    (input, n_classes): (InputShape, usize),
    sync: Option<Arc<BatchNormSync>>,
) -> Result<Model> {
    Ok(build_model_synced(
        spec,
        vs,
        (input, n_classes as i64),
        sync,
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

/// The spec's base optimizer; under float16, with dynamic loss scaling
/// (inside the data-parallel wrapper, so that every replica decides on the
/// same reduced gradient whether to skip a step).
fn build_optimizer(
    vs: &VarStore,
    optim: &OptimSpec,
    precision: Precision,
) -> Result<Box<dyn BaseOptimizer>> {
    let base: Box<dyn BaseOptimizer> = match optim.base {
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
    };
    Ok(match precision {
        Precision::Fp16 => Box::new(LossScaled::new(base, LossScaleConfig::default())?),
        Precision::Fp32 | Precision::Bf16 => base,
    })
}

/// The SAM family step of the spec's rule (None for plain SGD), with its
/// policy over the run's `total_steps` and seed. [`Trainer::step`] sets its
/// step counter to the global step, which the checkpoint restores, so
/// resumed runs take the same steps.
fn build_sam(
    optim: &OptimSpec,
    objective: &Objective,
    vs: &VarStore,
    total_steps: u64,
) -> Result<Option<SamStep>> {
    let run = SamRun {
        loss: objective.loss.clone(),
        clip: optim.clip,
        policy: optim.policy,
        horizon: Horizon {
            seed: objective.seed,
            total_steps,
        },
        reduce_first_gradient: optim.global_ascent,
    };
    Ok(optim.rule.sam_step(run, vs)?)
}

/// bSAM for the spec's rule (None for the other rules), its `N` the
/// training split's `n_train` examples times the rule's data factor.
fn build_bsam(
    optim: &OptimSpec,
    loss: &LossSpec,
    vs: &VarStore,
    n_train: usize,
) -> Result<Option<BsamStep>> {
    let UpdateRule::Bsam {
        rho,
        beta2,
        damping,
        init_precision,
        data_factor,
    } = optim.rule
    else {
        return Ok(None);
    };
    // OptimSpec::validate refuses AdamW and Nesterov with bSAM.
    let BaseSpec::Sgd { momentum, .. } = optim.base else {
        return Err(ConfigError::invalid(
            "base_optimizer",
            "adamw",
            "bSAM is its own optimizer: it has no base optimizer",
        )
        .into());
    };
    let config = BsamConfig {
        lr: optim.lr,
        beta1: momentum,
        beta2,
        rho,
        weight_decay: optim.weight_decay,
        damping,
        init_precision,
        n_data: n_train as f64 * data_factor,
        loss: loss.clone(),
    };
    Ok(Some(BsamStep::new(config, vs)?))
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
