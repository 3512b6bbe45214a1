//! Every metric of a prediction set in one serialisable record, the row of a
//! results table (fractions, not percent; the conventions are those of
//! crates/csam-calib/README.md).

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use super::{
    accuracy, auroc_misclassification, auroc_ovr, brier, classwise_ece, ece, mean_confidence,
    mean_entropy, nll,
};
use crate::binning::{AdaptiveVariant, Binning, EdgeConvention, Norm};
use crate::error::{CalibError, Result};
use crate::scores::{validate_labels, validate_probabilities};

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
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
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
    /// Negative log-likelihood (probabilities clamped at `f64::MIN_POSITIVE`).
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

/// Checks `probs` (row sums within `options.tolerance`) and `labels`, then
/// computes every metric. The AUROCs are `None` where they are undefined (a
/// perfect or a hopeless model, a single class), so a small or easy test set
/// still gets its summary; every other failure is an error.
pub fn summarize(
    probs: ArrayView2<'_, f64>,
    labels: &[usize],
    options: &MetricOptions,
) -> Result<MetricSummary> {
    validate_probabilities(probs, options.tolerance)?;
    validate_labels(labels, probs.nrows(), probs.ncols())?;
    let width = options.equal_width();
    let stats = super::reliability_diagram(probs, labels, &width)?;
    Ok(MetricSummary {
        accuracy: accuracy(probs, labels)?,
        ece: stats.calibration_error(Norm::L1),
        ece_l2: stats.calibration_error(Norm::L2),
        mce: stats.calibration_error(Norm::Max),
        adaece: ece(probs, labels, &options.equal_mass(), Norm::L1)?,
        classwise_ece: classwise_ece(probs, labels, &width)?,
        nll: nll(probs, labels)?,
        brier: brier(probs, labels)?,
        auroc_misclassification: defined(auroc_misclassification(probs, labels))?,
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
    use crate::metrics::test_support::two_class;
    use ndarray::array;

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
    fn unnormalised_rows_are_refused() {
        let probs = array![[0.5, 0.5], [0.6, 0.6]];
        assert!(matches!(
            summarize(probs.view(), &[0, 1], &MetricOptions::default()),
            Err(CalibError::NotNormalised { row: 1, .. })
        ));
    }
}
