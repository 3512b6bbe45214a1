//! The shared settings of a grid in `grid.json`: every key of
//! [`SharedSettings`] but `lr` and `weight_decay`, which the grid varies.
//! Saving a single lr next to the list `lrs` would read as if it were used,
//! and a change to it would refuse a directory for a setting no run reads.

use serde::de::Error as _;
use serde::ser::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::experiment::settings::SharedSettings;

/// The keys of [`SharedSettings`] that the grid varies.
const TUNED: [&str; 2] = ["lr", "weight_decay"];

/// Serde `with` module for the flattened shared settings of a grid.
pub mod without_tuned {
    use super::*;

    /// The settings' keys without [`TUNED`].
    pub fn serialize<S: Serializer>(
        shared: &SharedSettings,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::to_value(shared).map_err(S::Error::custom)?;
        if let Some(map) = value.as_object_mut() {
            for key in TUNED {
                map.remove(key);
            }
        }
        value.serialize(serializer)
    }

    /// The settings, [`TUNED`] taken from [`SharedSettings::default`]: no
    /// run reads them.
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<SharedSettings, D::Error> {
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        let defaults = serde_json::to_value(SharedSettings::default()).map_err(D::Error::custom)?;
        for key in TUNED {
            map.insert(key.to_string(), defaults[key].clone());
        }
        serde_json::from_value(Value::Object(map)).map_err(D::Error::custom)
    }
}
