//! What every experiment over many runs shares besides its base run
//! ([`super::base`]): the checks of its lists of seeds and values, and a
//! directory identified by a settings file ([`ExperimentDir`]): a rerun with
//! the same settings resumes, one with different settings is refused with
//! the keys that differ, and a directory of other files is never written
//! into.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

use csam_train::spec::Warning;
use csam_train::train::atomic::write_atomic;
use csam_train::train::lock::{DirectoryLock, ExperimentUse, LOCK_FILE};
use csam_train::train::{self, Remedy, TrainError};

use crate::error::{LabError, Result};

/// A configuration error for `key`.
pub(crate) fn invalid(key: &'static str, value: String, reason: &str) -> LabError {
    train::ConfigError::invalid(key, value, reason).into()
}

/// Adds the warnings of one run's spec to an experiment's, each once: the
/// runs of a sweep share most settings, so one unusual value (a CSAM gamma
/// above 2) would otherwise be said for every run.
pub(crate) fn add_warnings(warnings: &mut Vec<Warning>, found: Vec<Warning>) {
    for warning in found {
        if !warnings.contains(&warning) {
            warnings.push(warning);
        }
    }
}

/// The first item that occurs twice in `items`.
pub(crate) fn repeated<T: PartialEq + Copy>(items: &[T]) -> Option<T> {
    items
        .iter()
        .enumerate()
        .find(|(i, item)| items[..*i].contains(item))
        .map(|(_, item)| *item)
}

/// Refuses an empty or repeated seed list: every setting of an experiment
/// runs on each seed once.
pub(crate) fn check_seeds(seeds: &[u64]) -> Result<()> {
    if seeds.is_empty() {
        return Err(invalid("seeds", String::new(), "name at least one seed"));
    }
    match repeated(seeds) {
        Some(s) => Err(invalid("seeds", s.to_string(), "a seed is listed twice")),
        None => Ok(()),
    }
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
    /// one whose settings file holds the same settings, and returns the
    /// experiment's hold on the directory, to keep while it runs. Refuses
    /// different settings and a non-empty directory without the settings
    /// file. A directory that holds nothing but its settings file never
    /// started a run (its first attempt failed before that, on data that
    /// would not load, say): other settings replace them, unless another
    /// process holds the directory for its own experiment.
    ///
    /// The check and the write hold the directory's lock, so that two
    /// experiments started at once on one new directory do not see each
    /// other's settings half-written: the second finds the first's file,
    /// and the first's hold ([`ExperimentUse`]) if their settings differ.
    pub fn open<S: Serialize + DeserializeOwned>(&self, settings: &S) -> Result<ExperimentUse> {
        let existed = self.root.exists();
        std::fs::create_dir_all(&self.root).map_err(TrainError::io(
            "create the experiment directory",
            &self.root,
        ))?;
        let lock_error = |e| LabError::from(TrainError::from(e));
        let opened = DirectoryLock::hold(&self.root)
            .map_err(lock_error)
            .and_then(|_lock| {
                self.open_held(settings)?;
                ExperimentUse::hold(&self.root).map_err(lock_error)
            });
        if opened.is_err() && !existed {
            // Leave no empty directory behind a refusal.
            let _ = std::fs::remove_dir(&self.root);
        }
        opened
    }

    /// [`ExperimentDir::open`] with the directory's lock held.
    fn open_held<S: Serialize + DeserializeOwned>(&self, settings: &S) -> Result<()> {
        let path = self.settings();
        let shown = self.root.display();
        if path.exists() {
            let saved: S = read_json(&path)?;
            let changed = differences(settings, &saved);
            let refusal = |whose: &str| {
                TrainError::refused(
                    format!(
                        "{shown} holds a different {}{whose} (settings differ in: {}); refusing \
                         to overwrite it",
                        self.noun,
                        changed.join(", ")
                    ),
                    Remedy::MoveOrDelete,
                )
            };
            if changed.is_empty() {
                return Ok(());
            }
            if !self.holds_only_settings()? {
                return Err(refusal("").into());
            }
            if ExperimentUse::in_use(&self.root).map_err(TrainError::from)? {
                return Err(refusal(", which another csam process is running").into());
            }
            return write_json(&path, settings);
        }
        let occupied = std::fs::read_dir(&self.root)
            .map_err(TrainError::io("read directory", &self.root))?
            .flatten()
            .any(|entry| entry.file_name() != LOCK_FILE);
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
        write_json(&path, settings)
    }

    /// True when the directory holds its settings file and nothing else
    /// (but the lock file of the experiments that hold it).
    fn holds_only_settings(&self) -> Result<bool> {
        let entries =
            std::fs::read_dir(&self.root).map_err(TrainError::io("read directory", &self.root))?;
        Ok(entries
            .flatten()
            .all(|entry| entry.file_name() == self.file || entry.file_name() == LOCK_FILE))
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
    use crate::experiment::compare_settings::CompareSettings;

    #[test]
    fn differences_name_the_changed_keys_by_their_dotted_paths() {
        let a = CompareSettings::default();
        let mut b = CompareSettings {
            seeds: vec![0],
            ..a.clone()
        };
        b.base.epochs = 9;
        assert!(differences(&a, &a).is_empty());
        let mut changed = differences(&a, &b);
        changed.sort();
        assert_eq!(changed, vec!["base.epochs", "seeds"]);
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
    fn seeds_must_be_given_once_each() {
        for seeds in [vec![], vec![1, 2, 1]] {
            assert!(check_seeds(&seeds).is_err(), "{seeds:?}");
        }
        check_seeds(&[0, 1, 2]).unwrap();
    }

    #[test]
    fn directory_of_other_settings_or_foreign_files_is_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = ExperimentDir::new(root.path().join("x"), "thing.json", "thing");
        let settings = CompareSettings::default();
        dir.open(&settings).unwrap();
        dir.open(&settings).unwrap();
        let mut other = settings.clone();
        other.base.optim.lr = 0.5;
        // Only the settings file: nothing ran under them, so they are replaced.
        dir.open(&other).unwrap();
        assert_eq!(
            read_json::<CompareSettings>(&dir.settings()).unwrap(),
            other
        );
        std::fs::create_dir(dir.join("runs")).unwrap();
        let err = dir.open(&settings).unwrap_err().to_string();
        assert!(
            err.contains("different thing") && err.contains("settings differ in: base.optim.lr"),
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
