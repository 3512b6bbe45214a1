//! How training feeds each batch to the model: as it is, mixed up, or
//! mixed and decoupled (MIT-L); [`csam_nn::mixing::Mixing`] itself, the
//! branch `[mixing]` of `config.toml` tagged by `kind`. It composes with
//! every loss and update rule: each pass of a step (SGD's one, SAM's two)
//! runs the same mixed batch.

use super::check::keyed;
use super::ConfigError;

/// The input mixing of training.
pub type MixingSpec = csam_nn::mixing::Mixing;

/// Checks the mixing's parameters, naming a bad one by its key.
pub(crate) fn validate(mixing: &MixingSpec) -> Result<(), ConfigError> {
    keyed(&["mixing"], mixing.name(), mixing.validate())
}
