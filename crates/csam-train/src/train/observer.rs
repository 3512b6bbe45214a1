//! What a training run and an experiment report while they work. The library
//! never prints: it calls an observer the caller passes (as a searcher reports
//! to a sink), and the caller decides what to show. The command line draws a
//! progress bar per epoch and prints a line per epoch and per run; a test or
//! a notebook passes [`Silent`].

use std::path::Path;

use super::metrics_log::EpochRecord;
use crate::spec::Warning;
use crate::theory::TheorySummary;

/// The events of one training run. Every method has an empty default.
pub trait RunObserver {
    /// Epoch `epoch` (1-based) of `epochs` starts; it has `steps` steps.
    fn epoch_started(&mut self, _epoch: usize, _epochs: usize, _steps: usize) {}

    /// One optimizer step finished; the epoch's running means so far.
    fn step(&mut self, _mean_loss: f64, _accuracy: f64) {}

    /// An epoch finished and was checkpointed.
    fn epoch_finished(&mut self, _record: &EpochRecord, _epochs: usize) {}

    /// A run with theory tracking finished: its Lemma 2 summary.
    fn theory_summary(&mut self, _summary: &TheorySummary) {}
}

/// What an experiment does with one of its runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunAction {
    /// Read back a run that finished earlier.
    Reused,
    /// Keep the record of a run that diverged earlier (its
    /// `diverged.json`) instead of training it again.
    Diverged,
    /// Continue an interrupted run.
    Resuming,
    /// Wait for the other process that trains the run, then read it back
    /// or resume it.
    Waiting,
    /// Train a new run.
    Training,
}

impl std::fmt::Display for RunAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunAction::Reused => "reused finished run",
            RunAction::Diverged => "kept diverged run",
            RunAction::Resuming => "resuming into",
            RunAction::Waiting => "waiting for the other csam process that trains",
            RunAction::Training => "training into",
        })
    }
}

/// The events of an experiment over many runs (compare, sweep), besides
/// those of each run it trains.
pub trait ExperimentObserver: RunObserver {
    /// The run `label` (`[3/6] sam seed 0`) in `dir` is about to be handled.
    fn run_started(&mut self, _label: &str, _action: RunAction, _dir: &Path) {}

    /// The run `label` is done; `line` sums it up (time, key metrics).
    fn run_finished(&mut self, _label: &str, _line: &str) {}

    /// A setting of the experiment's runs is legal but probably not what
    /// was meant (as `RunSpec::validate` warns a single run); said once,
    /// before any run is trained.
    fn warning(&mut self, _warning: &Warning) {}
}

/// Reports nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct Silent;

impl RunObserver for Silent {}
impl ExperimentObserver for Silent {}
