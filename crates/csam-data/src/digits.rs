//! scikit-learn's 8x8 handwritten digits (`digits.csv.gz`, the UCI "Optical
//! Recognition of Handwritten Digits" test set as shipped by scikit-learn).
//!
//! Format: one sample per line, 64 comma-separated integer pixels in `0..=16`
//! (row-major 8x8), then the label `0..=9`. 1,797 lines.
//!
//! Conventions of this loader:
//! - Pixels are rescaled to bytes as `round(v * 255 / 16)` (integer
//!   `(v * 255 + 8) / 16`, so 16 maps to 255) so that, like every other
//!   dataset, `pixel / 255` lies in `[0, 1]`.
//! - There is no official test split. The test part is, for each class, the
//!   last `floor(n_c / 5)` samples of that class in file order (355 samples:
//!   a deterministic, stratified ~20%); the other 1,442 are the train part.
//!   Both parts keep file order.

use std::path::Path;

use super::dataset::{DataSource, Dataset};
use super::error::{DataError, Result};
use super::stream::ByteStream;

/// Number of pixels per sample (8 x 8).
const PIXELS: usize = 64;
/// Largest pixel value of the source.
const MAX_PIXEL: u32 = 16;
/// Digits 0..=9.
const N_CLASSES: usize = 10;

/// Parses the CSV (gzipped or plain) at `path` (`bytes` are its contents)
/// and splits it as documented in the module.
pub(crate) fn load(path: &Path, bytes: &[u8]) -> Result<DataSource> {
    let text = ByteStream::from_bytes(path, bytes).read_to_end()?;
    let (images, labels) = parse(path, &text)?;
    let all = Dataset::new("digits", images, labels, (1, 8, 8), N_CLASSES)?;
    let (train, test) = test_indices_split(&all.labels, N_CLASSES);
    DataSource::new(
        Some(all.select(&train).renamed("digits/train")),
        all.select(&test).renamed("digits/test"),
    )
}

fn parse(path: &Path, text: &[u8]) -> Result<(Vec<u8>, Vec<usize>)> {
    let text = std::str::from_utf8(text).map_err(|e| DataError::BadRecord {
        path: path.to_path_buf(),
        line: 1 + text[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        reason: "not UTF-8 text".into(),
    })?;
    let mut images = Vec::new();
    let mut labels = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let bad = |reason: String| DataError::BadRecord {
            path: path.to_path_buf(),
            line: index + 1,
            reason,
        };
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != PIXELS + 1 {
            return Err(bad(format!(
                "{} fields, expected {} (64 pixels and a label)",
                fields.len(),
                PIXELS + 1
            )));
        }
        for (column, field) in fields.iter().enumerate() {
            let value: u32 = field.trim().parse().map_err(|_| {
                bad(format!(
                    "field {} is {field:?}, not a non-negative integer",
                    column + 1
                ))
            })?;
            if column < PIXELS {
                if value > MAX_PIXEL {
                    return Err(bad(format!(
                        "pixel {} is {value}, outside 0..=16",
                        column + 1
                    )));
                }
                // Fits a byte: at most (16 * 255 + 8) / 16 = 255.
                images.push(((value * 255 + MAX_PIXEL / 2) / MAX_PIXEL) as u8);
            } else if (value as usize) < N_CLASSES {
                labels.push(value as usize);
            } else {
                return Err(bad(format!("label {value} is outside 0..=9")));
            }
        }
    }
    Ok((images, labels))
}

/// `(train, test)` indices: per class, the last `floor(n_c / 5)` samples in
/// file order go to test. Both lists are in increasing order.
fn test_indices_split(labels: &[usize], n_classes: usize) -> (Vec<usize>, Vec<usize>) {
    let mut counts = vec![0usize; n_classes];
    for &l in labels {
        counts[l] += 1;
    }
    let mut seen = vec![0usize; n_classes];
    let (mut train, mut test) = (Vec::new(), Vec::new());
    for (i, &l) in labels.iter().enumerate() {
        seen[l] += 1;
        if seen[l] > counts[l] - counts[l] / 5 {
            test.push(i);
        } else {
            train.push(i);
        }
    }
    (train, test)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_split_takes_the_last_fifth_of_each_class() {
        // class 0: 6 samples -> last 1 to test; class 1: 10 -> last 2.
        let labels = [0, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1, 1, 0, 1];
        let (train, test) = test_indices_split(&labels, 2);
        assert_eq!(test, vec![13, 14, 15]);
        assert_eq!(train.len() + test.len(), labels.len());
    }

    #[test]
    fn bad_lines_name_the_line() {
        let line = |last: &str| format!("{}{last}\n", "0,".repeat(64));
        let good = line("3");
        let text = format!("{good}{}", line("10"));
        match parse(Path::new("d.csv"), text.as_bytes()) {
            Err(DataError::BadRecord { line, .. }) => assert_eq!(line, 2),
            other => panic!("expected BadRecord, got {other:?}"),
        }
        let short = format!("{good}1,2,3\n");
        assert!(matches!(
            parse(Path::new("d.csv"), short.as_bytes()),
            Err(DataError::BadRecord { line: 2, .. })
        ));
        let big_pixel = format!("17,{}", line("3").split_at(2).1);
        assert!(matches!(
            parse(Path::new("d.csv"), big_pixel.as_bytes()),
            Err(DataError::BadRecord { line: 1, .. })
        ));
    }

    #[test]
    fn pixels_scale_to_the_byte_range() {
        let text = format!("16,8,1,{}0\n", "0,".repeat(61));
        let (images, labels) = parse(Path::new("d.csv"), text.as_bytes()).unwrap();
        assert_eq!(&images[..4], &[255, 128, 16, 0]);
        assert_eq!(labels, vec![0]);
    }
}
