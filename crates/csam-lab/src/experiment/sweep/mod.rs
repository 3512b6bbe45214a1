//! `csam sweep`: CSAM over a grid of perturbation radii rho and gammas (the
//! paper's rho x gamma table, its rho figure and its gamma figure; Appendix
//! "Effects of perturbation radius rho and coefficient gamma"), every cell
//! over the same seeds, with the settings every run shares
//! ([`SharedSettings`]) as in `csam compare`.
//!
//! gamma = 0 is SAM (paper §4: CSAM's loss reduces to cross entropy); those
//! cells train with the SAM optimizer, so they are exactly SAM runs.
//!
//! A sweep directory holds `sweep.json` (the [`SweepSettings`]: a rerun with
//! the same settings reuses finished runs and resumes an interrupted one, a
//! different sweep is refused), `runs/rho<r>-gamma<g>-seed<s>/` (one `csam
//! train` run directory each), `results.json` ([`results::SweepResults`]),
//! `results.csv` (one row per run), `cells.csv` (one row per cell),
//! `table.md`, `plots/` and `report.html`.

pub mod results;

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::report;
use super::runs::{self, run_all, Experiment, PlannedRun};
use super::settings::{check_grid_axis, write_json, ExperimentDir, SharedSettings};
use csam_nn::optim::SamPolicy;
use csam_train::spec::{OptimizerFamily, RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::{ExperimentObserver, RunSummary, TrainError};
use results::{cells, cells_csv, markdown, runs_csv, SweepRecord, SweepResults, SCHEMA};

type Result<T> = std::result::Result<T, TrainError>;

/// What identifies a sweep: the grid and the settings its runs share. Saved
/// as `sweep.json`, the shared keys at the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    /// Data, model, epochs, seeds and the shared hyperparameters.
    #[serde(flatten)]
    pub shared: SharedSettings,
    /// Perturbation radii, in table order.
    pub rhos: Vec<f64>,
    /// CSAM gammas, in table order (0 is SAM).
    pub gammas: Vec<f64>,
    /// The efficient SAM policy of every cell (every step by default).
    #[serde(default, skip_serializing_if = "is_every")]
    pub policy: SamPolicy,
}

fn is_every(policy: &SamPolicy) -> bool {
    *policy == SamPolicy::Every
}

impl Default for SweepSettings {
    /// The paper's grid: rho from 0.02 to 0.2 (its rho figure), gamma
    /// 0 to 2 in steps of 0.5 (its rho x gamma table).
    fn default() -> Self {
        SweepSettings {
            shared: SharedSettings::default(),
            rhos: vec![0.02, 0.05, 0.1, 0.2],
            gammas: vec![0.0, 0.5, 1.0, 1.5, 2.0],
            policy: SamPolicy::Every,
        }
    }
}

impl SweepSettings {
    /// The optimizer of a cell: SAM for gamma = 0, CSAM otherwise.
    pub fn optimizer(gamma: f64) -> OptimizerFamily {
        match gamma == 0.0 {
            true => OptimizerFamily::Sam,
            false => OptimizerFamily::Csam,
        }
    }

    /// The spec of one run.
    pub fn run_spec(&self, rho: f64, gamma: f64, seed: u64) -> Result<RunSpec> {
        let mut spec = self
            .shared
            .run_spec(Self::optimizer(gamma), rho, gamma, seed)?;
        spec.optim.policy = self.policy;
        Ok(spec)
    }

    /// Refuses empty or repeated lists and any setting a run would refuse
    /// (rho must be positive, gamma finite and non-negative; the data and
    /// model names must parse), so that a sweep is recorded only once its
    /// settings are valid.
    pub fn validate(&self) -> Result<()> {
        self.shared.validate()?;
        check_grid_axis("rho", &self.rhos)?;
        check_grid_axis("gamma", &self.gammas)?;
        for &rho in &self.rhos {
            for &gamma in &self.gammas {
                self.run_spec(rho, gamma, self.shared.seeds[0])?
                    .validate()?;
            }
        }
        Ok(())
    }

    /// Every (seed, rho, gamma) of the sweep, seed-major, so that every cell
    /// has a first value before any cell has a second.
    pub fn grid(&self) -> Vec<(u64, f64, f64)> {
        let mut grid = Vec::new();
        for &seed in &self.shared.seeds {
            for &rho in &self.rhos {
                for &gamma in &self.gammas {
                    grid.push((seed, rho, gamma));
                }
            }
        }
        grid
    }
}

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
    /// with the same settings; refuses anything else.
    pub fn open(&self, settings: &SweepSettings) -> Result<()> {
        self.dir.open(settings)
    }
}

/// What `csam sweep` asks for.
#[derive(Debug, Clone)]
pub struct SweepRequest {
    /// The sweep.
    pub settings: SweepSettings,
    /// The sweep directory.
    pub out: PathBuf,
    /// Device and threads of every run; not part of the sweep's identity.
    pub runtime: Runtime,
    /// When the invocation started: the wall time in `results.json` counts
    /// from here, so that runs trained ahead (by parallel processes) count.
    pub started: Instant,
}

impl SweepRequest {
    /// Checks the settings and the runtime and opens the directory (nothing
    /// is created for settings a run would refuse): the sweep, ready to run.
    fn open(&self) -> Result<Sweep<'_>> {
        self.settings.validate()?;
        self.runtime.validate()?;
        let dir = SweepDir::new(&self.out);
        dir.open(&self.settings)?;
        Ok(Sweep {
            settings: &self.settings,
            dir,
        })
    }
}

/// Checks the settings, opens the sweep directory (as [`run`] does) and
/// returns the runs that have not finished (see [`runs::unfinished`]).
/// Refuses a runtime no run could use before anything is trained.
pub fn plan(request: &SweepRequest) -> Result<Vec<PlannedRun>> {
    runs::unfinished(&request.open()?)
}

/// Trains (or reuses) every run of the grid, then writes `results.json`,
/// `results.csv`, `cells.csv`, `table.md`, the figures and `report.html`.
/// Returns the results and the Markdown table.
pub fn run<O: ExperimentObserver>(
    request: &SweepRequest,
    observer: &mut O,
) -> Result<(SweepResults, String)> {
    let started = request.started;
    let settings = &request.settings;
    let sweep = request.open()?;
    let runs = run_all(&sweep, &request.runtime, observer)?;
    let dir = &sweep.dir;
    let cells = cells(settings, &runs);
    let results = SweepResults {
        schema: SCHEMA.to_string(),
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        settings: settings.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        runs,
        cells,
    };
    let table = markdown(&results);
    write_json(&dir.join("results.json"), &results)?;
    write_atomic(&dir.join("results.csv"), runs_csv(&results.runs).as_bytes())?;
    write_atomic(&dir.join("cells.csv"), cells_csv(&results.cells).as_bytes())?;
    write_atomic(&dir.join("table.md"), table.as_bytes())?;
    report::sweep::write(dir, &results)?;
    Ok((results, table))
}

/// A sweep as the runs of an [`Experiment`]: the grid, seed-major.
struct Sweep<'a> {
    settings: &'a SweepSettings,
    dir: SweepDir,
}

impl Experiment for Sweep<'_> {
    type Run = (u64, f64, f64);
    type Record = SweepRecord;

    fn runs(&self) -> Vec<Self::Run> {
        self.settings.grid()
    }

    fn label(&self, (seed, rho, gamma): Self::Run) -> String {
        format!("rho {rho} gamma {gamma} seed {seed}")
    }

    fn spec(&self, (seed, rho, gamma): Self::Run) -> Result<RunSpec> {
        self.settings.run_spec(rho, gamma, seed)
    }

    fn dir(&self, (seed, rho, gamma): Self::Run) -> PathBuf {
        self.dir.join(&SweepDir::relative_run(rho, gamma, seed))
    }

    fn record(&self, run: Self::Run, summary: RunSummary) -> Result<SweepRecord> {
        let (seed, rho, gamma) = run;
        let relative = SweepDir::relative_run(rho, gamma, seed);
        SweepRecord::of_run(&self.dir(run), relative, rho, gamma, summary)
    }

    fn describe(record: &SweepRecord) -> String {
        format!(
            "test accuracy {:.2}%, ECE {:.2}%, mean H(p_y) {:.3}",
            100.0 * record.test.accuracy,
            100.0 * record.test.ece,
            record.h_py,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_train::spec::UpdateRule;

    #[test]
    fn gamma_zero_is_sam_and_the_grid_is_seed_major() {
        let settings = SweepSettings {
            shared: SharedSettings {
                seeds: vec![3, 4],
                ..SharedSettings::default()
            },
            rhos: vec![0.05, 0.1],
            gammas: vec![0.0, 1.0],
            policy: SamPolicy::Every,
        };
        settings.validate().unwrap();
        assert_eq!(
            settings.run_spec(0.05, 0.0, 3).unwrap().optim.rule.family(),
            OptimizerFamily::Sam
        );
        let csam = settings.run_spec(0.1, 1.0, 4).unwrap();
        assert!(matches!(
            csam.optim.rule,
            UpdateRule::Csam {
                rho: 0.1,
                gamma: 1.0,
                ..
            }
        ));
        assert_eq!(csam.seed, 4);
        let looksam = SweepSettings {
            policy: SamPolicy::named("looksam").unwrap(),
            ..settings.clone()
        };
        assert_eq!(
            looksam.run_spec(0.1, 1.0, 4).unwrap().optim.policy,
            looksam.policy
        );
        let grid = settings.grid();
        assert_eq!(grid.len(), 8);
        assert_eq!(grid[0], (3, 0.05, 0.0));
        assert_eq!(grid[3], (3, 0.1, 1.0));
        assert_eq!(grid[4], (4, 0.05, 0.0));
        assert_eq!(
            SweepDir::relative_run(0.05, 1.0, 2),
            "runs/rho0.05-gamma1-seed2"
        );
    }

    #[test]
    fn empty_repeated_or_invalid_values_are_refused() {
        let bad = [
            SweepSettings {
                rhos: vec![],
                ..SweepSettings::default()
            },
            SweepSettings {
                gammas: vec![1.0, 1.0],
                ..SweepSettings::default()
            },
            SweepSettings {
                rhos: vec![-0.1],
                ..SweepSettings::default()
            },
            SweepSettings {
                gammas: vec![-1.0],
                ..SweepSettings::default()
            },
        ];
        for settings in bad {
            assert!(settings.validate().is_err(), "{settings:?}");
        }
    }
}
