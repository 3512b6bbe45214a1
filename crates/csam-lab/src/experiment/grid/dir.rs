//! The layout of a grid directory: where its settings and runs live.

use std::path::PathBuf;

use csam_train::train::lock::ExperimentUse;

use super::settings::{short, GridPoint, GridSettings};
use crate::experiment::settings::ExperimentDir;

use crate::error::Result;

/// The paths of a grid directory.
#[derive(Debug, Clone)]
pub struct GridDir {
    dir: ExperimentDir,
}

impl GridDir {
    /// The grid directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        GridDir {
            dir: ExperimentDir::new(root, "grid.json", "grid"),
        }
    }

    /// `runs/lr<lr>-wd<weight decay>-seed<seed>`, relative to the grid
    /// directory (small values in exponent form: `wd5e-4`).
    pub fn relative_run(point: GridPoint, seed: u64) -> String {
        format!(
            "runs/lr{}-wd{}-seed{seed}",
            short(point.lr),
            short(point.weight_decay)
        )
    }

    /// A file or directory of the grid, by its relative path.
    pub fn join(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// `results.json`.
    pub fn results_json(&self) -> PathBuf {
        self.join("results.json")
    }

    /// Creates the directory and `grid.json`, or accepts an existing one
    /// with the same settings; refuses anything else. The returned hold is
    /// kept while the experiment runs (see [`ExperimentUse`]).
    pub fn open(&self, settings: &GridSettings) -> Result<ExperimentUse> {
        self.dir.open(settings)
    }
}
