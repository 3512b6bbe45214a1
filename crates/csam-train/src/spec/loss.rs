//! The training loss of a run: [`csam_nn::loss::TrainingLoss`] itself, the
//! branch `[loss]` of `config.toml` tagged by `kind`. Every update rule uses
//! it: SGD's one pass, both passes of SAM and ASAM, and CSAM's first pass;
//! CSAM's second pass weights its per-example terms (see
//! [`super::UpdateRule::Csam`]).
//!
//! Adding a loss is its file in `csam_nn::loss` (one line in that module's
//! table) and one line per parameter in the key table of [`super::keys`].

use super::check::keyed;
use super::ConfigError;

/// The loss minimised in training.
pub type LossSpec = csam_nn::loss::TrainingLoss;

/// Checks the loss's parameters, naming a bad one by its key.
pub(crate) fn validate(loss: &LossSpec) -> Result<(), ConfigError> {
    keyed(&["loss"], loss.name(), loss.validate())
}
