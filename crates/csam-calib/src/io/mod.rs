//! Readers for predictions and labels saved by other tools, and an `.npy` writer.
//!
//! The format follows the file extension: `.npy` ([`npy`]), `.npz` ([`npz`]),
//! `.safetensors` ([`safetensors`](mod@safetensors)), `.csv` / `.tsv` / `.txt`
//! ([`csv`]). float32 predictions stay float32 ([`Scores`]); float16 and
//! bfloat16 ones are widened to float32 once, exactly. The readers are strict and small (they
//! are fuzzed): every refusal is a [`CalibError::Io`] or [`CalibError::Format`]
//! naming the file and, where it applies, the byte offset or line. The `.npy`
//! reader also offers its refusals as an [`NpyError`] that keeps the offsets
//! as numbers, and a `uint8` path for image arrays ([`npy::read_u8`]).
//!
//! [`CalibError::Io`]: crate::CalibError::Io
//! [`CalibError::Format`]: crate::CalibError::Format

mod array;
mod atomic;
pub mod csv;
mod fault;
pub mod npy;
mod npy_error;
mod npy_header;
pub mod npz;
pub mod safetensors;

use std::path::Path;

use ndarray::Array2;

pub(crate) use array::{format_error, io_error, open_regular_file};
pub use array::{Elements, LoadedArray, Scores};
pub use atomic::{is_temporary_name, write_atomically, write_atomically_with, AtomicWriteError};
pub use npy_error::{NpyError, NpyProblem};
pub use npy_header::{ByteOrder, Dtype, Header as NpyHeader, Kind};

use crate::error::Result;

/// The array read from an `.npz` that holds several when no name is given:
/// the one of these names that is present (if two are, the caller must choose).
const MATRIX_NAMES: &[&str] = &["logits", "probs"];
const LABEL_NAMES: &[&str] = &["labels"];

/// Reads an `N x K` prediction matrix (logits or probabilities) in the type
/// it was stored in (see [`Scores`]).
///
/// `array_name` picks the array inside an `.npz` or the tensor inside a
/// `.safetensors` file (see [`npz::read`]; by default the only one, or the one
/// named `logits` or `probs`); it is refused for other formats. Values are not
/// validated here beyond their shape (finite, normalised: see the `scores`
/// validators).
pub fn load_scores(path: impl AsRef<Path>, array_name: Option<&str>) -> Result<Scores> {
    let path = path.as_ref();
    load(path, array_name, MATRIX_NAMES)?.into_scores(path)
}

/// [`load_scores`] as `f64`.
pub fn load_matrix(path: impl AsRef<Path>, array_name: Option<&str>) -> Result<Array2<f64>> {
    load_scores(path, array_name).map(Scores::into_f64)
}

/// Reads `N` integer labels (shape `(N,)` or `(N, 1)`, integer or bool dtype).
///
/// `array_name` picks the array inside an `.npz` or `.safetensors` file (by
/// default the only one, or the one named `labels`). The range `0..K` is checked by the caller, who
/// knows `K`.
pub fn load_labels(path: impl AsRef<Path>, array_name: Option<&str>) -> Result<Vec<i64>> {
    let path = path.as_ref();
    load(path, array_name, LABEL_NAMES)?.into_labels(path)
}

/// The shape of the matrix [`load_scores`] would read, from the file's
/// header alone (see [`header_shape`]).
pub fn scores_shape(
    path: impl AsRef<Path>,
    array_name: Option<&str>,
) -> Result<Option<Vec<usize>>> {
    header_shape(path.as_ref(), array_name, MATRIX_NAMES)
}

/// The shape of the labels [`load_labels`] would read, from the file's
/// header alone (see [`header_shape`]).
pub fn labels_shape(
    path: impl AsRef<Path>,
    array_name: Option<&str>,
) -> Result<Option<Vec<usize>>> {
    header_shape(path.as_ref(), array_name, LABEL_NAMES)
}

/// The shape of the array [`load`] would read, where the format states it
/// before the data: `.npy` and an `.npz` member. An `.npz` member may inflate
/// up to deflate's limit, about a thousandfold (a zero-filled array does), so
/// a caller that needs two files to agree (one label per prediction row)
/// compares their shapes before reading either. `None` for `.safetensors` and
/// delimited text, which are read whole and hold no more in memory than on
/// disk.
fn header_shape(
    path: &Path,
    array_name: Option<&str>,
    preferred: &[&str],
) -> Result<Option<Vec<usize>>> {
    Ok(match format_for(path, array_name)? {
        Format::Npy => Some(npy::NpyInput::open(path)?.header().shape.clone()),
        Format::Npz => Some(npz::shape(path, array_name, preferred)?),
        Format::Safetensors | Format::Delimited => None,
    })
}

/// The on-disk formats, chosen by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Npy,
    Npz,
    Safetensors,
    Delimited,
}

fn format_of(path: &Path) -> Result<Format> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("npy") => Ok(Format::Npy),
        Some("npz") => Ok(Format::Npz),
        Some("safetensors") => Ok(Format::Safetensors),
        Some("csv" | "tsv" | "txt") => Ok(Format::Delimited),
        _ => Err(array::format_error(
            path,
            "unknown file type; expected the extension .npy, .npz, .safetensors, .csv, .tsv or .txt"
                .into(),
        )),
    }
}

/// The format of `path`, refused when it cannot hold the named array.
fn format_for(path: &Path, array_name: Option<&str>) -> Result<Format> {
    let format = format_of(path)?;
    if array_name.is_some() && !matches!(format, Format::Npz | Format::Safetensors) {
        return Err(array::format_error(
            path,
            "an array name only applies to .npz and .safetensors files".into(),
        ));
    }
    Ok(format)
}

fn load(path: &Path, array_name: Option<&str>, preferred: &[&str]) -> Result<LoadedArray> {
    match format_for(path, array_name)? {
        Format::Npy => npy::read(path),
        Format::Npz => npz::read(path, array_name, preferred),
        Format::Safetensors => safetensors::read(path, array_name, preferred),
        Format::Delimited => csv::read(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatches_on_extension() {
        let dir = tempfile::tempdir().unwrap();
        let csv = dir.path().join("p.CSV");
        std::fs::write(&csv, "0.25,0.75\n1,0\n").unwrap();
        let m = load_matrix(&csv, None).unwrap();
        assert_eq!(m, ndarray::array![[0.25, 0.75], [1.0, 0.0]]);
        let npy = dir.path().join("l.npy");
        npy::write_i64(&npy, &[1, 0]).unwrap();
        assert_eq!(load_labels(&npy, None).unwrap(), vec![1, 0]);
    }

    #[test]
    fn unknown_extension_and_misplaced_array_name() {
        let e = load_matrix("preds.pt", None).unwrap_err().to_string();
        assert!(e.starts_with("preds.pt: unknown file type"), "{e}");
        let e = load_labels("labels.npy", Some("labels"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("only applies to .npz"), "{e}");
    }

    #[test]
    fn missing_file_names_the_path() {
        let e = load_matrix("/no/such/dir/p.npz", None).unwrap_err();
        assert!(matches!(e, crate::CalibError::Io { .. }), "{e:?}");
        assert!(e.to_string().starts_with("/no/such/dir/p.npz:"));
    }
}
