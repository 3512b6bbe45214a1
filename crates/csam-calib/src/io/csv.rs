//! Delimited text files: one sample per line, values separated by commas or by
//! whitespace (tabs, spaces), as written by `numpy.savetxt`, pandas or a
//! spreadsheet.
//!
//! Rules: lines that are empty or start with `#` are skipped; the first
//! remaining line is a header and skipped when any of its fields is not a
//! number; the delimiter is a comma if the first data line contains one,
//! whitespace otherwise; every data line must have the same number of values.
//! When every value is an integer the array has integer elements (usable as
//! labels), otherwise floating point.

use std::path::Path;

use super::array::{format_error, io_error, Elements, LoadedArray};
use crate::error::Result;

/// Reads the delimited text file at `path` as a 2-D array (lines x values).
pub fn read(path: &Path) -> Result<LoadedArray> {
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let text = std::str::from_utf8(&bytes).map_err(|e| {
        format_error(
            path,
            format!(
                "not UTF-8 text (invalid byte at offset {})",
                e.valid_up_to()
            ),
        )
    })?;
    parse(text).map_err(|detail| format_error(path, detail))
}

/// Parses delimited text (see the module documentation).
pub fn parse(text: &str) -> std::result::Result<LoadedArray, String> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.trim()))
        .filter(|(_, line)| !line.is_empty() && !line.starts_with('#'))
        .peekable();
    let comma = lines.peek().is_some_and(|(_, line)| line.contains(','));

    let mut floats = Vec::new();
    // Stays Some while every value so far is an integer.
    let mut integers = Some(Vec::new());
    let mut width: Option<(usize, usize)> = None; // (values per line, first data line)
    let mut rows = 0usize;
    for (index, (number, line)) in lines.enumerate() {
        let values = split_fields(line, comma);
        if index == 0 && values.iter().any(|v| v.parse::<f64>().is_err()) {
            continue; // header row
        }
        match width {
            None => width = Some((values.len(), number)),
            Some((w, first_line)) if w != values.len() => {
                return Err(format!(
                    "line {number} has {} values, line {first_line} has {w}",
                    values.len()
                ))
            }
            Some(_) => {}
        }
        for (column, value) in values.iter().enumerate() {
            let x = value.parse::<f64>().map_err(|_| {
                format!(
                    "line {number}, column {}: '{value}' is not a number",
                    column + 1
                )
            })?;
            floats.push(x);
            integers = integers.and_then(|mut ints: Vec<i64>| {
                ints.push(value.parse().ok()?);
                Some(ints)
            });
        }
        rows += 1;
    }
    let cols = width.map_or(0, |(w, _)| w);
    let elements = match integers {
        Some(ints) => Elements::Integer(ints),
        None => Elements::Float(floats),
    };
    Ok(LoadedArray {
        shape: vec![rows, cols],
        elements,
    })
}

/// The fields of one line: comma-separated (each trimmed) or whitespace-separated.
fn split_fields(line: &str, comma: bool) -> Vec<&str> {
    if comma {
        line.split(',').map(str::trim).collect()
    } else {
        line.split_whitespace().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_commas_and_comments() {
        let a = parse("# probs\nc0, c1,c2\n0.1,0.2,0.7\n\n 0.5 ,0.5, 0\n").unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(
            a.elements,
            Elements::Float(vec![0.1, 0.2, 0.7, 0.5, 0.5, 0.0])
        );
    }

    #[test]
    fn whitespace_and_integers() {
        let a = parse("1\t2\n3   4\r\n").unwrap();
        assert_eq!(a.shape, vec![2, 2]);
        assert_eq!(a.elements, Elements::Integer(vec![1, 2, 3, 4]));
        let labels = parse("label\n3\n0\n").unwrap();
        assert_eq!(labels.into_labels(Path::new("l.csv")).unwrap(), vec![3, 0]);
    }

    #[test]
    fn ragged_rows_and_bad_values_name_the_line() {
        let e = parse("1,2,3\n4,5\n").unwrap_err();
        assert_eq!(e, "line 2 has 2 values, line 1 has 3");
        let e = parse("a,b\n1,2\n\n3,x\n").unwrap_err();
        assert_eq!(e, "line 4, column 2: 'x' is not a number");
        let e = parse("1,2,3\n1,,2\n").unwrap_err();
        assert!(e.contains("line 2, column 2: ''"), "{e}");
    }

    #[test]
    fn empty_text_gives_an_empty_array() {
        let a = parse("# nothing\n\n").unwrap();
        assert_eq!(a.shape, vec![0, 0]);
        assert!(a
            .into_scores(Path::new("e.csv"))
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn file_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.csv");
        std::fs::write(&p, b"1,2\n\xff,3\n").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("bad.csv") && e.contains("offset 4"), "{e}");
    }

    proptest::proptest! {
        /// Any text parses or is refused without panicking; a parsed array's
        /// shape always matches its values.
        #[test]
        fn arbitrary_text_never_panics(text in "[0-9a-z.,#\\- \t\n]{0,80}") {
            if let Ok(a) = parse(&text) {
                proptest::prop_assert_eq!(a.shape[0] * a.shape[1], a.elements.len());
            }
        }
    }
}
