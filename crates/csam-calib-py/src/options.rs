//! Option strings (`edges="right-closed"`, `norm="max"`) read with the same
//! names csam-calib serialises, so the Python spelling is the CLI's and
//! `results.json`'s; an unknown one lists the valid ones.

use csam_calib::binning::{AdaptiveVariant, Binning, EdgeConvention, MAX_BINS};
use csam_calib::metrics::summary::MetricOptions;
use pyo3::prelude::*;
use serde::de::DeserializeOwned;

use crate::errors::calibration_error;

/// `value` of option `what` as the csam-calib enum `T`.
pub fn parse<T: DeserializeOwned>(what: &str, value: &str) -> PyResult<T> {
    serde_json::from_value(serde_json::Value::String(value.to_string()))
        .map_err(|e| calibration_error(format!("{what}: {e}")))
}

/// Count argument `what` (a Python int) if it lies in `lowest..=highest`:
/// a negative, huge or non-integer value is a ValueError like every other bad
/// argument, not an OverflowError, and a count no machine could allocate
/// (`n_bins=10**12`) is refused before anything is built.
pub fn count(
    what: &str,
    value: &Bound<'_, PyAny>,
    lowest: usize,
    highest: usize,
) -> PyResult<usize> {
    value
        .extract::<i64>()
        .ok()
        .and_then(|v| usize::try_from(v).ok())
        .filter(|v| (lowest..=highest).contains(v))
        .ok_or_else(|| {
            calibration_error(format!(
                "invalid argument: {what} must be an integer in {lowest}..={highest}, got {value}"
            ))
        })
}

/// `n_bins` of a call: 1..=[`MAX_BINS`], else a ValueError (the functions
/// read it with `#[pyo3(from_py_with = bin_count)]`).
pub fn bin_count(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    count("n_bins", value, 1, MAX_BINS)
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
