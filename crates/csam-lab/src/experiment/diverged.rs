//! Diverged runs in an experiment's results. A run whose loss became NaN or
//! infinite is an outcome, as in the paper's tables a failed run is marked
//! rather than dropped: its record (`diverged.json`, see
//! [`csam_train::train::divergence`]) is listed in `results.json` beside
//! the finished runs, the means and stds are over the finished seeds, and
//! the tables say how many seeds diverged ([`note`]).

use serde::{Deserialize, Serialize};

use csam_train::train::Divergence;

/// A run of an experiment that diverged: which one (`run`, the
/// experiment's own fields: method and seed, rho, gamma and seed, ...),
/// its directory relative to the experiment's, and its record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DivergedRun<K> {
    /// What identifies the run in the experiment.
    #[serde(flatten)]
    pub run: K,
    /// The run directory, relative to the experiment directory.
    pub run_dir: String,
    /// Where and why it diverged.
    #[serde(flatten)]
    pub divergence: Divergence,
}

/// What a row (or cell) of a table says of its diverged seeds: nothing when
/// none diverged, `diverged` when every seed did, `2 of 3 seeds; 1
/// diverged` when some did (the numbers are then over the finished ones).
pub fn note(finished: usize, diverged: usize) -> Option<String> {
    match (finished, diverged) {
        (_, 0) => None,
        (0, _) => Some(DIVERGED.to_string()),
        (finished, diverged) => Some(format!(
            "{finished} of {} seeds; {diverged} diverged",
            finished + diverged
        )),
    }
}

/// The cell of a number no finished seed has.
pub const DIVERGED: &str = "diverged";

/// `text` with the [`note`] of its seeds after it in parentheses; just
/// [`DIVERGED`] when every seed diverged.
pub fn noted(text: String, finished: usize, diverged: usize) -> String {
    match (finished, note(finished, diverged)) {
        (0, Some(_)) => DIVERGED.to_string(),
        (_, Some(note)) => format!("{text} ({note})"),
        (_, None) => text,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The record of a run whose loss was NaN at `step` of `epoch`.
    pub(crate) fn nan_at(epoch: usize, step: usize) -> Divergence {
        Divergence {
            epoch,
            step,
            reason: "loss is NaN after this step".into(),
            last_good_epoch: epoch - 1,
        }
    }

    #[test]
    fn notes_count_the_finished_and_the_diverged_seeds() {
        assert_eq!(note(3, 0), None);
        assert_eq!(note(0, 3).as_deref(), Some("diverged"));
        assert_eq!(note(2, 1).as_deref(), Some("2 of 3 seeds; 1 diverged"));
        assert_eq!(noted("SAM".into(), 2, 1), "SAM (2 of 3 seeds; 1 diverged)");
        assert_eq!(noted("81.00".into(), 0, 2), "diverged");
        assert_eq!(noted("81.00".into(), 2, 0), "81.00");
    }

    #[test]
    fn a_diverged_run_is_flat_in_json() {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        struct Seed {
            seed: u64,
        }
        let run = DivergedRun {
            run: Seed { seed: 2 },
            run_dir: "runs/sam-seed2".into(),
            divergence: nan_at(1, 3),
        };
        let json = serde_json::to_value(&run).unwrap();
        assert_eq!(json["seed"], 2);
        assert_eq!(json["step"], 3);
        assert_eq!(
            serde_json::from_value::<DivergedRun<Seed>>(json).unwrap(),
            run
        );
    }
}
