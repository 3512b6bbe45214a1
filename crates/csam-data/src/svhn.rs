//! SVHN, the Street View House Numbers in their cropped-digits form
//! ("format 2", Netzer et al. 2011, <http://ufldl.stanford.edu/housenumbers/>).
//!
//! `DIR/test_32x32.mat` (26,032 images) and `DIR/train_32x32.mat` (73,257)
//! are level 5 MAT-files (read by [`super::mat`]) holding
//! - `X`: `uint8`, `32 x 32 x 3 x N` in MATLAB's column-major order, so
//!   that pixel `(row h, column w)` of channel `c` of image `n` is the value
//!   at `h + 32 w + 1024 c + 3072 n`; it becomes the CHW image `n` at
//!   `1024 c + 32 h + w`, as torchvision's `SVHN` transposes `X` by
//!   `(3, 2, 0, 1)`;
//! - `y`: `N x 1` (or `1 x N`), stored as `uint8` or `double`, the digit
//!   with `10` standing for `0`; label = `y mod 10`, torchvision's mapping
//!   (`np.place(labels, labels == 10, 0)`). Any other value is an error.
//!
//! The train file may be absent (a test-only source). `extra_32x32.mat`
//! (531,131 easier images that some papers add to the training set) is
//! not read. Digits are not mirror invariant.

use std::path::Path;

use super::error::{DataError, Result};
use super::mat::{self, MatArray, Values};
use super::part::{into_source, Classes, LabelLocation, Part};
use super::stream::ByteStream;
use super::DataSource;

/// The test file, required.
const TEST_FILE: &str = "test_32x32.mat";
/// The train file, optional.
const TRAIN_FILE: &str = "train_32x32.mat";
/// `(height, width, channels)` of an image, MATLAB's first three dimensions of `X`.
const IMAGE_DIMS: [usize; 3] = [32, 32, 3];
const N_CLASSES: usize = 10;

/// Loads `dir` (see the module doc); the parts are named `<name>/train`
/// and `<name>/test`.
pub(crate) fn load(dir: &Path, name: &str) -> Result<DataSource> {
    let test_path = dir.join(TEST_FILE);
    if !test_path.is_file() {
        return Err(DataError::Missing {
            path: test_path,
            hint: format!(
                "an SVHN directory holds {TEST_FILE} (and {TRAIN_FILE} to train), the \
                 cropped-digits files of ufldl.stanford.edu/housenumbers"
            ),
        });
    }
    let train_path = dir.join(TRAIN_FILE);
    let train = if train_path.is_file() {
        Some(read_part(ByteStream::open(&train_path)?)?)
    } else {
        None
    };
    let test = read_part(ByteStream::open(&test_path)?)?;
    into_source(name, train, test, Classes::Fixed(N_CLASSES))
}

/// One SVHN MAT-file as a test-only source (for `parse::svhn`).
pub(crate) fn read_source(stream: ByteStream<'_>) -> Result<DataSource> {
    into_source("svhn", None, read_part(stream)?, Classes::Fixed(N_CLASSES))
}

/// One SVHN MAT-file: its `X` and `y`, checked and converted.
fn read_part(stream: ByteStream<'_>) -> Result<Part> {
    let path = stream.path().to_path_buf();
    let mut arrays = mat::read(stream)?;
    let mut take = |name: &str| match arrays.iter().position(|a| a.name == name) {
        Some(i) => Ok(arrays.swap_remove(i)),
        None => Err(DataError::Missing {
            path: path.clone(),
            hint: format!(
                "an SVHN file holds the arrays X and y; array {name} is not among {:?}",
                arrays.iter().map(|a| a.name.as_str()).collect::<Vec<_>>()
            ),
        }),
    };
    let (x, y) = (take("X")?, take("y")?);
    let n = image_count(&x)?;
    let labels = labels(&y, n)?;
    let Values::U8(pixels) = x.values else {
        return Err(DataError::BadHeader {
            path: x.path,
            offset: x.first_value,
            reason: "X is stored as double: expected uint8 pixels".into(),
        });
    };
    Ok(Part {
        images: column_major_to_chw(pixels),
        labels,
        shape: (IMAGE_DIMS[2], IMAGE_DIMS[0], IMAGE_DIMS[1]),
        label_locations: vec![LabelLocation {
            first: y.first_value,
            stride: y.value_bytes(),
            path: y.path,
            count: n,
        }],
    })
}

/// The image count of `X`: `32 x 32 x 3 x N`, or `32 x 32 x 3` for one
/// image (MATLAB drops trailing singleton dimensions).
fn image_count(x: &MatArray) -> Result<usize> {
    match x.dims[..] {
        [h, w, c] if [h, w, c] == IMAGE_DIMS => Ok(1),
        [h, w, c, n] if [h, w, c] == IMAGE_DIMS => Ok(n),
        _ => Err(DataError::ShapeMismatch {
            path: x.path.clone(),
            expected: "X of 32 x 32 x 3 x N (SVHN's cropped digits)".into(),
            found: format!("X of {:?}", x.dims),
        }),
    }
}

/// `y`'s `n` digits as labels (`10` becomes `0`).
fn labels(y: &MatArray, n: usize) -> Result<Vec<usize>> {
    if !matches!(y.dims[..], [m, 1] | [1, m] if m == n) {
        return Err(DataError::ShapeMismatch {
            path: y.path.clone(),
            expected: format!("y of {n} x 1, one label per image of X"),
            found: format!("y of {:?}", y.dims),
        });
    }
    let digit = |i: usize, value: f64| {
        if value.fract() == 0.0 && (1.0..=10.0).contains(&value) {
            Ok(value as usize % 10)
        } else {
            Err(DataError::BadLabel {
                path: y.path.clone(),
                offset: y.first_value + i as u64 * y.value_bytes(),
                value: value.to_string(),
                expected: "an SVHN digit 1..10 (10 stands for 0)".into(),
            })
        }
    };
    match &y.values {
        Values::U8(values) => values
            .iter()
            .enumerate()
            .map(|(i, &v)| digit(i, v.into()))
            .collect(),
        Values::F64(values) => values
            .iter()
            .enumerate()
            .map(|(i, &v)| digit(i, v))
            .collect(),
    }
}

/// `X`'s column-major `32 x 32 x 3 x N` bytes as `N` CHW images: every
/// `32 x 32` plane is transposed in place (MATLAB's column `w` becomes row `h`).
fn column_major_to_chw(mut pixels: Vec<u8>) -> Vec<u8> {
    let (height, width) = (IMAGE_DIMS[0], IMAGE_DIMS[1]);
    let mut column_major = vec![0; height * width];
    for plane in pixels.chunks_exact_mut(height * width) {
        column_major.copy_from_slice(plane);
        for w in 0..width {
            for h in 0..height {
                plane[h * width + w] = column_major[h + height * w];
            }
        }
    }
    pixels
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_are_transposed_from_column_major() {
        // Plane value at column-major index h + 32 w is 100 h + w (mod 256).
        let mut plane = vec![0u8; 1024];
        for w in 0..32 {
            for h in 0..32 {
                plane[h + 32 * w] = ((100 * h + w) % 256) as u8;
            }
        }
        let chw = column_major_to_chw(plane);
        assert_eq!(chw[0], 0);
        assert_eq!(chw[1], 1, "row 0, column 1");
        assert_eq!(chw[32], 100, "row 1, column 0");
        assert_eq!(chw[32 * 2 + 5], 205);
    }
}
