//! The small checks every branch of the spec uses, so each rejection names its
//! key and says what a valid value is.

use csam_nn::loss::LossError;

use super::keys;
use super::ConfigError;

/// `Err(Invalid)` for `key` holding `value`, with `reason`.
pub(crate) fn invalid(key: &'static str, value: impl ToString, reason: &str) -> ConfigError {
    ConfigError::invalid(key, value, reason)
}

/// Refuses a value that is not finite or not above `min` (or at least `min`
/// with `inclusive`).
pub(crate) fn finite_above(
    key: &'static str,
    value: f64,
    min: f64,
    inclusive: bool,
) -> Result<(), ConfigError> {
    let ok = value.is_finite() && if inclusive { value >= min } else { value > min };
    match ok {
        true => Ok(()),
        false => Err(invalid(
            key,
            value,
            &format!(
                "must be a finite number {} {min}",
                if inclusive { ">=" } else { ">" }
            ),
        )),
    }
}

/// Refuses a value outside `[0, 1)`.
pub(crate) fn unit_interval(key: &'static str, value: f64) -> Result<(), ConfigError> {
    match (0.0..1.0).contains(&value) {
        true => Ok(()),
        false => Err(invalid(key, value, "must lie in [0, 1)")),
    }
}

/// Refuses 0.
pub(crate) fn at_least_one(key: &'static str, value: usize) -> Result<(), ConfigError> {
    match value {
        0 => Err(invalid(key, 0, "must be at least 1")),
        _ => Ok(()),
    }
}

/// A parameter check of the spec's branch at `branch` (whose kind is
/// `name`), a bad field named by its key.
pub(crate) fn keyed(
    branch: &[&'static str],
    name: &str,
    checked: Result<(), LossError>,
) -> Result<(), ConfigError> {
    checked.map_err(|error| keyed_error(branch, name, error))
}

/// The refusal `error` of the spec's branch at `branch` (whose kind is
/// `name`), a bad field named by its key.
pub(crate) fn keyed_error(branch: &[&'static str], name: &str, error: LossError) -> ConfigError {
    match error {
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
        LossError::Policy {
            policy,
            rule,
            reason,
        } => {
            let path = ["optim", "policy", "kind"].map(String::from);
            let key = keys::at_path(&path).map_or("sam_policy", |key| key.name);
            ConfigError::invalid(key, policy, format!("optimizer {rule}: {reason}"))
        }
        // Invariant: callers name a branch.
        other => ConfigError::invalid(branch.last().copied().unwrap_or_default(), name, other),
    }
}
