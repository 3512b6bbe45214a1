//! `csam grid`: the learning rate and weight decay tuned on the validation
//! split (paper §5.1; docs/conventions.md, "Experiment protocol": tuned on
//! SGD, then reused for every method). One method (SGD with cross entropy
//! unless asked otherwise) trains at every (lr, weight decay) pair and seed,
//! each run the grid's base run ([`crate::experiment::base`]) with the pair
//! over it, as `csam compare` builds its runs; the pair with the highest mean validation accuracy over seeds is
//! chosen ([`results::best`]). The test split is never read for the choice.
//!
//! A grid directory holds `grid.json` (the [`GridSettings`]: a rerun with the
//! same settings reuses finished runs and resumes an interrupted one, a
//! different grid is refused), `runs/lr<lr>-wd<wd>-seed<s>/` (one `csam
//! train` run directory each), `results.json` ([`results::GridResults`]) and
//! `table.md`.

pub mod dir;
mod keys;
pub mod results;
pub mod settings;

use std::path::PathBuf;
use std::time::Instant;

use super::diverged::DivergedRun;
use super::runs::{self, run_all, Experiment, PlannedRun};
use super::settings::write_json;
use csam_train::spec::{RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::lock::ExperimentUse;
use csam_train::train::{ExperimentObserver, RunSummary, Silent};
pub use dir::GridDir;
use results::{cells, markdown, GridRecord, GridResults, GridRun, SCHEMA};
pub use settings::GridSettings;
use settings::{short, GridPoint};

use crate::error::{LabError, Result};

/// What `csam grid` asks for.
#[derive(Debug, Clone)]
pub struct GridRequest {
    /// The grid.
    pub settings: GridSettings,
    /// The grid directory.
    pub out: PathBuf,
    /// Device and threads of every run; not part of the grid's identity.
    pub runtime: Runtime,
    /// When the invocation started: the wall time in `results.json` counts
    /// from here, so that runs trained ahead (by parallel processes) count.
    pub started: Instant,
}

impl GridRequest {
    /// Checks the settings and the runtime and opens the directory (nothing
    /// is created for settings a run would refuse): the grid, ready to run.
    fn open<O: ExperimentObserver>(&self, observer: &mut O) -> Result<Grid<'_>> {
        for warning in self.settings.validate()? {
            observer.warning(&warning);
        }
        self.runtime.validate()?;
        let dir = GridDir::new(&self.out);
        let hold = dir.open(&self.settings)?;
        Ok(Grid {
            settings: &self.settings,
            dir,
            _hold: hold,
        })
    }
}

/// Checks the settings, opens the grid directory (as [`run`] does) and
/// returns the runs that have not finished (see [`runs::unfinished`]).
pub fn plan(request: &GridRequest) -> Result<Vec<PlannedRun>> {
    runs::unfinished(&request.open(&mut Silent)?)
}

/// Trains (or reuses) every run of the grid, chooses the pair, then writes
/// `results.json` and `table.md`. Returns the results and the Markdown table.
pub fn run<O: ExperimentObserver>(
    request: &GridRequest,
    observer: &mut O,
) -> Result<(GridResults, String)> {
    let grid = request.open(observer)?;
    let settings = &request.settings;
    let outcomes = run_all(&grid, &request.runtime, request.started, observer)?;
    let diverged: Vec<DivergedRun<GridRun>> = outcomes
        .diverged
        .into_iter()
        .map(|((seed, point), divergence)| DivergedRun {
            run: GridRun { point, seed },
            run_dir: GridDir::relative_run(point, seed),
            divergence,
        })
        .collect();
    let runs = outcomes.finished;
    let cells = cells(settings, &runs, &diverged);
    let best = results::best(&cells)
        .map(|cell| cell.point)
        .ok_or(LabError::EmptyGrid)?;
    let results = GridResults {
        schema: SCHEMA.to_string(),
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        settings: settings.clone(),
        wall_time_s: request.started.elapsed().as_secs_f64(),
        runs,
        diverged,
        cells,
        best,
    };
    let table = markdown(&results);
    write_json(&grid.dir.results_json(), &results)?;
    write_atomic(&grid.dir.join("table.md"), table.as_bytes())?;
    Ok((results, table))
}

/// An opened grid as the runs of an [`Experiment`]: every pair at every
/// seed, seed-major.
struct Grid<'a> {
    settings: &'a GridSettings,
    dir: GridDir,
    /// The experiment's hold on its directory, kept while it runs.
    _hold: ExperimentUse,
}

impl Experiment for Grid<'_> {
    type Run = (u64, GridPoint);
    type Record = GridRecord;

    fn runs(&self) -> Vec<Self::Run> {
        self.settings.runs()
    }

    fn label(&self, (seed, point): Self::Run) -> String {
        format!(
            "lr {} wd {} seed {seed}",
            short(point.lr),
            short(point.weight_decay)
        )
    }

    fn spec(&self, (seed, point): Self::Run) -> Result<RunSpec> {
        self.settings.run_spec(point, seed)
    }

    fn dir(&self, (seed, point): Self::Run) -> PathBuf {
        self.dir.join(&GridDir::relative_run(point, seed))
    }

    fn record(&self, (seed, point): Self::Run, summary: RunSummary) -> Result<GridRecord> {
        let run_dir = GridDir::relative_run(point, seed);
        Ok(GridRecord::of_summary(run_dir, point, summary))
    }

    fn describe(record: &GridRecord) -> String {
        format!(
            "val accuracy {:.2}%, NLL {:.4}, ECE {:.2}%",
            100.0 * record.val.accuracy,
            record.val.nll,
            100.0 * record.val.ece,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::compare_settings::CompareSettings;
    use crate::experiment::settings::differences;
    use csam_train::spec::UpdateRule;

    fn small() -> GridSettings {
        GridSettings {
            seeds: vec![3, 4],
            lrs: vec![0.01, 0.1],
            weight_decays: vec![5e-4],
            ..GridSettings::default()
        }
    }

    #[test]
    fn runs_cover_every_pair_seed_major_with_its_lr_and_weight_decay() {
        let settings = small();
        settings.validate().unwrap();
        let point = |lr| GridPoint {
            lr,
            weight_decay: 5e-4,
        };
        assert_eq!(settings.pairs(), vec![point(0.01), point(0.1)]);
        let runs = settings.runs();
        assert_eq!(runs.len(), 4);
        assert_eq!((runs[1], runs[2]), ((3, point(0.1)), (4, point(0.01))));
        let spec = settings.run_spec(point(0.1), 4).unwrap();
        assert_eq!((spec.optim.lr, spec.optim.weight_decay), (0.1, 5e-4));
        assert_eq!((spec.seed, spec.optim.rule.clone()), (4, UpdateRule::Sgd));
        assert_eq!(
            GridDir::relative_run(point(0.05), 0),
            "runs/lr0.05-wd5e-4-seed0"
        );
        let csam = GridSettings {
            method: "csam".parse().unwrap(),
            ..settings
        };
        assert!(matches!(
            csam.run_spec(point(0.1), 4).unwrap().optim.rule,
            UpdateRule::Csam {
                rho: 0.05,
                gamma: 1.0,
                ..
            }
        ));
    }

    #[test]
    fn defaults_are_the_papers_grid_on_sgd_with_one_seed() {
        let settings = GridSettings::default();
        assert_eq!(settings.runs().len(), 9);
        assert_eq!(settings.seeds, vec![0]);
        assert_eq!(settings.method.to_string(), "sgd");
        assert_eq!(settings.base, CompareSettings::default().base);
    }

    #[test]
    fn empty_repeated_or_invalid_values_are_refused() {
        for (lrs, weight_decays, key) in [
            (vec![], vec![1e-4], "lrs"),
            (vec![0.1], vec![], "weight_decays"),
            (vec![0.1, 0.1], vec![1e-4], "lrs"),
            (vec![0.0], vec![1e-4], "lr"),
            (vec![-1.0], vec![1e-4], "lr"),
            (vec![f64::NAN], vec![1e-4], "lr"),
            (vec![0.1], vec![-1e-4], "weight_decay"),
        ] {
            let settings = GridSettings {
                lrs,
                weight_decays,
                ..GridSettings::default()
            };
            let error = settings.validate().unwrap_err().to_string();
            assert!(error.contains(&format!("{key} =")), "{settings:?}: {error}");
        }
    }

    #[test]
    fn grid_json_holds_the_lists_not_a_single_pair_and_reads_back() {
        let settings = small();
        let json = serde_json::to_value(&settings).unwrap();
        let optim = &json["base"]["optim"];
        assert!(optim.get("lr").is_none() && optim.get("weight_decay").is_none());
        assert!(json.get("lr").is_none() && json["base"].get("seed").is_none());
        assert_eq!(json["lrs"], serde_json::json!([0.01, 0.1]));
        assert_eq!(json["base"]["data"]["source"], "fashion-mnist-full");
        let back: GridSettings = serde_json::from_value(json).unwrap();
        assert!(differences(&settings, &back).is_empty());
        assert_eq!(back, settings);
    }

    #[test]
    fn directory_of_another_grid_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = GridDir::new(root.path().join("grid"));
        let settings = small();
        dir.open(&settings).unwrap();
        let first = settings.runs()[0];
        std::fs::create_dir_all(dir.join(&GridDir::relative_run(first.1, first.0))).unwrap();
        dir.open(&settings).unwrap();
        let other = GridSettings {
            lrs: vec![0.01],
            ..settings
        };
        let error = dir.open(&other).unwrap_err().to_string();
        assert!(
            error.contains("different grid") && error.contains("lrs"),
            "{error}"
        );
    }
}
