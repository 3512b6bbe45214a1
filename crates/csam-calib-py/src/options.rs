//! Option strings (`edges="right-closed"`, `norm="max"`) read with the same
//! names csam-calib serialises, so the Python spelling is the CLI's and
//! `results.json`'s; an unknown one lists the valid ones.

use csam_calib::binning::{AdaptiveVariant, Binning, EdgeConvention};
use csam_calib::metrics::summary::MetricOptions;
use pyo3::PyResult;
use serde::de::DeserializeOwned;

use crate::errors::calibration_error;

/// `value` of option `what` as the csam-calib enum `T`.
pub fn parse<T: DeserializeOwned>(what: &str, value: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(value.to_string()))
        .map_err(|e| calibration_error(format!("{what}: {e}")))
}

/// The binning and row-sum tolerance of a call.
pub fn metric_options(
    n_bins: usize,
    edges: &str,
    variant: &str,
    tolerance: f64,
) -> PyResult<MetricOptions> {
    let edges: EdgeConvention = parse("edges", edges)?;
    let adaptive: AdaptiveVariant = parse("variant", variant)?;
    Ok(MetricOptions {
        n_bins,
        edges,
        adaptive,
        tolerance,
    })
}

/// Equal-width or equal-mass binning by name (`scheme`).
pub fn binning(scheme: &str, options: &MetricOptions) -> PyResult<Binning> {
    match scheme {
        "equal-width" => Ok(options.equal_width()),
        "equal-mass" => Ok(options.equal_mass()),
        other => Err(calibration_error(format!(
            "scheme: unknown binning `{other}`, expected `equal-width` or `equal-mass`"
        ))),
    }
}
