//! Every metric of a prediction set in one serialisable record, the row of a
//! results table (fractions, not percent; the conventions are those of
//! crates/csam-calib/README.md).

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::bootstrap::{bootstrap_each, BootstrapOptions, ConfidenceInterval};
use super::{
    accuracy, auroc_ovr, brier, mean_confidence, mean_entropy, nll, par_auroc_misclassification,
    par_classwise_ece, par_ece, par_reliability_diagram,
};
use crate::binning::{AdaptiveVariant, Binning, EdgeConvention, Norm};
use crate::error::{CalibError, Result};
use crate::parallel::Threads;
use crate::scores::{validate_labels, validate_probabilities, Real};

/// The binning and input checks a summary uses.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MetricOptions {
    /// Bins of every binned metric (15 in the paper).
    pub n_bins: usize,
    /// Edge convention of the equal-width metrics (ECE, MCE, classwise ECE, TCE).
    pub edges: EdgeConvention,
    /// Equal-mass variant of the AdaECE.
    pub adaptive: AdaptiveVariant,
    /// Largest accepted `|row sum - 1|` of the probabilities.
    pub tolerance: f64,
}

impl Default for MetricOptions {
    /// 15 bins, right-closed edges, interpolated AdaECE (the paper's lineage),
    /// row-sum tolerance `1e-3` (lenient enough for `f32` probabilities saved as text).
    fn default() -> Self {
        MetricOptions {
            n_bins: 15,
            edges: EdgeConvention::RightClosed,
            adaptive: AdaptiveVariant::Interpolated,
            tolerance: 1e-3,
        }
    }
}

impl MetricOptions {
    /// The equal-width binning of ECE, MCE, classwise ECE and TCE.
    pub fn equal_width(&self) -> Binning {
        Binning::EqualWidth {
            n_bins: self.n_bins,
            edges: self.edges,
        }
    }

    /// The equal-mass binning of AdaECE.
    pub fn equal_mass(&self) -> Binning {
        Binning::EqualMass {
            n_bins: self.n_bins,
            variant: self.adaptive,
        }
    }
}

/// All metrics of one prediction set, as fractions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricSummary {
    /// Fraction of correct predictions.
    pub accuracy: f64,
    /// l1 ECE, equal-width bins.
    pub ece: f64,
    /// l2 (RMS) calibration error, equal-width bins.
    pub ece_l2: f64,
    /// Maximum calibration error, equal-width bins.
    pub mce: f64,
    /// Adaptive (equal-mass) ECE.
    pub adaece: f64,
    /// Classwise ECE, equal-width bins.
    pub classwise_ece: f64,
    /// Negative log-likelihood, probabilities clipped to `[eps, 1 - eps]` with
    /// `eps` the machine epsilon of their type (scikit-learn's `log_loss`; see
    /// [`nll`]).
    pub nll: f64,
    /// Multi-class Brier score, summed over classes.
    pub brier: f64,
    /// Misclassification-detection AUROC of the confidence; `None` (JSON `null`)
    /// where it is undefined: every prediction right, or every one wrong.
    pub auroc_misclassification: Option<f64>,
    /// One-vs-rest macro AUROC over classes present in the labels; `None` where
    /// no class has both positives and negatives (a single class in the labels).
    pub auroc_ovr: Option<f64>,
    /// Mean max probability.
    pub mean_confidence: f64,
    /// Mean predictive entropy (nats).
    pub mean_entropy: f64,
    /// ECE after temperature scaling fitted on validation logits; only
    /// [`super::tce::tce`] can compute it, so [`summarize`] leaves it `None`.
    pub tce: Option<f64>,
}

impl MetricSummary {
    /// Every metric with its JSON name, in the order of the struct; `None`
    /// where it is undefined or was not computed.
    pub fn values(&self) -> [(&'static str, Option<f64>); 13] {
        [
            ("accuracy", Some(self.accuracy)),
            ("ece", Some(self.ece)),
            ("ece_l2", Some(self.ece_l2)),
            ("mce", Some(self.mce)),
            ("adaece", Some(self.adaece)),
            ("classwise_ece", Some(self.classwise_ece)),
            ("nll", Some(self.nll)),
            ("brier", Some(self.brier)),
            ("auroc_misclassification", self.auroc_misclassification),
            ("auroc_ovr", self.auroc_ovr),
            ("mean_confidence", Some(self.mean_confidence)),
            ("mean_entropy", Some(self.mean_entropy)),
            ("tce", self.tce),
        ]
    }
}

/// Checks `probs` (row sums within `options.tolerance`) and `labels`, then
/// computes every metric. The AUROCs are `None` where they are undefined (a
/// perfect or a hopeless model, a single class), so a small or easy test set
/// still gets its summary; every other failure is an error.
///
/// `f32` probabilities are read as `f32` (no `f64` copy of the matrix); the
/// sums are accumulated in `f64` either way.
pub fn summarize<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &MetricOptions,
) -> Result<MetricSummary> {
    par_summarize(probs, labels, options, Threads::ONE)
}

/// [`summarize`] with the binned metrics and the misclassification AUROC
/// computed on `threads` threads (see [`crate::parallel`] for what stays
/// the same bits); the other metrics run on the calling thread.
pub fn par_summarize<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &MetricOptions,
    threads: Threads,
) -> Result<MetricSummary> {
    validate_probabilities(probs, options.tolerance)?;
    validate_labels(labels, probs.nrows(), probs.ncols())?;
    summarize_checked(probs, labels, options, threads)
}

/// Bootstrap BCa intervals of every metric of [`summarize`], keyed by the
/// names of [`MetricSummary::values`], from the same resamples (see
/// [`bootstrap_each`]). A metric undefined on the data or on any resample
/// (an AUROC, say) has no interval, nor has `tce` (its temperature is fitted
/// on validation data, which the resampling does not see).
///
/// The intervals are bias-corrected and accelerated (BCa, Efron 1987; BC
/// above `resamples` rows): see [`mod@crate::metrics::bootstrap`]. Binned errors
/// are biased upwards on resamples (a resample's duplicated rows make its bins
/// emptier and noisier); BCa moves their interval down by that bias, so on a
/// small set the interval of the MCE, and sometimes of the ECE, can lie below
/// the estimate, and a metric whose estimate lies below every resample has no
/// interval.
pub fn bootstrap_summary<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &MetricOptions,
    resampling: &BootstrapOptions,
) -> Result<BTreeMap<&'static str, Option<ConfidenceInterval>>> {
    validate_probabilities(probs, options.tolerance)?;
    validate_labels(labels, probs.nrows(), probs.ncols())?;
    let intervals = bootstrap_each(probs, labels, resampling, |p, l| {
        let summary = summarize_checked(p, l, options, Threads::ONE)?;
        Ok(summary.values().map(|(_, value)| value).to_vec())
    })?;
    let names = MetricSummary::values(&MetricSummary::default()).map(|(name, _)| name);
    Ok(names.into_iter().zip(intervals).collect())
}

/// [`summarize`] of probabilities and labels already checked (a resample of
/// checked rows needs no second check).
fn summarize_checked<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &MetricOptions,
    threads: Threads,
) -> Result<MetricSummary> {
    let width = options.equal_width();
    let stats = par_reliability_diagram(probs, labels, &width, threads)?;
    Ok(MetricSummary {
        accuracy: accuracy(probs, labels)?,
        ece: stats.calibration_error(Norm::L1),
        ece_l2: stats.calibration_error(Norm::L2),
        mce: stats.calibration_error(Norm::Max),
        adaece: par_ece(probs, labels, &options.equal_mass(), Norm::L1, threads)?,
        classwise_ece: par_classwise_ece(probs, labels, &width, threads)?,
        nll: nll(probs, labels)?,
        brier: brier(probs, labels)?,
        auroc_misclassification: defined(par_auroc_misclassification(probs, labels, threads))?,
        auroc_ovr: defined(auroc_ovr(probs, labels))?,
        mean_confidence: mean_confidence(probs, labels)?,
        mean_entropy: mean_entropy(probs)?,
        tce: None,
    })
}

/// `Some(value)`, `None` for [`CalibError::Undefined`], other errors unchanged.
fn defined(result: Result<f64>) -> Result<Option<f64>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(CalibError::Undefined { .. }) => Ok(None),
        Err(other) => Err(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::ece;
    use crate::metrics::test_support::two_class;
    use ndarray::{array, Array2};

    #[test]
    fn summary_agrees_with_the_single_metrics() {
        let (probs, labels) = two_class(&[(0.8, false), (0.85, true), (0.6, true), (0.95, true)]);
        let s = summarize(probs.view(), &labels, &MetricOptions::default()).unwrap();
        let width = Binning::default();
        assert_eq!(s.ece, ece(probs.view(), &labels, &width, Norm::L1).unwrap());
        assert_eq!(
            s.mce,
            ece(probs.view(), &labels, &width, Norm::Max).unwrap()
        );
        assert_eq!(s.accuracy, 0.75);
        assert_eq!(s.auroc_misclassification, Some(2.0 / 3.0));
        assert_eq!(s.tce, None);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"auroc_ovr\"") && json.contains("\"tce\":null"));
    }

    #[test]
    fn options_deserialize_with_defaults_and_kebab_case() {
        let o: MetricOptions =
            serde_json::from_str(r#"{"edges":"left-closed-with-one-bin","adaptive":"chunked"}"#)
                .unwrap();
        assert_eq!(o.n_bins, 15);
        assert_eq!(o.edges, EdgeConvention::LeftClosedWithOneBin);
        assert_eq!(o.adaptive, AdaptiveVariant::Chunked);
    }

    #[test]
    fn undefined_aurocs_are_none_not_an_error() {
        let (probs, labels) = two_class(&[(0.8, true), (0.9, true)]);
        let s = summarize(probs.view(), &labels, &MetricOptions::default()).unwrap();
        assert_eq!(s.auroc_misclassification, None);
        assert_eq!(s.accuracy, 1.0);
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.contains("\"auroc_misclassification\":null"));
    }

    /// Every number of the summary as JSON writes it (so a field added later
    /// is covered too).
    fn numbers(summary: &MetricSummary) -> Vec<(String, f64)> {
        let json = serde_json::to_value(summary).unwrap();
        json.as_object()
            .unwrap()
            .iter()
            .filter_map(|(key, value)| Some((key.clone(), value.as_f64()?)))
            .collect()
    }

    #[test]
    fn one_example_gives_no_negative_zero() {
        // The one sample falls in no interpolated AdaECE bin: AdaECE is 0,
        // and was -0.0 (printed "-0.00%").
        let (probs, labels) = two_class(&[(0.88, true)]);
        let s = summarize(probs.view(), &labels, &MetricOptions::default()).unwrap();
        assert_eq!(s.adaece, 0.0);
        assert!(s.adaece.is_sign_positive());
    }

    proptest::proptest! {
        #[test]
        fn no_metric_is_negative_zero(
            rows in proptest::collection::vec((0usize..5, proptest::bool::ANY), 1..6),
            chunked in proptest::bool::ANY,
            left_closed in proptest::bool::ANY,
        ) {
            // Confidences on a grid that includes 0.5 and 1 (certain rows).
            let cases: Vec<(f64, bool)> = rows
                .iter()
                .map(|&(step, correct)| (0.5 + step as f64 / 8.0, correct))
                .collect();
            let (probs, labels) = two_class(&cases);
            let options = MetricOptions {
                edges: if left_closed { EdgeConvention::LeftClosedWithOneBin } else { EdgeConvention::RightClosed },
                adaptive: if chunked { AdaptiveVariant::Chunked } else { AdaptiveVariant::Interpolated },
                ..MetricOptions::default()
            };
            let s = summarize(probs.view(), &labels, &options).unwrap();
            for (key, value) in numbers(&s) {
                proptest::prop_assert!(
                    !(value == 0.0 && value.is_sign_negative()),
                    "{} is -0.0 for {:?}", key, cases
                );
            }
        }
    }

    #[test]
    fn values_are_named_as_in_the_json() {
        let (probs, labels) = two_class(&[(0.8, false), (0.85, true), (0.6, true)]);
        let s = summarize(probs.view(), &labels, &MetricOptions::default()).unwrap();
        let json = serde_json::to_value(s).unwrap();
        let keys: Vec<&String> = json.as_object().unwrap().keys().collect();
        let mut names: Vec<&str> = s.values().iter().map(|(name, _)| *name).collect();
        names.sort_unstable();
        assert_eq!(keys, names);
        for (name, value) in s.values() {
            assert_eq!(json[name].as_f64(), value, "{name}");
        }
    }

    /// Probabilities of 3 classes in float32 and the same values widened.
    fn float32_and_widened() -> (Array2<f32>, Array2<f64>, Vec<usize>) {
        let probs = Array2::from_shape_fn((40, 3), |(i, k)| {
            let top = 0.4 + 0.6 * ((i * 7919) % 40) as f32 / 40.0;
            if k == i % 3 {
                top
            } else {
                (1.0 - top) / 2.0
            }
        });
        let labels = (0..40).map(|i| (i * i) % 3).collect();
        let widened = probs.mapv(f64::from);
        (probs, widened, labels)
    }

    #[test]
    fn float32_gives_the_numbers_of_its_values_in_float64() {
        // Values are read through Into<f64>, so widening first changes nothing.
        let (narrow, wide, labels) = float32_and_widened();
        let options = MetricOptions::default();
        let a = summarize(narrow.view(), &labels, &options).unwrap();
        let b = summarize(wide.view(), &labels, &options).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.accuracy, accuracy(narrow.view(), &labels).unwrap());
        let resampling = BootstrapOptions {
            resamples: 30,
            ..Default::default()
        };
        let ia = bootstrap_summary(narrow.view(), &labels, &options, &resampling).unwrap();
        let ib = bootstrap_summary(wide.view(), &labels, &options, &resampling).unwrap();
        assert_eq!(ia, ib);
    }

    #[test]
    fn bootstrap_summary_brackets_each_estimate() {
        let (_, probs, labels) = float32_and_widened();
        let options = MetricOptions::default();
        let s = summarize(probs.view(), &labels, &options).unwrap();
        let resampling = BootstrapOptions {
            resamples: 200,
            level: 0.9,
            seed: 11,
        };
        let intervals = bootstrap_summary(probs.view(), &labels, &options, &resampling).unwrap();
        assert_eq!(intervals.len(), 13);
        assert_eq!(intervals["tce"], None);
        // Means of per-row values are unbiased under resampling (z0 near 0),
        // so their interval holds the estimate. Binned errors are biased
        // upwards on resamples: on these 40 rows some estimates lie below
        // every resample, and such a metric has no interval.
        let means = [
            "accuracy",
            "nll",
            "brier",
            "mean_confidence",
            "mean_entropy",
        ];
        for (name, value) in s.values() {
            let Some(value) = value else { continue };
            let Some(ci) = intervals[name] else {
                assert!(!means.contains(&name), "{name} has no interval");
                continue;
            };
            assert_eq!(ci.estimate, value, "{name}");
            assert!(ci.lower < ci.upper, "{name}: {ci:?}");
            if means.contains(&name) {
                assert!(ci.lower <= value && value <= ci.upper, "{name}: {ci:?}");
            }
        }
    }

    #[test]
    fn unnormalised_rows_are_refused() {
        let probs = array![[0.5, 0.5], [0.6, 0.6]];
        assert!(matches!(
            summarize(probs.view(), &[0, 1], &MetricOptions::default()),
            Err(CalibError::NotNormalised { row: 1, .. })
        ));
    }
}
