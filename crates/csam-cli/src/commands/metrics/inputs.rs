//! Loading and checking one prediction set (predictions + labels) for `csam metrics`.

use std::path::Path;

use anyhow::{bail, Context};
use csam_calib::io::{load_labels, load_matrix};
use csam_calib::scores::{
    labels_from_i64, log_probabilities, softmax, validate_logits, validate_probabilities,
};
use ndarray::Array2;

/// What the prediction files hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScoreKind {
    /// Unnormalised scores; probabilities are their softmax.
    Logits,
    /// Class probabilities; logits for the calibrators are `ln p`.
    Probs,
}

impl ScoreKind {
    /// The name used in the JSON `meta` member.
    pub fn name(self) -> &'static str {
        match self {
            ScoreKind::Logits => "logits",
            ScoreKind::Probs => "probs",
        }
    }
}

/// Where one prediction set comes from.
pub struct Source<'a> {
    /// "test" or "validation": the first word of every error about this set.
    pub role: &'static str,
    pub preds: &'a Path,
    pub labels: &'a Path,
    /// Array of the predictions inside an `.npz`.
    pub preds_array: Option<&'a str>,
    /// Array of the labels inside an `.npz`.
    pub labels_array: Option<&'a str>,
    /// The number of classes another set already has (validation must match
    /// test), with the file it came from.
    pub same_classes_as: Option<(usize, &'a Path)>,
}

/// A checked prediction set: both forms of the scores and labels in `0..K`.
pub struct PredictionSet {
    /// Logits (or `ln p` for probability input), `N x K`, finite.
    pub logits: Array2<f64>,
    /// Probabilities, `N x K`, rows summing to 1.
    pub probs: Array2<f64>,
    /// `N` labels in `0..K`.
    pub labels: Vec<usize>,
}

impl PredictionSet {
    /// Number of classes `K`.
    pub fn n_classes(&self) -> usize {
        self.probs.ncols()
    }
}

/// Loads the files of `source` and checks them: the number of classes, one
/// label per row, labels in `0..K`, finite logits or valid probabilities
/// (within `tolerance`).
pub fn load(source: &Source<'_>, kind: ScoreKind, tolerance: f64) -> anyhow::Result<PredictionSet> {
    let role = source.role;
    let preds_name = source.preds.display();
    let labels_name = source.labels.display();
    let matrix = load_matrix(source.preds, source.preds_array)
        .with_context(|| format!("{role} predictions"))?;
    if let Some((k, other)) = source.same_classes_as {
        if matrix.ncols() != k {
            bail!(
                "{role} predictions {preds_name} have K = {} classes but {} has K = {k}",
                matrix.ncols(),
                other.display()
            );
        }
    }
    let raw_labels = load_labels(source.labels, source.labels_array)
        .with_context(|| format!("{role} labels"))?;
    if raw_labels.len() != matrix.nrows() {
        bail!(
            "{role} labels {labels_name} hold {} labels but {role} predictions {preds_name} have {} rows",
            raw_labels.len(),
            matrix.nrows()
        );
    }
    let labels = labels_from_i64(&raw_labels, matrix.ncols()).with_context(|| {
        format!(
            "{role} labels {labels_name} (the predictions have K = {} classes)",
            matrix.ncols()
        )
    })?;
    let (logits, probs) = match kind {
        ScoreKind::Logits => {
            validate_logits(matrix.view())
                .with_context(|| format!("{role} predictions {preds_name} (--logits)"))?;
            let probs = softmax(matrix.view());
            (matrix, probs)
        }
        ScoreKind::Probs => {
            validate_probabilities(matrix.view(), tolerance)
                .with_context(|| format!("{role} predictions {preds_name} (--probs)"))?;
            (log_probabilities(matrix.view()), matrix)
        }
    };
    Ok(PredictionSet {
        logits,
        probs,
        labels,
    })
}
