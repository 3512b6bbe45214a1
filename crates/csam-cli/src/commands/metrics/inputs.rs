//! Loading and checking one prediction set (predictions + labels) for `csam metrics`.
//!
//! Predictions keep the element type they were stored in: float32 (and
//! float16 / bfloat16, widened once) are checked, softmaxed and measured as
//! float32, with no float64 copy of the matrix. Only the calibrators and TCE,
//! which fit in float64, get a float64 copy of the logits, and only when
//! validation data asks for them.

use std::path::Path;

use anyhow::{anyhow, bail, Context};
use csam_calib::io::{labels_shape, load_labels, load_scores, scores_shape, Scores};
use csam_calib::scores::{
    labels_from_i64, log_probabilities, softmax, validate_logits, validate_probabilities,
};
use ndarray::Array2;

/// Runs `$body` with `$m` bound to the matrix inside a [`Scores`] (by
/// reference), whichever its element type: csam-calib's checks and metrics are
/// generic over it.
macro_rules! with_scores {
    ($scores:expr, |$m:ident| $body:expr) => {
        match $scores {
            csam_calib::io::Scores::F32($m) => $body,
            csam_calib::io::Scores::F64($m) => $body,
        }
    };
}
pub(crate) use with_scores;

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
    /// Array of the predictions inside an `.npz` or `.safetensors` file.
    pub preds_array: Option<&'a str>,
    /// Array of the labels inside an `.npz` or `.safetensors` file.
    pub labels_array: Option<&'a str>,
    /// The number of classes another set already has (validation must match
    /// test), with the file it came from.
    pub same_classes_as: Option<(usize, &'a Path)>,
}

/// A checked prediction set: probabilities, labels in `0..K` and, when asked
/// for, the float64 logits of the calibrators.
pub struct PredictionSet {
    /// Probabilities, `N x K`, rows summing to 1, in the stored element type.
    pub probs: Scores,
    /// Logits (or `ln p` for probability input), `N x K`, finite, float64;
    /// `None` unless [`load`] was asked for them.
    pub logits: Option<Array2<f64>>,
    /// `N` labels in `0..K`.
    pub labels: Vec<usize>,
}

impl PredictionSet {
    /// Number of classes `K`.
    pub fn n_classes(&self) -> usize {
        self.probs.dim().1
    }

    /// The float64 logits, for a calibrator or TCE.
    pub fn logits(&self) -> anyhow::Result<&Array2<f64>> {
        // load() keeps them whenever validation data is given, the only
        // case that fits anything.
        self.logits
            .as_ref()
            .context("internal: the logits were not kept for the calibrators")
    }
}

/// The lowercase extension of `path`.
fn extension(path: &Path) -> Option<String> {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
}

/// Loads the files of `source` and checks them: the number of classes, one
/// label per row, labels in `0..K`, finite logits or valid probabilities
/// (within `tolerance`). `with_logits` keeps float64 logits for calibrators.
pub fn load(
    source: &Source<'_>,
    kind: ScoreKind,
    tolerance: f64,
    with_logits: bool,
) -> anyhow::Result<PredictionSet> {
    let role = source.role;
    let preds_name = source.preds.display();
    let labels_name = source.labels.display();
    // Labels read from the predictions' own archive are its `labels` array:
    // its only array would be the predictions themselves.
    let archive = matches!(
        extension(source.preds).as_deref(),
        Some("npz" | "safetensors")
    );
    let own_archive = archive && source.labels == source.preds && source.labels_array.is_none();
    let labels_array = source.labels_array.or(own_archive.then_some("labels"));
    let whose = match own_archive {
        true => " (the predictions' file's 'labels' array; --labels names another file)",
        false => "",
    };
    let count_differs = |labels: usize, rows: usize| {
        anyhow!(
            "{role} labels {labels_name} hold {labels} labels but {role} predictions {preds_name} have {rows} rows"
        )
    };
    // The headers are compared before either array is read: an .npz member
    // can inflate a thousandfold, and a count that cannot agree should cost
    // nothing to refuse.
    let preds_rows = scores_shape(source.preds, source.preds_array)
        .with_context(|| format!("{role} predictions"))?
        .and_then(|shape| shape.first().copied());
    let labels_count = labels_shape(source.labels, labels_array)
        .with_context(|| format!("{role} labels{whose}"))?
        .and_then(|shape| shape.first().copied());
    if let (Some(rows), Some(labels)) = (preds_rows, labels_count) {
        if labels != rows {
            return Err(count_differs(labels, rows));
        }
    }
    let scores = load_scores(source.preds, source.preds_array)
        .with_context(|| format!("{role} predictions"))?;
    let (rows, k) = scores.dim();
    if let Some((expected, other)) = source.same_classes_as {
        if k != expected {
            bail!(
                "{role} predictions {preds_name} have K = {k} classes but {} has K = {expected}",
                other.display()
            );
        }
    }
    let raw_labels = load_labels(source.labels, labels_array)
        .with_context(|| format!("{role} labels{whose}"))?;
    if raw_labels.len() != rows {
        return Err(count_differs(raw_labels.len(), rows));
    }
    let labels = labels_from_i64(&raw_labels, k).with_context(|| {
        format!("{role} labels {labels_name} (the predictions have K = {k} classes)")
    })?;
    let (probs, logits) = match kind {
        ScoreKind::Logits => {
            with_scores!(&scores, |m| validate_logits(m.view()))
                .with_context(|| format!("{role} predictions {preds_name} (--logits)"))?;
            // Rows of probabilities read as logits give a softmax of them,
            // a silently wrong calibration (every confidence near 1/K).
            if with_scores!(&scores, |m| validate_probabilities(m.view(), tolerance)).is_ok() {
                bail!(
                    "{role} predictions {preds_name} (--logits) are probabilities: every entry \
                     lies in [0, 1] and every row sums to 1 within {tolerance}; pass --probs"
                );
            }
            let probs = match &scores {
                Scores::F32(m) => Scores::F32(softmax(m.view())),
                Scores::F64(m) => Scores::F64(softmax(m.view())),
            };
            (probs, with_logits.then(|| scores.into_f64()))
        }
        ScoreKind::Probs => {
            with_scores!(&scores, |m| validate_probabilities(m.view(), tolerance))
                .with_context(|| format!("{role} predictions {preds_name} (--probs)"))?;
            let logits =
                with_logits.then(|| with_scores!(&scores, |m| log_probabilities(m.view())));
            (scores, logits)
        }
    };
    Ok(PredictionSet {
        probs,
        logits,
        labels,
    })
}
