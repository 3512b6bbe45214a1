//! The base of a grid in `grid.json`: every setting but those each run sets
//! itself ([`layout::RUN_OWN`]) and its `optim.lr` and `optim.weight_decay`,
//! which the grid varies. Saving a single lr next to the list `lrs` would
//! read as if it were used, and a change to it would refuse a directory for
//! a setting no run reads.

use serde::{Deserializer, Serializer};

use crate::experiment::base::layout::{self, KeyPath};
use csam_train::spec::RunSpec;

/// The settings of the base that the grid varies.
const TUNED: [KeyPath; 2] = [&["optim", "lr"], &["optim", "weight_decay"]];

/// The settings of the base that no run of the grid reads.
fn unread() -> Vec<KeyPath> {
    layout::RUN_OWN.iter().chain(&TUNED).copied().collect()
}

/// Serde `with` module for the flattened base of a grid.
pub mod without_tuned {
    use super::*;

    /// The base without [`unread`]'s settings.
    pub fn serialize<S: Serializer>(base: &RunSpec, serializer: S) -> Result<S::Ok, S::Error> {
        layout::write(base, &unread(), serializer)
    }

    /// The base, [`unread`]'s settings taken from the default base:
    /// no run reads them.
    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<RunSpec, D::Error> {
        layout::read(deserializer, &unread())
    }
}
