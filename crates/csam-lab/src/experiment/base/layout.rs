//! The base in a settings file: nested as the one key `base`, or, in the
//! files of earlier releases, flat keys at the top level (`legacy`).
//!
//! The base's `seed` and its update rule (`optim.rule`, with its SAM policy
//! `optim.policy`) are read by no run: each run takes one of the
//! experiment's `seeds`, and the rule of its method or cell. So the settings
//! files leave them out, and reading one sets them to [`default_base`]'s
//! (seed 0, plain SGD steps): two experiments never differ in them, and a
//! file never shows a rule that no run uses.

use serde::de::Error as _;
use serde::ser::{Error as _, SerializeMap};
use serde::{Deserialize, Deserializer, Serializer};
use serde_json::{Map, Value};

use csam_train::spec::RunSpec;

use super::{default_base, legacy};

/// The key of the base in a settings file.
const KEY: &str = "base";

/// A setting of the base, as the keys of its nested JSON (`["optim", "lr"]`).
pub(crate) type KeyPath = &'static [&'static str];

/// The settings of the base that every run sets itself: its seed, its
/// update rule and the rule's SAM policy (see the module doc).
pub(crate) const RUN_OWN: [KeyPath; 3] = [&["seed"], &["optim", "rule"], &["optim", "policy"]];

/// Serde `with` module of an experiment's flattened base (compare, sweep):
/// written as the one key `base`, without the settings every run sets
/// itself (see the module doc); read from it, or from the flat keys of the
/// files written before it.
pub mod file {
    use super::*;

    /// The base as `{"base": ...}`.
    pub fn serialize<S: Serializer>(base: &RunSpec, serializer: S) -> Result<S::Ok, S::Error> {
        write(base, &RUN_OWN, serializer)
    }

    /// The base from `base`, or from the flat keys.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunSpec, D::Error> {
        read(deserializer, &RUN_OWN)
    }
}

/// Writes `base` as the map `{"base": ...}` without the settings at
/// `omitted`, which no run reads.
pub(crate) fn write<S: Serializer>(
    base: &RunSpec,
    omitted: &[KeyPath],
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    let mut value = serde_json::to_value(base).map_err(S::Error::custom)?;
    for path in omitted {
        remove(&mut value, path);
    }
    let mut map = serializer.serialize_map(Some(1))?;
    map.serialize_entry(KEY, &value)?;
    map.end()
}

/// Reads the base from the settings' keys: `base`, or the flat keys of the
/// earlier layout when there is no `base` ([`legacy::base`]). The settings
/// at `omitted` are [`default_base`]'s, whatever the file says.
pub(crate) fn read<'de, D: Deserializer<'de>>(
    deserializer: D,
    omitted: &[KeyPath],
) -> std::result::Result<RunSpec, D::Error> {
    let mut keys = Map::<String, Value>::deserialize(deserializer)?;
    let mut value = match keys.remove(KEY) {
        Some(value) => value,
        None => {
            let base = legacy::base(keys).map_err(D::Error::custom)?;
            serde_json::to_value(base).map_err(D::Error::custom)?
        }
    };
    let defaults = serde_json::to_value(default_base()).map_err(D::Error::custom)?;
    for path in omitted {
        match path
            .iter()
            .try_fold(&defaults, |value, key| value.get(*key))
        {
            Some(default) => set(&mut value, path, default.clone()),
            // Left out of the default's JSON too: its serde default.
            None => remove(&mut value, path),
        }
    }
    serde_json::from_value(value).map_err(D::Error::custom)
}

/// Removes the value at `path` below `value`, if there is one.
fn remove(value: &mut Value, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let parent = parents
        .iter()
        .try_fold(value, |value, key| value.get_mut(*key));
    if let Some(Value::Object(parent)) = parent {
        parent.remove(*last);
    }
}

/// Sets the value at `path` below `value`, making the objects on the way (a
/// file may leave a branch out; its serde defaults then fill the rest).
fn set(value: &mut Value, path: &[&str], new: Value) {
    match path.split_first() {
        None => *value = new,
        Some((first, rest)) => {
            if !value.is_object() {
                *value = Value::Object(Map::new());
            }
            set(&mut value[*first], rest, new);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::experiment::compare_settings::CompareSettings;

    #[test]
    fn the_settings_every_run_sets_itself_are_neither_written_nor_read() {
        let settings = CompareSettings::default();
        let mut json = serde_json::to_value(&settings).unwrap();
        let base = &json["base"];
        assert!(base.get("seed").is_none() && base["optim"].get("rule").is_none());
        assert_eq!(base["optim"]["lr"], 0.05);
        // A file that says otherwise reads as the same settings.
        json["base"]["seed"] = 5.into();
        json["base"]["optim"]["rule"] = serde_json::json!({"kind": "sam", "rho": 0.1});
        json["base"]["optim"]["policy"] = serde_json::json!({"kind": "rst", "p": 0.5});
        let read: CompareSettings = serde_json::from_value(json).unwrap();
        assert_eq!(read, settings);
        assert_eq!(read.base.seed, 0);
    }
}
