//! Errors of configuring, running, checkpointing and evaluating a training run.

use std::path::PathBuf;

/// A configuration that cannot be read or must not run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The TOML (file or flags) does not describe a configuration.
    #[error("bad configuration in {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A key holds a value that would make the run meaningless.
    #[error("invalid {key} = {value:?}: {reason}")]
    Invalid {
        key: &'static str,
        value: String,
        reason: String,
    },
}

/// Anything that stops a training run or an evaluation.
#[derive(Debug, thiserror::Error)]
pub enum TrainError {
    /// See [`ConfigError`].
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The run directory is in a state that the requested action must not touch.
    #[error("{0}")]
    RunDir(String),
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
        "training diverged at epoch {epoch}, step {step} of the epoch ({what}); the run \
         directory keeps the checkpoint of epoch {last_good_epoch} (0: none yet). \
         Lower --lr or add --clip."
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
        "could not save epoch {epoch}: {cause}; the run directory keeps the checkpoint of \
         epoch {last_good_epoch} (0: none yet). Free some space, then continue with --resume."
    )]
    SaveFailed {
        epoch: usize,
        last_good_epoch: usize,
        cause: Box<TrainError>,
    },
    /// An error from libtorch (shape, device, file format), shown without
    /// its C++ stack trace.
    #[error("libtorch: {}", crate::torch_message::message(.0))]
    Torch(#[from] tch::TchError),
    /// The device string is not `cpu`, `cuda` or `cuda:N`, or names a missing GPU.
    #[error("device {0:?}: {1}")]
    Device(String, String),
    /// Loading or splitting data failed.
    #[error("data: {0}")]
    Data(String),
    /// Building the model or the optimizer failed.
    #[error("model/optimizer: {0}")]
    Engine(String),
    /// A calibration metric could not be computed.
    #[error("metrics: {0}")]
    Metrics(String),
}

impl TrainError {
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

/// Result of this module.
pub type Result<T, E = TrainError> = std::result::Result<T, E>;
