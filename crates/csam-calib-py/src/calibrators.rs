//! The post-hoc calibrators as one Python class, scikit-learn style:
//! `Calibrator("temperature").fit(val_logits, val_labels).transform(logits)`.
//! Fitted parameters save to and load from the JSON that `csam calibrate`
//! writes, so a calibrator moves between the CLI and Python.

use std::path::PathBuf;

use csam_calib::calibrators::registry::{self, CalibratorKind, FittedCalibrator};
use csam_calib::io::write_atomically;
use numpy::PyArray2;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use crate::arrays::{labels, to_numpy, Matrix};
use crate::errors::{calibration_error, from_calib};

/// A post-hoc calibrator from logits to calibrated probabilities, by method
/// name (`csam_calib.CALIBRATORS`), with its default settings.
#[pyclass(module = "csam_calib", frozen)]
struct Calibrator {
    kind: CalibratorKind,
    fitted: std::sync::Mutex<Option<FittedCalibrator>>,
}

impl Calibrator {
    fn with(kind: CalibratorKind, fitted: Option<FittedCalibrator>) -> Calibrator {
        Calibrator {
            kind,
            fitted: std::sync::Mutex::new(fitted),
        }
    }

    /// The fitted calibrator, or the error that says to fit it first.
    fn fitted(&self) -> PyResult<FittedCalibrator> {
        self.lock()?.clone().ok_or_else(|| {
            calibration_error(format!(
                "{} calibrator is not fitted: call fit on validation logits first",
                self.kind
            ))
        })
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, Option<FittedCalibrator>>> {
        self.fitted
            .lock()
            .map_err(|_| calibration_error("a fit failed part-way in another thread"))
    }
}

#[pymethods]
impl Calibrator {
    #[new]
    fn new(method: &str) -> PyResult<Self> {
        let kind: CalibratorKind = method.parse().map_err(from_calib)?;
        Ok(Calibrator::with(kind, None))
    }

    /// The method's name.
    #[getter]
    fn method(&self) -> &'static str {
        self.kind.name()
    }

    /// Whether `fit` has run.
    #[getter]
    fn is_fitted(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_some())
    }

    /// Fits on validation logits `(N, K)` and integer labels `(N,)`; returns
    /// the calibrator.
    fn fit<'py>(
        slf: Bound<'py, Self>,
        logits: &Bound<'py, PyAny>,
        labels_object: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, Self>> {
        let matrix = Matrix::new(logits, "logits")?;
        let labels = labels(labels_object, matrix.dim(), "labels")?;
        let view = matrix.view()?;
        let kind = slf.get().kind;
        let fitted = slf
            .py()
            .detach(|| registry::fit(kind, view.to_f64().view(), &labels))
            .map_err(from_calib)?;
        *slf.get().lock()? = Some(fitted);
        Ok(slf)
    }

    /// Calibrated probabilities `(N, K)` of logits with the fitted `K`.
    fn transform<'py>(
        &self,
        py: Python<'py>,
        logits: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let fitted = self.fitted()?;
        let matrix = Matrix::new(logits, "logits")?;
        let view = matrix.view()?;
        let probabilities = py.detach(|| fitted.transform(view.to_f64().view()));
        to_numpy(py, probabilities.map_err(from_calib)?)
    }

    /// `fit(logits, labels)` then `transform(logits)`.
    fn fit_transform<'py>(
        slf: Bound<'py, Self>,
        logits: &Bound<'py, PyAny>,
        labels: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let py = slf.py();
        let fitted = Self::fit(slf, logits, labels)?;
        fitted.get().transform(py, logits)
    }

    /// The fitted parameters as JSON tagged with `"method"` (the format of
    /// `csam calibrate --save`).
    fn to_json(&self) -> PyResult<String> {
        self.fitted()?.to_json().map_err(from_calib)
    }

    /// The fitted parameters as a dict (the JSON's fields).
    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        py.import("json")?.call_method1("loads", (self.to_json()?,))
    }

    /// A fitted calibrator from [`Calibrator::to_json`]'s JSON; parameters of
    /// the wrong shape are refused.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<Self> {
        let fitted = FittedCalibrator::from_json(text).map_err(from_calib)?;
        Ok(Calibrator::with(fitted.kind(), Some(fitted)))
    }

    /// Writes the JSON to `path` atomically (a crash leaves the old file or
    /// the new one, never half of one). An existing file is kept unless
    /// `overwrite=True`.
    #[pyo3(signature = (path, *, overwrite=false))]
    fn save(&self, path: PathBuf, overwrite: bool) -> PyResult<()> {
        if path.exists() && !overwrite {
            return Err(calibration_error(format!(
                "{} exists; pass overwrite=True to replace it",
                path.display()
            )));
        }
        write_atomically(&path, self.to_json()?.as_bytes()).map_err(from_calib)
    }

    /// A calibrator saved by [`Calibrator::save`] (or `csam metrics
    /// --save-calibrators`). Only a regular file of at most 64 MiB is read
    /// (`FittedCalibrator::load`): `/dev/zero` or a stray large file is a
    /// CalibrationError, not a read that fills memory.
    #[staticmethod]
    fn load(path: PathBuf) -> PyResult<Self> {
        let fitted = FittedCalibrator::load(&path).map_err(from_calib)?;
        Ok(Calibrator::with(fitted.kind(), Some(fitted)))
    }

    fn __repr__(&self) -> PyResult<String> {
        let state = match self.lock()?.is_some() {
            true => "fitted",
            false => "not fitted",
        };
        Ok(format!("Calibrator({:?}, {state})", self.kind.name()))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Calibrator>()?;
    let names: Vec<&str> = CalibratorKind::ALL.iter().map(|k| k.name()).collect();
    m.add("CALIBRATORS", PyTuple::new(m.py(), names)?)
}
