//! Evaluation: run a model over a data set in eval mode (BatchNorm running
//! statistics, no dropout, no gradients), collect its logits, and summarise
//! them with the calibration crate's metrics (15 bins, equal-width ECE with
//! (lo, hi] bins, equal-mass AdaECE: crates/csam-calib/README.md, "Metric
//! conventions").

use std::path::Path;

use csam_calib::calibrators::temperature::TemperatureObjective;
use csam_calib::metrics::summary::{summarize, MetricOptions, MetricSummary};
use csam_calib::metrics::tce::tce;
use ndarray::Array2;
use tch::{Device, Kind, Tensor};

use csam_nn::model::{Mode, Model};

use super::error::{Result, TrainError};

/// A model's logits on a data set, in data set order, with the true labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Predictions {
    /// N x K logits.
    pub logits: Array2<f32>,
    /// N true labels.
    pub labels: Vec<usize>,
}

/// Runs `model` in eval mode over `batches` (`xs` `[B, C, H, W]`, `ys` `[B]`);
/// a batch whose shape the model cannot take is an error, not a panic.
pub fn predict(
    model: &Model,
    batches: impl IntoIterator<Item = (Tensor, Tensor)>,
    n_classes: usize,
) -> Result<Predictions> {
    predict_mode(model, batches, n_classes, Mode::Eval)
}

/// [`predict`] in an explicit [`Mode`]: [`Mode::McDropout`] keeps dropout
/// active (BatchNorm still on its running statistics) for MC-Dropout
/// sampling, drawing from libtorch's global random stream.
pub fn predict_mode(
    model: &Model,
    batches: impl IntoIterator<Item = (Tensor, Tensor)>,
    n_classes: usize,
    mode: Mode,
) -> Result<Predictions> {
    let mut logits = Vec::new();
    let mut labels = Vec::new();
    tch::no_grad(|| -> Result<()> {
        for (xs, ys) in batches {
            let out = model
                .try_forward(&xs, mode)?
                .to_kind(Kind::Float)
                .to_device(Device::Cpu)
                .contiguous();
            logits.extend(Vec::<f32>::try_from(out.view([-1]))?);
            let ys = Vec::<i64>::try_from(ys.to_device(Device::Cpu).view([-1]))?;
            // Invariant: labels come from a validated data set (0 <= y < K).
            labels.extend(ys.into_iter().map(|y| y as usize));
        }
        Ok(())
    })?;
    let n = labels.len();
    let logits = Array2::from_shape_vec((n, n_classes), logits)
        .map_err(|source| TrainError::LogitColumns { n_classes, source })?;
    Ok(Predictions { logits, labels })
}

impl Predictions {
    /// Number of examples with a NaN or infinite logit (0 for a healthy model).
    pub fn non_finite_rows(&self) -> usize {
        self.logits
            .rows()
            .into_iter()
            .filter(|row| row.iter().any(|v| !v.is_finite()))
            .count()
    }

    /// Each example's confidence (largest softmax probability, computed in
    /// f64) and whether the prediction is its label.
    pub fn confidence_and_correctness(&self) -> Result<(Vec<f64>, Vec<bool>)> {
        let probs = csam_calib::scores::softmax(self.logits.mapv(f64::from).view());
        let pairs = csam_calib::metrics::confidence_hits(probs.view(), &self.labels)
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(pairs.into_iter().unzip())
    }

    /// The metric summary of the softmax of the logits (computed in f64),
    /// binned as `options` say.
    pub fn summarize(&self, options: &MetricOptions) -> Result<MetricSummary> {
        let bad = self.non_finite_rows();
        if bad > 0 {
            return Err(TrainError::NonFiniteLogits {
                bad,
                n: self.labels.len(),
            });
        }
        let logits = self.logits.mapv(f64::from);
        let probs = csam_calib::scores::softmax(logits.view());
        Ok(summarize(probs.view(), &self.labels, options)?)
    }

    /// [`Predictions::summarize`] with `tce` set: the ECE of these predictions
    /// after temperature scaling fitted (by NLL) on `val`'s logits.
    pub fn summarize_with_tce(
        &self,
        val: &Predictions,
        options: &MetricOptions,
    ) -> Result<MetricSummary> {
        let mut summary = self.summarize(options)?;
        let tce = tce(
            val.logits.mapv(f64::from).view(),
            &val.labels,
            self.logits.mapv(f64::from).view(),
            &self.labels,
            options,
            TemperatureObjective::Nll,
        )?;
        summary.tce = Some(tce);
        Ok(summary)
    }

    /// Writes `logits` (f32, N x K) and `labels` (int64, N) as .npy files
    /// for `csam metrics` and NumPy (the calibration crate's writers, which
    /// replace files atomically).
    pub fn write_npy(&self, logits_path: &Path, labels_path: &Path) -> Result<()> {
        csam_calib::io::npy::write_f32(logits_path, &self.logits.view())?;
        let labels: Vec<i64> = self.labels.iter().map(|&y| y as i64).collect();
        Ok(csam_calib::io::npy::write_i64(labels_path, &labels)?)
    }
}
