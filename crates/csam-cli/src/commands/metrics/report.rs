//! The results of `csam metrics`: the JSON document (schema in [`JSON_SCHEMA`])
//! and the terminal table.

use std::collections::BTreeMap;

use csam_calib::metrics::summary::MetricSummary;
use csam_calib::metrics::{BootstrapOptions, ConfidenceInterval};
use serde::Serialize;

use crate::table::Table;

/// The `schema` tag of the `--json` document: raised when a member changes
/// meaning or disappears (new optional members keep it).
pub const SCHEMA: &str = "csam-metrics/1";

/// The `--json` schema, shown in `csam metrics --help` and the CLI README.
pub const JSON_SCHEMA: &str = "\
JSON OUTPUT (--json), one object:
  schema: \"csam-metrics/1\" (the layout below; raised when a member changes meaning)
  csam_version: the csam that wrote it
  meta:  { n, k, n_val (null without validation data), bins, edges, adaptive,
           tolerance, input (\"logits\" | \"probs\"), dtype (\"float32\" | \"float64\":
           the type the raw metrics were computed in), tce_objective (or null),
           calibrators: [names], bootstrap ({ resamples, level, seed } or null),
           files: { preds, labels, val_preds, val_labels } }
  raw:   metrics of the test predictions as given
  NAME:  one member per calibrator (temperature, isotonic, ...): metrics of the
         test predictions after that calibrator, fitted on the validation set
Each metrics member holds, all as fractions (not percent):
  accuracy, ece, ece_l2, mce, adaece, classwise_ece, nll, brier,
  auroc_misclassification, auroc_ovr, mean_confidence, mean_entropy (nats),
  tce (raw only, when validation data is given; otherwise null),
  and with --bootstrap: ci: { METRIC: { estimate, lower, upper, level } or null }.
auroc_misclassification is null when every prediction is right (or every one
wrong); auroc_ovr is null when no class has both positives and negatives.
In the table such values print as \"-\". A ci is null where the metric is
undefined on the data or on any resample, and for tce (not resampled).
ece / ece_l2 / mce / classwise_ece / tce use --bins equal-width bins with --edges;
adaece uses --bins equal-mass bins with --adaptive.";

/// Provenance and settings of a report.
#[derive(Serialize)]
pub struct Meta {
    pub n: usize,
    pub k: usize,
    pub n_val: Option<usize>,
    pub bins: usize,
    pub edges: String,
    pub adaptive: String,
    pub tolerance: f64,
    pub input: &'static str,
    pub dtype: &'static str,
    pub tce_objective: Option<String>,
    pub calibrators: Vec<String>,
    pub bootstrap: Option<BootstrapOptions>,
    pub files: Files,
}

/// The input files, as given on the command line.
#[derive(Serialize)]
pub struct Files {
    pub preds: String,
    pub labels: String,
    pub val_preds: Option<String>,
    pub val_labels: Option<String>,
}

/// Bootstrap intervals of a column's metrics, by metric name.
pub type Intervals = BTreeMap<&'static str, Option<ConfidenceInterval>>;

/// One column's metrics and, with `--bootstrap`, their intervals.
#[derive(Serialize)]
pub struct ColumnReport {
    #[serde(flatten)]
    pub summary: MetricSummary,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<Intervals>,
}

/// The `--json` document: `schema`, `csam_version`, `meta`, `raw` and one
/// member per calibrator.
#[derive(Serialize)]
pub struct Report {
    pub schema: &'static str,
    pub csam_version: &'static str,
    pub meta: Meta,
    #[serde(flatten)]
    pub columns: BTreeMap<String, ColumnReport>,
}

/// How a row's value is shown.
#[derive(Clone, Copy)]
enum Unit {
    Percent,
    Plain,
}

/// The table's rows: label, unit, and the metric's name in
/// [`MetricSummary::values`].
const ROWS: &[(&str, Unit, &str)] = &[
    ("accuracy", Unit::Percent, "accuracy"),
    ("ECE", Unit::Percent, "ece"),
    ("ECE l2 (RMS)", Unit::Percent, "ece_l2"),
    ("MCE", Unit::Percent, "mce"),
    ("AdaECE", Unit::Percent, "adaece"),
    ("classwise ECE", Unit::Percent, "classwise_ece"),
    ("TCE", Unit::Percent, "tce"),
    ("NLL", Unit::Plain, "nll"),
    ("Brier", Unit::Plain, "brier"),
    (
        "AUROC misclassification",
        Unit::Percent,
        "auroc_misclassification",
    ),
    ("AUROC one-vs-rest", Unit::Percent, "auroc_ovr"),
    ("mean confidence", Unit::Percent, "mean_confidence"),
    ("mean entropy (nats)", Unit::Plain, "mean_entropy"),
];

/// The first line above the table: what was measured and the units (and,
/// with `--bootstrap`, what the bracketed intervals are).
pub fn table_caption(meta: &Meta) -> String {
    let mut caption = format!(
        "{} test samples, {} classes, {} bins ({} edges, {} AdaECE); values with % are percent, \
         NLL / Brier / entropy are plain numbers",
        meta.n, meta.k, meta.bins, meta.edges, meta.adaptive
    );
    if let Some(b) = &meta.bootstrap {
        caption += &format!(
            "; [lower, upper]: {}% bootstrap BCa interval, {} resamples, seed {}",
            100.0 * b.level,
            b.resamples,
            b.seed
        );
    }
    caption
}

/// Metrics as rows, `raw` then the calibrators (in `order`) as columns.
pub fn table(columns: &BTreeMap<String, ColumnReport>, order: &[String]) -> Table {
    let mut header = vec!["metric".to_string()];
    header.extend(order.iter().cloned());
    let mut table = Table::new(header);
    let any_tce = columns.values().any(|c| c.summary.tce.is_some());
    for (label, unit, key) in ROWS {
        if *key == "tce" && !any_tce {
            continue;
        }
        let mut row = vec![label.to_string()];
        for name in order {
            let Some(column) = columns.get(name) else {
                row.push("-".to_string());
                continue;
            };
            let value = column
                .summary
                .values()
                .into_iter()
                .find_map(|(k, v)| (k == *key).then_some(v).flatten());
            let interval = column
                .ci
                .as_ref()
                .and_then(|ci| ci.get(key).copied().flatten());
            row.push(cell(value, interval, *unit));
        }
        table.push(row);
    }
    table
}

/// `2.99%`, `0.1234`, `-` for no value; with an interval, `2.99% [2.10, 3.80]`.
fn cell(value: Option<f64>, interval: Option<ConfidenceInterval>, unit: Unit) -> String {
    let number = |v: f64| match unit {
        Unit::Percent => format!("{:.2}", 100.0 * v),
        Unit::Plain => format!("{v:.4}"),
    };
    let Some(value) = value else {
        return "-".to_string();
    };
    let percent = if matches!(unit, Unit::Percent) {
        "%"
    } else {
        ""
    };
    match interval {
        None => format!("{}{percent}", number(value)),
        Some(ci) => format!(
            "{}{percent} [{}, {}]",
            number(value),
            number(ci.lower),
            number(ci.upper)
        ),
    }
}
