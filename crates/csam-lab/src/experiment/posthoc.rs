//! The test metrics of a finished run before and after post-hoc calibration
//! (crates/csam-calib/README.md, "Post-hoc calibrators"): temperature scaling
//! (its ECE is the TCE, fitted by validation NLL),
//! isotonic regression and histogram binning, each fitted on the run's
//! validation logits and applied to its test logits.

use std::path::Path;

use csam_calib::calibrators::registry::{fit, CalibratorKind, FittedCalibrator};
use csam_calib::metrics::summary::{summarize, MetricOptions, MetricSummary};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use csam_train::train::rundir::{RunDir, Split};
use csam_train::train::TrainError;

use crate::error::{LabError, Result};

/// The test metrics after each post-hoc calibrator (fractions).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PosthocSummaries {
    /// Temperature scaling, `T` by minimum validation NLL; its ECE is the TCE.
    pub temperature: MetricSummary,
    /// One-vs-rest isotonic regression, renormalised.
    pub isotonic: MetricSummary,
    /// One-vs-rest histogram binning (15 equal-width bins), renormalised.
    pub histogram: MetricSummary,
}

/// What post-hoc calibration gives for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunCalibration {
    /// The fitted temperature.
    pub temperature: f64,
    /// Test metrics after each calibrator.
    pub posthoc: PosthocSummaries,
}

/// Reads the run's validation and test logits and labels, fits the three
/// calibrators on validation and summarises their test predictions, binned
/// as `options` say.
pub fn calibrate_run(run_dir: &RunDir, options: &MetricOptions) -> Result<RunCalibration> {
    let (val_logits, val_labels) = read_split(run_dir, Split::Val)?;
    let (test_logits, test_labels) = read_split(run_dir, Split::Test)?;
    let fitted = |kind: CalibratorKind| {
        fit(kind, val_logits.view(), &val_labels).map_err(TrainError::metrics_of(format!(
            "fitting {} on {}",
            kind.name(),
            run_dir.root().display()
        )))
    };
    let summary_after = |calibrator: &FittedCalibrator| -> Result<MetricSummary> {
        let probs = calibrator.transform(test_logits.view())?;
        Ok(summarize(probs.view(), &test_labels, options)?)
    };
    let scaling = fitted(CalibratorKind::Temperature)?;
    let temperature = match &scaling {
        FittedCalibrator::Temperature(t) => t.temperature,
        // Invariant: fitting the temperature kind yields a temperature calibrator.
        other => unreachable!("temperature fit returned {}", other.kind().name()),
    };
    let posthoc = PosthocSummaries {
        temperature: summary_after(&scaling)?,
        isotonic: summary_after(&fitted(CalibratorKind::Isotonic)?)?,
        histogram: summary_after(&fitted(CalibratorKind::Histogram)?)?,
    };
    Ok(RunCalibration {
        temperature,
        posthoc,
    })
}

/// The raw test probabilities (softmax of the test logits, N x K) and labels
/// of a finished run.
pub fn test_probabilities(run_dir: &RunDir) -> Result<(Array2<f64>, Vec<usize>)> {
    split_probabilities(run_dir, Split::Test)
}

/// The raw probabilities (softmax of the logits, N x K) and labels of one
/// split of a finished run.
pub fn split_probabilities(run_dir: &RunDir, split: Split) -> Result<(Array2<f64>, Vec<usize>)> {
    let (logits, labels) = read_split(run_dir, split)?;
    Ok((csam_calib::scores::softmax(logits.view()), labels))
}

/// The logits (as f64) and labels of one split of a finished run, read with
/// the calibration crate's npy reader (as `csam metrics` reads them).
fn read_split(run_dir: &RunDir, split: Split) -> Result<(Array2<f64>, Vec<usize>)> {
    let logits_path = run_dir.logits(split);
    let logits = csam_calib::io::load_matrix(&logits_path, None)
        .map_err(|e| corrupt(&logits_path, e.to_string()))?;
    let labels_path = run_dir.labels(split);
    let labels = csam_calib::io::load_labels(&labels_path, None)
        .and_then(|labels| csam_calib::scores::labels_from_i64(&labels, logits.ncols()))
        .map_err(|e| corrupt(&labels_path, e.to_string()))?;
    if labels.len() != logits.nrows() {
        return Err(corrupt(
            &labels_path,
            format!(
                "{} labels for {} rows of logits",
                labels.len(),
                logits.nrows()
            ),
        ));
    }
    Ok((logits, labels))
}

fn corrupt(path: &Path, message: String) -> LabError {
    TrainError::Corrupt {
        path: path.to_path_buf(),
        message,
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_calib::calibrators::temperature::TemperatureObjective;
    use csam_calib::metrics::tce::tce;
    use csam_train::train::evaluate::Predictions;

    /// Three classes, one in four predictions wrong, all with confidence
    /// above 0.95: an overconfident model.
    fn overconfident(n: usize, shift: usize) -> Predictions {
        let mut logits = Array2::<f32>::zeros((n, 3));
        let labels: Vec<usize> = (0..n).map(|i| (i + shift) % 3).collect();
        for (i, &y) in labels.iter().enumerate() {
            let predicted = if i % 4 == 0 { (y + 1) % 3 } else { y };
            logits[[i, predicted]] = 4.0 + 0.5 * (i % 5) as f32;
        }
        Predictions { logits, labels }
    }

    #[test]
    fn temperature_column_is_the_calibration_crate_tce() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        let (val, test) = (overconfident(40, 0), overconfident(30, 1));
        for (split, predictions) in [(Split::Val, &val), (Split::Test, &test)] {
            predictions
                .write_npy(&run.logits(split), &run.labels(split))
                .unwrap();
        }
        let calibration = calibrate_run(&run, &MetricOptions::default()).unwrap();
        let expected = tce(
            val.logits.mapv(f64::from).view(),
            &val.labels,
            test.logits.mapv(f64::from).view(),
            &test.labels,
            &MetricOptions::default(),
            TemperatureObjective::Nll,
        )
        .unwrap();
        // The same logits through the same f64 code, at most summed in other chunks:
        // an ECE over 30 rows moves by <= 30 * 2.2e-16 ~ 7e-15 (the fit's T likewise).
        assert!((calibration.posthoc.temperature.ece - expected).abs() < 1e-12);
        assert!(calibration.temperature > 1.0, "overconfident: T > 1");
        let (probs, labels) = test_probabilities(&run).unwrap();
        assert_eq!(labels, test.labels);
        assert_eq!(probs.dim(), (30, 3));
        // Temperature scaling keeps every argmax, and so does isotonic regression
        // on these logits: 8 of the 30 (i % 4 == 0) stay wrong.
        for summary in [
            &calibration.posthoc.temperature,
            &calibration.posthoc.isotonic,
        ] {
            // An exact count over 30, rounded once like 22 / 30: equal up to 1 ulp.
            assert!(
                (summary.accuracy - 22.0 / 30.0).abs() < 1e-12,
                "{summary:?}"
            );
        }
    }

    #[test]
    fn missing_logits_are_an_error_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let err = calibrate_run(&RunDir::new(dir.path()), &MetricOptions::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("val_logits.npy"), "{err}");
    }
}
