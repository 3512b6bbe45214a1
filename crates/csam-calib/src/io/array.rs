//! The in-memory result of reading one array from a file, before it becomes a
//! prediction matrix or a label vector.

use std::path::Path;

use ndarray::Array2;

use crate::error::{CalibError, Result};

/// The element values of a decoded array, in a type that holds each of them
/// exactly, so that nothing is rounded before the caller decides what the
/// array is.
#[derive(Debug, Clone, PartialEq)]
pub enum Elements {
    /// float64 values (and non-integer CSV values).
    Float(Vec<f64>),
    /// float32 values, and float16 / bfloat16 ones widened (exactly) to float32:
    /// kept at half the size of float64.
    Float32(Vec<f32>),
    /// Signed and unsigned integers up to 8 bytes and booleans (0 / 1).
    /// Unsigned values above `i64::MAX` cannot be represented and are refused
    /// when the file is decoded.
    Integer(Vec<i64>),
}

impl Elements {
    /// Number of values.
    pub fn len(&self) -> usize {
        match self {
            Elements::Float(v) => v.len(),
            Elements::Float32(v) => v.len(),
            Elements::Integer(v) => v.len(),
        }
    }

    /// True when there are no values.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An array read from a file: its shape (row-major, C order) and its values.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedArray {
    /// Dimensions, outermost first; the product equals `elements.len()`.
    pub shape: Vec<usize>,
    /// Values in C (row-major) order.
    pub elements: Elements,
}

/// An `N x K` prediction matrix in the type it was stored in: float32 (and
/// float16 / bfloat16, widened once) as `f32`, float64 and integers as `f64`.
/// The metrics are generic over both, so a float32 matrix is never copied to
/// float64 unless a caller asks ([`Scores::into_f64`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Scores {
    F32(Array2<f32>),
    F64(Array2<f64>),
}

impl Scores {
    /// `(N, K)`.
    pub fn dim(&self) -> (usize, usize) {
        match self {
            Scores::F32(m) => m.dim(),
            Scores::F64(m) => m.dim(),
        }
    }

    /// The matrix as `f64` (widening a float32 one, which is exact).
    pub fn into_f64(self) -> Array2<f64> {
        match self {
            Scores::F32(m) => m.mapv(f64::from),
            Scores::F64(m) => m,
        }
    }
}

impl LoadedArray {
    /// Interprets the array as an `N x K` prediction matrix (logits or
    /// probabilities). Requires a 2-D array with at least one row and one column.
    pub fn into_scores(self, source: &Path) -> Result<Scores> {
        let (rows, cols) = match self.shape[..] {
            [rows, cols] => (rows, cols),
            _ => {
                return Err(format_error(
                    source,
                    format!(
                        "expected a 2-D array (N samples x K classes), found shape {}",
                        shape_text(&self.shape)
                    ),
                ))
            }
        };
        if rows == 0 || cols == 0 {
            return Err(format_error(
                source,
                format!(
                    "the prediction matrix is empty (shape {})",
                    shape_text(&self.shape)
                ),
            ));
        }
        let shape_error = |e: ndarray::ShapeError| format_error(source, e.to_string());
        Ok(match self.elements {
            Elements::Float32(v) => {
                Scores::F32(Array2::from_shape_vec((rows, cols), v).map_err(shape_error)?)
            }
            Elements::Float(v) => {
                Scores::F64(Array2::from_shape_vec((rows, cols), v).map_err(shape_error)?)
            }
            Elements::Integer(v) => Scores::F64(
                Array2::from_shape_vec((rows, cols), v.into_iter().map(|x| x as f64).collect())
                    .map_err(shape_error)?,
            ),
        })
    }

    /// Interprets the array as `N` integer class labels. Accepts shape `(N,)` or
    /// `(N, 1)`; requires an integer or boolean dtype (float labels are refused
    /// rather than rounded).
    pub fn into_labels(self, source: &Path) -> Result<Vec<i64>> {
        let n = match self.shape[..] {
            [n] | [n, 1] => n,
            _ => {
                return Err(format_error(
                    source,
                    format!(
                        "expected labels of shape (N,) or (N, 1), found shape {}",
                        shape_text(&self.shape)
                    ),
                ))
            }
        };
        if n == 0 {
            return Err(format_error(
                source,
                "there are no labels (N = 0)".to_string(),
            ));
        }
        match self.elements {
            Elements::Integer(v) => Ok(v),
            Elements::Float(_) | Elements::Float32(_) => Err(format_error(
                source,
                "labels must be integers, found floating-point values \
                 (save them with labels.astype(numpy.int64))"
                    .to_string(),
            )),
        }
    }
}

/// `(3, 4)` / `(3,)` / `()`: shapes written the way NumPy prints them.
pub(crate) fn shape_text(shape: &[usize]) -> String {
    match shape {
        [single] => format!("({single},)"),
        _ => {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// A [`CalibError::Format`] for `source`.
pub(crate) fn format_error(source: &Path, detail: String) -> CalibError {
    CalibError::Format {
        path: source.to_path_buf(),
        detail,
    }
}

/// Opens `path` for reading and returns it with its length; refuses anything
/// but a regular file (a directory would otherwise read as a short file).
pub(crate) fn open_regular_file(path: &Path) -> Result<(std::fs::File, u64)> {
    regular_file(path).map_err(|e| io_error(path, e))
}

/// [`open_regular_file`] with the bare operating-system error.
pub(crate) fn regular_file(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let file = std::fs::File::open(path)?;
    let metadata = file.metadata()?;
    if !metadata.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((file, metadata.len()))
}

/// A [`CalibError::Io`] for `source`.
pub(crate) fn io_error(source: &Path, error: std::io::Error) -> CalibError {
    CalibError::Io {
        path: source.to_path_buf(),
        source: error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> &'static Path {
        Path::new("x.npy")
    }

    #[test]
    fn matrix_keeps_row_major_order() {
        let a = LoadedArray {
            shape: vec![2, 3],
            elements: Elements::Integer(vec![0, 1, 2, 3, 4, 5]),
        };
        let m = a.into_scores(path()).unwrap().into_f64();
        assert_eq!(m[[1, 0]], 3.0);
        assert_eq!(m[[0, 2]], 2.0);
    }

    #[test]
    fn matrix_refuses_1d_and_empty() {
        let one_d = LoadedArray {
            shape: vec![3],
            elements: Elements::Float(vec![0.1, 0.2, 0.7]),
        };
        let err = one_d.into_scores(path()).unwrap_err().to_string();
        assert!(err.contains("x.npy") && err.contains("(3,)"), "{err}");
        let empty = LoadedArray {
            shape: vec![0, 4],
            elements: Elements::Float(vec![]),
        };
        assert!(empty
            .into_scores(path())
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn float32_stays_float32() {
        let a = LoadedArray {
            shape: vec![1, 2],
            elements: Elements::Float32(vec![0.25, 0.75]),
        };
        assert_eq!(
            a.into_scores(path()).unwrap(),
            Scores::F32(ndarray::array![[0.25, 0.75]])
        );
    }

    #[test]
    fn labels_accept_column_and_refuse_floats_and_matrices() {
        let column = LoadedArray {
            shape: vec![2, 1],
            elements: Elements::Integer(vec![3, 1]),
        };
        assert_eq!(column.into_labels(path()).unwrap(), vec![3, 1]);
        let floats = LoadedArray {
            shape: vec![2],
            elements: Elements::Float(vec![1.0, 0.0]),
        };
        assert!(floats
            .into_labels(path())
            .unwrap_err()
            .to_string()
            .contains("integers"));
        let matrix = LoadedArray {
            shape: vec![2, 2],
            elements: Elements::Integer(vec![0, 1, 1, 0]),
        };
        assert!(matrix
            .into_labels(path())
            .unwrap_err()
            .to_string()
            .contains("(2, 2)"));
    }

    #[test]
    fn shape_text_matches_numpy() {
        assert_eq!(shape_text(&[3]), "(3,)");
        assert_eq!(shape_text(&[3, 4]), "(3, 4)");
        assert_eq!(shape_text(&[]), "()");
    }
}
