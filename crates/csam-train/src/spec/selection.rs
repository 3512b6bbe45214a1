//! Which epoch's weights a run keeps as its result.

use serde::{Deserialize, Serialize};

/// The validation metric that picks the best checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BestMetric {
    /// Negative log-likelihood (lower is better).
    Nll,
    /// Expected calibration error, equal-width bins (lower is better).
    Ece,
    /// Adaptive (equal-mass) ECE (lower is better).
    Adaece,
    /// Brier score (lower is better).
    Brier,
    /// Top-1 accuracy (higher is better).
    Accuracy,
}

impl BestMetric {
    /// True when a larger value of the metric is better.
    pub fn higher_is_better(self) -> bool {
        matches!(self, BestMetric::Accuracy)
    }

    /// True when `candidate` improves on `incumbent` (the first epoch always does).
    pub fn improves(self, candidate: f64, incumbent: Option<f64>) -> bool {
        match incumbent {
            None => true,
            Some(best) if self.higher_is_better() => candidate > best,
            Some(best) => candidate < best,
        }
    }
}

super::text::serde_enum_text!(BestMetric);
