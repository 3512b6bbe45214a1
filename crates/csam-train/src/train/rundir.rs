//! The run directory (`--out DIR`): the names of its files and the rules for
//! starting, resuming or refusing to touch it.
//!
//! Layout:
//! - `config.toml`: the effective configuration;
//! - `normalization.json`: per-channel mean / std fitted on the training split;
//! - `metrics.jsonl`: one JSON object per finished epoch (training loss,
//!   validation metrics, test metrics with the TCE of that epoch);
//! - `theory.jsonl` (with `track_theory`): one JSON object per perturbed step,
//!   and its figures `theory-*.{svg,png}` (see [`crate::theory`]);
//! - `events.out.tfevents.*` (unless the runtime turns it off): the
//!   TensorBoard event file of both logs (see [`crate::tensorboard`]);
//! - `sharpness.json`: the report of `csam sharpness`;
//! - `model.safetensors` (best by the chosen validation metric) and
//!   `model-last.safetensors` (after the last epoch);
//! - `{val,test}_logits.npy` (f32, N x K) and `{val,test}_labels.npy` of the best model;
//! - `summary.json`: final test metrics and run facts; its presence marks a finished run;
//! - `diverged.json`: where and why the run diverged, when it did (see
//!   [`super::divergence`]);
//! - `checkpoint/`: what `--resume` needs (see [`super::checkpoint`]);
//! - `eval-NAME.json`: reports of `csam eval`;
//! - `.lock`: there while a process trains into the directory (see
//!   [`super::lock`]).

use std::path::{Path, PathBuf};

use super::atomic::is_temporary;
use super::error::{Remedy, Result, TrainError};
use super::lock::LOCK_FILE;
use super::notice::NoCheckpoint;
use crate::spec::RunSpec;

fn is_temporary_entry(entry: &std::fs::DirEntry) -> bool {
    is_temporary(&entry.file_name().to_string_lossy())
}

/// True for the files that do not make a directory a run: temporaries of a
/// killed writer and the lock file (see [`super::lock`]).
fn is_bookkeeping(entry: &std::fs::DirEntry) -> bool {
    is_temporary_entry(entry) || entry.file_name() == LOCK_FILE
}

/// Which split a logits / labels file belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// The validation split (held out of the training set).
    Val,
    /// The test split.
    Test,
}

impl Split {
    fn name(self) -> &'static str {
        match self {
            Split::Val => "val",
            Split::Test => "test",
        }
    }
}

/// What a run directory holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunState {
    /// Missing or empty: a new run may start.
    Empty,
    /// A run started but no epoch finished (no checkpoint).
    Started,
    /// A run with at least one checkpointed epoch and no summary.
    Interrupted,
    /// `summary.json` exists: the run finished.
    Finished,
    /// Files that no csam run wrote.
    Foreign,
}

/// What a training run does with its directory (see [`RunDir::check`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Train from epoch 1; with a resume asked for, `Some` says why there
    /// was nothing to resume.
    Start(Option<NoCheckpoint>),
    /// Continue from the checkpoint.
    Resume,
    /// A resume of a finished run: nothing to train.
    Finished,
}

/// Paths of one run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    root: PathBuf,
}

impl RunDir {
    /// The run directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        RunDir { root: root.into() }
    }

    /// The directory itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// Fails unless the directory holds a run: [`TrainError::NoSuchRun`]
    /// where there is no directory, [`TrainError::NotARun`] where it has no
    /// `config.toml`.
    pub fn require_run(&self) -> Result<()> {
        let dir = self.root.clone();
        match (self.root.is_dir(), self.config().is_file()) {
            (_, true) => Ok(()),
            (false, false) => Err(TrainError::NoSuchRun { dir }),
            (true, false) => Err(TrainError::NotARun { dir }),
        }
    }

    /// The spec saved in `config.toml` (either layout, see
    /// [`RunSpec::from_saved_toml`]).
    pub fn saved_spec(&self) -> Result<RunSpec> {
        let path = self.config();
        let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
        Ok(RunSpec::from_saved_toml(
            &text,
            &path.display().to_string(),
        )?)
    }

    /// `normalization.json`.
    pub fn normalization(&self) -> PathBuf {
        self.root.join("normalization.json")
    }

    /// `metrics.jsonl`.
    pub fn metrics_log(&self) -> PathBuf {
        self.root.join("metrics.jsonl")
    }

    /// `theory.jsonl`.
    pub fn theory_log(&self) -> PathBuf {
        self.root.join("theory.jsonl")
    }

    /// `model.safetensors`: the best weights by the validation metric.
    pub fn best_model(&self) -> PathBuf {
        self.root.join("model.safetensors")
    }

    /// `model-last.safetensors`: the weights after the last epoch.
    pub fn last_model(&self) -> PathBuf {
        self.root.join("model-last.safetensors")
    }

    /// `summary.json`.
    pub fn summary(&self) -> PathBuf {
        self.root.join("summary.json")
    }

    /// `diverged.json` (see [`super::divergence`]).
    pub fn diverged(&self) -> PathBuf {
        self.root.join("diverged.json")
    }

    /// `{split}_logits.npy`.
    pub fn logits(&self, split: Split) -> PathBuf {
        self.root.join(format!("{}_logits.npy", split.name()))
    }

    /// `{split}_labels.npy`.
    pub fn labels(&self, split: Split) -> PathBuf {
        self.root.join(format!("{}_labels.npy", split.name()))
    }

    /// `checkpoint/`.
    pub fn checkpoint_dir(&self) -> PathBuf {
        self.root.join("checkpoint")
    }

    /// `eval-NAME.json`, the report of `csam eval` on a data set named NAME.
    pub fn eval_report(&self, name: &str) -> PathBuf {
        self.root.join(format!("eval-{name}.json"))
    }

    /// Classifies the directory's content.
    pub fn state(&self) -> Result<RunState> {
        if !self.root.exists() {
            return Ok(RunState::Empty);
        }
        // A temporary file of a writer killed before its first rename, or
        // a lock file, is not a run yet.
        let entries =
            std::fs::read_dir(&self.root).map_err(TrainError::io("read directory", &self.root))?;
        let mut kept = entries.flatten().filter(|e| !is_bookkeeping(e));
        if kept.next().is_none() {
            return Ok(RunState::Empty);
        }
        Ok(if self.summary().exists() {
            RunState::Finished
        } else if super::checkpoint::exists(self) {
            RunState::Interrupted
        } else if self.config().exists() {
            RunState::Started
        } else {
            RunState::Foreign
        })
    }

    /// Decides what a training run does with this directory, without
    /// touching it: refuses foreign files, and a finished or unfinished run
    /// unless `resume`; a resume of a finished run has nothing to train; a
    /// resume of a run without a checkpoint starts it over, unless it got
    /// past its first epoch (see [`super::integrity::without_checkpoint`]).
    /// [`RunDir::create`] then makes the directory.
    pub fn check(&self, resume: bool) -> Result<Plan> {
        let shown = self.root.display();
        match (self.state()?, resume) {
            (RunState::Finished, true) => Ok(Plan::Finished),
            (RunState::Finished, false) => Err(TrainError::refused(
                format!(
                    "{shown} holds a finished run (summary.json exists); refusing to overwrite it"
                ),
                Remedy::MoveOrDelete,
            )),
            (RunState::Foreign, _) => Err(TrainError::refused(
                format!("{shown} is not empty and holds no csam run; refusing to write into it"),
                Remedy::Move,
            )),
            (RunState::Interrupted | RunState::Started, false) => Err(TrainError::refused(
                format!("{shown} holds an unfinished run"),
                Remedy::ResumeOrMove,
            )),
            (RunState::Interrupted, true) => Ok(Plan::Resume),
            (RunState::Started, true) => Ok(Plan::Start(Some(
                super::integrity::without_checkpoint(self)?,
            ))),
            (RunState::Empty, false) => Ok(Plan::Start(None)),
            (RunState::Empty, true) => Ok(Plan::Start(Some(match self.root.exists() {
                true => NoCheckpoint::Empty,
                false => NoCheckpoint::Missing,
            }))),
        }
    }

    /// Removes the temporary files that a killed writer left in the
    /// directory and in `checkpoint/` (see [`super::atomic::is_temporary`]);
    /// their targets are untouched, so nothing the run keeps is lost.
    pub fn remove_temporaries(&self) -> Result<()> {
        for dir in [self.root.clone(), self.checkpoint_dir()] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue; // not created yet: nothing left behind
            };
            for entry in entries.flatten().filter(is_temporary_entry) {
                std::fs::remove_file(entry.path()).map_err(TrainError::io(
                    "remove leftover temporary file",
                    entry.path(),
                ))?;
            }
        }
        Ok(())
    }

    /// Creates the directory (and its parents).
    pub fn create(&self) -> Result<()> {
        std::fs::create_dir_all(&self.root)
            .map_err(TrainError::io("create run directory", &self.root))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_directory_is_accepted_then_created() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path().join("run"));
        assert_eq!(run.state().unwrap(), RunState::Empty);
        assert_eq!(run.check(false).unwrap(), Plan::Start(None));
        assert_eq!(
            run.check(true).unwrap(),
            Plan::Start(Some(NoCheckpoint::Missing))
        );
        assert!(!run.root().exists(), "checking creates nothing");
        run.create().unwrap();
        assert!(run.root().is_dir());
        std::fs::write(run.root().join(LOCK_FILE), "{}").unwrap();
        assert_eq!(
            run.state().unwrap(),
            RunState::Empty,
            "a lock file is no run"
        );
        assert_eq!(
            run.check(true).unwrap(),
            Plan::Start(Some(NoCheckpoint::Empty))
        );
    }

    #[test]
    fn leftover_temporaries_are_removed_and_kept_files_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::create_dir(run.checkpoint_dir()).unwrap();
        let kept = [run.config(), run.checkpoint_dir().join("state.json")];
        let leftovers = [
            dir.path().join(".model.tmp-12.safetensors"),
            run.checkpoint_dir().join(".weights-2.tmp-12.safetensors"),
        ];
        for path in kept.iter().chain(&leftovers) {
            std::fs::write(path, "x").unwrap();
        }
        run.remove_temporaries().unwrap();
        assert!(kept.iter().all(|p| p.exists()));
        assert!(leftovers.iter().all(|p| !p.exists()));
    }

    #[test]
    fn finished_run_is_never_overwritten_and_has_nothing_to_resume() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.config(), "").unwrap();
        std::fs::write(run.summary(), "{}").unwrap();
        assert_eq!(run.state().unwrap(), RunState::Finished);
        let err = run.check(false).unwrap_err().to_string();
        assert!(err.contains("finished run"), "{err}");
        assert_eq!(run.check(true).unwrap(), Plan::Finished);
    }

    #[test]
    fn started_run_needs_resume_and_foreign_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.config(), "").unwrap();
        assert!(matches!(
            run.check(false).unwrap_err(),
            TrainError::Refused {
                remedy: Remedy::ResumeOrMove,
                ..
            }
        ));
        assert_eq!(
            run.check(true).unwrap(),
            Plan::Start(Some(NoCheckpoint::NoEpochFinished)),
            "no checkpoint yet: start over"
        );

        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join(".config.tmp-7.toml"), "half").unwrap();
        assert_eq!(RunDir::new(other.path()).state().unwrap(), RunState::Empty);
        std::fs::write(other.path().join("notes.txt"), "mine").unwrap();
        let run = RunDir::new(other.path());
        assert_eq!(run.state().unwrap(), RunState::Foreign);
        assert!(run.check(true).is_err());
    }
}
