//! The model branch of a run: [`ModelSpec`], declared with the models in
//! csam-nn (its options, defaults and checks), checked here with the files it
//! names, each refusal named by the run specification's key; and the short
//! form `torchscript:FILE` of a model name in a written spec.

use super::check::keyed_error;
use super::keys;
use super::ConfigError;
use csam_nn::model::spec::{split_model_name, TORCHSCRIPT_PREFIX};
use csam_nn::model::ModelError;
pub use csam_nn::model::{ModelSpec, DEFAULT_MLP_HIDDEN};

/// Checks the model branch: [`ModelSpec::validate`], whose refusal is named
/// by the key of the field it concerns, and the existence of the files it
/// names (the initial weights, the TorchScript module), which the run reads
/// when it starts.
pub(crate) fn validate(model: &ModelSpec) -> Result<(), ConfigError> {
    model.validate().map_err(keyed_model_error)?;
    if let Some(init) = model.init.as_ref().filter(|init| !init.is_file()) {
        return Err(ConfigError::invalid(
            "init",
            init.display(),
            "no such weights file",
        ));
    }
    if let Some(script) = model.script.as_ref().filter(|script| !script.is_file()) {
        return Err(ConfigError::invalid(
            "script",
            script.display(),
            "no such TorchScript file",
        ));
    }
    Ok(())
}

/// A refusal of [`ModelSpec::validate`] as the refusal of the key at its
/// field's path in the `[model]` branch.
fn keyed_model_error(error: ModelError) -> ConfigError {
    match error {
        ModelError::Option {
            field,
            value,
            reason,
        } => {
            let path = ["model".to_string(), field.to_string()];
            let key = keys::at_path(&path).map_or(field, |key| key.name);
            ConfigError::invalid(key, value, reason)
        }
        ModelError::Branch {
            field,
            name,
            source,
        } => keyed_error(&["model", field], name, source),
        other => ConfigError::invalid("model", "", other),
    }
}

/// Splits a written `arch = "torchscript:FILE"` in the `[model]` table
/// into `arch = "torchscript"` and `script = "FILE"` (the command line's
/// short form, like the data sources' `cifar10:DIR`), so that the spec
/// deserialises it as a `script`. Refuses a table that names the file both
/// ways, and an architecture that is not registered.
pub(crate) fn split_torchscript_name(model: &mut toml::Table) -> Result<(), ConfigError> {
    let Some(name) = model.get("arch").and_then(toml::Value::as_str) else {
        return Ok(());
    };
    if !name.starts_with(TORCHSCRIPT_PREFIX) {
        return Ok(());
    }
    let name = name.to_string();
    let (arch, file) =
        split_model_name(&name).map_err(|e| ConfigError::invalid("model", &name, e))?;
    if model.contains_key("script") {
        return Err(ConfigError::invalid(
            "model",
            &name,
            "names its file, and script names another: give one",
        ));
    }
    model.insert("arch".into(), arch.name().into());
    if let Some(file) = file {
        model.insert("script".into(), file.display().to_string().into());
    }
    Ok(())
}
