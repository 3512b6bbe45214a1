//! What every experiment over many runs shares: the training settings common
//! to all its runs ([`SharedSettings`]), and a directory identified by a
//! settings file ([`ExperimentDir`]): a rerun with the same settings resumes,
//! one with different settings is refused, and a directory of other files is
//! never written into.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use csam_calib::metrics::summary::MetricOptions;

use csam_data::{DatasetSpec, DEFAULT_DATA};
use csam_nn::model::precision::Precision;
use csam_train::spec::{DataSpec, ModelSpec, OptimizerFamily, RunSpec, UpdateRule, ValSize};
use csam_train::train::atomic::write_atomic;
use csam_train::train::{self, Remedy, TrainError};

use crate::error::{LabError, Result};

/// The settings every run of an experiment shares: data, model, length, seeds
/// and the hyperparameters tuned on SGD and reused for the SAM family
/// (docs/conventions.md, "Experiment protocol"). The other training settings are [`RunSpec`]'s
/// defaults (SGD momentum 0.9, cosine decay to 0, best checkpoint by
/// validation NLL). Experiments flatten it into their own settings file, so
/// its keys sit at the top level of `compare.json` and `sweep.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SharedSettings {
    /// Data set spec.
    pub data: String,
    /// Model name.
    pub model: String,
    /// Epochs of every run.
    pub epochs: usize,
    /// The seeds of every setting.
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
    /// Training augmentation (random crop with padding, flip where the data
    /// set allows it).
    pub augment: bool,
    /// Log the theory diagnostics (`theory.jsonl`) of the SAM and CSAM runs;
    /// the other methods have no perturbed point to track (see
    /// [`csam_train::theory`]). Absent in older settings files: off.
    #[serde(default)]
    pub track_theory: bool,
    /// Precision of every run's forward passes (autocast to bfloat16 or
    /// float16, or float32). Float32 is left out of the settings file, so
    /// experiments written before it resume and compare equal.
    #[serde(default, skip_serializing_if = "is_fp32")]
    pub precision: Precision,
    /// Binning of every calibration metric: per-epoch validation, the
    /// table, post-hoc columns and the report's figures. Absent in older
    /// settings files: the default (15 bins, right-closed edges).
    #[serde(default)]
    pub metrics: MetricOptions,
}

impl Default for SharedSettings {
    /// The defaults of `csam compare` and `csam sweep`: the whole of the
    /// bundled Fashion-MNIST ([`DEFAULT_DATA`]); lr and weight decay from the
    /// SGD grid on the validation split recorded in
    /// `docs/compare-defaults.md`; `val_size` is 20%
    /// ([`super::compare_settings::DEFAULT_VAL_FRACTION`]) of its 60,000 training
    /// images.
    fn default() -> Self {
        SharedSettings {
            data: DEFAULT_DATA.to_string(),
            model: "mlp".to_string(),
            epochs: 20,
            seeds: vec![0, 1, 2],
            val_size: 12_000,
            batch_size: 128,
            lr: 0.05,
            weight_decay: 5e-4,
            augment: false,
            track_theory: false,
            precision: Precision::Fp32,
            metrics: MetricOptions::default(),
        }
    }
}

impl SharedSettings {
    /// The spec of one run: `optimizer` with radius `rho` and exponent
    /// `gamma` (where they apply) on `seed`. Refuses a data set or model
    /// name that does not parse.
    pub fn run_spec(
        &self,
        optimizer: OptimizerFamily,
        rho: f64,
        gamma: f64,
        seed: u64,
    ) -> Result<RunSpec> {
        let source: DatasetSpec = self.data.parse().map_err(|e: csam_data::DataError| {
            invalid("data", self.data.clone(), &e.to_string())
        })?;
        let model = ModelSpec::named(&self.model)
            .map_err(|reason| invalid("model", self.model.clone(), &reason))?;
        let mut spec = RunSpec::new(DataSpec {
            val_size: ValSize::Count(self.val_size),
            augment: self.augment,
            ..DataSpec::new(source)
        });
        spec.seed = seed;
        spec.epochs = self.epochs;
        spec.batch_size = self.batch_size;
        spec.model = ModelSpec {
            precision: self.precision,
            ..model
        };
        spec.optim.lr = self.lr;
        spec.optim.weight_decay = self.weight_decay;
        spec.optim.rule = UpdateRule::of_family(optimizer, rho, gamma);
        spec.track_theory = self.track_theory && spec.optim.rule.has_sam_point();
        spec.metrics = self.metrics;
        Ok(spec.normalized())
    }

    /// Refuses an empty or repeated seed list.
    pub fn validate(&self) -> Result<()> {
        if self.seeds.is_empty() {
            return Err(invalid("seeds", String::new(), "name at least one seed"));
        }
        if let Some(s) = repeated(&self.seeds) {
            return Err(invalid("seeds", s.to_string(), "a seed is listed twice"));
        }
        Ok(())
    }
}

fn is_fp32(precision: &Precision) -> bool {
    *precision == Precision::Fp32
}

/// A configuration error for `key`.
pub(crate) fn invalid(key: &'static str, value: String, reason: &str) -> LabError {
    train::ConfigError::invalid(key, value, reason).into()
}

/// The first item that occurs twice in `items`.
pub(crate) fn repeated<T: PartialEq + Copy>(items: &[T]) -> Option<T> {
    items
        .iter()
        .enumerate()
        .find(|(i, item)| items[..*i].contains(item))
        .map(|(_, item)| *item)
}

/// Refuses an empty list of grid values for `key`, or one that names a value
/// twice (its runs would share a directory and count twice in a cell).
pub(crate) fn check_grid_axis(key: &'static str, values: &[f64]) -> Result<()> {
    if values.is_empty() {
        return Err(invalid(key, String::new(), "name at least one value"));
    }
    match repeated(values) {
        Some(v) => Err(invalid(key, v.to_string(), "a value is listed twice")),
        None => Ok(()),
    }
}

/// The keys in which the JSON forms of `ours` and `theirs` differ, a nested
/// key by its dotted path (`base.optim.lr`), so that a refusal names the
/// setting itself rather than the whole branch it sits in. A key that only
/// one side has counts as changed.
pub fn differences<S: Serialize>(ours: &S, theirs: &S) -> Vec<String> {
    let (Ok(ours), Ok(theirs)) = (serde_json::to_value(ours), serde_json::to_value(theirs)) else {
        return vec!["(settings)".to_string()];
    };
    let mut changed = Vec::new();
    changed_paths(&ours, &theirs, &mut Vec::new(), &mut changed);
    changed
}

/// Pushes onto `changed` the dotted paths, below `path`, at which `ours` and
/// `theirs` differ, descending into the objects both have.
fn changed_paths<'a>(
    ours: &'a Value,
    theirs: &'a Value,
    path: &mut Vec<&'a str>,
    changed: &mut Vec<String>,
) {
    let (Value::Object(ours), Value::Object(theirs)) = (ours, theirs) else {
        if ours != theirs {
            changed.push(match path.is_empty() {
                true => "(settings)".to_string(),
                false => path.join("."),
            });
        }
        return;
    };
    let keys: BTreeSet<&String> = ours.keys().chain(theirs.keys()).collect();
    for key in keys {
        path.push(key);
        match (ours.get(key), theirs.get(key)) {
            (Some(a), Some(b)) => changed_paths(a, b, path, changed),
            _ => changed.push(path.join(".")),
        }
        path.pop();
    }
}

/// A directory that holds one experiment, identified by its settings file.
#[derive(Debug, Clone)]
pub struct ExperimentDir {
    root: PathBuf,
    /// The settings file's name (`compare.json`).
    file: &'static str,
    /// What the directory holds, in messages (`comparison`).
    noun: &'static str,
}

impl ExperimentDir {
    /// The directory at `root` whose identity is `root/file`; `noun` names the
    /// experiment in messages. Nothing is created.
    pub fn new(root: impl Into<PathBuf>, file: &'static str, noun: &'static str) -> Self {
        ExperimentDir {
            root: root.into(),
            file,
            noun,
        }
    }

    /// The directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The settings file.
    pub fn settings(&self) -> PathBuf {
        self.root.join(self.file)
    }

    /// `root/relative`.
    pub fn join(&self, relative: impl AsRef<Path>) -> PathBuf {
        self.root.join(relative)
    }

    /// Creates the directory and its settings file, or accepts an existing
    /// one whose settings file holds the same settings. Refuses different
    /// settings and a non-empty directory without the settings file. A
    /// directory that holds nothing but its settings file never started a
    /// run (its first attempt failed before that, on data that would not
    /// load, say): other settings replace them.
    pub fn open<S: Serialize + DeserializeOwned>(&self, settings: &S) -> Result<()> {
        let path = self.settings();
        let shown = self.root.display();
        if path.exists() {
            let saved: S = read_json(&path)?;
            let changed = differences(settings, &saved);
            return match (changed.is_empty(), self.holds_only_settings()?) {
                (true, _) => Ok(()),
                (false, true) => write_json(&path, settings),
                (false, false) => Err(TrainError::refused(
                    format!(
                        "{shown} holds a different {} (settings differ in: {}); refusing to \
                         overwrite it",
                        self.noun,
                        changed.join(", ")
                    ),
                    Remedy::MoveOrDelete,
                )
                .into()),
            };
        }
        let occupied = std::fs::read_dir(&self.root)
            .map(|mut entries| entries.next().is_some())
            .unwrap_or(false);
        if occupied {
            return Err(TrainError::refused(
                format!(
                    "{shown} is not empty and holds no {} (no {}); refusing to write into it",
                    self.noun, self.file
                ),
                Remedy::Move,
            )
            .into());
        }
        std::fs::create_dir_all(&self.root).map_err(TrainError::io(
            "create the experiment directory",
            &self.root,
        ))?;
        write_json(&path, settings)
    }

    /// True when the directory holds its settings file and nothing else.
    fn holds_only_settings(&self) -> Result<bool> {
        let entries =
            std::fs::read_dir(&self.root).map_err(TrainError::io("read directory", &self.root))?;
        Ok(entries
            .flatten()
            .all(|entry| entry.file_name() == self.file))
    }
}

/// Reads a JSON file; a file that does not parse is named.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T> {
    let text = std::fs::read_to_string(path).map_err(TrainError::io("read", path))?;
    let value = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(value)
}

/// Writes `value` as pretty JSON, atomically.
pub fn write_json(path: &Path, value: &impl Serialize) -> Result<()> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| TrainError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    Ok(write_atomic(path, &json)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_changed_keys_by_their_dotted_paths() {
        let a = SharedSettings::default();
        let mut b = SharedSettings {
            epochs: 9,
            seeds: vec![0],
            ..a.clone()
        };
        b.metrics.n_bins = 10;
        assert!(differences(&a, &a).is_empty());
        let mut changed = differences(&a, &b);
        changed.sort();
        assert_eq!(changed, vec!["epochs", "metrics.n_bins", "seeds"]);
        // A key on one side only, at any depth, is named too.
        let ours = serde_json::json!({"base": {"optim": {"lr": 0.05}}, "rho": 0.05});
        let theirs = serde_json::json!({"base": {"optim": {"lr": 0.05, "clip": 1.0}}});
        assert_eq!(differences(&ours, &theirs), vec!["base.optim.clip", "rho"]);
        assert_eq!(
            differences(&serde_json::json!(1), &serde_json::json!(2)),
            vec!["(settings)"]
        );
    }

    #[test]
    fn a_torchscript_model_name_carries_its_file_into_every_run() {
        let settings = SharedSettings {
            model: "torchscript:models/net.pt".to_string(),
            ..SharedSettings::default()
        };
        let spec = settings
            .run_spec(OptimizerFamily::Csam, 0.05, 1.0, 3)
            .unwrap();
        assert_eq!(spec.model.arch.name(), "torchscript");
        assert_eq!(
            spec.model.script.as_deref(),
            Some(std::path::Path::new("models/net.pt"))
        );
        let unknown = SharedSettings {
            model: "torchscrypt:net.pt".to_string(),
            ..SharedSettings::default()
        };
        let error = unknown
            .run_spec(OptimizerFamily::Sgd, 0.0, 0.0, 0)
            .unwrap_err();
        assert!(error.to_string().contains("unknown model"), "{error}");
    }

    #[test]
    fn seeds_must_be_given_once_each() {
        for seeds in [vec![], vec![1, 2, 1]] {
            let settings = SharedSettings {
                seeds,
                ..SharedSettings::default()
            };
            assert!(settings.validate().is_err(), "{settings:?}");
        }
        SharedSettings::default().validate().unwrap();
    }

    #[test]
    fn directory_of_other_settings_or_foreign_files_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = ExperimentDir::new(root.path().join("x"), "thing.json", "thing");
        let settings = SharedSettings::default();
        dir.open(&settings).unwrap();
        dir.open(&settings).unwrap();
        let other = SharedSettings {
            lr: 0.5,
            ..settings.clone()
        };
        // Only the settings file: nothing ran under them, so they are replaced.
        dir.open(&other).unwrap();
        assert_eq!(read_json::<SharedSettings>(&dir.settings()).unwrap(), other);
        std::fs::create_dir(dir.join("runs")).unwrap();
        let err = dir.open(&settings).unwrap_err().to_string();
        assert!(
            err.contains("different thing") && err.contains("lr"),
            "{err}"
        );

        std::fs::write(root.path().join("notes.txt"), "mine").unwrap();
        let err = ExperimentDir::new(root.path(), "thing.json", "thing")
            .open(&other)
            .unwrap_err()
            .to_string();
        assert!(err.contains("holds no thing (no thing.json)"), "{err}");
    }
}
