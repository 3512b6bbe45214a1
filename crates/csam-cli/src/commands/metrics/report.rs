//! The results of `csam metrics`: the JSON document (schema in [`JSON_SCHEMA`])
//! and the terminal table.

use std::collections::BTreeMap;

use csam_calib::metrics::summary::MetricSummary;
use serde::Serialize;

use crate::table::Table;

/// The `--json` schema, shown in `csam metrics --help` and the CLI README.
pub const JSON_SCHEMA: &str = "\
JSON OUTPUT (--json), one object:
  meta:  { n, k, n_val (null without validation data), bins, edges, adaptive,
           tolerance, input (\"logits\" | \"probs\"), tce_objective (or null),
           calibrators: [names], files: { preds, labels, val_preds, val_labels } }
  raw:   metrics of the test predictions as given
  NAME:  one member per calibrator (temperature, isotonic, ...): metrics of the
         test predictions after that calibrator, fitted on the validation set
Each metrics member holds, all as fractions (not percent):
  accuracy, ece, ece_l2, mce, adaece, classwise_ece, nll, brier,
  auroc_misclassification, auroc_ovr, mean_confidence, mean_entropy (nats),
  tce (raw only, when validation data is given; otherwise null).
auroc_misclassification is null when every prediction is right (or every one
wrong); auroc_ovr is null when no class has both positives and negatives.
In the table such values print as \"-\".
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
    pub tce_objective: Option<String>,
    pub calibrators: Vec<String>,
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

/// The `--json` document: `meta`, `raw` and one member per calibrator.
#[derive(Serialize)]
pub struct Report {
    pub meta: Meta,
    #[serde(flatten)]
    pub columns: BTreeMap<String, MetricSummary>,
}

/// How a row's value is shown.
#[derive(Clone, Copy)]
enum Unit {
    Percent,
    Plain,
}

/// Reads one metric of a summary (`None` where it was not computed).
type Field = fn(&MetricSummary) -> Option<f64>;

/// The table's rows: label, unit, and the field of [`MetricSummary`].
const ROWS: &[(&str, Unit, Field)] = &[
    ("accuracy", Unit::Percent, |s| Some(s.accuracy)),
    ("ECE", Unit::Percent, |s| Some(s.ece)),
    ("ECE l2 (RMS)", Unit::Percent, |s| Some(s.ece_l2)),
    ("MCE", Unit::Percent, |s| Some(s.mce)),
    ("AdaECE", Unit::Percent, |s| Some(s.adaece)),
    ("classwise ECE", Unit::Percent, |s| Some(s.classwise_ece)),
    ("TCE", Unit::Percent, |s| s.tce),
    ("NLL", Unit::Plain, |s| Some(s.nll)),
    ("Brier", Unit::Plain, |s| Some(s.brier)),
    ("AUROC misclassification", Unit::Percent, |s| {
        s.auroc_misclassification
    }),
    ("AUROC one-vs-rest", Unit::Percent, |s| s.auroc_ovr),
    ("mean confidence", Unit::Percent, |s| {
        Some(s.mean_confidence)
    }),
    ("mean entropy (nats)", Unit::Plain, |s| Some(s.mean_entropy)),
];

/// The first line above the table: what was measured and the units.
pub fn table_caption(meta: &Meta) -> String {
    format!(
        "{} test samples, {} classes, {} bins ({} edges, {} AdaECE); values with % are percent, \
         NLL / Brier / entropy are plain numbers",
        meta.n, meta.k, meta.bins, meta.edges, meta.adaptive
    )
}

/// Metrics as rows, `raw` then the calibrators (in `order`) as columns.
pub fn table(columns: &BTreeMap<String, MetricSummary>, order: &[String]) -> Table {
    let mut header = vec!["metric".to_string()];
    header.extend(order.iter().cloned());
    let mut table = Table::new(header);
    let any_tce = columns.values().any(|s| s.tce.is_some());
    for (label, unit, field) in ROWS {
        if *label == "TCE" && !any_tce {
            continue;
        }
        let mut row = vec![label.to_string()];
        for name in order {
            let value = columns.get(name).and_then(field);
            row.push(match (value, unit) {
                (None, _) => "-".to_string(),
                (Some(v), Unit::Percent) => format!("{:.2}%", 100.0 * v),
                (Some(v), Unit::Plain) => format!("{v:.4}"),
            });
        }
        table.push(row);
    }
    table
}
