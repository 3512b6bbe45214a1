//! The training loss of a run: [`csam_nn::loss::TrainingLoss`] itself, the
//! branch `[loss]` of `config.toml` tagged by `kind`. Every update rule uses
//! it: SGD's one pass, both passes of SAM and ASAM, and CSAM's first pass;
//! CSAM's second pass weights its per-example terms (see
//! [`super::UpdateRule::Csam`]).
//!
//! Adding a loss is its file in `csam_nn::loss` (one line in that module's
//! table) and one line per parameter in the key table of [`super::keys`].

use csam_nn::loss::LossError;

use super::keys;
use super::ConfigError;

/// The loss minimised in training.
pub type LossSpec = csam_nn::loss::TrainingLoss;

/// Checks the loss's parameters, naming a bad one by its key.
pub(crate) fn validate(loss: &LossSpec) -> Result<(), ConfigError> {
    keyed(&["loss"], loss.name(), loss.validate())
}

/// A parameter check of the spec's branch at `branch` (whose kind is
/// `name`), a bad field named by its key.
pub(crate) fn keyed(
    branch: &[&'static str],
    name: &str,
    checked: Result<(), LossError>,
) -> Result<(), ConfigError> {
    checked.map_err(|error| match error {
        LossError::Field {
            field,
            value,
            reason,
            ..
        } => {
            let path: Vec<String> = branch
                .iter()
                .chain([&field])
                .map(|s| s.to_string())
                .collect();
            let key = keys::at_path(&path).map_or(field, |key| key.name);
            ConfigError::invalid(key, value, reason)
        }
        // Invariant: callers name a branch.
        other => ConfigError::invalid(branch.last().copied().unwrap_or_default(), name, other),
    })
}
