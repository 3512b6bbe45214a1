//! The error of a run specification that cannot be read or must not run.

use std::path::PathBuf;

/// A configuration that cannot be read or must not run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The TOML (file or flags) does not describe a configuration.
    #[error("bad configuration in {origin}: {message}")]
    Parse { origin: String, message: String },
    /// A key was given for a branch of the run that does not read it.
    #[error(
        "`{key}` does not apply to this run: it is read when {selector} is {}, and {selector} is {chosen}",
        applies_to.join(" or ")
    )]
    Inapplicable {
        key: &'static str,
        selector: &'static str,
        chosen: String,
        applies_to: Vec<&'static str>,
    },
    /// A key holds a value that would make the run meaningless.
    #[error("invalid {key} = {value:?}: {reason}")]
    Invalid {
        key: &'static str,
        value: String,
        reason: String,
    },
}

impl ConfigError {
    /// [`ConfigError::Invalid`] for `key` holding `value`, with `reason`.
    pub fn invalid(key: &'static str, value: impl ToString, reason: impl ToString) -> Self {
        ConfigError::Invalid {
            key,
            value: value.to_string(),
            reason: reason.to_string(),
        }
    }
}
