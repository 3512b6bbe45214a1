//! Claiming a run directory for one training process: what its content
//! allows (see [`RunDir::check`]) and the lock (see [`super::lock`]) that
//! keeps that true while the run trains.

use super::error::{Result, TrainError};
use super::lock::RunLock;
use super::rundir::{Plan, RunDir, RunState};

/// A checked run directory and, once it exists, its lock.
#[derive(Debug)]
pub struct Claim {
    plan: Plan,
    lock: Option<RunLock>,
}

impl Claim {
    /// Checks `run_dir` for a run (a resume when `resume`). An existing
    /// directory that the run may use is locked at once, before any data is
    /// loaded, and checked again under the lock; a missing one is locked by
    /// [`Claim::create`]. Nothing is written into a directory the check
    /// refuses, nor into a finished run.
    pub fn new(run_dir: &RunDir, resume: bool) -> Result<Claim> {
        let plan = run_dir.check(resume)?;
        if plan == Plan::Finished || !run_dir.root().is_dir() {
            return Ok(Claim { plan, lock: None });
        }
        let lock = RunLock::acquire(run_dir.root())?;
        Ok(Claim {
            plan: run_dir.check(resume)?,
            lock: Some(lock),
        })
    }

    /// What the run does with the directory.
    pub fn plan(&self) -> Plan {
        self.plan
    }

    /// Creates the directory and locks it if it was missing. Another
    /// process that created it and wrote a run there since
    /// [`Claim::new`] is refused.
    pub fn create(&mut self, run_dir: &RunDir) -> Result<()> {
        run_dir.create()?;
        if self.lock.is_none() {
            let lock = RunLock::acquire(run_dir.root())?;
            if run_dir.state()? != RunState::Empty {
                return Err(TrainError::StartedElsewhere {
                    dir: run_dir.root().to_path_buf(),
                });
            }
            self.lock = Some(lock);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::lock::{LockError, LOCK_FILE};

    #[test]
    fn an_existing_directory_is_locked_at_once_and_a_missing_one_when_created() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path().join("run"));
        let mut claim = Claim::new(&run, true).unwrap();
        assert!(!run.root().exists(), "claiming creates nothing");
        claim.create(&run).unwrap();
        assert!(run.root().join(LOCK_FILE).is_file());
        let err = Claim::new(&run, true).unwrap_err();
        assert!(
            matches!(err, TrainError::Lock(LockError::Busy { .. })),
            "{err:?}"
        );
        drop(claim);
        let _again = Claim::new(&run, true).unwrap();
        assert!(run.root().join(LOCK_FILE).is_file());
    }

    #[test]
    fn a_finished_run_is_only_read_and_foreign_files_are_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.config(), "").unwrap();
        std::fs::write(run.summary(), "{}").unwrap();
        assert_eq!(Claim::new(&run, true).unwrap().plan(), Plan::Finished);
        assert!(!dir.path().join(LOCK_FILE).exists());

        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
        assert!(Claim::new(&RunDir::new(other.path()), true).is_err());
        assert!(!other.path().join(LOCK_FILE).exists());
    }

    #[test]
    fn a_run_started_by_another_process_meanwhile_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path().join("run"));
        let mut claim = Claim::new(&run, false).unwrap();
        run.create().unwrap();
        std::fs::write(run.config(), "").unwrap();
        let err = claim.create(&run).unwrap_err().to_string();
        assert!(err.contains("another process started a run"), "{err}");
    }
}
