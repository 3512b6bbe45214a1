//! The one exception type of the package.

use pyo3::create_exception;
use pyo3::exceptions::PyValueError;
use pyo3::PyErr;

create_exception!(
    csam_calib,
    CalibrationError,
    PyValueError,
    "Bad input or an undefined metric, with csam's one-line message (a ValueError)."
);

/// `message` as a [`CalibrationError`].
pub fn calibration_error(message: impl Into<String>) -> PyErr {
    CalibrationError::new_err(message.into())
}

/// A csam-calib error as a [`CalibrationError`] with its message.
pub fn from_calib(error: csam_calib::CalibError) -> PyErr {
    calibration_error(error.to_string())
}
