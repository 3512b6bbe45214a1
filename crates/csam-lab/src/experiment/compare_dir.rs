//! The layout of a comparison directory (`csam compare`'s output): where
//! its settings, runs, predictions, tables and report live. Below the
//! comparison itself, so that its results, tables and reports read paths
//! from here.

use std::path::PathBuf;

use csam_train::train::lock::ExperimentUse;
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::method::{Method, Training};
use super::settings::ExperimentDir;

use crate::error::Result;

/// The paths of a comparison directory.
#[derive(Debug, Clone)]
pub struct CompareDir {
    dir: ExperimentDir,
}

impl CompareDir {
    /// The comparison directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CompareDir {
            dir: ExperimentDir::new(root, "compare.json", "comparison"),
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &std::path::Path {
        self.dir.root()
    }

    /// `relative` (a run's or predictions' directory) inside the comparison.
    pub fn join(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// `compare.json`.
    pub fn settings(&self) -> PathBuf {
        self.dir.settings()
    }

    /// `runs/<training>-seed<seed>` for member 0 (`runs/csam-seed0`,
    /// `runs/csam-dropout-seed0`), `runs/<training>-seed<seed>-member<j>`
    /// for the others, relative to the comparison directory.
    pub fn relative_run(training: Training, seed: u64, member: usize) -> String {
        match member {
            0 => format!("runs/{training}-seed{seed}"),
            j => format!("runs/{training}-seed{seed}-member{j}"),
        }
    }

    /// The directory of member `member` of `training`'s replicate `seed`.
    pub fn run(&self, training: Training, seed: u64, member: usize) -> PathBuf {
        self.dir.join(Self::relative_run(training, seed, member))
    }

    /// `predictions/<method>-seed<seed>`: the combined predictions of an
    /// ensemble or MC-Dropout (see [`super::combined`]), relative to the
    /// comparison directory.
    pub fn relative_predictions(method: Method, seed: u64) -> String {
        format!("predictions/{method}-seed{seed}")
    }

    /// `results.json`.
    pub fn results_json(&self) -> PathBuf {
        self.dir.join("results.json")
    }

    /// `results.csv`.
    pub fn results_csv(&self) -> PathBuf {
        self.dir.join("results.csv")
    }

    /// `table.md`.
    pub fn table(&self) -> PathBuf {
        self.dir.join("table.md")
    }

    /// `cost.md`: training time and second-pass share per method.
    pub fn cost_table(&self) -> PathBuf {
        self.dir.join("cost.md")
    }

    /// `shift.md`: the table under shift and against OOD data.
    pub fn shift_table(&self) -> PathBuf {
        self.dir.join("shift.md")
    }

    /// `plots/`.
    pub fn plots(&self) -> PathBuf {
        self.dir.join("plots")
    }

    /// `report.html`.
    pub fn report(&self) -> PathBuf {
        self.dir.join("report.html")
    }

    /// Creates the directory and `compare.json` holding `settings` (a
    /// comparison's, [`super::compare_settings::CompareSettings`]), or
    /// accepts an existing one whose `compare.json` holds the same settings.
    /// Refuses a different comparison and a non-empty directory without
    /// `compare.json`. The returned hold is kept while the comparison runs
    /// (see [`ExperimentUse`]).
    pub fn open<S: Serialize + DeserializeOwned>(&self, settings: &S) -> Result<ExperimentUse> {
        self.dir.open(settings)
    }
}
