//! `csam compare`: train every (method, seed) pair with the same settings,
//! calibrate each run post hoc, aggregate over seeds and write the
//! comparison directory (see [`super`] for its files).
//!
//! The training itself is the loop's [`crate::train::run`], one run
//! directory per pair. A rerun with the same settings reuses finished runs
//! (nothing is retrained) and resumes an interrupted one from its checkpoint;
//! a directory that holds a different comparison, or anything else, is
//! refused.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::plots::write_method_plots;
use super::posthoc::{calibrate_run, RunCalibration};
use super::results::{aggregate, csv, CompareResults, RunRecord, SCHEMA};
use super::table;
use crate::data::{self, DatasetSpec};
use crate::train::atomic::write_atomic;
use crate::train::rundir::{RunDir, RunState};
use crate::train::{
    self, OptimizerFamily, RunOutcome, RunSummary, TrainConfig, TrainError, TrainRequest,
};

type Result<T> = std::result::Result<T, TrainError>;

/// The fraction of the training part held out for validation when no
/// validation size is given.
pub const DEFAULT_VAL_FRACTION: f64 = 0.2;

/// What identifies a comparison: the runs it trains and their shared
/// settings. Every run uses the same lr and weight decay (paper-notes §5:
/// tuned on SGD, reused for the SAM family); the other training settings are
/// [`TrainConfig`]'s defaults (SGD momentum 0.9, cosine decay to 0, best
/// checkpoint by validation NLL). Saved as `compare.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompareSettings {
    /// Data set spec.
    pub data: String,
    /// Model name.
    pub model: String,
    /// Epochs of every run.
    pub epochs: usize,
    /// The methods, in table order.
    pub methods: Vec<OptimizerFamily>,
    /// The seeds of every method.
    pub seeds: Vec<u64>,
    /// Training examples held out for validation (early stopping and
    /// post-hoc calibration).
    pub val_size: usize,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Peak learning rate (cosine decay).
    pub lr: f64,
    /// Weight decay of the base SGD.
    pub weight_decay: f64,
    /// Perturbation radius of SAM, ASAM and CSAM.
    pub rho: f64,
    /// CSAM's gamma.
    pub gamma: f64,
    /// Training augmentation (random crop with padding, flip where the data
    /// set allows it).
    pub augment: bool,
    /// Log the theory diagnostics (`theory.jsonl`) of the SAM and CSAM runs;
    /// the other methods have no perturbed point to track (see
    /// [`crate::theory`]). Absent in older `compare.json` files: off.
    #[serde(default)]
    pub track_theory: bool,
}

impl Default for CompareSettings {
    /// The default comparison of `csam compare`; lr and weight decay come
    /// from the SGD grid on the validation split recorded in
    /// `docs/compare-defaults.md`, rho 0.05 and gamma 1 from the paper
    /// (paper-notes §1), `val_size` is [`DEFAULT_VAL_FRACTION`] of the
    /// bundled Fashion-MNIST subset's 10,000 training images.
    fn default() -> Self {
        CompareSettings {
            data: "fashion-mnist".to_string(),
            model: "mlp".to_string(),
            epochs: 20,
            methods: vec![
                OptimizerFamily::Sgd,
                OptimizerFamily::Sam,
                OptimizerFamily::Csam,
            ],
            seeds: vec![0, 1, 2],
            val_size: 2000,
            batch_size: 128,
            lr: 0.05,
            weight_decay: 5e-4,
            rho: 0.05,
            gamma: 1.0,
            augment: false,
            track_theory: false,
        }
    }
}

impl CompareSettings {
    /// The training configuration of the run of `method` with `seed`.
    pub fn train_config(&self, method: OptimizerFamily, seed: u64) -> TrainConfig {
        TrainConfig {
            data: self.data.clone(),
            val_size: self.val_size,
            seed,
            model: self.model.clone(),
            epochs: self.epochs,
            batch_size: self.batch_size,
            lr: self.lr,
            weight_decay: self.weight_decay,
            optimizer: method,
            rho: self.rho,
            gamma: self.gamma,
            augment: self.augment,
            track_theory: self.track_theory
                && matches!(method, OptimizerFamily::Sam | OptimizerFamily::Csam),
            ..TrainConfig::default()
        }
    }

    /// Refuses an empty or repeated method or seed list and any setting a
    /// run would refuse.
    pub fn validate(&self) -> Result<()> {
        let invalid = |key: &'static str, value: String, reason: &str| {
            TrainError::Config(train::ConfigError::Invalid {
                key,
                value,
                reason: reason.to_string(),
            })
        };
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
        if self.seeds.is_empty() {
            return Err(invalid("seeds", String::new(), "name at least one seed"));
        }
        if let Some(s) = repeated(&self.seeds) {
            return Err(invalid("seeds", s.to_string(), "a seed is listed twice"));
        }
        for &method in &self.methods {
            self.train_config(method, self.seeds[0]).validate()?;
        }
        Ok(())
    }

    /// The keys in which `self` and `other` differ.
    pub fn differences(&self, other: &CompareSettings) -> Vec<String> {
        let (Ok(ours), Ok(theirs)) = (serde_json::to_value(self), serde_json::to_value(other))
        else {
            return vec!["(settings)".to_string()];
        };
        let (Some(ours), Some(theirs)) = (ours.as_object(), theirs.as_object()) else {
            return vec!["(settings)".to_string()];
        };
        ours.iter()
            .filter(|(key, value)| theirs.get(*key) != Some(*value))
            .map(|(key, _)| key.clone())
            .collect()
    }
}

fn repeated<T: PartialEq + Copy>(items: &[T]) -> Option<T> {
    items
        .iter()
        .enumerate()
        .find(|(i, item)| items[..*i].contains(item))
        .map(|(_, item)| *item)
}

/// [`DEFAULT_VAL_FRACTION`] of the training part of `data` (rounded down, at
/// least 1): the validation size when none is given.
pub fn default_val_size(data: &str) -> Result<usize> {
    let spec: DatasetSpec = data.parse().map_err(|e| TrainError::Data(format!("{e}")))?;
    let source = data::load(&spec).map_err(|e| TrainError::Data(e.to_string()))?;
    let n_train = source.train.map(|t| t.n).ok_or_else(|| {
        TrainError::Data(format!(
            "{data} has no training part; it cannot be trained on"
        ))
    })?;
    Ok(((n_train as f64 * DEFAULT_VAL_FRACTION) as usize).max(1))
}

/// The default comparison directory: `runs/compare-<data>-<model>`, with
/// the data spec made file-name safe.
pub fn default_out(settings: &CompareSettings) -> PathBuf {
    let data = train::eval::report_name(&settings.data);
    PathBuf::from("runs").join(format!("compare-{data}-{}", settings.model))
}

/// What `csam compare` asks for.
#[derive(Debug, Clone)]
pub struct CompareRequest {
    /// The comparison.
    pub settings: CompareSettings,
    /// The comparison directory.
    pub out: PathBuf,
    /// Device of every run (None: the default device); not part of the
    /// comparison's identity.
    pub device: Option<String>,
    /// CPU threads of libtorch (None: libtorch's default).
    pub threads: Option<usize>,
    /// Draw the loop's per-epoch progress bar.
    pub show_progress: bool,
}

/// The paths of a comparison directory.
#[derive(Debug, Clone)]
pub struct CompareDir {
    root: PathBuf,
}

impl CompareDir {
    /// The comparison directory at `root` (nothing is created).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        CompareDir { root: root.into() }
    }

    /// `compare.json`.
    pub fn settings(&self) -> PathBuf {
        self.root.join("compare.json")
    }

    /// `runs/<method>-seed<seed>`, relative to the comparison directory.
    pub fn relative_run(method: OptimizerFamily, seed: u64) -> String {
        format!("runs/{method}-seed{seed}")
    }

    /// The run directory of `method` with `seed`.
    pub fn run(&self, method: OptimizerFamily, seed: u64) -> PathBuf {
        self.root.join(Self::relative_run(method, seed))
    }

    /// `results.json`.
    pub fn results_json(&self) -> PathBuf {
        self.root.join("results.json")
    }

    /// `results.csv`.
    pub fn results_csv(&self) -> PathBuf {
        self.root.join("results.csv")
    }

    /// `table.md`.
    pub fn table(&self) -> PathBuf {
        self.root.join("table.md")
    }

    /// `plots/`.
    pub fn plots(&self) -> PathBuf {
        self.root.join("plots")
    }

    /// Creates the directory and `compare.json`, or accepts an existing one
    /// whose `compare.json` holds the same settings. Refuses a different
    /// comparison and a non-empty directory without `compare.json`.
    pub fn open(&self, settings: &CompareSettings) -> Result<()> {
        let path = self.settings();
        let shown = self.root.display();
        if path.exists() {
            let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
            let saved: CompareSettings =
                serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            let changed = settings.differences(&saved);
            return match changed.is_empty() {
                true => Ok(()),
                false => Err(TrainError::RunDir(format!(
                    "{shown} holds a different comparison (settings differ in: {}); refusing to \
                     overwrite it. Choose another --out, or delete the directory.",
                    changed.join(", ")
                ))),
            };
        }
        let occupied = std::fs::read_dir(&self.root)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(false);
        if occupied {
            return Err(TrainError::RunDir(format!(
                "{shown} is not empty and holds no comparison (no compare.json); refusing to \
                 write into it. Choose another --out."
            )));
        }
        std::fs::create_dir_all(&self.root)
            .map_err(TrainError::io("create comparison directory", &self.root))?;
        write_json(&path, settings)
    }
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| TrainError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    write_atomic(path, &json)
}

/// The outcome of [`run`].
#[derive(Debug, Clone)]
pub struct CompareOutcome {
    /// What `results.json` holds.
    pub results: CompareResults,
    /// The Markdown table (`table.md`).
    pub table: String,
}

/// Trains (or reuses) every run, calibrates it, draws the first seed's
/// figures, aggregates and writes `results.json`, `results.csv` and
/// `table.md`. Prints one line when a run starts and one when it finishes,
/// with elapsed times.
pub fn run(request: &CompareRequest) -> Result<CompareOutcome> {
    let started = Instant::now();
    let settings = &request.settings;
    settings.validate()?;
    let dir = CompareDir::new(&request.out);
    dir.open(settings)?;
    let pairs: Vec<(u64, OptimizerFamily)> = settings
        .seeds
        .iter()
        .flat_map(|&seed| settings.methods.iter().map(move |&method| (seed, method)))
        .collect();
    let mut runs = Vec::with_capacity(pairs.len());
    for (index, &(seed, method)) in pairs.iter().enumerate() {
        let label = format!("[{}/{}] {method} seed {seed}", index + 1, pairs.len());
        let run_started = Instant::now();
        let summary = train_or_reuse(request, &dir, method, seed, &label)?;
        let (record, calibration) = record_run(&dir, method, seed, summary)?;
        if seed == settings.seeds[0] {
            write_method_plots(
                &dir.plots(),
                method,
                seed,
                calibration.test_probabilities.view(),
                &calibration.test_labels,
            )?;
        }
        println!(
            "{label}: done in {:.1}s, {:.1}s since start (test accuracy {:.2}%, ECE {:.2}%, TCE {:.2}%)",
            run_started.elapsed().as_secs_f64(),
            started.elapsed().as_secs_f64(),
            100.0 * record.test.accuracy,
            100.0 * record.test.ece,
            100.0 * record.posthoc.temperature.ece,
        );
        runs.push(record);
    }
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
    Ok(CompareOutcome { results, table })
}

/// The summary of the run of `method` with `seed`: read back when the run
/// finished earlier (after checking its configuration), otherwise trained,
/// resuming from its checkpoint when it was interrupted.
fn train_or_reuse(
    request: &CompareRequest,
    dir: &CompareDir,
    method: OptimizerFamily,
    seed: u64,
    label: &str,
) -> Result<RunSummary> {
    let out = dir.run(method, seed);
    let run_dir = RunDir::new(&out);
    let config = TrainConfig {
        device: request.device.clone(),
        threads: request.threads,
        ..request.settings.train_config(method, seed)
    };
    let state = run_dir.state()?;
    if state == RunState::Finished {
        check_saved_config(&run_dir, &config)?;
        println!("{label}: reused finished run {}", out.display());
        return read_summary(&run_dir);
    }
    let verb = match state {
        RunState::Interrupted => "resuming",
        _ => "training",
    };
    println!("{label}: {verb} into {}", out.display());
    let request = TrainRequest {
        config,
        out: out.clone(),
        resume: true,
        show_progress: request.show_progress,
        stop_after_epoch: None,
    };
    match train::run(&request)? {
        RunOutcome::Finished(summary) => Ok(*summary),
        RunOutcome::Stopped { epoch } => Err(TrainError::RunDir(format!(
            "{} stopped after epoch {epoch} without finishing",
            out.display()
        ))),
    }
}

/// Refuses to reuse a finished run trained with other settings.
fn check_saved_config(run_dir: &RunDir, config: &TrainConfig) -> Result<()> {
    let path = run_dir.config();
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    let saved = TrainConfig::from_toml(&text, &path.display().to_string())?;
    let changed = config.differences_that_break_resume(&saved);
    match changed.is_empty() {
        true => Ok(()),
        false => Err(TrainError::RunDir(format!(
            "{} was trained with other settings ({}) than this comparison asks for; delete it \
             to retrain it",
            run_dir.root().display(),
            changed.join(", ")
        ))),
    }
}

fn read_summary(run_dir: &RunDir) -> Result<RunSummary> {
    let path = run_dir.summary();
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path,
        message: e.to_string(),
    })
}

/// The record of a finished run (its summary plus post-hoc calibration) and
/// the calibration's raw test predictions.
fn record_run(
    dir: &CompareDir,
    method: OptimizerFamily,
    seed: u64,
    summary: RunSummary,
) -> Result<(RunRecord, RunCalibration)> {
    let calibration = calibrate_run(&RunDir::new(dir.run(method, seed)))?;
    let mut test = summary.test;
    test.tce = Some(calibration.posthoc.temperature.ece);
    let record = RunRecord {
        method,
        seed,
        run_dir: CompareDir::relative_run(method, seed),
        best_epoch: summary.best_epoch,
        train_wall_time_s: summary.wall_time_s,
        temperature: calibration.temperature,
        val: summary.val,
        test,
        posthoc: calibration.posthoc,
    };
    Ok((record, calibration))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_shares_lr_and_weight_decay() {
        let settings = CompareSettings {
            methods: vec![OptimizerFamily::Sgd, OptimizerFamily::Csam],
            ..CompareSettings::default()
        };
        let sgd = settings.train_config(OptimizerFamily::Sgd, 0);
        let csam = settings.train_config(OptimizerFamily::Csam, 2);
        assert_eq!((sgd.lr, sgd.weight_decay), (csam.lr, csam.weight_decay));
        assert_eq!(csam.optimizer, OptimizerFamily::Csam);
        assert_eq!((csam.seed, csam.rho, csam.gamma), (2, 0.05, 1.0));
        settings.validate().unwrap();
        let tracked = CompareSettings {
            track_theory: true,
            ..settings
        };
        assert!(!tracked.train_config(OptimizerFamily::Sgd, 0).track_theory);
        assert!(tracked.train_config(OptimizerFamily::Csam, 0).track_theory);
        tracked.validate().unwrap();
    }

    #[test]
    fn repeated_or_missing_methods_and_seeds_are_refused() {
        let bad = [
            CompareSettings {
                methods: vec![],
                ..CompareSettings::default()
            },
            CompareSettings {
                methods: vec![OptimizerFamily::Sam, OptimizerFamily::Sam],
                ..CompareSettings::default()
            },
            CompareSettings {
                seeds: vec![1, 2, 1],
                ..CompareSettings::default()
            },
            CompareSettings {
                lr: 0.0,
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
            epochs: 9,
            seeds: vec![0],
            ..a.clone()
        };
        assert!(a.differences(&a).is_empty());
        let mut changed = a.differences(&b);
        changed.sort();
        assert_eq!(changed, vec!["epochs", "seeds"]);
    }

    #[test]
    fn directory_of_another_comparison_or_foreign_files_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = CompareDir::new(root.path().join("cmp"));
        let settings = CompareSettings::default();
        dir.open(&settings).unwrap();
        dir.open(&settings).unwrap();
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
        let settings = CompareSettings {
            data: "idx:/data/fm".into(),
            model: "mlp".into(),
            ..CompareSettings::default()
        };
        assert_eq!(
            default_out(&settings),
            PathBuf::from("runs/compare-idx--data-fm-mlp")
        );
    }
}
