//! Reading a run's `theory.jsonl` and summarising it.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::record::TheoryRecord;
use crate::train::epoch_log::EpochLog;
use crate::train::rundir::RunDir;
use crate::train::TrainError;

/// `theory.jsonl`: one [`TheoryRecord`] per perturbed step, appended once per
/// epoch before the epoch's checkpoint and cut back to the checkpointed
/// epochs on resume (see [`EpochLog`]).
pub type TheoryLog = EpochLog<TheoryRecord>;

/// The theory log of the run directory `run_dir`.
pub fn theory_log(run_dir: &Path) -> TheoryLog {
    TheoryLog::new(RunDir::new(run_dir).theory_log())
}

/// Reads the records of the run in `run_dir`; a run trained without
/// `track_theory` has no log and is an error that says so.
pub fn read_theory(run_dir: &Path) -> Result<Vec<TheoryRecord>, TrainError> {
    let log = theory_log(run_dir);
    if !log.path().is_file() {
        return Err(TrainError::NoTheoryLog {
            path: log.path().to_path_buf(),
        });
    }
    log.read()
}

/// What a theory log says over the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TheorySummary {
    /// Number of logged (perturbed) steps.
    pub steps: usize,
    /// Steps where Lemma 2's bound `p~_y <= exp(-rho ||g|| / 2) p_y` held.
    pub lemma2_held: usize,
    /// `lemma2_held / steps` (None without steps).
    pub lemma2_fraction: Option<f64>,
    /// Steps with `p~_y <= p_y` (the weaker conclusion the paper draws from
    /// Lemma 2 for its Theorem 2).
    pub p_tilde_below_p: usize,
    /// Mean of `lambda` over the steps where it is defined (None if nowhere).
    pub mean_lambda: Option<f64>,
    /// Mean of `lambda_0` over the steps where it is defined.
    pub mean_lambda_0: Option<f64>,
}

impl TheorySummary {
    /// Summarises `records`.
    pub fn of(records: &[TheoryRecord]) -> TheorySummary {
        let steps = records.len();
        let count = |keep: fn(&TheoryRecord) -> bool| records.iter().filter(|r| keep(r)).count();
        let lemma2_held = count(|r| r.lemma2_holds);
        TheorySummary {
            steps,
            lemma2_held,
            lemma2_fraction: (steps > 0).then(|| lemma2_held as f64 / steps as f64),
            p_tilde_below_p: count(|r| r.p_y_tilde <= r.p_y),
            mean_lambda: mean(records.iter().filter_map(|r| r.lambda)),
            mean_lambda_0: mean(records.iter().filter_map(|r| r.lambda_0)),
        }
    }

    /// One line for the terminal, e.g. "Lemma 2 held on 812 of 900 steps (90.2%)".
    pub fn line(&self) -> String {
        match self.lemma2_fraction {
            Some(fraction) => format!(
                "Lemma 2 held on {} of {} steps ({:.1}%); p~_y <= p_y on {}",
                self.lemma2_held,
                self.steps,
                100.0 * fraction,
                self.p_tilde_below_p
            ),
            None => "no perturbed step was logged".to_string(),
        }
    }
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    (n > 0).then(|| sum / n as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(global_step: usize, p_y: f64, p_y_tilde: f64, holds: bool) -> TheoryRecord {
        TheoryRecord {
            epoch: 1,
            global_step,
            p_y,
            p_y_tilde,
            grad_norm: 1.0,
            bound: p_y,
            lemma2_holds: holds,
            lambda: (global_step != 0).then_some(2.0),
            lambda_0: None,
            entropy: 0.5,
        }
    }

    #[test]
    fn fraction_counts_the_steps_where_the_bound_held() {
        let records = [
            record(0, 0.5, 0.4, true),
            record(1, 0.5, 0.45, false),
            record(2, 0.5, 0.6, false),
            record(3, 0.5, 0.3, true),
        ];
        let summary = TheorySummary::of(&records);
        assert_eq!((summary.steps, summary.lemma2_held), (4, 2));
        // Counts and means of small integers: exact in f64.
        assert_eq!(summary.lemma2_fraction, Some(0.5));
        assert_eq!(summary.p_tilde_below_p, 3);
        assert_eq!(summary.mean_lambda, Some(2.0));
        assert_eq!(summary.mean_lambda_0, None);
        assert!(summary.line().contains("2 of 4 steps (50.0%)"));
        assert_eq!(TheorySummary::of(&[]).lemma2_fraction, None);
    }

    #[test]
    fn missing_log_names_the_flag() {
        let dir = tempfile::tempdir().unwrap();
        let err = read_theory(dir.path()).unwrap_err().to_string();
        assert!(err.contains("track_theory = true"), "{err}");
    }
}
