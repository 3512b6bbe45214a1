//! The predictions of a method that combines networks: a deep ensemble (the
//! mean of its members' softmax probabilities) or MC-Dropout (the mean over
//! passes with dropout active), on the validation and test splits its
//! members were trained and selected on.
//!
//! They are written like a run's (`val_logits.npy`, `test_logits.npy` and
//! the labels, in `predictions/<method>-seed<k>/` of the comparison), with
//! the log of the mean probability as the logit: the softmax of those
//! "logits" is the mean probability again, so the metrics, the post-hoc
//! calibrators (temperature scaling then scales log-probabilities) and the
//! report read them exactly as a single run's. Probabilities are averaged,
//! never logits. A probability that underflows to 0 is written as
//! `ln(f64::MIN_POSITIVE)` (-708.4), so every file holds finite numbers.

use std::path::Path;

use ndarray::Array2;
use tch::Device;

use super::method::Prediction;
use crate::shift::predictor::{Predictor, Sampling};
use csam_data::Splits;
use csam_train::train::evaluate::Predictions;
use csam_train::train::rundir::{RunDir, Split};
use csam_train::train::{TrainError, TrainedRun};

use crate::error::{LabError, Result};

/// The finished member runs of one replicate, ready to predict together (one
/// run for a single network or MC-Dropout).
pub struct Combination {
    predictor: Predictor,
    splits: Splits,
}

impl Combination {
    /// Opens the runs in `members` (the first one's split is every
    /// member's: they must share it) for `prediction`; MC-Dropout's masks
    /// are drawn from `seed`.
    pub fn open(
        members: &[&Path],
        prediction: Prediction,
        seed: u64,
        device: Device,
    ) -> Result<Combination> {
        let runs = members
            .iter()
            .map(|dir| TrainedRun::open(dir))
            .collect::<Result<Vec<_>, TrainError>>()?;
        let Some(first) = runs.first() else {
            return Err(LabError::NoMembers);
        };
        let split_of = |run: &TrainedRun| run.spec.data.split_seed(run.spec.seed);
        if let Some(other) = runs.iter().find(|run| split_of(run) != split_of(first)) {
            return Err(LabError::OtherSplits {
                first: first.dir.root().to_path_buf(),
                other: other.dir.root().to_path_buf(),
                first_seed: split_of(first),
                other_seed: split_of(other),
            });
        }
        let splits = first.spec.data.splits(first.spec.seed)?;
        let batch_size = first.spec.batch_size;
        let name = first.spec.data.source.to_string();
        let sampling = match prediction {
            Prediction::McDropout(passes) => Sampling::McDropout { passes, seed },
            Prediction::Single | Prediction::Ensemble(_) => Sampling::Deterministic,
        };
        let predictor = Predictor::new(runs, &splits.test, &name, sampling, batch_size, device)?;
        Ok(Combination { predictor, splits })
    }

    /// What predicts: the members, combined.
    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// The test split the members were evaluated on.
    pub fn test(&self) -> &csam_data::Dataset {
        &self.splits.test
    }

    /// The combined probabilities of the validation and test splits, written
    /// into `out` as its log-probabilities and labels (see the module doc).
    pub fn write(&self, out: &RunDir) -> Result<()> {
        std::fs::create_dir_all(out.root()).map_err(TrainError::io("create", out.root()))?;
        for (split, dataset) in [
            (Split::Val, &self.splits.val),
            (Split::Test, &self.splits.test),
        ] {
            let probabilities = self.predictor.probabilities(dataset)?;
            let predictions = Predictions {
                logits: log_probabilities(&probabilities),
                labels: dataset.labels.clone(),
            };
            predictions.write_npy(&out.logits(split), &out.labels(split))?;
        }
        Ok(())
    }
}

/// `ln p`, with 0 written as `ln(f64::MIN_POSITIVE)`, in float32 as runs
/// write their logits.
fn log_probabilities(probabilities: &Array2<f64>) -> Array2<f32> {
    probabilities.mapv(|p| p.max(f64::MIN_POSITIVE).ln() as f32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn log_probabilities_are_finite_and_softmax_back_to_the_probabilities() {
        let p = array![[0.7, 0.2, 0.1], [1.0, 0.0, 0.0]];
        let logs = log_probabilities(&p);
        assert!(logs.iter().all(|v| v.is_finite()));
        let back = csam_calib::scores::softmax(logs.mapv(f64::from).view());
        // Rounding ln p to f32 shifts each logit by d_i <= half an f32 ulp (1.2e-7 at
        // |ln p| < 2.4); softmax then moves p_i by p_i |d_i - sum_j p_j d_j| < 3e-8 here.
        for (a, b) in back.iter().zip(p.iter()) {
            assert!((a - b).abs() < 1e-7, "{back} vs {p}");
        }
    }
}
