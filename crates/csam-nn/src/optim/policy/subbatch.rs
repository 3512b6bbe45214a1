//! Ascent on a sub-batch: the first pass, whose gradient only chooses the
//! perturbation's direction, runs on a fraction of the batch; the second
//! pass, whose gradient is the update, runs on the whole batch at every
//! step. SAM's extra cost, one forward and backward pass of the batch,
//! falls to `fraction` of it, while every step still takes the second-pass
//! loss (CSAM's reweighting included) on every example.
//!
//! Foret et al. (2021) find that perturbing with the gradient of fewer
//! examples (m-sharpness, m < B) does not hurt and often helps; this policy
//! takes one perturbation from `ceil(fraction B)` examples instead of one per
//! sub-batch of m, so that the saving is in the first pass.
//!
//! Which rows: the first `ceil(fraction B)` of the batch, which the loader
//! has already shuffled, so no draw of its own. BatchNorm's running
//! statistics move with the first pass, so on those rows only.

use crate::loss::{Fields, LossError};

/// The share of the batch the ascent direction is computed on.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubBatch {
    /// The fraction of the batch's rows in the first pass, in (0, 1]; 1 is
    /// SAM's step. Default 0.25: the first pass costs a quarter of SAM's.
    #[serde(default = "SubBatch::default_fraction")]
    pub fraction: f64,
}

impl Default for SubBatch {
    fn default() -> Self {
        Self {
            fraction: Self::default_fraction(),
        }
    }
}

impl SubBatch {
    fn default_fraction() -> f64 {
        0.25
    }

    /// The rows of a batch of `size` rows in the first pass:
    /// `ceil(fraction size)`, at least 1 and at most `size`.
    pub fn rows(&self, size: i64) -> i64 {
        ((self.fraction * size as f64).ceil() as i64).clamp(1, size.max(1))
    }

    pub(super) fn validate(&self, fields: &Fields) -> Result<(), LossError> {
        fields.check(
            "fraction",
            self.fraction,
            self.fraction > 0.0 && self.fraction <= 1.0,
            "must lie in (0, 1]",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_up_and_stay_within_the_batch() {
        let sub = |fraction| SubBatch { fraction };
        assert_eq!(sub(0.25).rows(128), 32);
        assert_eq!(sub(0.25).rows(10), 3);
        assert_eq!(sub(0.01).rows(10), 1);
        assert_eq!(sub(1.0).rows(7), 7);
        let fields = Fields("subbatch");
        for bad in [0.0, -0.5, 1.5, f64::NAN] {
            assert!(sub(bad).validate(&fields).is_err(), "{bad}");
        }
        assert!(sub(1.0).validate(&fields).is_ok());
    }
}
