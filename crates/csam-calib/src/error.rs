//! The one error type of the crate: every failure names what was wrong with
//! the input, so a caller can print it as a one-line message.

use std::path::PathBuf;

/// Why a metric, calibrator or reader refused its input.
#[derive(Debug, thiserror::Error)]
pub enum CalibError {
    /// No rows (or no classes) where at least one is needed.
    #[error("empty input: {0}")]
    Empty(String),
    /// Two inputs whose sizes must agree do not.
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// A NaN or infinite value at (row, column).
    #[error("non-finite value {value} at row {row}, column {col}")]
    NonFinite { row: usize, col: usize, value: f64 },
    /// A label outside `0..n_classes`.
    #[error("label {label} at row {row} is outside 0..={last}", last = .n_classes.saturating_sub(1))]
    LabelOutOfRange {
        row: usize,
        label: i64,
        n_classes: usize,
    },
    /// A probability below zero.
    #[error("negative probability {value} at row {row}, column {col}")]
    NegativeProbability { row: usize, col: usize, value: f64 },
    /// A probability row whose sum is not 1 within the tolerance.
    #[error("probabilities in row {row} sum to {sum}, not 1 (tolerance {tolerance}); pass logits as logits")]
    NotNormalised {
        row: usize,
        sum: f64,
        tolerance: f64,
    },
    /// A metric that has no value for this input (e.g. AUROC when every
    /// prediction is correct: there is no negative to rank).
    #[error("{metric} is undefined: {reason}")]
    Undefined {
        metric: &'static str,
        reason: String,
    },
    /// An argument outside its valid range (bins = 0, resamples = 0, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A fit that could not produce a usable model (e.g. a single class in the data).
    #[error("cannot fit {method}: {reason}")]
    Fit {
        method: &'static str,
        reason: String,
    },
    /// Reading or writing a file failed at the operating-system level.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file whose contents do not follow its format.
    #[error("{path}: {detail}")]
    Format { path: PathBuf, detail: String },
    /// Drawing or encoding a plot failed (before anything was written).
    #[error("cannot draw the plot: {0}")]
    Plot(String),
}

/// Shorthand used throughout the crate.
pub type Result<T, E = CalibError> = std::result::Result<T, E>;
