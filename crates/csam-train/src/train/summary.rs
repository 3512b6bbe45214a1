//! `summary.json`: the outcome of a finished run (final test metrics of the
//! best checkpoint, which epoch that was, and the facts needed to reproduce
//! or compare it).

use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};

use crate::spec::{BestMetric, OptimizerFamily};

/// The content of `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// Version of csam that trained the run.
    pub csam_version: String,
    /// The run's seed.
    pub seed: u64,
    /// Device the run trained on (`cpu`, `cuda:0`).
    pub device: String,
    /// Data set spec.
    pub data: String,
    /// Model name.
    pub model: String,
    /// SGD, SAM, ASAM or CSAM.
    pub optimizer: OptimizerFamily,
    /// The base optimizer (`sgd`, `adamw`).
    pub base_optimizer: String,
    /// CSAM only: `differentiated` (through (1+p)^-gamma) or `detached-weight`.
    pub csam_gradient_mode: Option<String>,
    /// Epochs trained.
    pub epochs: usize,
    /// Metric that chose the best checkpoint.
    pub best_metric: BestMetric,
    /// 1-based epoch of the best checkpoint.
    pub best_epoch: usize,
    /// Its validation value of `best_metric`.
    pub best_value: f64,
    /// Training and evaluation wall time in seconds, over all resumes.
    pub wall_time_s: f64,
    /// Sizes of the splits.
    pub n_train: usize,
    /// Validation examples.
    pub n_val: usize,
    /// Test examples.
    pub n_test: usize,
    /// Validation metrics of the best checkpoint.
    pub val: MetricSummary,
    /// Test metrics of the best checkpoint.
    pub test: MetricSummary,
}

impl RunSummary {
    /// A few human-readable lines: best epoch and the test metrics.
    pub fn report(&self) -> String {
        let t = &self.test;
        format!(
            "best epoch {} ({} {:.4}); test accuracy {:.4}  nll {:.4}  ece {:.4}  adaece {:.4}  \
             classwise-ece {:.4}  brier {:.4}  ({} examples, {:.1}s on {})",
            self.best_epoch,
            self.best_metric,
            self.best_value,
            t.accuracy,
            t.nll,
            t.ece,
            t.adaece,
            t.classwise_ece,
            t.brier,
            self.n_test,
            self.wall_time_s,
            self.device,
        )
    }
}
