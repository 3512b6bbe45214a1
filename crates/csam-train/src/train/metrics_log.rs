//! `metrics.jsonl`: one JSON object per finished epoch (an [`EpochLog`]:
//! rewritten atomically after every epoch and cut back to the checkpointed
//! epochs when a run resumes).

use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};

pub use super::epoch_log::EpochLog;

/// Loss and accuracy of the training mini-batches of one epoch (means over
/// examples, at the weights each step started from).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrainStats {
    /// Mean first-pass cross-entropy.
    pub loss: f64,
    /// Fraction of training examples classified correctly.
    pub accuracy: f64,
    /// Fraction of the epoch's steps that ran a second (perturbed) pass:
    /// what an efficient SAM policy saves is one minus it. Absent in logs
    /// written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_pass: Option<f64>,
    /// Steps of the epoch whose update float16 loss scaling skipped because
    /// a gradient overflowed (each halves the scale). Written only for fp16
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overflow_skipped: Option<usize>,
}

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 1-based epoch.
    pub epoch: usize,
    /// Learning rate of the epoch's last step.
    pub lr: f64,
    /// Training loss / accuracy.
    pub train: TrainStats,
    /// BalCAL's weight `lambda` of the linear classifier, set after this
    /// epoch's steps and used by its predictions; absent for a model with one
    /// classifier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub balcal_lambda: Option<f64>,
    /// Validation metrics (fractions, not percent).
    pub val: MetricSummary,
    /// Test metrics of this epoch's weights, `tce` set to the test ECE after a
    /// temperature fitted (by NLL) on this epoch's validation logits (the paper's ECE
    /// and TCE over training, Figure 3c-d). Only logged: nothing is chosen by
    /// it. Absent in logs written before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<MetricSummary>,
    /// Whether this epoch became the best checkpoint.
    pub best: bool,
    /// Wall time of the epoch (training and validation), seconds.
    pub seconds: f64,
}

/// The epoch log of a run (`metrics.jsonl`).
pub type MetricsLog = EpochLog<EpochRecord>;

#[cfg(test)]
mod tests {
    use super::*;

    fn record(epoch: usize, nll: f64) -> EpochRecord {
        let metrics = serde_json::json!({
            "accuracy": 0.5, "ece": 0.1, "ece_l2": 0.1, "mce": 0.2, "adaece": 0.1,
            "classwise_ece": 0.05, "nll": nll, "brier": 0.3, "auroc_misclassification": 0.7,
            "auroc_ovr": 0.8, "mean_confidence": 0.6, "mean_entropy": 1.0, "tce": null
        });
        EpochRecord {
            epoch,
            lr: 0.1,
            train: TrainStats {
                loss: 1.0,
                accuracy: 0.4,
                second_pass: None,
                overflow_skipped: None,
            },
            balcal_lambda: None,
            val: serde_json::from_value(metrics).unwrap(),
            test: None,
            best: epoch == 1,
            seconds: 0.5,
        }
    }

    #[test]
    fn truncation_keeps_earlier_lines_byte_for_byte() {
        let dir = tempfile::tempdir().unwrap();
        let log = MetricsLog::new(dir.path().join("metrics.jsonl"));
        // A value whose shortest decimal form does not survive a lossy parse.
        log.append(&record(1, 0.369_623_653_510_116_83)).unwrap();
        let first = std::fs::read(dir.path().join("metrics.jsonl")).unwrap();
        log.append(&record(2, 0.2)).unwrap();
        log.append(&record(3, 0.1)).unwrap();
        assert_eq!(log.read().unwrap().len(), 3);
        log.truncate_after(1).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join("metrics.jsonl")).unwrap(),
            first
        );
        assert_eq!(log.read().unwrap()[0].epoch, 1);
    }

    #[test]
    fn logs_without_test_metrics_still_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = MetricsLog::new(dir.path().join("metrics.jsonl"));
        log.append(&record(1, 0.5)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("metrics.jsonl")).unwrap();
        assert!(!text.contains("\"test\""), "absent, not null: {text}");
        let mut with_test = record(2, 0.4);
        with_test.test = Some(with_test.val);
        log.append(&with_test).unwrap();
        let read = log.read().unwrap();
        assert_eq!(read[0].test, None);
        assert_eq!(read[1].test, Some(with_test.val));
    }
}
