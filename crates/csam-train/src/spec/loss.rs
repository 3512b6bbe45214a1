//! The training loss of a run. Every update rule uses it: SGD's one pass, both
//! passes of SAM and ASAM, and CSAM's first pass (its second pass weights the
//! loss's per-example terms, see [`super::UpdateRule::Csam`]).
//!
//! Adding a loss is a variant here (its parameters as fields with their
//! defaults and checks in [`LossSpec::validate`]), one line per parameter in
//! the key table of [`super::keys`], and its formula in [`csam_nn::loss`].

use serde::{Deserialize, Serialize};

use crate::train::ConfigError;

/// The loss minimised in training.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LossSpec {
    /// Mean cross entropy `-log p_y` over the batch.
    #[default]
    CrossEntropy,
}

impl LossSpec {
    /// Checks the loss's parameters (cross entropy has none).
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            LossSpec::CrossEntropy => Ok(()),
        }
    }
}
