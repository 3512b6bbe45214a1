//! What `csam eval` measures under shift: accuracy, ECE and NLL per
//! corruption and severity with their averages (the paper's CIFAR-10-C and
//! ImageNet-C columns), and the OOD AUROC of in-distribution test data
//! against another data set (its SVHN column), scored by the maximum
//! probability and by the predictive entropy.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use csam_calib::metrics::auroc::{auroc_ood, OodScore};
use csam_calib::metrics::summary::{summarize, MetricOptions};
use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use super::cifar_c::open_corruption_set;
use super::eval_set::EvalSet;
use super::imagenet_c::{is_imagenet_c, open_imagenet_c, severity_files};
use super::predictor::Predictor;
use crate::error::{LabError, LayoutProblem, Result};
use csam_data::streaming::ImageFiles;

/// Accuracy, ECE (15 equal-width bins, `(lo, hi]`) and NLL, as fractions.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShiftMetrics {
    pub accuracy: f64,
    pub ece: f64,
    pub nll: f64,
}

/// The metrics of one severity (of one corruption, or averaged over them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeverityMetrics {
    /// Severity level, 1..5.
    pub severity: u8,
    /// Images evaluated (summed over corruptions for an average).
    pub n: usize,
    #[serde(flatten)]
    pub metrics: ShiftMetrics,
}

/// One corruption's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionResult {
    /// File stem or folder name (`gaussian_noise`).
    pub name: String,
    /// Per severity, in file order.
    pub severities: Vec<SeverityMetrics>,
    /// Unweighted mean over the severities.
    pub mean: ShiftMetrics,
}

/// All corruption files of a directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CorruptionReport {
    /// The CIFAR-10-C or ImageNet-C layout directory.
    pub dir: PathBuf,
    /// Per corruption, sorted by name.
    pub corruptions: Vec<CorruptionResult>,
    /// Per severity, the unweighted mean over corruptions.
    pub per_severity: Vec<SeverityMetrics>,
    /// The unweighted mean over corruptions and severities.
    pub mean: ShiftMetrics,
}

/// OOD detection of in-distribution test data against another set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OodReport {
    /// The OOD data set spec (its test split).
    pub data: String,
    /// In-distribution examples (the positives).
    pub n_in: usize,
    /// OOD examples.
    pub n_ood: usize,
    /// AUROC with the maximum probability as score.
    pub auroc_max_probability: f64,
    /// AUROC with minus the predictive entropy as score.
    pub auroc_entropy: f64,
}

/// Accuracy, ECE (binned as `options` say) and NLL of probabilities against labels.
pub fn shift_metrics(
    probs: ArrayView2<'_, f64>,
    labels: &[usize],
    options: &MetricOptions,
) -> Result<ShiftMetrics> {
    let s = summarize(probs, labels, options)?;
    Ok(ShiftMetrics {
        accuracy: s.accuracy,
        ece: s.ece,
        nll: s.nll,
    })
}

/// The unweighted mean of metrics.
fn mean<'a>(all: impl IntoIterator<Item = &'a ShiftMetrics>) -> ShiftMetrics {
    let (mut sum, mut count) = ([0.0; 3], 0.0);
    for m in all {
        sum[0] += m.accuracy;
        sum[1] += m.ece;
        sum[2] += m.nll;
        count += 1.0;
    }
    ShiftMetrics {
        accuracy: sum[0] / count,
        ece: sum[1] / count,
        nll: sum[2] / count,
    }
}

/// What corrupted images are labelled by, which also says which layouts a
/// corruption directory may have.
#[derive(Debug, Clone, Copy)]
pub enum ShiftReference<'a> {
    /// A run trained in memory: CIFAR-10-C's layout, labels in
    /// `0..n_classes`.
    Labels { n_classes: usize },
    /// A run trained on a streamed `imagenet:` folder: ImageNet-C's layout,
    /// labelled by the run's class folders, less the validation images the
    /// run held out, decoded by `workers` threads.
    Folders {
        classes: &'a [String],
        held_out: Option<&'a ImageFiles>,
        workers: usize,
    },
}

/// Evaluates `predictor` on every corruption of the directory `dir` (the
/// CIFAR-10-C or the ImageNet-C layout, as `reference` says), one severity
/// at a time, with the metrics binned as `options` say.
pub fn evaluate_corruptions(
    predictor: &Predictor,
    dir: &Path,
    reference: &ShiftReference<'_>,
    options: &MetricOptions,
) -> Result<CorruptionReport> {
    let severity = |set: EvalSet<'_>, level: u8| -> Result<SeverityMetrics> {
        let probs = predictor.probabilities(set)?;
        Ok(SeverityMetrics {
            severity: level,
            n: set.len(),
            metrics: shift_metrics(probs.view(), set.labels(), options)?,
        })
    };
    let mut corruptions = Vec::new();
    match *reference {
        ShiftReference::Labels { n_classes } => {
            if is_imagenet_c(dir) {
                return Err(LabError::layout(dir, LayoutProblem::ImageNetForArrays));
            }
            let set = open_corruption_set(dir)?;
            for path in &set.files {
                let file = set.load(path, n_classes)?;
                let severities = file
                    .severities
                    .iter()
                    .map(|(level, dataset)| severity(dataset.into(), *level))
                    .collect::<Result<Vec<_>>>()?;
                corruptions.push(CorruptionResult::new(file.name, severities));
            }
        }
        ShiftReference::Folders {
            classes,
            held_out,
            workers,
        } => {
            for corruption in open_imagenet_c(dir)? {
                let mut severities = Vec::with_capacity(corruption.severities.len());
                for (level, folder) in &corruption.severities {
                    let name = format!("{}/{level}", corruption.name);
                    let files = Arc::new(severity_files(folder, &name, classes, held_out)?);
                    let set = EvalSet::Files {
                        files: &files,
                        workers,
                    };
                    severities.push(severity(set, *level)?);
                }
                corruptions.push(CorruptionResult::new(corruption.name, severities));
            }
        }
    }
    Ok(CorruptionReport::of(dir, corruptions))
}

impl CorruptionResult {
    /// A corruption's severities with their unweighted mean.
    fn new(name: String, severities: Vec<SeverityMetrics>) -> CorruptionResult {
        let mean = mean(severities.iter().map(|s| &s.metrics));
        CorruptionResult {
            name,
            severities,
            mean,
        }
    }
}

impl CorruptionReport {
    /// The report of `corruptions` (at least one, all with the same
    /// severities): their means per severity and over everything.
    fn of(dir: &Path, corruptions: Vec<CorruptionResult>) -> CorruptionReport {
        let levels: Vec<u8> = corruptions[0]
            .severities
            .iter()
            .map(|s| s.severity)
            .collect();
        let per_severity = levels
            .iter()
            .enumerate()
            .map(|(k, &severity)| {
                let at: Vec<&SeverityMetrics> =
                    corruptions.iter().map(|c| &c.severities[k]).collect();
                SeverityMetrics {
                    severity,
                    n: at.iter().map(|s| s.n).sum(),
                    metrics: mean(at.iter().map(|s| &s.metrics)),
                }
            })
            .collect();
        let mean = mean(
            corruptions
                .iter()
                .flat_map(|c| c.severities.iter().map(|s| &s.metrics)),
        );
        CorruptionReport {
            dir: dir.to_path_buf(),
            corruptions,
            per_severity,
            mean,
        }
    }
}

/// OOD AUROCs of `in_distribution` probabilities (positives) against those
/// of `ood` (negatives), with both scores.
pub fn ood_report(
    data: &str,
    in_distribution: ArrayView2<'_, f64>,
    ood: ArrayView2<'_, f64>,
) -> Result<OodReport> {
    let score = |s| auroc_ood(in_distribution, ood, s);
    Ok(OodReport {
        data: data.to_string(),
        n_in: in_distribution.nrows(),
        n_ood: ood.nrows(),
        auroc_max_probability: score(OodScore::MaxProbability)?,
        auroc_entropy: score(OodScore::NegativeEntropy)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    #[test]
    fn means_are_unweighted_averages() {
        let a = ShiftMetrics {
            accuracy: 0.9,
            ece: 0.1,
            nll: 0.3,
        };
        let b = ShiftMetrics {
            accuracy: 0.5,
            ece: 0.3,
            nll: 1.1,
        };
        let m = mean([&a, &b]);
        // A sum of two and a halving: <= 2 roundings of values < 1.5, < 3.4e-16.
        assert!(
            (m.accuracy - 0.7).abs() < 1e-12
                && (m.ece - 0.2).abs() < 1e-12
                && (m.nll - 0.7).abs() < 1e-12
        );
    }

    #[test]
    fn confident_in_distribution_rows_separate_from_flat_ood_rows() {
        let inside = array![[0.9, 0.1], [0.8, 0.2]];
        let outside = array![[0.5, 0.5], [0.6, 0.4]];
        let r = ood_report("x", inside.view(), outside.view()).unwrap();
        assert_eq!((r.auroc_max_probability, r.auroc_entropy), (1.0, 1.0));
        let same = ood_report("x", inside.view(), inside.view()).unwrap();
        assert_eq!(same.auroc_max_probability, 0.5);
    }
}
