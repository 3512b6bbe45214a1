//! Training one run of an experiment, or reusing it: a finished run (its
//! `summary.json` exists) is read back after checking that it was trained
//! with the same configuration; an interrupted one resumes from its
//! checkpoint; a missing one trains. Each decision is reported to the
//! observer, so a rerun can show which runs were reused.

use std::path::Path;

use super::settings::read_json;
use crate::spec::{RunSpec, Runtime};
use crate::train::rundir::{RunDir, RunState};
use crate::train::{
    self, ExperimentObserver, RunAction, RunOutcome, RunSummary, TrainError, TrainRequest,
};

type Result<T> = std::result::Result<T, TrainError>;

/// The summary of the run in `out` with `spec`: read back when it finished
/// earlier, otherwise trained (resuming when it was interrupted). `label`
/// names the run to the observer (`[3/6] sam seed 0`).
pub fn train_or_reuse<O: ExperimentObserver>(
    spec: RunSpec,
    runtime: &Runtime,
    out: &Path,
    label: &str,
    observer: &mut O,
) -> Result<RunSummary> {
    let run_dir = RunDir::new(out);
    let state = run_dir.state()?;
    if state == RunState::Finished {
        check_saved_spec(&run_dir, &spec)?;
        observer.run_started(label, RunAction::Reused, out);
        return read_json(&run_dir.summary());
    }
    let action = match state {
        RunState::Interrupted => RunAction::Resuming,
        _ => RunAction::Training,
    };
    observer.run_started(label, action, out);
    let request = TrainRequest {
        spec,
        runtime: runtime.clone(),
        out: out.to_path_buf(),
        resume: true,
        stop_after_epoch: None,
    };
    match train::run(&request, observer)? {
        RunOutcome::Finished(summary) => Ok(*summary),
        // Finished by another process since the state was read.
        RunOutcome::AlreadyFinished { summary } => read_json(&summary),
        RunOutcome::Stopped { epoch } => Err(TrainError::RunDir(format!(
            "{} stopped after epoch {epoch} without finishing",
            out.display()
        ))),
    }
}

/// Refuses to reuse a finished run trained with other settings.
fn check_saved_spec(run_dir: &RunDir, spec: &RunSpec) -> Result<()> {
    let changed = spec.differences(&run_dir.saved_spec()?);
    match changed.is_empty() {
        true => Ok(()),
        false => Err(TrainError::RunDir(format!(
            "{} was trained with other settings ({}) than this experiment asks for; delete it \
             to retrain it",
            run_dir.root().display(),
            changed.join(", ")
        ))),
    }
}
