//! `csam_calib` for Python: csam-calib's metrics and post-hoc calibrators on
//! numpy arrays (and anything numpy can read: lists, CPU torch tensors).
//!
//! The compiled module is `csam_calib._native`; `python/csam_calib` re-exports
//! it as the package users import. Every entry point converts its arrays
//! ([`arrays`]), releases the GIL while csam-calib computes, and turns a
//! [`csam_calib::CalibError`] into a `csam_calib.CalibrationError` (a
//! `ValueError`) with the same one-line message ([`errors`]). Nothing panics
//! across the boundary: no `unwrap` on anything a caller passes.

mod arrays;
mod calibrators;
mod errors;
mod metrics;
mod options;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add(
        "CalibrationError",
        m.py().get_type::<errors::CalibrationError>(),
    )?;
    metrics::register(m)?;
    calibrators::register(m)?;
    Ok(())
}
