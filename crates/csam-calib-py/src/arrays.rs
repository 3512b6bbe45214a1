//! Arrays across the boundary. A C-contiguous float32 or float64 matrix is
//! read in place (zero-copy); anything else numpy can read (other layouts,
//! float16, integers, lists, CPU torch tensors through `__array__`) is
//! converted once by numpy, to float32 when it is a narrower float and to
//! float64 otherwise. Results go back as new float64 arrays.

use ndarray::{Array2, ArrayView2, CowArray, Ix2};
use numpy::{PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use numpy::{PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use crate::errors::{calibration_error, from_calib};

/// A borrowed `N x K` float matrix.
pub enum Matrix<'py> {
    F32(PyReadonlyArray2<'py, f32>),
    F64(PyReadonlyArray2<'py, f64>),
}

/// A [`Matrix`] seen by csam-calib, in its own element type.
pub enum View<'a> {
    F32(ArrayView2<'a, f32>),
    F64(ArrayView2<'a, f64>),
}

/// Runs `$body` with `$v` bound to the `ArrayView2` inside a [`View`],
/// whichever its element type (csam-calib's metrics are generic over it).
macro_rules! with_view {
    ($view:expr, |$v:ident| $body:expr) => {
        match $view {
            $crate::arrays::View::F32($v) => $body,
            $crate::arrays::View::F64($v) => $body,
        }
    };
}
pub(crate) use with_view;

impl<'py> Matrix<'py> {
    /// `object` as a matrix; `name` names it in messages.
    pub fn new(object: &Bound<'py, PyAny>, name: &str) -> PyResult<Matrix<'py>> {
        if let Some(matrix) = Self::borrowed(object) {
            return Ok(matrix);
        }
        let array = as_numpy(object, name)?;
        check_ndim(&array, 2, name, "a 2-D array (N x K)")?;
        let dtype = match dtype_of(&array)? {
            ('f', size) if size <= 4 => "float32",
            ('f' | 'i' | 'u' | 'b', _) => "float64",
            (kind, _) => return Err(not_numbers(name, "numbers", kind)),
        };
        let converted = contiguous(&array, dtype)?;
        Self::borrowed(&converted)
            .ok_or_else(|| calibration_error(format!("{name}: numpy could not make it {dtype}")))
    }

    /// The matrix itself when it is C-contiguous float32 or float64.
    fn borrowed(object: &Bound<'py, PyAny>) -> Option<Matrix<'py>> {
        if let Ok(array) = object.cast::<PyArray2<f64>>() {
            if array.is_c_contiguous() {
                return Some(Matrix::F64(array.readonly()));
            }
        }
        if let Ok(array) = object.cast::<PyArray2<f32>>() {
            if array.is_c_contiguous() {
                return Some(Matrix::F32(array.readonly()));
            }
        }
        None
    }

    /// `(rows, columns)`.
    pub fn dim(&self) -> (usize, usize) {
        let shape = match self {
            Matrix::F32(array) => array.shape(),
            Matrix::F64(array) => array.shape(),
        };
        (shape[0], shape[1])
    }

    /// The data in place.
    pub fn view(&self) -> PyResult<View<'_>> {
        let dim = self.dim();
        Ok(match self {
            Matrix::F32(array) => View::F32(in_place(array.as_slice(), dim)?),
            Matrix::F64(array) => View::F64(in_place(array.as_slice(), dim)?),
        })
    }
}

impl View<'_> {
    /// The values as float64 (the calibrators' type): in place for float64,
    /// widened once for float32.
    pub fn to_f64(&self) -> CowArray<'_, f64, Ix2> {
        match self {
            View::F32(view) => CowArray::from(view.mapv(f64::from)),
            View::F64(view) => CowArray::from(view.view()),
        }
    }
}

/// A C-contiguous slice of `dim` seen as a matrix.
fn in_place<T, E>(slice: Result<&[T], E>, dim: (usize, usize)) -> PyResult<ArrayView2<'_, T>> {
    let slice = slice.map_err(|_| calibration_error("array is not contiguous"))?;
    ArrayView2::from_shape(dim, slice).map_err(|e| calibration_error(e.to_string()))
}

/// `object` as integer class labels of a matrix of `(rows, classes)`: a
/// 1-D array of one integer in `0..classes` per row.
pub fn labels(
    object: &Bound<'_, PyAny>,
    (rows, classes): (usize, usize),
    name: &str,
) -> PyResult<Vec<usize>> {
    let array = as_numpy(object, name)?;
    check_ndim(&array, 1, name, "a 1-D array of class indices")?;
    match dtype_of(&array)? {
        ('i' | 'u', _) => {}
        (kind, _) => return Err(not_numbers(name, "integer class indices", kind)),
    }
    let converted = contiguous(&array, "int64")?;
    let converted = converted.cast::<PyArray1<i64>>()?;
    let readonly: PyReadonlyArray1<'_, i64> = converted.readonly();
    let values = readonly
        .as_slice()
        .map_err(|_| calibration_error(format!("{name}: numpy could not make it contiguous")))?;
    let labels = csam_calib::scores::labels_from_i64(values, classes).map_err(from_calib)?;
    csam_calib::scores::validate_labels(&labels, rows, classes).map_err(from_calib)?;
    Ok(labels)
}

/// A float64 matrix as a new numpy array.
pub fn to_numpy(py: Python<'_>, array: Array2<f64>) -> PyResult<Bound<'_, PyArray2<f64>>> {
    let (rows, columns) = array.dim();
    let (values, _) = array
        .as_standard_layout()
        .into_owned()
        .into_raw_vec_and_offset();
    PyArray1::from_vec(py, values).reshape([rows, columns])
}

fn as_numpy<'py>(object: &Bound<'py, PyAny>, name: &str) -> PyResult<Bound<'py, PyUntypedArray>> {
    let numpy = object.py().import("numpy")?;
    let array = numpy.call_method1("asarray", (object,)).map_err(|e| {
        calibration_error(format!("{name}: numpy cannot read it as an array ({e})"))
    })?;
    Ok(array.cast_into::<PyUntypedArray>()?)
}

fn contiguous<'py>(array: &Bound<'py, PyUntypedArray>, dtype: &str) -> PyResult<Bound<'py, PyAny>> {
    let numpy = array.py().import("numpy")?;
    numpy.call_method1("ascontiguousarray", (array, dtype))
}

/// numpy's dtype kind character and item size.
fn dtype_of(array: &Bound<'_, PyUntypedArray>) -> PyResult<(char, usize)> {
    let dtype = array.getattr("dtype")?;
    Ok((
        dtype.getattr("kind")?.extract()?,
        dtype.getattr("itemsize")?.extract()?,
    ))
}

fn check_ndim(
    array: &Bound<'_, PyUntypedArray>,
    ndim: usize,
    name: &str,
    what: &str,
) -> PyResult<()> {
    match array.ndim() == ndim {
        true => Ok(()),
        false => Err(calibration_error(format!(
            "{name} must be {what}, got shape {:?}",
            array.shape()
        ))),
    }
}

fn not_numbers(name: &str, what: &str, kind: char) -> PyErr {
    calibration_error(format!(
        "{name} must hold {what}, got numpy dtype kind '{kind}'"
    ))
}
