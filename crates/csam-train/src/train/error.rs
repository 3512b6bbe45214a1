//! Errors of configuring, running, checkpointing and evaluating a training run.

use std::path::PathBuf;

use super::lock::LockOwner;

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
    /// A key was given for a branch of the run that does not read it.
    #[error(
        "`{key}` does not apply to this run: it is read when {selector} is {}, and {selector} is {chosen}",
        applies_to.join(" or ")
    )]
    Inapplicable {
        key: &'static str,
        selector: &'static str,
        chosen: String,
        applies_to: &'static [&'static str],
    },
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
    /// Another live process holds the run directory's lock (see
    /// [`super::lock`]).
    #[error(
        "{} is in use by another csam process ({}); wait for it to finish or stop it, then \
         try again",
        .dir.display(),
        holder(.owner)
    )]
    Busy {
        dir: PathBuf,
        owner: Option<LockOwner>,
    },
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
        "training diverged at epoch {epoch}, step {step} of the epoch ({what}); {}. \
         Lower --lr or add --clip.",
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
        "could not save epoch {epoch}: {cause}; {}. Free some space, then continue with \
         --resume.",
        kept_checkpoint(*.last_good_epoch)
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

/// What a failed run leaves to resume from: the checkpoint of epoch
/// `last_good_epoch`, or none when no epoch was checkpointed yet.
fn kept_checkpoint(last_good_epoch: usize) -> String {
    match last_good_epoch {
        0 => "no epoch was checkpointed yet, so the run starts again from epoch 1".to_string(),
        epoch => format!("the run directory keeps the checkpoint of epoch {epoch}"),
    }
}

/// The holder of a lock, as far as its lock file says.
fn holder(owner: &Option<LockOwner>) -> String {
    owner.as_ref().map_or_else(
        || "which has not recorded its pid yet".to_string(),
        ToString::to_string,
    )
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
            cause: Box::new(TrainError::RunDir("disk full".into())),
        }
        .to_string()
    }

    #[test]
    fn failures_name_the_kept_checkpoint_in_words() {
        let first = save_failed(0);
        assert!(
            first.contains("could not save epoch 1: disk full; no epoch was checkpointed yet"),
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
