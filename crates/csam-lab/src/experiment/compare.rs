//! `csam compare`: train every (method, seed) pair with the same settings,
//! calibrate each run post hoc, aggregate over seeds and write the
//! comparison directory (see [`super`] for its files).
//!
//! The training itself is the loop's [`csam_train::train::run`], one run
//! directory per pair. A rerun with the same settings reuses finished runs
//! (nothing is retrained) and resumes an interrupted one from its checkpoint;
//! a directory that holds a different comparison, or anything else, is
//! refused.

use std::path::{Path, PathBuf};
use std::time::Instant;

use csam_calib::metrics::summary::{summarize, MetricOptions, MetricSummary};
use csam_nn::device::parse_device;
use csam_train::train::lock::ExperimentUse;
use tch::Device;

use super::combined::Combination;
use super::compare_dir::CompareDir;
use super::compare_settings::{CompareSettings, ShiftRequest};
use super::diverged::DivergedRun;
use super::method::{Method, Prediction, Training};
use super::posthoc::{calibrate_run, split_probabilities};
use super::report;
use super::results::{
    aggregate, csv, CompareResults, MethodSeed, Metric, RunRecord, ShiftRecord, SCHEMA,
};
use super::runs::{self, run_all, Experiment, Outcomes, PlannedRun};
use super::settings::{invalid, write_json};
use super::table;
use crate::shift::cifar_c::open_corruption_set;
use crate::shift::report::{evaluate_corruptions, ood_report, ShiftReference};
use csam_data::{self as data, DatasetSpec};
use csam_train::spec::{RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::metrics_log::MetricsLog;
use csam_train::train::rundir::{RunDir, Split};
use csam_train::train::{ExperimentObserver, RunSummary, Silent, TrainError};

use crate::error::Result;

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
    /// What to evaluate under shift; not part of the comparison's identity
    /// (a rerun may add it without retraining).
    pub shift: ShiftRequest,
}

/// A [`ShiftRequest`] with its data opened, before anything trains.
struct ShiftData<'a> {
    request: &'a ShiftRequest,
    /// The OOD set's name and test split.
    ood: Option<(&'a str, data::Dataset)>,
}

impl<'a> ShiftData<'a> {
    /// Checks the corruption directory and loads the OOD test split, so that
    /// a bad path or spec is refused before any run trains.
    fn open(request: &'a ShiftRequest) -> Result<ShiftData<'a>> {
        if let Some(dir) = &request.corruptions {
            open_corruption_set(dir)?;
        }
        let ood = match request.ood.as_deref() {
            Some(text) => {
                let spec: DatasetSpec = text.parse().map_err(|e: data::DataError| {
                    invalid("ood", text.to_string(), &e.to_string())
                })?;
                Some((text, data::load(&spec)?.test))
            }
            None => None,
        };
        Ok(ShiftData { request, ood })
    }

    /// The metrics of `combination` on the corrupted data and against the
    /// OOD set, binned as `options` say.
    fn evaluate(&self, combination: &Combination, options: &MetricOptions) -> Result<ShiftRecord> {
        let predictor = combination.predictor();
        let n_classes = combination.test().n_classes;
        let corruptions = self
            .request
            .corruptions
            .as_deref()
            .map(|dir| {
                let reference = ShiftReference::Labels { n_classes };
                evaluate_corruptions(predictor, dir, &reference, options)
            })
            .transpose()?;
        let ood = match &self.ood {
            Some((name, ood_set)) => {
                let inside = predictor.probabilities(combination.test())?;
                let outside = predictor.probabilities(ood_set)?;
                Some(ood_report(name, inside.view(), outside.view())?)
            }
            None => None,
        };
        Ok(ShiftRecord { corruptions, ood })
    }
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct CompareOutcome {
    /// What `results.json` holds.
    pub results: CompareResults,
    /// The Markdown table (`table.md`).
    pub table: String,
    /// The training cost per method (`cost.md`): unlike the table, wall
    /// times differ from one invocation to the next.
    pub cost_table: String,
    /// The shift table (`shift.md`), when the request asked for shift data.
    pub shift_table: Option<String>,
}

impl CompareRequest {
    /// Checks the settings and the runtime and opens the directory (nothing
    /// is created for settings a run would refuse): the comparison, ready
    /// to run.
    fn open<O: ExperimentObserver>(&self, observer: &mut O) -> Result<Comparison<'_>> {
        for warning in self.settings.validate()? {
            observer.warning(&warning);
        }
        self.runtime.validate()?;
        let shift = ShiftData::open(&self.shift)?;
        let dir = CompareDir::new(&self.out);
        let hold = dir.open(&self.settings)?;
        Ok(Comparison {
            settings: &self.settings,
            dir,
            _hold: hold,
            shift,
        })
    }
}

/// Checks the settings, opens the comparison directory (as [`run`] does) and
/// returns the runs that have not finished (see [`runs::unfinished`]).
/// Refuses a runtime no run could use before anything is trained.
pub fn plan(request: &CompareRequest) -> Result<Vec<PlannedRun>> {
    runs::unfinished(&request.open(&mut Silent)?)
}

/// Trains (or reuses) every run, combines the members of ensembles and
/// MC-Dropout ([`super::combined`]), calibrates each method's predictions,
/// aggregates, writes `results.json`, `results.csv` and `table.md`, then the
/// figures and `report.html` (see [`report::compare`]). Prints one line when
/// a run starts and one when it finishes, with elapsed times.
pub fn run<O: ExperimentObserver>(
    request: &CompareRequest,
    observer: &mut O,
) -> Result<CompareOutcome> {
    let started = request.started;
    let settings = &request.settings;
    let comparison = request.open(observer)?;
    let device = parse_device(request.runtime.device.as_deref())
        .map_err(|e| TrainError::Device(e.text, e.reason))?;
    let outcomes = run_all(&comparison, &request.runtime, started, observer)?;
    let (runs, diverged) = comparison.method_records(&outcomes, device)?;
    let dir = &comparison.dir;
    let aggregates = aggregate(&runs, &diverged, &settings.methods);
    let table = table::markdown(&table::caption(settings), &aggregates);
    let cost_table = table::cost_markdown(&runs, &settings.methods);
    let shift_table = (!request.shift.is_empty()).then(|| {
        let caption = table::shift_caption(settings, &request.shift);
        let severities = table::severity_markdown(&runs, &settings.methods);
        let table = table::markdown_of(&caption, &aggregates, Metric::SHIFT);
        match severities.is_empty() {
            true => table,
            false => format!("{table}\n{severities}"),
        }
    });
    let results = CompareResults {
        schema: SCHEMA.to_string(),
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        settings: settings.clone(),
        wall_time_s: started.elapsed().as_secs_f64(),
        runs,
        diverged,
        aggregates,
    };
    write_json(&dir.results_json(), &results)?;
    write_atomic(&dir.results_csv(), csv(&results.runs).as_bytes())?;
    write_atomic(&dir.table(), table.as_bytes())?;
    write_atomic(&dir.cost_table(), cost_table.as_bytes())?;
    if let Some(shift_table) = &shift_table {
        write_atomic(&dir.shift_table(), shift_table.as_bytes())?;
    }
    report::compare::write(dir, &results)?;
    Ok(CompareOutcome {
        results,
        table,
        cost_table,
        shift_table,
    })
}

/// A comparison as the runs of an [`Experiment`]: every member of every
/// method at each seed, seed-major, each run once however many methods
/// share it.
struct Comparison<'a> {
    settings: &'a CompareSettings,
    dir: CompareDir,
    /// The experiment's hold on its directory, kept while it runs.
    _hold: ExperimentUse,
    /// What the methods are evaluated on besides the test split.
    shift: ShiftData<'a>,
}

/// One training run of a comparison: member `member` of replicate `seed` of
/// what `method` trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemberRun {
    method: Method,
    seed: u64,
    member: usize,
}

impl MemberRun {
    /// What identifies the run: methods that train alike share it.
    fn key(&self) -> (Training, u64, usize) {
        (self.method.training(), self.seed, self.member)
    }
}

/// A finished training run.
struct MemberRecord {
    run: MemberRun,
    summary: RunSummary,
    /// The mean over epochs of the share of steps with a second pass; None
    /// when an epoch's log lacks it (written before it was logged).
    second_pass: Option<f64>,
}

impl Comparison<'_> {
    /// One record per method and seed, seed-major, from the finished runs;
    /// a method at a seed one of whose member runs diverged is listed apart,
    /// with the first such member's record.
    fn method_records(
        &self,
        outcomes: &Outcomes<MemberRun, MemberRecord>,
        device: Device,
    ) -> Result<(Vec<RunRecord>, Vec<DivergedRun<MethodSeed>>)> {
        let (mut records, mut diverged) = (Vec::new(), Vec::new());
        for &seed in &self.settings.seeds {
            for &method in &self.settings.methods {
                let keys: Vec<_> = (0..method.prediction.members())
                    .map(|member| (method.training(), seed, member))
                    .collect();
                let failed = outcomes
                    .diverged
                    .iter()
                    .find(|(run, _)| keys.contains(&run.key()));
                if let Some((run, divergence)) = failed {
                    diverged.push(DivergedRun {
                        run: MethodSeed { method, seed },
                        run_dir: CompareDir::relative_run(run.method.training(), seed, run.member),
                        divergence: divergence.clone(),
                    });
                    continue;
                }
                let of_method: Vec<&MemberRecord> = keys
                    .iter()
                    .map(|key| {
                        // Invariant: run_all trained every member that did not diverge.
                        outcomes
                            .finished
                            .iter()
                            .find(|record| record.run.key() == *key)
                            .expect("every member run has a record")
                    })
                    .collect();
                records.push(self.method_record((method, seed), &of_method, device)?);
            }
        }
        Ok((records, diverged))
    }

    /// The record of `method` at `seed` from its member runs: the run's own
    /// predictions for one network, the combined ones otherwise; calibrated
    /// post hoc on the validation split either way, and evaluated under
    /// shift when the request asks for it.
    fn method_record(
        &self,
        (method, seed): (Method, u64),
        members: &[&MemberRecord],
        device: Device,
    ) -> Result<RunRecord> {
        let shift = &self.shift;
        let options = &self.settings.base.metrics;
        let train_wall_time_s = members.iter().map(|m| m.summary.wall_time_s).sum();
        let second_pass = mean_of(members.iter().map(|m| m.second_pass));
        let dirs: Vec<PathBuf> = members.iter().map(|m| self.dir(m.run)).collect();
        let dirs: Vec<&Path> = dirs.iter().map(PathBuf::as_path).collect();
        let open = || Combination::open(&dirs, method.prediction, seed, device);
        let mut combination = None;
        let (run_dir, best_epoch, val, test) = match method.prediction {
            Prediction::Single => {
                let summary = &members[0].summary;
                let relative = CompareDir::relative_run(method.training(), seed, 0);
                (
                    relative,
                    Some(summary.best_epoch),
                    summary.val,
                    summary.test,
                )
            }
            Prediction::Ensemble(_) | Prediction::McDropout(_) => {
                let relative = CompareDir::relative_predictions(method, seed);
                let out = RunDir::new(self.dir.join(&relative));
                combination.insert(open()?).write(&out)?;
                let summary_of = |split| -> Result<MetricSummary> {
                    let (probabilities, labels) = split_probabilities(&out, split)?;
                    Ok(summarize(probabilities.view(), &labels, options)?)
                };
                (
                    relative,
                    None,
                    summary_of(Split::Val)?,
                    summary_of(Split::Test)?,
                )
            }
        };
        let calibration = calibrate_run(&RunDir::new(self.dir.join(&run_dir)), options)?;
        let mut test = test;
        test.tce = Some(calibration.posthoc.temperature.ece);
        let shift = match shift.request.is_empty() {
            true => None,
            false => Some(shift.evaluate(&combination.map_or_else(open, Ok)?, options)?),
        };
        Ok(RunRecord {
            method,
            seed,
            run_dir,
            best_epoch,
            train_wall_time_s,
            second_pass,
            temperature: calibration.temperature,
            val,
            test,
            posthoc: calibration.posthoc,
            shift,
        })
    }
}

impl Experiment for Comparison<'_> {
    type Run = MemberRun;
    type Record = MemberRecord;

    fn runs(&self) -> Vec<MemberRun> {
        let mut runs: Vec<MemberRun> = Vec::new();
        for &seed in &self.settings.seeds {
            for &method in &self.settings.methods {
                for member in 0..method.prediction.members() {
                    let run = MemberRun {
                        method,
                        seed,
                        member,
                    };
                    if runs.iter().all(|other| other.key() != run.key()) {
                        runs.push(run);
                    }
                }
            }
        }
        runs
    }

    fn label(&self, run: MemberRun) -> String {
        let training = run.method.training();
        match run.member {
            0 => format!("{training} seed {}", run.seed),
            j => format!("{training} seed {} member {j}", run.seed),
        }
    }

    fn spec(&self, run: MemberRun) -> Result<RunSpec> {
        self.settings.run_spec(run.method, run.seed, run.member)
    }

    fn dir(&self, run: MemberRun) -> PathBuf {
        self.dir.run(run.method.training(), run.seed, run.member)
    }

    fn record(&self, run: MemberRun, summary: RunSummary) -> Result<MemberRecord> {
        let epochs = MetricsLog::new(RunDir::new(self.dir(run)).metrics_log()).read()?;
        let second_pass = mean_of(epochs.iter().map(|epoch| epoch.train.second_pass));
        Ok(MemberRecord {
            run,
            summary,
            second_pass,
        })
    }

    fn describe(record: &MemberRecord) -> String {
        let test = &record.summary.test;
        format!(
            "test accuracy {:.2}%, ECE {:.2}%",
            100.0 * test.accuracy,
            100.0 * test.ece,
        )
    }
}

/// The mean of `values`; None when there are none or any is None.
fn mean_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let values: Vec<f64> = values.collect::<Option<_>>()?;
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::base::{model_named, source_named};
    use crate::experiment::compare_settings::MEMBER_SEED_STRIDE;
    use crate::experiment::method::MC_DROPOUT_RATE;
    use crate::experiment::method_settings::MethodSettings;
    use crate::experiment::settings::read_json;
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
        assert_eq!(
            json["base"]["optim"]["lr"], 0.05,
            "the shared keys in the base: {json}"
        );
        let sgd = settings
            .run_spec(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0)
            .unwrap();
        let csam = settings
            .run_spec(Method::cross_entropy(OptimizerFamily::Csam), 2, 0)
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
        let mut tracked = settings;
        tracked.base.track_theory = true;
        assert!(
            !tracked
                .run_spec(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0)
                .unwrap()
                .track_theory
        );
        assert!(
            tracked
                .run_spec(Method::cross_entropy(OptimizerFamily::Csam), 0, 0)
                .unwrap()
                .track_theory
        );
        tracked.validate().unwrap();
    }

    fn methods(names: &str) -> Vec<Method> {
        names.split(',').map(|name| name.parse().unwrap()).collect()
    }

    #[test]
    fn ensembles_share_their_first_member_and_split_and_mc_dropout_trains_with_dropout() {
        let settings = CompareSettings {
            methods: methods("csam,csam-ensemble3,mc-dropout2,sgd,mc-dropout5"),
            seeds: vec![0, 7],
            ..CompareSettings::default()
        };
        settings.validate().unwrap();
        let no_shift = ShiftRequest::default();
        let scratch = tempfile::tempdir().unwrap();
        let comparison = Comparison {
            settings: &settings,
            dir: CompareDir::new("cmp"),
            shift: ShiftData::open(&no_shift).unwrap(),
            _hold: ExperimentUse::hold(scratch.path()).unwrap(),
        };
        let runs = comparison.runs();
        let dirs: Vec<String> = runs
            .iter()
            .map(|&run| comparison.dir(run).display().to_string())
            .collect();
        // Per seed: csam's run and the ensemble's two others, one run with
        // dropout for both MC-Dropout methods, SGD's.
        assert_eq!(
            &dirs[..5],
            [
                "cmp/runs/csam-seed0",
                "cmp/runs/csam-seed0-member1",
                "cmp/runs/csam-seed0-member2",
                "cmp/runs/sgd-dropout-seed0",
                "cmp/runs/sgd-seed0",
            ]
        );
        assert_eq!(runs.len(), 10);
        let ensemble = methods("csam-ensemble3")[0];
        let single = settings.run_spec(methods("csam")[0], 7, 0).unwrap();
        assert_eq!(settings.run_spec(ensemble, 7, 0).unwrap(), single);
        let member = settings.run_spec(ensemble, 7, 2).unwrap();
        assert_eq!(member.seed, 7 + 2 * MEMBER_SEED_STRIDE);
        assert_eq!(member.data.split_seed(member.seed), 7);
        assert_eq!(single.data.split_seed(single.seed), 7);
        assert_eq!(
            single.data.split_seed, None,
            "a single run's spec is unchanged"
        );
        let dropout = settings.run_spec(methods("mc-dropout2")[0], 0, 0).unwrap();
        assert_eq!(dropout.model.dropout, MC_DROPOUT_RATE);
        assert_eq!((single.model.dropout, dropout.seed), (0.0, 0));
    }

    #[test]
    fn methods_sharing_runs_must_share_settings_and_mc_dropout_needs_dropout() {
        let with_file = |names: &str, file: &str| CompareSettings {
            methods: methods(names),
            method_settings: MethodSettings::parse(file, "methods.toml").unwrap(),
            ..CompareSettings::default()
        };
        let clash = with_file("csam,csam-ensemble5", "[csam-ensemble5]\ngamma = 0.5\n");
        let error = clash.validate().unwrap_err().to_string();
        assert!(error.contains("runs/csam-seed0"), "{error}");
        with_file("csam-ensemble5", "[csam-ensemble5]\ngamma = 0.5\n")
            .validate()
            .unwrap();
        let no_dropout = with_file("mc-dropout5", "[mc-dropout5]\ndropout = 0.0\n");
        let error = no_dropout.validate().unwrap_err().to_string();
        assert!(error.contains("dropout must be above 0"), "{error}");
        let own_rate = with_file("mc-dropout5", "[mc-dropout5]\ndropout = 0.3\n");
        own_rate.validate().unwrap();
        let spec = own_rate.run_spec(methods("mc-dropout5")[0], 0, 0).unwrap();
        assert_eq!(spec.model.dropout, 0.3);
        let refused = MethodSettings::parse("[sgd]\ndropout = 0.3\n", "methods.toml");
        assert!(refused
            .unwrap_err()
            .to_string()
            .contains("MC-Dropout's dropout rate"));
    }

    #[test]
    fn repeated_or_missing_methods_and_seeds_and_unknown_names_are_refused() {
        let mut no_lr = CompareSettings::default();
        no_lr.base.optim.lr = 0.0;
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
                seeds: vec![1, 2, 1],
                ..CompareSettings::default()
            },
            no_lr,
        ];
        for settings in bad {
            assert!(settings.validate().is_err(), "{settings:?}");
        }
        // A name that does not parse never makes a base: it is refused
        // as the setting it names.
        let model = model_named("mpl").unwrap_err().to_string();
        assert!(model.contains("invalid model = \"mpl\""), "{model}");
        let data = source_named("nonsense").unwrap_err().to_string();
        assert!(data.contains("invalid data = \"nonsense\""), "{data}");
    }

    #[test]
    fn differences_name_the_changed_keys() {
        let a = CompareSettings::default();
        let mut b = CompareSettings {
            gamma: 2.0,
            ..a.clone()
        };
        b.base.epochs = 9;
        assert!(a.differences(&a).is_empty());
        let mut changed = a.differences(&b);
        changed.sort();
        assert_eq!(changed, vec!["base.epochs", "gamma"]);
    }

    #[test]
    fn directory_of_another_comparison_or_foreign_files_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = CompareDir::new(root.path().join("cmp"));
        let settings = CompareSettings::default();
        dir.open(&settings).unwrap();
        dir.open(&settings).unwrap();
        // A run started: the settings are the comparison's from now on.
        std::fs::create_dir_all(dir.run(
            Method::cross_entropy(OptimizerFamily::Sgd).training(),
            0,
            0,
        ))
        .unwrap();
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

    /// Two different comparisons started at once on one new directory: the
    /// second finds only the first's settings (no run started yet), which it
    /// would take for a failed attempt's and replace; the first's hold
    /// refuses that. Once released, they may be replaced.
    #[test]
    fn settings_another_comparison_holds_are_not_replaced() {
        let root = tempfile::tempdir().unwrap();
        let dir = CompareDir::new(root.path().join("cmp"));
        let settings = CompareSettings::default();
        let other = CompareSettings {
            gamma: 2.0,
            ..settings.clone()
        };
        let first = dir.open(&settings).unwrap();
        let err = dir.open(&other).unwrap_err().to_string();
        assert!(
            err.contains("which another csam process is running") && err.contains("gamma"),
            "{err}"
        );
        // The same settings share the directory.
        let _beside = dir.open(&settings).unwrap();
        drop((first, _beside));
        let _replaced = dir.open(&other).unwrap();
        let saved: CompareSettings = read_json(&dir.settings()).unwrap();
        assert!(saved.differences(&other).is_empty());
    }
}
