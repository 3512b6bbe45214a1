//! Calibration over training (the paper's Figure 3c-d): per method, the ECE
//! and TCE of every epoch's weights, averaged over seeds, read from the runs'
//! `metrics.jsonl`. The paper plots test-set numbers (TCE: temperature fitted
//! on validation, ECE on test), which the loop logs per epoch; runs trained
//! before it did have validation metrics only, and then the validation ECE is
//! plotted instead (and no TCE).

use std::collections::BTreeMap;
use std::path::Path;

use csam_calib::plot::Series;

use crate::error::Result;
use crate::experiment::method::{Method, Prediction};
use crate::experiment::results::CompareResults;
use csam_train::train::metrics_log::{EpochRecord, MetricsLog};

/// The curves of a comparison, one series per method, in percent.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochCurves {
    /// `test`, or `validation` when some run has no per-epoch test metrics.
    pub split: &'static str,
    /// ECE per epoch.
    pub ece: Vec<Series>,
    /// TCE per epoch (test only).
    pub tce: Option<Vec<Series>>,
}

/// Reads every run's epoch log; `root` is the comparison directory.
pub fn read(root: &Path, results: &CompareResults) -> Result<EpochCurves> {
    let mut logs = Vec::with_capacity(results.runs.len());
    // An ensemble or MC-Dropout has no weights of its own to log per epoch.
    let single = |method: &Method| method.prediction == Prediction::Single;
    for run in results.runs.iter().filter(|run| single(&run.method)) {
        let path = root.join(&run.run_dir).join("metrics.jsonl");
        logs.push((run.method, MetricsLog::new(&path).read()?));
    }
    let on_test = logs
        .iter()
        .all(|(_, records)| records.iter().all(|r| r.test.is_some()));
    let series = |value: &dyn Fn(&EpochRecord) -> Option<f64>| -> Vec<Series> {
        results
            .settings
            .methods
            .iter()
            .filter(|method| single(method))
            .map(|&method| {
                let mut per_epoch: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
                for (_, records) in logs.iter().filter(|(m, _)| *m == method) {
                    for record in records {
                        if let Some(v) = value(record) {
                            per_epoch.entry(record.epoch).or_default().push(v);
                        }
                    }
                }
                Series {
                    label: method.to_string().to_uppercase(),
                    points: per_epoch
                        .into_iter()
                        .map(|(epoch, values)| {
                            let mean = values.iter().sum::<f64>() / values.len() as f64;
                            (epoch as f64, 100.0 * mean)
                        })
                        .collect(),
                }
            })
            .collect()
    };
    Ok(match on_test {
        true => EpochCurves {
            split: "test",
            ece: series(&|r| r.test.map(|t| t.ece)),
            tce: Some(series(&|r| r.test.and_then(|t| t.tce))),
        },
        false => EpochCurves {
            split: "validation",
            ece: series(&|r| Some(r.val.ece)),
            tce: None,
        },
    })
}
