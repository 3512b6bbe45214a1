//! `csam sweep`: CSAM over a grid of perturbation radii rho and gammas (the
//! paper's rho x gamma table, its rho figure and its gamma figure; Appendix
//! "Effects of perturbation radius rho and coefficient gamma"), every cell
//! over the same seeds, each run the sweep's base run
//! ([`crate::experiment::base`]) with its cell's update rule, as in `csam
//! compare`.
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

pub mod dir;
pub mod results;
pub mod settings;

use std::path::PathBuf;
use std::time::Instant;

use super::diverged::DivergedRun;
use super::report;
use super::runs::{self, run_all, Experiment, PlannedRun};
use super::settings::write_json;
use csam_train::spec::{RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::lock::ExperimentUse;
use csam_train::train::{ExperimentObserver, RunSummary, Silent};
pub use dir::SweepDir;
use results::{cells, cells_csv, markdown, runs_csv, SweepRecord, SweepResults, SweepRun, SCHEMA};
pub use settings::SweepSettings;

use crate::error::Result;

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
    fn open<O: ExperimentObserver>(&self, observer: &mut O) -> Result<Sweep<'_>> {
        for warning in self.settings.validate()? {
            observer.warning(&warning);
        }
        self.runtime.validate()?;
        let dir = SweepDir::new(&self.out);
        let hold = dir.open(&self.settings)?;
        Ok(Sweep {
            settings: &self.settings,
            dir,
            _hold: hold,
        })
    }
}

/// Checks the settings, opens the sweep directory (as [`run`] does) and
/// returns the runs that have not finished (see [`runs::unfinished`]).
/// Refuses a runtime no run could use before anything is trained.
pub fn plan(request: &SweepRequest) -> Result<Vec<PlannedRun>> {
    runs::unfinished(&request.open(&mut Silent)?)
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
    let sweep = request.open(observer)?;
    let outcomes = run_all(&sweep, &request.runtime, started, observer)?;
    let diverged: Vec<DivergedRun<SweepRun>> = outcomes
        .diverged
        .into_iter()
        .map(|((seed, rho, gamma), divergence)| DivergedRun {
            run: SweepRun { rho, gamma, seed },
            run_dir: SweepDir::relative_run(rho, gamma, seed),
            divergence,
        })
        .collect();
    let runs = outcomes.finished;
    let dir = &sweep.dir;
    let cells = cells(settings, &runs, &diverged);
    let results = SweepResults {
        schema: SCHEMA.to_string(),
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        settings: settings.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        runs,
        diverged,
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
    /// The experiment's hold on its directory, kept while it runs.
    _hold: ExperimentUse,
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
        Ok(self.settings.run_spec(rho, gamma, seed))
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
    use csam_nn::optim::SamPolicy;
    use csam_train::spec::OptimizerFamily;
    use csam_train::spec::UpdateRule;

    #[test]
    fn gamma_zero_is_sam_and_the_grid_is_seed_major() {
        let settings = SweepSettings {
            seeds: vec![3, 4],
            rhos: vec![0.05, 0.1],
            gammas: vec![0.0, 1.0],
            ..SweepSettings::default()
        };
        settings.validate().unwrap();
        assert_eq!(
            settings.run_spec(0.05, 0.0, 3).optim.rule.family(),
            OptimizerFamily::Sam
        );
        let csam = settings.run_spec(0.1, 1.0, 4);
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
        assert_eq!(looksam.run_spec(0.1, 1.0, 4).optim.policy, looksam.policy);
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
    fn an_unusual_gamma_is_warned_once_for_all_its_runs() {
        let usual = SweepSettings {
            rhos: vec![0.05, 0.1],
            gammas: vec![0.0, 2.0],
            ..SweepSettings::default()
        };
        assert_eq!(usual.validate().unwrap(), Vec::new());
        let unusual = SweepSettings {
            gammas: vec![1.0, 3.0],
            ..usual
        };
        let warnings = unusual.validate().unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].to_string().contains("gamma = 3"),
            "{warnings:?}"
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
