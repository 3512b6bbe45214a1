//! Errors of configuring, running, checkpointing and evaluating a training run.

use std::path::PathBuf;

use super::integrity::Inconsistency;
use super::lock::LockError;
use super::preflight::PreflightError;
use super::saved_weights::Checkpoint;
use crate::spec::ConfigError;

/// Anything that stops a training run or an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Another process started a run in the directory while this one was
    /// claiming it.
    #[error(
        "another process started a run in {} while this one was starting; refusing to share it",
        .dir.display()
    )]
    StartedElsewhere { dir: PathBuf },
    /// A data-parallel run resumed by another number of processes.
    #[error(
        "{} was trained by {trained} data-parallel process(es); resume it with as many (csam \
         launch --nproc {trained}), since their number sets SAM's m-sharpness and BatchNorm's \
         batches; this is {now}",
        .dir.display()
    )]
    OtherProcessCount {
        dir: PathBuf,
        trained: usize,
        now: usize,
    },
    /// A run resumed with settings it did not start with.
    #[error(
        "resuming with settings that differ from {} ({}); a resumed run must use the settings \
         it started with (only the runtime settings may change: {})",
        .config.display(),
        .changed.join(", "),
        crate::spec::keys::runtime_names().join(", ")
    )]
    ResumeSettings {
        config: PathBuf,
        changed: Vec<String>,
    },
    /// A resume found a run file that disagrees with the checkpoint (see
    /// [`super::integrity`]); the run directory was left as it was.
    #[error("refusing to resume: {} {problem}; nothing was changed", .path.display())]
    Inconsistent {
        path: PathBuf,
        problem: Inconsistency,
    },
    /// A run that finished no epoch has no best model to evaluate.
    #[error("no epoch finished, so there is no best model")]
    NoBestEpoch,
    /// A run directory that has not logged an epoch yet.
    #[error(
        "{} has no metrics.jsonl: the run has not finished an epoch, so there is nothing to \
         write",
        .dir.display()
    )]
    NoMetrics { dir: PathBuf },
    /// A directory with no run directory below it.
    #[error("{} holds no run directory (one with config.toml and metrics.jsonl)", .dir.display())]
    NoRunsBelow { dir: PathBuf },
    /// A run trained without the theory log, asked for it.
    #[error("{} does not exist: the run was not trained with track_theory = true", .path.display())]
    NoTheoryLog { path: PathBuf },
    /// A theory log without a step.
    #[error("theory plots: the log holds no step")]
    EmptyTheoryLog,
    /// A model whose output has another width than the class count.
    #[error("model output does not have {n_classes} columns: {source}")]
    LogitColumns {
        n_classes: usize,
        #[source]
        source: ndarray::ShapeError,
    },
    /// A model whose logits are NaN or infinite on some examples.
    #[error("{bad} of {n} examples have NaN or infinite logits")]
    NonFiniteLogits { bad: usize, n: usize },
    /// A streamed data source asked to split over data-parallel processes.
    #[error("a streamed source is not split over data-parallel processes")]
    StreamedShard,
    /// A loss that ranks examples by their history got a batch without
    /// one index per example.
    #[error(
        "the loss ranks examples by their history, but the batch of {batch} came with {indices} \
         example indices"
    )]
    HistoryIndices { batch: usize, indices: usize },
    /// A benchmark step whose loss was not finite.
    #[error("benchmark step diverged: {0}")]
    BenchDiverged(String),
    /// The run directory's lock could not be taken (another live process
    /// holds it, say; see [`super::lock`]).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The run directory cannot take the run (see [`super::preflight`]).
    #[error(transparent)]
    Preflight(#[from] PreflightError),
    /// A file of the run could not be read or written.
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A run file exists but its content is not what the run wrote.
    #[error("corrupt run file {path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// The loss (or another statistic) became NaN or infinite; the last good
    /// checkpoint is kept.
    #[error(
        "training diverged at epoch {epoch}, step {step} of the epoch ({what}); {}.",
        kept_checkpoint(*.last_good_epoch)
    )]
    Diverged {
        epoch: usize,
        step: usize,
        what: String,
        last_good_epoch: usize,
    },
    /// Saving an epoch's results failed (a full disk, say); the atomic
    /// writes leave the previous checkpoint intact.
    #[error(
        "could not save epoch {epoch}: {cause}; {}. Free some space, then resume the run.",
        kept_checkpoint(*.last_good_epoch)
    )]
    SaveFailed {
        epoch: usize,
        last_good_epoch: usize,
        cause: Box<TrainError>,
    },
    /// A data-parallel run's processes could not meet, or one of them failed
    /// or stopped answering (see [`super::replica`]).
    #[error("data-parallel training: {0}")]
    Replicas(#[source] Box<csam_dist::DistError>),
    /// An error from libtorch (shape, device, file format), shown without
    /// its C++ stack trace.
    #[error("libtorch: {}", csam_nn::torch_message::message(.0))]
    Torch(#[from] tch::TchError),
    /// The device string is not `cpu`, `cuda` or `cuda:N`, or names a missing GPU.
    #[error("device {0:?}: {1}")]
    Device(String, String),
    /// Loading, splitting or batching data failed.
    #[error("data: {0}")]
    Data(#[source] Box<csam_data::DataError>),
    /// The model could not be built or refused its input.
    #[error("model: {0}")]
    Model(#[source] Box<csam_nn::model::ModelError>),
    /// A weights file could not be read or does not fit the model.
    #[error("{0}")]
    Weights(#[source] Box<csam_nn::model::weights::WeightsError>),
    /// The spec's `init` weights do not fit the model (the source names the
    /// file).
    #[error("initial weights: {0}")]
    InitWeights(#[source] Box<csam_nn::model::weights::WeightsError>),
    /// A trained run's weights do not fit the data it is asked to predict.
    #[error(
        "{data} ({shape}) does not fit the run {}, trained on {trained_on} (evaluate it on \
         data of its training set's image size and class count): {source}",
        .run.display()
    )]
    WeightsMismatch {
        /// The data set, as the caller names it.
        data: String,
        /// Its images and classes, in words.
        shape: String,
        run: PathBuf,
        /// The run's training data.
        trained_on: String,
        #[source]
        source: Box<csam_nn::model::weights::WeightsError>,
    },
    /// The optimizer could not be built, stepped or restored.
    #[error("optimizer: {0}")]
    Optim(#[source] Box<csam_nn::optim::OptimError>),
    /// The loss could not be computed.
    #[error("loss: {0}")]
    Loss(#[source] Box<csam_nn::loss::LossError>),
    /// A curvature measurement failed.
    #[error("curvature: {0}")]
    Curvature(#[source] Box<csam_nn::curvature::CurvatureError>),
    /// A calibration metric or figure could not be computed.
    #[error("metrics: {0}")]
    Metrics(#[source] Box<csam_calib::CalibError>),
    /// A metric or figure of something named in `what` (a method, a file)
    /// could not be computed.
    #[error("{what}: {source}")]
    MetricsOf {
        what: String,
        #[source]
        source: Box<csam_calib::CalibError>,
    },
    /// The checkpoint's optimizer state does not fit the optimizer.
    #[error("restoring the optimizer: {0}")]
    OptimizerState(#[source] Box<csam_nn::optim::OptimError>),
    /// A run directory that does not exist.
    #[error("{}: no such directory", .dir.display())]
    NoSuchRun { dir: PathBuf },
    /// A directory that holds no run (no `config.toml`).
    #[error("{}: no config.toml, so this is not a csam run directory", .dir.display())]
    NotARun { dir: PathBuf },
    /// A run's weights that it has not written yet.
    #[error(
        "{} does not exist: the run has not {}",
        .path.display(),
        match .which {
            Checkpoint::Best => "finished an epoch",
            Checkpoint::Last => "finished",
        }
    )]
    NoWeights { path: PathBuf, which: Checkpoint },
    /// An output that exists or a directory that holds something else:
    /// nothing was written. `remedy` says what the caller can do.
    #[error("{message}; {remedy}")]
    Refused { message: String, remedy: Remedy },
}

/// Boxed: the sources are large, and every `Result` of the crate carries
/// this type.
impl From<csam_data::DataError> for TrainError {
    fn from(error: csam_data::DataError) -> Self {
        TrainError::Data(Box::new(error))
    }
}

impl From<csam_nn::model::ModelError> for TrainError {
    fn from(error: csam_nn::model::ModelError) -> Self {
        TrainError::Model(Box::new(error))
    }
}

impl From<csam_nn::model::weights::WeightsError> for TrainError {
    fn from(error: csam_nn::model::weights::WeightsError) -> Self {
        TrainError::Weights(Box::new(error))
    }
}

impl From<csam_nn::optim::OptimError> for TrainError {
    /// A failed gradient reduction is the data-parallel run's failure, not
    /// the optimiser's.
    fn from(error: csam_nn::optim::OptimError) -> Self {
        match error {
            csam_nn::optim::OptimError::Replicas(source) => {
                match source.downcast::<csam_dist::DistError>() {
                    Ok(dist) => TrainError::Replicas(dist),
                    Err(other) => {
                        TrainError::Optim(Box::new(csam_nn::optim::OptimError::Replicas(other)))
                    }
                }
            }
            other => TrainError::Optim(Box::new(other)),
        }
    }
}

impl From<csam_dist::DistError> for TrainError {
    fn from(error: csam_dist::DistError) -> Self {
        TrainError::Replicas(Box::new(error))
    }
}

impl From<csam_nn::loss::LossError> for TrainError {
    fn from(error: csam_nn::loss::LossError) -> Self {
        TrainError::Loss(Box::new(error))
    }
}

impl From<csam_nn::curvature::CurvatureError> for TrainError {
    fn from(error: csam_nn::curvature::CurvatureError) -> Self {
        TrainError::Curvature(Box::new(error))
    }
}

impl From<csam_calib::CalibError> for TrainError {
    fn from(error: csam_calib::CalibError) -> Self {
        TrainError::Metrics(Box::new(error))
    }
}

impl TrainError {
    /// [`TrainError::MetricsOf`] for `what`, to wrap a metric's error.
    pub fn metrics_of(what: impl Into<String>) -> impl FnOnce(csam_calib::CalibError) -> Self {
        let what = what.into();
        move |source| TrainError::MetricsOf {
            what,
            source: Box::new(source),
        }
    }

    /// An I/O error with the action and path it concerns.
    pub fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| TrainError::Io {
            action,
            path,
            source,
        }
    }
}

/// What the caller can do about a [`TrainError::Refused`] (the command
/// line names its own flags for each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Remedy {
    /// Ask again with the request to replace the existing output.
    Replace,
    /// Resume the unfinished run there, or write elsewhere.
    ResumeOrMove,
    /// Write elsewhere, or delete the directory.
    MoveOrDelete,
    /// Write elsewhere.
    Move,
}

impl std::fmt::Display for Remedy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Remedy::Replace => "ask to replace it (force) to go on",
            Remedy::ResumeOrMove => "resume it, or choose another directory",
            Remedy::MoveOrDelete => "choose another directory, or delete this one",
            Remedy::Move => "choose another directory",
        })
    }
}

impl TrainError {
    /// [`TrainError::Refused`] with `message` and `remedy`.
    pub fn refused(message: impl Into<String>, remedy: Remedy) -> Self {
        TrainError::Refused {
            message: message.into(),
            remedy,
        }
    }
}

/// What a failed run leaves to resume from: the checkpoint of epoch
/// `last_good_epoch`, or none when no epoch was checkpointed yet.
fn kept_checkpoint(last_good_epoch: usize) -> String {
    match last_good_epoch {
        0 => "no epoch was checkpointed yet, so the run starts again from epoch 1".to_string(),
        epoch => format!("the run directory keeps the checkpoint of epoch {epoch}"),
    }
}

/// Result of this module.
pub type Result<T, E = TrainError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    fn save_failed(last_good_epoch: usize) -> String {
        TrainError::SaveFailed {
            epoch: last_good_epoch + 1,
            last_good_epoch,
            cause: Box::new(TrainError::NoBestEpoch),
        }
        .to_string()
    }

    #[test]
    fn failures_name_the_kept_checkpoint_in_words() {
        let first = save_failed(0);
        assert!(
            first.contains(
                "could not save epoch 1: no epoch finished, so there is no best model; no epoch \
                 was checkpointed yet"
            ),
            "{first}"
        );
        let later = save_failed(4);
        assert!(
            later.contains("keeps the checkpoint of epoch 4. Free some space"),
            "{later}"
        );
        let diverged = TrainError::Diverged {
            epoch: 1,
            step: 3,
            what: "loss NaN".into(),
            last_good_epoch: 0,
        }
        .to_string();
        for message in [first, later, diverged] {
            assert!(!message.contains("none yet"), "{message}");
            assert!(!message.contains("(0"), "{message}");
        }
    }
}
