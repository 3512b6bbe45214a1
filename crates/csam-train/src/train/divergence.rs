//! `diverged.json`: the record a run leaves when its loss (or another
//! statistic) became NaN or infinite ([`TrainError::Diverged`]). A diverged
//! run is an outcome, as a finished one is: an experiment reads the record
//! back instead of training the run again (with the same settings it would
//! diverge again), and shows the run as diverged in its tables. Removing the
//! file makes the run resumable again; a run that trains into the directory
//! removes a stale record first.
//!
//! The rank that writes the run directory writes the record, atomically
//! (see [`super::atomic`]), so that a reader sees all of it or none.

use serde::{Deserialize, Serialize};

use super::atomic::write_atomic;
use super::error::{Result, TrainError};
use super::rundir::RunDir;

/// Where and why a run diverged, as `diverged.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Divergence {
    /// The 1-based epoch that diverged.
    pub epoch: usize,
    /// The 1-based step of that epoch (after its last step when the
    /// validation logits were not finite).
    pub step: usize,
    /// What was not finite (`loss is NaN after this step`).
    pub reason: String,
    /// The last checkpointed epoch, 0 when none was.
    pub last_good_epoch: usize,
}

impl Divergence {
    /// The record of `error` when it is a divergence.
    pub fn of(error: &TrainError) -> Option<Divergence> {
        match error {
            TrainError::Diverged {
                epoch,
                step,
                what,
                last_good_epoch,
            } => Some(Divergence {
                epoch: *epoch,
                step: *step,
                reason: what.clone(),
                last_good_epoch: *last_good_epoch,
            }),
            _ => None,
        }
    }

    /// The record in `run_dir`, None when the run did not diverge (or the
    /// record was removed).
    pub fn read(run_dir: &RunDir) -> Result<Option<Divergence>> {
        let path = run_dir.diverged();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(TrainError::io("read", &path)(e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| TrainError::Corrupt {
                path,
                message: e.to_string(),
            })
    }

    /// Writes the record into `run_dir`, atomically.
    pub fn write(&self, run_dir: &RunDir) -> Result<()> {
        let path = run_dir.diverged();
        let json = serde_json::to_vec_pretty(self).map_err(|e| TrainError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        write_atomic(&path, &json)
    }

    /// Removes the record of an earlier attempt, if any.
    pub fn clear(run_dir: &RunDir) -> Result<()> {
        let path = run_dir.diverged();
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(TrainError::io("remove", &path)(e))
            }
            _ => Ok(()),
        }
    }
}

/// `diverged at epoch 2, step 7 (loss is NaN after this step)`.
impl std::fmt::Display for Divergence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "diverged at epoch {}, step {} ({})",
            self.epoch, self.step, self.reason
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_divergence_is_written_read_back_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        assert_eq!(Divergence::read(&run).unwrap(), None);
        Divergence::clear(&run).unwrap();
        let error = TrainError::Diverged {
            epoch: 2,
            step: 7,
            what: "loss is NaN after this step".into(),
            last_good_epoch: 1,
        };
        let divergence = Divergence::of(&error).unwrap();
        assert_eq!(
            divergence.to_string(),
            "diverged at epoch 2, step 7 (loss is NaN after this step)"
        );
        divergence.write(&run).unwrap();
        assert_eq!(Divergence::read(&run).unwrap(), Some(divergence));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        Divergence::clear(&run).unwrap();
        assert_eq!(Divergence::read(&run).unwrap(), None);
        assert_eq!(Divergence::of(&TrainError::NoBestEpoch), None);
    }

    #[test]
    fn a_torn_record_is_corrupt_not_absent() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.diverged(), "{\"epoch\": 1").unwrap();
        let error = Divergence::read(&run).unwrap_err().to_string();
        assert!(error.starts_with("corrupt run file"), "{error}");
    }
}
