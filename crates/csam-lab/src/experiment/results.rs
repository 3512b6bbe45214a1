//! The records of a comparison: one [`RunRecord`] per (method, seed), their
//! aggregates over seeds ([`MethodAggregate`], mean ± sample std), and the
//! files they are written to.
//!
//! `results.json` ([`CompareResults`], schema [`SCHEMA`]), all numbers as
//! fractions (not percent):
//! - `schema`, `csam_version`, `settings` (the comparison's settings, as in
//!   `compare.json`), `wall_time_s` (of the invocation that wrote the file);
//! - `runs[]`: `method`, `seed`, `run_dir` (relative to the comparison
//!   directory), `best_epoch` (null for ensembles and MC-Dropout), `train_wall_time_s`,
//!   `second_pass` (the share of steps with SAM's second pass), `temperature`, `val` and
//!   `test` (every metric of the calibration crate's `MetricSummary`; `test.tce`
//!   set), `posthoc.{temperature,isotonic,histogram}` (test metrics after each
//!   calibrator fitted on validation);
//! - `diverged[]` (left out when no run diverged): `method`, `seed`,
//!   `run_dir` (the member run that diverged), `epoch`, `step`, `reason`,
//!   `last_good_epoch` (see [`super::diverged`]);
//! - `aggregates[]`: `method`, `seeds` (those that finished),
//!   `diverged_seeds` (left out when none diverged),
//!   `metrics.<key>.{mean,std,n}` for every [`Metric`] key over the finished
//!   seeds (`std` is the sample standard deviation, n - 1 in the
//!   denominator; null for a single seed).

use std::collections::BTreeMap;

use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};

use super::compare_settings::CompareSettings;
use super::diverged::DivergedRun;
use super::method::Method;
use super::posthoc::PosthocSummaries;
use crate::shift::report::{CorruptionReport, OodReport};

/// The `schema` tag of `results.json`.
pub const SCHEMA: &str = "csam-compare/1";

/// The numbers of one trained run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The method (`sgd`, `focal+csam`, `csam-ensemble5`, ...).
    pub method: Method,
    /// The run's seed (an ensemble's: its first member's).
    pub seed: u64,
    /// The run directory, relative to the comparison directory; for an
    /// ensemble or MC-Dropout, the directory of the combined predictions.
    pub run_dir: String,
    /// 1-based epoch of the best checkpoint (by validation NLL); None for an
    /// ensemble or MC-Dropout (each member has its own).
    pub best_epoch: Option<usize>,
    /// Training and evaluation time of the run, over all resumes (an
    /// ensemble's: summed over its members).
    pub train_wall_time_s: f64,
    /// Share of training steps that ran SAM's second (perturbed) pass: the
    /// mean over epochs (and over an ensemble's members) of `train.second_pass`
    /// in `metrics.jsonl`; 0 for SGD. None when a log predates that field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub second_pass: Option<f64>,
    /// Temperature fitted on validation (NLL).
    pub temperature: f64,
    /// Validation metrics of the best checkpoint.
    pub val: MetricSummary,
    /// Test metrics of the best checkpoint, `tce` set.
    pub test: MetricSummary,
    /// Test metrics after post-hoc calibration.
    pub posthoc: PosthocSummaries,
    /// Under shift and against OOD data, when the comparison asked for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shift: Option<ShiftRecord>,
}

/// A method's predictions on corrupted test data and against an
/// out-of-distribution set (the paper's Table 1).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShiftRecord {
    /// Per corruption and severity, and their means.
    pub corruptions: Option<CorruptionReport>,
    /// OOD detection AUROCs.
    pub ood: Option<OodReport>,
}

/// A column of the results table: one number per run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Test accuracy.
    Accuracy,
    /// ECE, 15 equal-width (lo, hi] bins.
    Ece,
    /// Adaptive (equal-mass) ECE.
    Adaece,
    /// Classwise ECE.
    ClasswiseEce,
    /// ECE after temperature scaling fitted on validation (TCE).
    Tce,
    /// Negative log-likelihood.
    Nll,
    /// Brier score.
    Brier,
    /// Misclassification-detection AUROC of the confidence.
    AurocMisclassification,
    /// One-vs-rest macro AUROC.
    AurocOvr,
    /// ECE after isotonic regression fitted on validation.
    EceIsotonic,
    /// ECE after histogram binning fitted on validation.
    EceHistogram,
    /// Accuracy on corrupted test data, the mean over corruptions and
    /// severities.
    CorruptedAccuracy,
    /// ECE on corrupted test data, the mean over corruptions and severities.
    CorruptedEce,
    /// NLL on corrupted test data, the mean over corruptions and severities.
    CorruptedNll,
    /// OOD detection AUROC, scored by the maximum probability.
    OodAurocMaxProbability,
    /// OOD detection AUROC, scored by minus the predictive entropy.
    OodAurocEntropy,
}

impl Metric {
    /// Every column, in table order.
    pub const ALL: &'static [Metric] = &[
        Metric::Accuracy,
        Metric::Ece,
        Metric::Adaece,
        Metric::ClasswiseEce,
        Metric::Tce,
        Metric::Nll,
        Metric::Brier,
        Metric::AurocMisclassification,
        Metric::AurocOvr,
        Metric::EceIsotonic,
        Metric::EceHistogram,
    ];

    /// The columns of the shift table (`shift.md`): in-distribution test
    /// accuracy and ECE beside the shift and OOD ones.
    pub const SHIFT: &'static [Metric] = &[
        Metric::Accuracy,
        Metric::Ece,
        Metric::CorruptedAccuracy,
        Metric::CorruptedEce,
        Metric::CorruptedNll,
        Metric::OodAurocMaxProbability,
        Metric::OodAurocEntropy,
    ];

    /// The key in `results.json` and `results.csv`.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Accuracy => "accuracy",
            Metric::Ece => "ece",
            Metric::Adaece => "adaece",
            Metric::ClasswiseEce => "classwise_ece",
            Metric::Tce => "tce",
            Metric::Nll => "nll",
            Metric::Brier => "brier",
            Metric::AurocMisclassification => "auroc_misclassification",
            Metric::AurocOvr => "auroc_ovr",
            Metric::EceIsotonic => "ece_isotonic",
            Metric::EceHistogram => "ece_histogram",
            Metric::CorruptedAccuracy => "corrupted_accuracy",
            Metric::CorruptedEce => "corrupted_ece",
            Metric::CorruptedNll => "corrupted_nll",
            Metric::OodAurocMaxProbability => "ood_auroc_max_probability",
            Metric::OodAurocEntropy => "ood_auroc_entropy",
        }
    }

    /// The column header of the table.
    pub fn header(self) -> &'static str {
        match self {
            Metric::Accuracy => "Acc",
            Metric::Ece => "ECE",
            Metric::Adaece => "AdaECE",
            Metric::ClasswiseEce => "CW-ECE",
            Metric::Tce => "TCE",
            Metric::Nll => "NLL",
            Metric::Brier => "Brier",
            Metric::AurocMisclassification => "AUROC mis",
            Metric::AurocOvr => "AUROC ovr",
            Metric::EceIsotonic => "ECE iso",
            Metric::EceHistogram => "ECE hist",
            Metric::CorruptedAccuracy => "Corrupted acc",
            Metric::CorruptedEce => "Corrupted ECE",
            Metric::CorruptedNll => "Corrupted NLL",
            Metric::OodAurocMaxProbability => "OOD AUROC max-prob",
            Metric::OodAurocEntropy => "OOD AUROC entropy",
        }
    }

    /// True when the table shows the metric in percent (as the paper does);
    /// NLL and Brier are shown as they are.
    pub fn in_percent(self) -> bool {
        !matches!(self, Metric::Nll | Metric::Brier | Metric::CorruptedNll)
    }

    /// The metric's value in `run`; None where it is undefined (an AUROC
    /// without both positives and negatives, e.g. when every prediction is right).
    pub fn of(self, run: &RunRecord) -> Option<f64> {
        let test = &run.test;
        let corrupted = || Some(run.shift.as_ref()?.corruptions.as_ref()?.mean);
        let ood = || run.shift.as_ref()?.ood.as_ref();
        match self {
            Metric::Accuracy => Some(test.accuracy),
            Metric::Ece => Some(test.ece),
            Metric::Adaece => Some(test.adaece),
            Metric::ClasswiseEce => Some(test.classwise_ece),
            Metric::Tce => Some(run.posthoc.temperature.ece),
            Metric::Nll => Some(test.nll),
            Metric::Brier => Some(test.brier),
            Metric::AurocMisclassification => test.auroc_misclassification,
            Metric::AurocOvr => test.auroc_ovr,
            Metric::EceIsotonic => Some(run.posthoc.isotonic.ece),
            Metric::EceHistogram => Some(run.posthoc.histogram.ece),
            Metric::CorruptedAccuracy => corrupted().map(|m| m.accuracy),
            Metric::CorruptedEce => corrupted().map(|m| m.ece),
            Metric::CorruptedNll => corrupted().map(|m| m.nll),
            Metric::OodAurocMaxProbability => ood().map(|o| o.auroc_max_probability),
            Metric::OodAurocEntropy => ood().map(|o| o.auroc_entropy),
        }
    }
}

/// Mean and sample standard deviation of a metric over seeds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeanStd {
    /// Arithmetic mean.
    pub mean: f64,
    /// `sqrt(sum (x - mean)^2 / (n - 1))`; None when n = 1.
    pub std: Option<f64>,
    /// Number of values.
    pub n: usize,
}

/// The mean and sample std of `values`; None when there are none.
/// Accumulates in f64, two passes (mean first) for accuracy.
pub fn mean_std(values: &[f64]) -> Option<MeanStd> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    let std = (n > 1).then(|| {
        let squares: f64 = values.iter().map(|v| (v - mean) * (v - mean)).sum();
        (squares / (n - 1) as f64).sqrt()
    });
    Some(MeanStd { mean, std, n })
}

/// One method's metrics aggregated over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodAggregate {
    /// The method.
    pub method: Method,
    /// The seeds aggregated (those that finished), in run order.
    pub seeds: Vec<u64>,
    /// The seeds whose run diverged, in run order (absent from files
    /// written before runs could diverge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged_seeds: Vec<u64>,
    /// Mean ± std per [`Metric::key`].
    pub metrics: BTreeMap<String, MeanStd>,
}

impl MethodAggregate {
    /// The aggregate of `metric`.
    pub fn get(&self, metric: Metric) -> Option<&MeanStd> {
        self.metrics.get(metric.key())
    }
}

/// Aggregates `runs` per method, in the order of `methods`, with the seeds
/// of the method that `diverged`; a method without runs is left out, and so
/// is a metric undefined in every run of the method (a metric undefined in
/// some runs is aggregated over the others: see `n`). A method every seed
/// of which diverged has no metrics.
pub fn aggregate(
    runs: &[RunRecord],
    diverged: &[DivergedRun<MethodSeed>],
    methods: &[Method],
) -> Vec<MethodAggregate> {
    methods
        .iter()
        .filter_map(|&method| {
            let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.method == method).collect();
            let diverged_seeds: Vec<u64> = diverged
                .iter()
                .filter(|d| d.run.method == method)
                .map(|d| d.run.seed)
                .collect();
            let shift_only = Metric::SHIFT.iter().filter(|m| !Metric::ALL.contains(m));
            let metrics = Metric::ALL
                .iter()
                .chain(shift_only)
                .filter_map(|&metric| {
                    let values: Vec<f64> = mine.iter().filter_map(|r| metric.of(r)).collect();
                    Some((metric.key().to_string(), mean_std(&values)?))
                })
                .collect::<BTreeMap<_, _>>();
            (!mine.is_empty() || !diverged_seeds.is_empty()).then(|| MethodAggregate {
                method,
                seeds: mine.iter().map(|r| r.seed).collect(),
                diverged_seeds,
                metrics,
            })
        })
        .collect()
}

/// A method at a seed: what identifies a diverged run of a comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MethodSeed {
    /// The method.
    pub method: Method,
    /// The seed (an ensemble's: its first member's).
    pub seed: u64,
}

/// The content of `results.json` (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareResults {
    /// [`SCHEMA`].
    pub schema: String,
    /// Version of csam that wrote the file.
    pub csam_version: String,
    /// The comparison's settings.
    pub settings: CompareSettings,
    /// Wall time of the invocation that wrote the file (reused runs cost ~0).
    pub wall_time_s: f64,
    /// One record per finished run, seed-major.
    pub runs: Vec<RunRecord>,
    /// The runs that diverged, seed-major (absent from files written
    /// before runs could diverge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<DivergedRun<MethodSeed>>,
    /// One aggregate per method, in `settings.methods` order.
    pub aggregates: Vec<MethodAggregate>,
}

impl CompareResults {
    /// Whether the run of `method` at `seed` diverged.
    pub fn diverged_at(&self, method: Method, seed: u64) -> bool {
        self.diverged
            .iter()
            .any(|d| d.run.method == method && d.run.seed == seed)
    }
}

/// `results.csv`: a header, then one row per run with `method`, `seed`,
/// `run_dir`, `best_epoch`, `train_wall_time_s`, `temperature` and every
/// [`Metric::key`] (fractions, full precision; empty where undefined).
pub fn csv(runs: &[RunRecord]) -> String {
    let mut header = vec![
        "method",
        "seed",
        "run_dir",
        "best_epoch",
        "train_wall_time_s",
        "temperature",
    ];
    header.extend(Metric::ALL.iter().map(|m| m.key()));
    let mut out = header.join(",");
    out.push('\n');
    for run in runs {
        let mut row = vec![
            run.method.to_string(),
            run.seed.to_string(),
            run.run_dir.clone(),
            run.best_epoch.map_or_else(String::new, |e| e.to_string()),
            run.train_wall_time_s.to_string(),
            run.temperature.to_string(),
        ];
        row.extend(
            Metric::ALL
                .iter()
                .map(|m| m.of(run).map(|v| v.to_string()).unwrap_or_default()),
        );
        out.push_str(&row.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use csam_train::spec::OptimizerFamily;

    /// A summary whose every metric is `value` (tce None).
    pub(crate) fn flat_summary(value: f64) -> MetricSummary {
        MetricSummary {
            accuracy: value,
            ece: value,
            ece_l2: value,
            mce: value,
            adaece: value,
            classwise_ece: value,
            nll: value,
            brier: value,
            auroc_misclassification: Some(value),
            auroc_ovr: Some(value),
            mean_confidence: value,
            mean_entropy: value,
            tce: None,
        }
    }

    /// A run whose raw test metrics are `raw` and post-hoc ones `calibrated`.
    pub(crate) fn record(method: Method, seed: u64, raw: f64, calibrated: f64) -> RunRecord {
        RunRecord {
            method,
            seed,
            run_dir: format!("runs/{method}-seed{seed}"),
            best_epoch: Some(1),
            train_wall_time_s: 1.0,
            second_pass: None,
            temperature: 1.5,
            val: flat_summary(raw),
            test: MetricSummary {
                tce: Some(calibrated),
                ..flat_summary(raw)
            },
            posthoc: PosthocSummaries {
                temperature: flat_summary(calibrated),
                isotonic: flat_summary(calibrated / 2.0),
                histogram: flat_summary(calibrated / 4.0),
            },
            shift: None,
        }
    }

    #[test]
    fn mean_and_sample_std_by_hand() {
        // mean 4, squares 4 + 0 + 4 = 8, / (3 - 1) = 4, sqrt 2.
        let got = mean_std(&[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(got.mean, 4.0);
        assert_eq!(got.std, Some(2.0));
        assert_eq!(got.n, 3);
        // mean 0.5, squares 0.0625 * 2 = 0.125, / (2 - 1), sqrt 0.3535...:
        // the population std would be sqrt(0.125 / 2) = 0.25.
        let two = mean_std(&[0.25, 0.75]).unwrap();
        assert_eq!((two.mean, two.std), (0.5, Some(0.125f64.sqrt())));
        assert_eq!(mean_std(&[0.3]).unwrap().std, None);
        assert_eq!(mean_std(&[]), None);
    }

    /// SGD, SAM and CSAM, each with cross entropy.
    pub(crate) fn sgd_sam_csam() -> [Method; 3] {
        [
            OptimizerFamily::Sgd,
            OptimizerFamily::Sam,
            OptimizerFamily::Csam,
        ]
        .map(Method::cross_entropy)
    }

    #[test]
    fn aggregates_per_method_in_the_requested_order() {
        let [sgd, sam, csam] = sgd_sam_csam();
        let runs = vec![
            record(sgd, 0, 0.80, 0.02),
            record(csam, 0, 0.90, 0.01),
            record(sgd, 1, 0.84, 0.04),
            record(csam, 1, 0.90, 0.03),
        ];
        let aggregates = aggregate(&runs, &[], &[csam, sam, sgd]);
        let methods: Vec<_> = aggregates.iter().map(|a| a.method).collect();
        assert_eq!(methods, vec![csam, sgd], "SAM has no runs and is left out");
        let sgd = &aggregates[1];
        assert_eq!(sgd.seeds, vec![0, 1]);
        let accuracy = sgd.get(Metric::Accuracy).unwrap();
        // Means and sample stds of 2 seeds: < 10 f64 roundings of values < 1, < 1e-15.
        assert!((accuracy.mean - 0.82).abs() < 1e-12);
        // |0.80 - 0.84| / sqrt(2) = 0.028284...
        assert!((accuracy.std.unwrap() - 0.04 / 2f64.sqrt()).abs() < 1e-12);
        let tce = sgd.get(Metric::Tce).unwrap();
        assert!((tce.mean - 0.03).abs() < 1e-12);
        let isotonic = sgd.get(Metric::EceIsotonic).unwrap();
        assert!((isotonic.mean - 0.015).abs() < 1e-12);
        assert_eq!(aggregates[0].get(Metric::Nll).unwrap().std, Some(0.0));
        assert_eq!(sgd.metrics.len(), Metric::ALL.len());
    }

    #[test]
    fn undefined_values_are_left_out_of_the_aggregate_and_the_csv() {
        let mut perfect = record(Method::cross_entropy(OptimizerFamily::Sgd), 1, 1.0, 0.0);
        perfect.test.auroc_misclassification = None;
        let runs = vec![
            record(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0.5, 0.1),
            perfect,
        ];
        let sgd = &aggregate(&runs, &[], &[Method::cross_entropy(OptimizerFamily::Sgd)])[0];
        let auroc = sgd.get(Metric::AurocMisclassification).unwrap();
        assert_eq!((auroc.mean, auroc.std, auroc.n), (0.5, None, 1));
        assert_eq!(sgd.get(Metric::Accuracy).unwrap().n, 2);
        let text = csv(&runs);
        let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
        let column = header
            .iter()
            .position(|h| *h == "auroc_misclassification")
            .unwrap();
        let row: Vec<&str> = text.lines().nth(2).unwrap().split(',').collect();
        assert_eq!(row[column], "");
    }

    #[test]
    fn csv_has_a_header_and_one_row_per_run() {
        let runs = vec![
            record(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0.5, 0.25),
            record(Method::cross_entropy(OptimizerFamily::Sam), 3, 0.5, 0.25),
        ];
        let text = csv(&runs);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        let header: Vec<&str> = lines[0].split(',').collect();
        assert_eq!(header.len(), 6 + Metric::ALL.len());
        assert_eq!(header[6], "accuracy");
        let row: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(row.len(), header.len());
        assert_eq!(&row[..3], &["sam", "3", "runs/sam-seed3"]);
        let tce = header.iter().position(|h| *h == "tce").unwrap();
        assert_eq!(row[tce], "0.25");
        let histogram = header.iter().position(|h| *h == "ece_histogram").unwrap();
        assert_eq!(row[histogram], "0.0625");
    }
}
