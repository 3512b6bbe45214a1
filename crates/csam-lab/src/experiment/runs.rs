//! The runs of an experiment: [`run_all`] walks an [`Experiment`]'s runs in
//! order, training or reusing each ([`train_or_reuse`]: a finished run, its
//! `summary.json` there, is read back after checking that it was trained
//! with the same configuration; so is a diverged one, its `diverged.json`
//! there; an interrupted one resumes from its checkpoint; a missing one
//! trains) and recording it. A run that diverges is an outcome, not a
//! failure: the others train on, and the experiment shows it as diverged
//! (see [`super::diverged`]). Each decision and each run's end is reported
//! to the observer, so a rerun shows which runs were reused. `compare`,
//! `sweep` and `grid` are [`Experiment`]s over this one loop.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::settings::read_json;
use csam_train::spec::{RunSpec, Runtime};
use csam_train::train::lock::{LockError, RunLock};
use csam_train::train::rundir::{RunDir, RunState};
use csam_train::train::{
    self, Divergence, ExperimentObserver, RunAction, RunOutcome, RunSummary, TrainError,
    TrainRequest,
};

use crate::error::{LabError, Result};

/// An experiment as a list of runs: what each one trains, where it lives,
/// and what the experiment keeps of it once it has finished.
pub trait Experiment {
    /// What identifies one run (a method and a seed, a grid point).
    type Run: Copy;
    /// What the experiment records of a finished run.
    type Record;

    /// The runs, in the order they train.
    fn runs(&self) -> Vec<Self::Run>;
    /// The run's name in progress lines (`sam seed 0`).
    fn label(&self, run: Self::Run) -> String;
    /// The run's specification.
    fn spec(&self, run: Self::Run) -> Result<RunSpec>;
    /// The run's directory.
    fn dir(&self, run: Self::Run) -> PathBuf;
    /// The record of the finished run, from its summary (and its files).
    fn record(&self, run: Self::Run, summary: RunSummary) -> Result<Self::Record>;
    /// The record's numbers for the progress line (`test accuracy 87.1%, ...`).
    fn describe(record: &Self::Record) -> String;
}

/// One run of an experiment, as a separate process would train it.
#[derive(Debug, Clone)]
pub struct PlannedRun {
    /// Its name in progress lines, numbered (`[3/9] sam seed 0`).
    pub label: String,
    /// What it trains.
    pub spec: RunSpec,
    /// Its run directory.
    pub dir: PathBuf,
}

/// The runs of `experiment` that have not finished, in order: what a caller
/// may train elsewhere (in parallel processes, say) before [`run_all`]
/// reuses them. A finished or diverged run is left out here and checked by
/// `run_all`.
pub fn unfinished<E: Experiment>(experiment: &E) -> Result<Vec<PlannedRun>> {
    let runs = experiment.runs();
    let mut planned = Vec::new();
    for (index, &run) in runs.iter().enumerate() {
        let dir = experiment.dir(run);
        let run_dir = RunDir::new(&dir);
        if run_dir.state()? != RunState::Finished && Divergence::read(&run_dir)?.is_none() {
            planned.push(PlannedRun {
                label: numbered(index, runs.len(), &experiment.label(run)),
                spec: experiment.spec(run)?,
                dir,
            });
        }
    }
    Ok(planned)
}

/// `[3/9] label`.
fn numbered(index: usize, total: usize, label: &str) -> String {
    format!("[{}/{total}] {label}", index + 1)
}

/// What became of the runs of an experiment, each list in run order.
#[derive(Debug)]
pub struct Outcomes<Run, Record> {
    /// The records of the runs that finished.
    pub finished: Vec<Record>,
    /// The runs that diverged, with their records.
    pub diverged: Vec<(Run, Divergence)>,
}

/// Trains (or reuses) every run of `experiment` in order with `runtime` and
/// returns their records, and the divergence of each run that diverged (its
/// `diverged.json` written, the other runs trained on). The observer hears
/// each run start and end, a finished one with its training time (its own,
/// also when it was trained earlier or by another process and is only read
/// back here), the time since the invocation `started` (runs trained ahead
/// in other processes count), and the record's numbers. Refuses an
/// experiment none of whose runs finished ([`LabError::EveryRunDiverged`]).
pub fn run_all<E: Experiment, O: ExperimentObserver>(
    experiment: &E,
    runtime: &Runtime,
    started: Instant,
    observer: &mut O,
) -> Result<Outcomes<E::Run, E::Record>> {
    // The records are made in this process (post-hoc calibration, ensembles,
    // shift), also when every run is reused.
    runtime.apply_threads();
    let runs = experiment.runs();
    let mut outcomes = Outcomes {
        finished: Vec::with_capacity(runs.len()),
        diverged: Vec::new(),
    };
    for (index, &run) in runs.iter().enumerate() {
        let label = numbered(index, runs.len(), &experiment.label(run));
        let dir = experiment.dir(run);
        let (ended, action) =
            train_or_reuse(experiment.spec(run)?, runtime, &dir, &label, observer)?;
        let since = started.elapsed().as_secs_f64();
        let summary = match ended {
            Ended::Finished(summary) => summary,
            Ended::Diverged(divergence) => {
                let record = RunDir::new(&dir).diverged();
                let line = format!(
                    "{divergence}, recorded in {}; {since:.1}s since start",
                    record.display()
                );
                observer.run_finished(&label, &line);
                outcomes.diverged.push((run, divergence));
                continue;
            }
        };
        let trained_s = summary.wall_time_s;
        let record = experiment.record(run, *summary)?;
        let trained = match action {
            RunAction::Reused | RunAction::Diverged | RunAction::Waiting => {
                format!("read back (trained in {trained_s:.1}s)")
            }
            RunAction::Training | RunAction::Resuming => format!("done in {trained_s:.1}s"),
        };
        let line = format!(
            "{trained}, {since:.1}s since start ({})",
            E::describe(&record),
        );
        observer.run_finished(&label, &line);
        outcomes.finished.push(record);
    }
    match (outcomes.finished.is_empty(), outcomes.diverged.first()) {
        (true, Some((run, divergence))) => Err(LabError::EveryRunDiverged {
            runs: outcomes.diverged.len(),
            dir: experiment.dir(*run),
            divergence: divergence.clone(),
        }),
        _ => Ok(outcomes),
    }
}

/// How a run of an experiment ended.
#[derive(Debug, Clone)]
pub enum Ended {
    /// It finished: its summary (boxed: it is ten times a divergence).
    Finished(Box<RunSummary>),
    /// It diverged (now or earlier): its record.
    Diverged(Divergence),
}

/// The run in `out` with `spec`: read back when it finished or diverged
/// earlier, otherwise trained (resuming when it was interrupted), with what
/// was done. A run that diverges leaves its record (`diverged.json`) and
/// ends [`Ended::Diverged`]; any other error is returned. `label` names the
/// run to the observer (`[3/6] sam seed 0`).
pub fn train_or_reuse<O: ExperimentObserver>(
    spec: RunSpec,
    runtime: &Runtime,
    out: &Path,
    label: &str,
    observer: &mut O,
) -> Result<(Ended, RunAction)> {
    let run_dir = RunDir::new(out);
    let state = run_dir.state()?;
    if state == RunState::Finished {
        check_saved_spec(&run_dir, &spec)?;
        observer.run_started(label, RunAction::Reused, out);
        let summary = read_json(&run_dir.summary())?;
        return Ok((Ended::Finished(Box::new(summary)), RunAction::Reused));
    }
    if let Some(divergence) = Divergence::read(&run_dir)? {
        check_saved_spec(&run_dir, &spec)?;
        observer.run_started(label, RunAction::Diverged, out);
        return Ok((Ended::Diverged(divergence), RunAction::Diverged));
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
    let outcome = match train::run(&request, observer) {
        Ok(outcome) => outcome,
        // Another process (a second experiment on the same directory) trains
        // it: wait for that one, then read the run back or resume it.
        Err(TrainError::Lock(LockError::Busy { .. })) => {
            observer.run_started(label, RunAction::Waiting, out);
            RunLock::wait_until_free(out).map_err(TrainError::from)?;
            return train_or_reuse(request.spec, runtime, out, label, observer);
        }
        Err(error) => {
            return match Divergence::of(&error) {
                Some(divergence) => Ok((Ended::Diverged(divergence), action)),
                None => Err(error.into()),
            }
        }
    };
    match outcome {
        RunOutcome::Finished(summary) => Ok((Ended::Finished(summary), action)),
        // Finished by another process since the state was read.
        RunOutcome::AlreadyFinished { summary } => Ok((
            Ended::Finished(Box::new(read_json(&summary)?)),
            RunAction::Reused,
        )),
        RunOutcome::Stopped { epoch } => Err(LabError::Stopped {
            dir: out.to_path_buf(),
            epoch,
        }),
        // A single process (no replica) is every run's rank 0.
        RunOutcome::Replicated { rank } => Err(LabError::ReplicaRank {
            dir: out.to_path_buf(),
            rank,
        }),
    }
}

/// Refuses to reuse a finished run trained with other settings.
fn check_saved_spec(run_dir: &RunDir, spec: &RunSpec) -> Result<()> {
    let changed = spec.differences(&run_dir.saved_spec()?);
    match changed.is_empty() {
        true => Ok(()),
        false => Err(LabError::OtherSettings {
            dir: run_dir.root().to_path_buf(),
            changed,
        }),
    }
}
