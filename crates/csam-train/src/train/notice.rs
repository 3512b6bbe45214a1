//! What a run reports before it trains: requests it honours differently
//! than asked (a resume with nothing to resume, a batch larger than the
//! training set). The loop does not print them; the caller shows them
//! (the CLI as `warning:` lines).

use std::path::PathBuf;

/// Why a resume found nothing to continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoCheckpoint {
    /// The run directory does not exist.
    Missing,
    /// The run directory is empty.
    Empty,
    /// A run started there but was stopped before it finished an epoch.
    NoEpochFinished,
    /// A run started there and trained its first epoch, but has no
    /// checkpoint of it (no `checkpoint/state.json`: a run killed while
    /// writing it, or a file removed since).
    NotCheckpointed,
}

/// One thing a run reports before training.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunNotice {
    /// A resume was asked for, but there is no checkpoint: the run starts
    /// from epoch 1.
    NothingToResume {
        /// The run directory.
        dir: PathBuf,
        /// What it holds instead.
        why: NoCheckpoint,
    },
    /// A resume of a checkpoint written before csam recorded the SHA-256 of
    /// its files and the settings it was trained with: they are not checked
    /// (see [`super::integrity`]); the next checkpoint records them.
    Unchecked {
        /// The run directory.
        dir: PathBuf,
    },
    /// The batch size exceeds the training split, so every step is one
    /// full-batch step over the whole split.
    FullBatch {
        /// The configured batch size.
        batch_size: usize,
        /// Examples in the training split.
        n_train: usize,
    },
}

impl std::fmt::Display for RunNotice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunNotice::NothingToResume { dir, why } => {
                let why = match why {
                    NoCheckpoint::Missing => "no such directory",
                    NoCheckpoint::Empty => "the directory is empty",
                    NoCheckpoint::NoEpochFinished => "its run stopped before finishing an epoch",
                    NoCheckpoint::NotCheckpointed => {
                        "its run trained its first epoch but has no checkpoint of it: \
                         checkpoint/state.json is missing"
                    }
                };
                write!(
                    f,
                    "nothing to resume in {} ({why}); starting a new run from epoch 1",
                    dir.display()
                )
            }
            RunNotice::Unchecked { dir } => write!(
                f,
                "the checkpoint in {} was written by an earlier csam, which recorded neither \
                 the SHA-256 of its files nor the settings it was trained with: resuming \
                 without checking them",
                dir.display()
            ),
            RunNotice::FullBatch {
                batch_size,
                n_train,
            } => write!(
                f,
                "batch size {batch_size} is larger than the {n_train} training examples: every \
                 step trains on the whole training split at once (full batch)"
            ),
        }
    }
}

/// The notice of a batch size above the training split's size, if any.
pub fn full_batch(batch_size: usize, n_train: usize) -> Option<RunNotice> {
    (batch_size > n_train).then_some(RunNotice::FullBatch {
        batch_size,
        n_train,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_above_the_training_split_is_reported_and_one_equal_to_it_is_not() {
        assert_eq!(full_batch(100, 100), None);
        let notice = full_batch(101, 100).unwrap().to_string();
        assert!(
            notice.contains("batch size 101 is larger than the 100 training examples"),
            "{notice}"
        );
    }
}
