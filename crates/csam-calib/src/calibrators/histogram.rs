//! Histogram binning (Zadrozny & Elkan 2001, "Obtaining calibrated probability
//! estimates from decision trees and naive Bayesian classifiers", ICML), one-vs-rest
//! (Zadrozny & Elkan 2002, KDD) as in Guo et al. 2017, §4.1.
//!
//! For each class `k`, the uncalibrated probability `p_k = softmax(z)_k` is placed in
//! one of `M` equal-width bins (default `M = 15`). Bin `b` covers
//! `(b/M, (b+1)/M]` and bin 0 also takes `p_k = 0`: the bin-edge convention of the
//! metrics' default lineage (a) (crates/csam-calib/README.md, "ECE: equal-width
//! bins"). Fitting stores, per class and bin,
//! the fraction of validation samples in the bin whose label is `k`:
//!
//! `theta_kb = #{n : p_nk in bin b, y_n = k} / #{n : p_nk in bin b}`.
//!
//! A bin that no validation sample fell into has no estimate (`null` in JSON) and
//! leaves `p_k` unchanged: no evidence, no correction. Transform replaces each `p_k`
//! by its bin's `theta_kb` and divides the row by its sum; a row whose values are all
//! 0 falls back to the uncalibrated `p` (see `one_vs_rest`).

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::input::{check_fit_inputs, check_transform_inputs};
use super::one_vs_rest::renormalise_rows;
use super::Calibrator;
use crate::error::{CalibError, Result};
use crate::scores::softmax;

/// Default number of equal-width bins, the metrics' default `M`.
pub const DEFAULT_BINS: usize = 15;

/// One-vs-rest histogram binning; see the module documentation.
/// `Default` is unfitted with [`DEFAULT_BINS`] bins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "HistogramParts")]
pub struct HistogramBinning {
    n_bins: usize,
    /// `bin_values[k][b]`: positive fraction of class `k` in bin `b`, `None` if the bin was empty.
    bin_values: Vec<Vec<Option<f64>>>,
}

impl Default for HistogramBinning {
    fn default() -> Self {
        Self {
            n_bins: DEFAULT_BINS,
            bin_values: Vec::new(),
        }
    }
}

impl HistogramBinning {
    /// An unfitted calibrator with `n_bins >= 1` equal-width bins.
    pub fn with_bins(n_bins: usize) -> Result<Self> {
        if n_bins == 0 {
            return Err(CalibError::InvalidArgument(
                "histogram binning needs at least one bin".into(),
            ));
        }
        Ok(Self {
            n_bins,
            bin_values: Vec::new(),
        })
    }

    /// Number of bins `M`.
    pub fn n_bins(&self) -> usize {
        self.n_bins
    }

    /// Fitted values, `[class][bin]`; `None` marks an empty bin.
    pub fn bin_values(&self) -> &[Vec<Option<f64>>] {
        &self.bin_values
    }

    fn n_classes(&self) -> usize {
        self.bin_values.len()
    }
}

/// Index of the bin `(b/M, (b+1)/M]` holding `p` (bin 0 also holds `p <= 0`,
/// bin `M - 1` also holds `p > 1`). Edges are computed as `b as f64 / M as f64`.
fn bin_index(p: f64, n_bins: usize) -> usize {
    let edge = |b: usize| b as f64 / n_bins as f64;
    // Starting guess from ceil(p M) - 1, then corrected against the exact edges.
    let mut bin = ((p * n_bins as f64).ceil().max(1.0) as usize).min(n_bins) - 1;
    while bin > 0 && p <= edge(bin) {
        bin -= 1;
    }
    while bin + 1 < n_bins && p > edge(bin + 1) {
        bin += 1;
    }
    bin
}

impl Calibrator for HistogramBinning {
    fn name(&self) -> &'static str {
        "histogram"
    }

    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        check_fit_inputs("histogram", logits, labels)?;
        let probabilities = softmax(logits);
        let k = probabilities.ncols();
        let mut counts = vec![vec![0usize; self.n_bins]; k];
        let mut positives = vec![vec![0usize; self.n_bins]; k];
        for (row, &label) in probabilities.rows().into_iter().zip(labels) {
            for (class, &p) in row.iter().enumerate() {
                let bin = bin_index(p, self.n_bins);
                counts[class][bin] += 1;
                positives[class][bin] += usize::from(label == class);
            }
        }
        self.bin_values = counts
            .iter()
            .zip(&positives)
            .map(|(counts, positives)| {
                counts
                    .iter()
                    .zip(positives)
                    .map(|(&n, &pos)| (n > 0).then(|| pos as f64 / n as f64))
                    .collect()
            })
            .collect();
        Ok(())
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        check_transform_inputs("histogram", logits, self.n_classes())?;
        let probabilities = softmax(logits);
        let mut scores = probabilities.clone();
        for mut row in scores.rows_mut() {
            for (p, values) in row.iter_mut().zip(&self.bin_values) {
                if let Some(value) = values[bin_index(*p, self.n_bins)] {
                    *p = value;
                }
            }
        }
        Ok(renormalise_rows(scores, probabilities.view()))
    }
}

/// Unchecked JSON form, validated by `TryFrom`.
#[derive(Deserialize)]
struct HistogramParts {
    n_bins: usize,
    bin_values: Vec<Vec<Option<f64>>>,
}

impl TryFrom<HistogramParts> for HistogramBinning {
    type Error = CalibError;

    /// Refuses `n_bins = 0`, fewer than 2 classes, a class without exactly
    /// `n_bins` values and values outside `[0, 1]`.
    fn try_from(parts: HistogramParts) -> Result<Self> {
        let mut binning = Self::with_bins(parts.n_bins)?;
        if parts.bin_values.len() < 2 {
            return Err(CalibError::InvalidArgument(format!(
                "histogram: {} classes; a fitted calibrator needs K >= 2",
                parts.bin_values.len()
            )));
        }
        for (class, values) in parts.bin_values.iter().enumerate() {
            if values.len() != parts.n_bins {
                return Err(CalibError::ShapeMismatch(format!(
                    "histogram: class {class} has {} bin values, expected {}",
                    values.len(),
                    parts.n_bins
                )));
            }
            if let Some(bad) = values.iter().flatten().find(|v| !(0.0..=1.0).contains(*v)) {
                return Err(CalibError::InvalidArgument(format!(
                    "histogram: class {class} has bin value {bad} outside [0, 1]"
                )));
            }
        }
        binning.bin_values = parts.bin_values;
        Ok(binning)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn bins_are_left_open_and_right_closed() {
        assert_eq!(bin_index(0.0, 15), 0);
        assert_eq!(bin_index(1.0 / 15.0, 15), 0);
        assert_eq!(bin_index(1.0 / 15.0 + 1e-12, 15), 1);
        assert_eq!(bin_index(0.2, 15), 2);
        assert_eq!(bin_index(1.0, 15), 14);
        assert_eq!(bin_index(0.5, 2), 0);
        assert_eq!(bin_index(0.75, 2), 1);
    }

    /// Two classes, two bins: (0, 0.5] and (0.5, 1]. Logit rows `[0, ln(p/(1-p))]`
    /// give `p_1 = p` exactly up to rounding.
    #[test]
    fn hand_computed_two_bin_case() {
        let row = |p1: f64| [0.0, (p1 / (1.0 - p1)).ln()];
        let logits = array![row(0.2), row(0.3), row(0.4), row(0.7), row(0.8), row(0.9)];
        let labels = [0, 0, 1, 1, 1, 0];
        let mut binning = HistogramBinning::with_bins(2).unwrap();
        binning.fit(logits.view(), &labels).unwrap();
        // Class 1: p_1 in bin 0 for rows 0..3 (1 positive of 3), bin 1 for rows 3..6 (2 of 3).
        // Class 0: p_0 = 1 - p_1: bin 1 for rows 0..3 (2 positives of 3), bin 0 for rows 3..6 (1 of 3).
        let third = 1.0 / 3.0;
        assert_eq!(
            binning.bin_values(),
            &[
                vec![Some(third), Some(2.0 * third)],
                vec![Some(third), Some(2.0 * third)]
            ]
        );
        // A row with p_1 = 0.25: class 1 -> 1/3, class 0 (p_0 = 0.75) -> 2/3; sum is 1 already.
        let q = binning.transform(array![row(0.25)].view()).unwrap();
        // Bin means of 3 rows and one renormalisation: <= 5 f64 roundings of values
        // <= 2, ~1e-15; a row in the wrong bin moves a value by >= 1/3.
        assert!((q[[0, 0]] - 2.0 / 3.0).abs() < 1e-12);
        assert!((q[[0, 1]] - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn empty_bins_keep_the_raw_probability() {
        // Three classes, p_k always <= 0.6, so every class's top bins stay empty.
        let logits = array![[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [0.0, 0.5, 0.0]];
        let mut binning = HistogramBinning::with_bins(2).unwrap();
        binning.fit(logits.view(), &[0, 1, 2]).unwrap();
        assert!(binning.bin_values().iter().all(|v| v[1].is_none()));
        // Class 0: bin 0 holds all three rows, one positive -> 1/3.
        assert_eq!(binning.bin_values()[0][0], Some(1.0 / 3.0));
        // p = (0.9, 0.05, 0.05): class 0 keeps 0.9, classes 1, 2 take 1/3 each.
        let z = array![[(0.9f64).ln(), (0.05f64).ln(), (0.05f64).ln()]];
        let q = binning.transform(z.view()).unwrap();
        let sum = 0.9 + 2.0 / 3.0;
        // As above: a handful of f64 roundings of values <= 2, ~1e-15.
        assert!((q[[0, 0]] - 0.9 / sum).abs() < 1e-12);
        assert!((q[[0, 1]] - (1.0 / 3.0) / sum).abs() < 1e-12);
    }

    #[test]
    fn refuses_malformed_json() {
        let bad_len = r#"{"n_bins": 2, "bin_values": [[0.5], [0.5, null]]}"#;
        assert!(serde_json::from_str::<HistogramBinning>(bad_len).is_err());
        let bad_value = r#"{"n_bins": 1, "bin_values": [[1.5], [0.5]]}"#;
        assert!(serde_json::from_str::<HistogramBinning>(bad_value).is_err());
        let good = r#"{"n_bins": 1, "bin_values": [[0.5], [null]]}"#;
        assert!(serde_json::from_str::<HistogramBinning>(good).is_ok());
    }
}
