//! `csam compare`: train every (method, seed) pair with the same settings,
//! calibrate each run post hoc, aggregate over seeds and write the
//! comparison directory (see [`super`] for its files).
//!
//! The training itself is the loop's [`csam_train::train::run`], one run
//! directory per pair. A rerun with the same settings reuses finished runs
//! (nothing is retrained) and resumes an interrupted one from its checkpoint;
//! a directory that holds a different comparison, or anything else, is
//! refused.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::method::Method;
use super::method_settings::MethodSettings;
use super::posthoc::calibrate_run;
use super::report;
use super::results::{aggregate, csv, CompareResults, RunRecord, SCHEMA};
use super::runs::{self, run_all, Experiment, PlannedRun};
use super::settings::{invalid, repeated, write_json, ExperimentDir, SharedSettings};
use super::table;
use csam_data::{self as data, DatasetSpec};
use csam_train::spec::{OptimizerFamily, RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::rundir::RunDir;
use csam_train::train::{ExperimentObserver, RunSummary, TrainError};

type Result<T> = std::result::Result<T, TrainError>;

/// The fraction of the training part held out for validation when no
/// validation size is given.
pub const DEFAULT_VAL_FRACTION: f64 = 0.2;

/// What identifies a comparison: the runs it trains and their shared
/// settings. Every run uses the same lr and weight decay (docs/conventions.md, "Experiment protocol":
/// tuned on SGD, reused for the SAM family). Saved as `compare.json`, the
/// shared keys at the top level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareSettings {
    /// Data, model, epochs, seeds and the shared hyperparameters.
    #[serde(flatten)]
    pub shared: SharedSettings,
    /// The methods, in table order.
    pub methods: Vec<Method>,
    /// Perturbation radius of the SAM family's methods without their own.
    pub rho: f64,
    /// CSAM's gamma, for the methods without their own.
    pub gamma: f64,
    /// Each method's own settings (loss and update-rule keys), layered over
    /// the shared ones; left out of `compare.json` when none.
    #[serde(default, skip_serializing_if = "MethodSettings::is_empty")]
    pub method_settings: MethodSettings,
}

impl Default for CompareSettings {
    /// The default comparison of `csam compare`: [`SharedSettings`]'
    /// defaults, SGD, SAM and CSAM, rho 0.05 and gamma 1 from the paper
    /// (docs/conventions.md, "Experiment protocol").
    fn default() -> Self {
        CompareSettings {
            shared: SharedSettings::default(),
            methods: vec![
                Method::cross_entropy(OptimizerFamily::Sgd),
                Method::cross_entropy(OptimizerFamily::Sam),
                Method::cross_entropy(OptimizerFamily::Csam),
            ],
            rho: 0.05,
            gamma: 1.0,
            method_settings: MethodSettings::default(),
        }
    }
}

impl CompareSettings {
    /// The spec of the run of `method` with `seed`.
    pub fn run_spec(&self, method: Method, seed: u64) -> Result<RunSpec> {
        let mut spec = self
            .shared
            .run_spec(method.rule, self.rho, self.gamma, seed)?;
        method.objective().apply(&mut spec);
        // The theory diagnostics are defined on unmixed batches.
        spec.track_theory &= spec.mixing.is_none();
        self.method_settings.apply(method, spec)
    }

    /// Refuses an empty or repeated method or seed list and any setting a
    /// run would refuse, names (data, model) included, so that a comparison
    /// is recorded only once its settings are valid.
    pub fn validate(&self) -> Result<()> {
        if self.methods.is_empty() {
            return Err(invalid(
                "methods",
                String::new(),
                "name at least one method",
            ));
        }
        if let Some(m) = repeated(&self.methods) {
            return Err(invalid(
                "methods",
                m.to_string(),
                "a method is listed twice",
            ));
        }
        self.shared.validate()?;
        for &method in &self.methods {
            self.run_spec(method, self.shared.seeds[0])?.validate()?;
        }
        Ok(())
    }

    /// The keys in which `self` and `other` differ.
    pub fn differences(&self, other: &CompareSettings) -> Vec<String> {
        super::settings::differences(self, other)
    }
}

/// [`DEFAULT_VAL_FRACTION`] of the training part of `data` (rounded down, at
/// least 1): the validation size when none is given.
pub fn default_val_size(data: &str) -> Result<usize> {
    let spec: DatasetSpec = data.parse()?;
    let source = data::load(&spec)?;
    let n_train = source.train.map(|t| t.n).ok_or_else(|| {
        TrainError::Invalid(format!(
            "{data} has no training part; it cannot be trained on"
        ))
    })?;
    Ok(((n_train as f64 * DEFAULT_VAL_FRACTION) as usize).max(1))
}

/// The default directory of an experiment: `runs/<kind>-<data>-<model>`,
/// with the data spec made file-name safe.
pub fn default_out(kind: &str, shared: &SharedSettings) -> PathBuf {
    let data = crate::eval::report_name(&shared.data);
    PathBuf::from("runs").join(format!("{kind}-{data}-{}", shared.model))
}

/// What `csam compare` asks for.
#[derive(Debug, Clone)]
pub struct CompareRequest {
    /// The comparison.
    pub settings: CompareSettings,
    /// The comparison directory.
    pub out: PathBuf,
    /// Device and threads of every run; not part of the comparison's identity.
    pub runtime: Runtime,
    /// When the invocation started: the wall time in `results.json` counts
    /// from here, so that runs trained ahead (by parallel processes) count.
    pub started: Instant,
}

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

    /// `compare.json`.
    pub fn settings(&self) -> PathBuf {
        self.dir.settings()
    }

    /// `runs/<method>-seed<seed>`, relative to the comparison directory.
    pub fn relative_run(method: Method, seed: u64) -> String {
        format!("runs/{method}-seed{seed}")
    }

    /// The run directory of `method` with `seed`.
    pub fn run(&self, method: Method, seed: u64) -> PathBuf {
        self.dir.join(Self::relative_run(method, seed))
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

    /// `plots/`.
    pub fn plots(&self) -> PathBuf {
        self.dir.join("plots")
    }

    /// `report.html`.
    pub fn report(&self) -> PathBuf {
        self.dir.join("report.html")
    }

    /// Creates the directory and `compare.json`, or accepts an existing one
    /// whose `compare.json` holds the same settings. Refuses a different
    /// comparison and a non-empty directory without `compare.json`.
    pub fn open(&self, settings: &CompareSettings) -> Result<()> {
        self.dir.open(settings)
    }
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct CompareOutcome {
    /// What `results.json` holds.
    pub results: CompareResults,
    /// The Markdown table (`table.md`).
    pub table: String,
}

impl CompareRequest {
    /// Checks the settings and the runtime and opens the directory (nothing
    /// is created for settings a run would refuse): the comparison, ready
    /// to run.
    fn open(&self) -> Result<Comparison<'_>> {
        self.settings.validate()?;
        self.runtime.validate()?;
        let dir = CompareDir::new(&self.out);
        dir.open(&self.settings)?;
        Ok(Comparison {
            settings: &self.settings,
            dir,
        })
    }
}

/// Checks the settings, opens the comparison directory (as [`run`] does) and
/// returns the runs that have not finished (see [`runs::unfinished`]).
/// Refuses a runtime no run could use before anything is trained.
pub fn plan(request: &CompareRequest) -> Result<Vec<PlannedRun>> {
    runs::unfinished(&request.open()?)
}

/// Trains (or reuses) every run, calibrates it, aggregates, writes
/// `results.json`, `results.csv` and `table.md`, then the figures and
/// `report.html` (see [`report::compare`]). Prints one line when a run
/// starts and one when it finishes, with elapsed times.
pub fn run<O: ExperimentObserver>(
    request: &CompareRequest,
    observer: &mut O,
) -> Result<CompareOutcome> {
    let started = request.started;
    let settings = &request.settings;
    let comparison = request.open()?;
    let runs = run_all(&comparison, &request.runtime, observer)?;
    let dir = &comparison.dir;
    let aggregates = aggregate(&runs, &settings.methods);
    let table = table::markdown(&table::caption(settings), &aggregates);
    let results = CompareResults {
        schema: SCHEMA.to_string(),
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        settings: settings.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        runs,
        aggregates,
    };
    write_json(&dir.results_json(), &results)?;
    write_atomic(&dir.results_csv(), csv(&results.runs).as_bytes())?;
    write_atomic(&dir.table(), table.as_bytes())?;
    report::compare::write(dir, &results)?;
    Ok(CompareOutcome { results, table })
}

/// A comparison as the runs of an [`Experiment`]: each method at each seed,
/// seed-major.
struct Comparison<'a> {
    settings: &'a CompareSettings,
    dir: CompareDir,
}

impl Experiment for Comparison<'_> {
    type Run = (u64, Method);
    type Record = RunRecord;

    fn runs(&self) -> Vec<Self::Run> {
        let methods = &self.settings.methods;
        self.settings
            .shared
            .seeds
            .iter()
            .flat_map(|&seed| methods.iter().map(move |&method| (seed, method)))
            .collect()
    }

    fn label(&self, (seed, method): Self::Run) -> String {
        format!("{method} seed {seed}")
    }

    fn spec(&self, (seed, method): Self::Run) -> Result<RunSpec> {
        self.settings.run_spec(method, seed)
    }

    fn dir(&self, (seed, method): Self::Run) -> PathBuf {
        self.dir.run(method, seed)
    }

    /// The run's summary plus post-hoc calibration.
    fn record(&self, (seed, method): Self::Run, summary: RunSummary) -> Result<RunRecord> {
        let options = &self.settings.shared.metrics;
        let calibration = calibrate_run(&RunDir::new(self.dir((seed, method))), options)?;
        let mut test = summary.test;
        test.tce = Some(calibration.posthoc.temperature.ece);
        Ok(RunRecord {
            method,
            seed,
            run_dir: CompareDir::relative_run(method, seed),
            best_epoch: summary.best_epoch,
            train_wall_time_s: summary.wall_time_s,
            temperature: calibration.temperature,
            val: summary.val,
            test,
            posthoc: calibration.posthoc,
        })
    }

    fn describe(record: &RunRecord) -> String {
        format!(
            "test accuracy {:.2}%, ECE {:.2}%, TCE {:.2}%",
            100.0 * record.test.accuracy,
            100.0 * record.test.ece,
            100.0 * record.posthoc.temperature.ece,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_train::spec::OptimizerFamily;
    use csam_train::spec::UpdateRule;

    #[test]
    fn every_run_shares_lr_and_weight_decay() {
        let settings = CompareSettings {
            methods: vec![
                Method::cross_entropy(OptimizerFamily::Sgd),
                Method::cross_entropy(OptimizerFamily::Csam),
            ],
            ..CompareSettings::default()
        };
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["lr"], 0.05, "shared keys at the top level: {json}");
        let sgd = settings
            .run_spec(Method::cross_entropy(OptimizerFamily::Sgd), 0)
            .unwrap();
        let csam = settings
            .run_spec(Method::cross_entropy(OptimizerFamily::Csam), 2)
            .unwrap();
        assert_eq!(
            (sgd.optim.lr, sgd.optim.weight_decay),
            (csam.optim.lr, csam.optim.weight_decay)
        );
        assert_eq!(sgd.optim.rule, UpdateRule::Sgd);
        assert!(matches!(
            csam.optim.rule,
            UpdateRule::Csam {
                rho: 0.05,
                gamma: 1.0,
                detach: false,
                m: None,
                every: 1
            }
        ));
        assert_eq!(csam.seed, 2);
        settings.validate().unwrap();
        let tracked = CompareSettings {
            shared: SharedSettings {
                track_theory: true,
                ..settings.shared.clone()
            },
            ..settings
        };
        assert!(
            !tracked
                .run_spec(Method::cross_entropy(OptimizerFamily::Sgd), 0)
                .unwrap()
                .track_theory
        );
        assert!(
            tracked
                .run_spec(Method::cross_entropy(OptimizerFamily::Csam), 0)
                .unwrap()
                .track_theory
        );
        tracked.validate().unwrap();
    }

    #[test]
    fn repeated_or_missing_methods_and_seeds_and_unknown_names_are_refused() {
        let bad = [
            CompareSettings {
                methods: vec![],
                ..CompareSettings::default()
            },
            CompareSettings {
                methods: vec![
                    Method::cross_entropy(OptimizerFamily::Sam),
                    Method::cross_entropy(OptimizerFamily::Sam),
                ],
                ..CompareSettings::default()
            },
            CompareSettings {
                shared: SharedSettings {
                    seeds: vec![1, 2, 1],
                    ..SharedSettings::default()
                },
                ..CompareSettings::default()
            },
            CompareSettings {
                shared: SharedSettings {
                    lr: 0.0,
                    ..SharedSettings::default()
                },
                ..CompareSettings::default()
            },
            CompareSettings {
                shared: SharedSettings {
                    model: "mpl".into(),
                    ..SharedSettings::default()
                },
                ..CompareSettings::default()
            },
            CompareSettings {
                shared: SharedSettings {
                    data: "nonsense".into(),
                    ..SharedSettings::default()
                },
                ..CompareSettings::default()
            },
        ];
        for settings in bad {
            assert!(settings.validate().is_err(), "{settings:?}");
        }
    }

    #[test]
    fn differences_name_the_changed_keys() {
        let a = CompareSettings::default();
        let b = CompareSettings {
            gamma: 2.0,
            shared: SharedSettings {
                epochs: 9,
                ..a.shared.clone()
            },
            ..a.clone()
        };
        assert!(a.differences(&a).is_empty());
        let mut changed = a.differences(&b);
        changed.sort();
        assert_eq!(changed, vec!["epochs", "gamma"]);
    }

    #[test]
    fn directory_of_another_comparison_or_foreign_files_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = CompareDir::new(root.path().join("cmp"));
        let settings = CompareSettings::default();
        dir.open(&settings).unwrap();
        dir.open(&settings).unwrap();
        // A run started: the settings are the comparison's from now on.
        std::fs::create_dir_all(dir.run(Method::cross_entropy(OptimizerFamily::Sgd), 0)).unwrap();
        let other = CompareSettings {
            gamma: 2.0,
            ..settings
        };
        let err = dir.open(&other).unwrap_err().to_string();
        assert!(
            err.contains("different comparison") && err.contains("gamma"),
            "{err}"
        );

        std::fs::write(root.path().join("notes.txt"), "mine").unwrap();
        let err = CompareDir::new(root.path())
            .open(&other)
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds no comparison"), "{err}");
    }

    #[test]
    fn default_out_is_file_safe() {
        let settings = SharedSettings {
            data: "idx:/data/fm".into(),
            model: "mlp".into(),
            ..SharedSettings::default()
        };
        assert_eq!(
            default_out("compare", &settings),
            PathBuf::from("runs/compare-idx--data-fm-mlp")
        );
    }
}
