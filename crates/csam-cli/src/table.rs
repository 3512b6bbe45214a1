//! Aligned plain-text tables for the terminal.

use std::fmt;

/// A table with a header row: the first column left-aligned (row labels), the
/// others right-aligned (numbers).
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(header: Vec<String>) -> Self {
        Table {
            header,
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells print empty, extra cells are kept.
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    fn widths(&self) -> Vec<usize> {
        let mut widths: Vec<usize> = Vec::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, cell) in row.iter().enumerate() {
                let w = cell.chars().count();
                match widths.get_mut(i) {
                    Some(current) => *current = (*current).max(w),
                    None => widths.push(w),
                }
            }
        }
        widths
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths = self.widths();
        let line = |f: &mut fmt::Formatter<'_>, row: &[String]| -> fmt::Result {
            let cells: Vec<String> = widths
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    let cell = row.get(i).map_or("", String::as_str);
                    if i == 0 {
                        format!("{cell:<w$}")
                    } else {
                        format!("{cell:>w$}")
                    }
                })
                .collect();
            writeln!(f, "{}", cells.join("  ").trim_end())
        };
        line(f, &self.header)?;
        let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        writeln!(f, "{}", "-".repeat(total))?;
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(cells: &[&str]) -> Vec<String> {
        cells.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn aligns_labels_left_and_numbers_right() {
        let mut t = Table::new(strings(&["metric", "raw", "temperature"]));
        t.push(strings(&["ECE (%)", "12.50%", "1.00%"]));
        t.push(strings(&["NLL", "0.2", "-"]));
        let expected = "\
metric      raw  temperature
----------------------------
ECE (%)  12.50%        1.00%
NLL         0.2            -
";
        assert_eq!(t.to_string(), expected);
    }
}
