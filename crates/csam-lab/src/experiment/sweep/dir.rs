//! The layout of a sweep directory: where its settings and runs live.

use std::path::PathBuf;

use csam_train::train::lock::ExperimentUse;

use super::settings::SweepSettings;
use crate::experiment::settings::ExperimentDir;

use crate::error::Result;

/// The paths of a sweep directory.
#[derive(Debug, Clone)]
pub struct SweepDir {
    dir: ExperimentDir,
}

impl SweepDir {
    /// The sweep directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        SweepDir {
            dir: ExperimentDir::new(root, "sweep.json", "sweep"),
        }
    }

    /// The directory itself.
    pub fn root(&self) -> &std::path::Path {
        self.dir.root()
    }

    /// `runs/rho<rho>-gamma<gamma>-seed<seed>`, relative to the sweep directory.
    pub fn relative_run(rho: f64, gamma: f64, seed: u64) -> String {
        format!("runs/rho{rho}-gamma{gamma}-seed{seed}")
    }

    /// A file or directory of the sweep, by its relative path.
    pub fn join(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// Creates the directory and `sweep.json`, or accepts an existing one
    /// with the same settings; refuses anything else. The returned hold is
    /// kept while the experiment runs (see [`ExperimentUse`]).
    pub fn open(&self, settings: &SweepSettings) -> Result<ExperimentUse> {
        self.dir.open(settings)
    }
}
