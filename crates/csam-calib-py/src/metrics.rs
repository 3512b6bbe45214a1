//! The metrics as Python functions. Each checks its inputs as `csam metrics`
//! does (probability rows summing to 1 within `tolerance`, labels in
//! `0..K`), then computes with the GIL released.

use csam_calib::binning::Norm;
use csam_calib::metrics::bootstrap::MAX_RESAMPLES;
use csam_calib::metrics::summary::MetricOptions;
use csam_calib::metrics::{self, BootstrapOptions, OodScore};
use csam_calib::scores::{validate_probabilities, Real};
use csam_calib::CalibError;
use ndarray::ArrayView2;
use numpy::{PyArray1, PyArray2};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::arrays::{labels, to_numpy, with_view, Matrix, View};
use crate::errors::from_calib;
use crate::options::{bin_count, binning, count, metric_options, parse};

/// The metrics of `(probs, labels)` by name: each Python function below is
/// one of them, and [`bootstrap`] takes any by its name.
#[derive(Debug, Clone, Copy)]
enum Metric {
    Ece(Norm),
    AdaptiveEce,
    ClasswiseEce,
    Nll,
    Brier,
    Accuracy,
    AurocMisclassification,
    AurocOvr,
}

impl Metric {
    /// Each metric's Python name, the one `bootstrap` takes and `summarize`
    /// keys it by, with the name `csam metrics` writes it under where that
    /// differs (its JSON keeps the names of the paper's tables).
    const NAMES: [(&'static str, Metric); 10] = [
        ("ece", Metric::Ece(Norm::L1)),
        ("rms_ce", Metric::Ece(Norm::L2)),
        ("mce", Metric::Ece(Norm::Max)),
        ("adaptive_ece", Metric::AdaptiveEce),
        ("classwise_ece", Metric::ClasswiseEce),
        ("nll", Metric::Nll),
        ("brier", Metric::Brier),
        ("accuracy", Metric::Accuracy),
        ("auroc_misclassification", Metric::AurocMisclassification),
        ("auroc_ovr", Metric::AurocOvr),
    ];

    /// `(csam metrics' JSON name, Python name)` where the two differ.
    const CLI_NAMES: [(&'static str, &'static str); 2] =
        [("ece_l2", "rms_ce"), ("adaece", "adaptive_ece")];

    fn named(name: &str) -> PyResult<Metric> {
        if let Some(metric) = Self::NAMES
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, metric)| *metric)
        {
            return Ok(metric);
        }
        let message = match Self::CLI_NAMES.iter().find(|(cli, _)| *cli == name) {
            Some((_, python)) => format!(
                "metric: `{name}` is the name `csam metrics` writes; csam_calib calls it `{python}`"
            ),
            None => {
                let known: Vec<&str> = Self::NAMES.iter().map(|(known, _)| *known).collect();
                format!(
                    "metric: unknown metric `{name}`, expected one of {}",
                    known.join(", ")
                )
            }
        };
        Err(crate::errors::calibration_error(message))
    }

    /// The Python name of the summary value `csam metrics` names `cli_name`.
    fn python_name(cli_name: &'static str) -> &'static str {
        Self::CLI_NAMES
            .iter()
            .find(|(cli, _)| *cli == cli_name)
            .map_or(cli_name, |(_, python)| python)
    }

    /// The metric's value, binned as `options` say.
    fn of<T: Real>(
        self,
        probs: ArrayView2<'_, T>,
        labels: &[usize],
        options: &MetricOptions,
    ) -> Result<f64, CalibError> {
        match self {
            Metric::Ece(norm) => metrics::ece(probs, labels, &options.equal_width(), norm),
            Metric::AdaptiveEce => {
                metrics::adaptive_ece(probs, labels, options.n_bins, options.adaptive)
            }
            Metric::ClasswiseEce => metrics::classwise_ece(probs, labels, &options.equal_width()),
            Metric::Nll => metrics::nll(probs, labels),
            Metric::Brier => metrics::brier(probs, labels),
            Metric::Accuracy => metrics::accuracy(probs, labels),
            Metric::AurocMisclassification => metrics::auroc_misclassification(probs, labels),
            Metric::AurocOvr => metrics::auroc_ovr(probs, labels),
        }
    }
}

/// Probabilities and labels read and checked (labels as they are read), then `compute` on them with
/// the GIL released.
fn on_predictions<R: Send>(
    probs: &Bound<'_, PyAny>,
    labels_object: &Bound<'_, PyAny>,
    tolerance: f64,
    compute: impl for<'v> Fn(&View<'v>, &[usize]) -> Result<R, CalibError> + Send + Sync,
) -> PyResult<R> {
    let matrix = Matrix::new(probs, "probs")?;
    let labels = labels(labels_object, matrix.dim(), "labels")?;
    let view = matrix.view()?;
    probs
        .py()
        .detach(|| {
            with_view!(&view, |v| validate_probabilities(v.view(), tolerance))?;
            compute(&view, &labels)
        })
        .map_err(from_calib)
}

/// One named metric of `(probs, labels)`.
fn metric(
    probs: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
    metric: Metric,
    options: MetricOptions,
) -> PyResult<f64> {
    on_predictions(probs, labels, options.tolerance, |view, labels| {
        with_view!(view, |v| metric.of(v.view(), labels, &options))
    })
}

/// Expected calibration error of the confidence over `n_bins` equal-width
/// bins: `norm="l1"` the ECE, `"l2"` the RMS calibration error, `"max"` the
/// MCE. `edges="right-closed"` bins `(k/M, (k+1)/M]` (the paper's tables);
/// `"left-closed-with-one-bin"` bins `[k/M, (k+1)/M)` plus a bin for 1.0.
#[pyfunction]
#[pyo3(signature = (probs, labels, *, n_bins=15, edges="right-closed", norm="l1", tolerance=1e-3))]
fn ece(
    probs: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    edges: &str,
    norm: &str,
    tolerance: f64,
) -> PyResult<f64> {
    let options = metric_options(n_bins, edges, "interpolated", tolerance)?;
    metric(probs, labels, Metric::Ece(parse("norm", norm)?), options)
}

/// Adaptive ECE over `n_bins` equal-mass bins: `variant="interpolated"`
/// (edges interpolated in the sorted confidences) or `"chunked"` (equal
/// chunks of the sorted samples).
#[pyfunction]
#[pyo3(signature = (probs, labels, *, n_bins=15, variant="interpolated", tolerance=1e-3))]
fn adaptive_ece(
    probs: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    variant: &str,
    tolerance: f64,
) -> PyResult<f64> {
    let options = metric_options(n_bins, "right-closed", variant, tolerance)?;
    metric(probs, labels, Metric::AdaptiveEce, options)
}

/// Classwise ECE: the mean over classes `k` of the calibration error of
/// `p_k` against `y == k`, equal-width bins.
#[pyfunction]
#[pyo3(signature = (probs, labels, *, n_bins=15, edges="right-closed", tolerance=1e-3))]
fn classwise_ece(
    probs: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    edges: &str,
    tolerance: f64,
) -> PyResult<f64> {
    let options = metric_options(n_bins, edges, "interpolated", tolerance)?;
    metric(probs, labels, Metric::ClasswiseEce, options)
}

/// Declares metrics that take no binning: `name => variant, doc;`.
macro_rules! unbinned_metrics {
    ($($name:ident => $metric:expr, $doc:literal;)+) => {
        $(
            #[doc = $doc]
            #[pyfunction]
            #[pyo3(signature = (probs, labels, *, tolerance=1e-3))]
            fn $name(
                probs: &Bound<'_, PyAny>,
                labels: &Bound<'_, PyAny>,
                tolerance: f64,
            ) -> PyResult<f64> {
                let options = MetricOptions { tolerance, ..MetricOptions::default() };
                metric(probs, labels, $metric, options)
            }
        )+

        fn register_unbinned(m: &Bound<'_, PyModule>) -> PyResult<()> {
            $(m.add_function(wrap_pyfunction!($name, m)?)?;)+
            Ok(())
        }
    };
}

unbinned_metrics! {
    nll => Metric::Nll, "Mean negative log-likelihood of the true class (natural log; a probability of 0 is clamped).";
    brier => Metric::Brier, "Brier score: the mean over rows of the squared distance to the one-hot label, summed over classes.";
    accuracy => Metric::Accuracy, "Fraction of rows whose first argmax is the label.";
    auroc_misclassification => Metric::AurocMisclassification, "AUROC of the confidence separating right (positive) from wrong predictions; ties counted half.";
    auroc_ovr => Metric::AurocOvr, "Macro one-vs-rest AUROC of the class probabilities (scikit-learn's `roc_auc_score(multi_class=\"ovr\")`).";
}

/// AUROC of in-distribution rows (positives) against OOD rows (negatives),
/// ranked by `score="max-probability"` or `"negative-entropy"`.
#[pyfunction]
#[pyo3(signature = (in_distribution, ood, *, score="max-probability", tolerance=1e-3))]
fn auroc_ood(
    py: Python<'_>,
    in_distribution: &Bound<'_, PyAny>,
    ood: &Bound<'_, PyAny>,
    score: &str,
    tolerance: f64,
) -> PyResult<f64> {
    let score: OodScore = parse("score", score)?;
    let inside = Matrix::new(in_distribution, "in_distribution")?;
    let outside = Matrix::new(ood, "ood")?;
    let (inside, outside) = (inside.view()?, outside.view()?);
    py.detach(|| {
        with_view!(&inside, |v| validate_probabilities(v.view(), tolerance))?;
        with_view!(&outside, |v| validate_probabilities(v.view(), tolerance))?;
        match (&inside, &outside) {
            (View::F32(a), View::F32(b)) => metrics::auroc_ood(a.view(), b.view(), score),
            (View::F64(a), View::F64(b)) => metrics::auroc_ood(a.view(), b.view(), score),
            (a, b) => metrics::auroc_ood(a.to_f64().view(), b.to_f64().view(), score),
        }
    })
    .map_err(from_calib)
}

/// TCE: the ECE on the test logits after temperature scaling fitted on the
/// validation logits (`objective="nll"`, or `"ece-grid"`: the grid
/// 0.1..10.0 minimising validation ECE).
#[pyfunction]
#[pyo3(signature = (val_logits, val_labels, test_logits, test_labels, *, n_bins=15, edges="right-closed", objective="nll"))]
#[allow(clippy::too_many_arguments)] // the Python signature's keywords
fn tce(
    py: Python<'_>,
    val_logits: &Bound<'_, PyAny>,
    val_labels: &Bound<'_, PyAny>,
    test_logits: &Bound<'_, PyAny>,
    test_labels: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    edges: &str,
    objective: &str,
) -> PyResult<f64> {
    let options = metric_options(n_bins, edges, "interpolated", 1e-3)?;
    let objective = parse("objective", objective)?;
    let val = Matrix::new(val_logits, "val_logits")?;
    let test = Matrix::new(test_logits, "test_logits")?;
    let val_labels = labels(val_labels, val.dim(), "val_labels")?;
    let test_labels = labels(test_labels, test.dim(), "test_labels")?;
    let (val, test) = (val.view()?, test.view()?);
    py.detach(|| {
        metrics::tce::tce(
            val.to_f64().view(),
            &val_labels,
            test.to_f64().view(),
            &test_labels,
            &options,
            objective,
        )
    })
    .map_err(from_calib)
}

/// Reliability-diagram data: per bin its `lower` and `upper` edge, `count`,
/// `mean_confidence` and `accuracy` (NaN for an empty bin), and `n_samples`.
/// `scheme="equal-width"` (with `edges`) or `"equal-mass"` (with `variant`).
#[pyfunction]
#[pyo3(signature = (probs, labels, *, n_bins=15, scheme="equal-width", edges="right-closed", variant="interpolated", tolerance=1e-3))]
#[allow(clippy::too_many_arguments)]
fn reliability_diagram<'py>(
    py: Python<'py>,
    probs: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    scheme: &str,
    edges: &str,
    variant: &str,
    tolerance: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let options = metric_options(n_bins, edges, variant, tolerance)?;
    let binning = binning(scheme, &options)?;
    let stats = on_predictions(probs, labels, tolerance, |view, labels| {
        with_view!(view, |v| metrics::reliability_diagram(
            v.view(),
            labels,
            &binning
        ))
    })?;
    let column = |value: &dyn Fn(&csam_calib::binning::Bin) -> f64| {
        PyArray1::from_vec(py, stats.bins.iter().map(value).collect())
    };
    let out = PyDict::new(py);
    out.set_item("lower", column(&|b| b.lo))?;
    out.set_item("upper", column(&|b| b.hi))?;
    out.set_item("count", column(&|b| b.count as f64))?;
    out.set_item(
        "mean_confidence",
        column(&|b| b.mean_confidence().unwrap_or(f64::NAN)),
    )?;
    out.set_item("accuracy", column(&|b| b.accuracy().unwrap_or(f64::NAN)))?;
    out.set_item("n_samples", stats.n_samples)?;
    Ok(out)
}

/// `resamples` of a bootstrap: 2..=[`MAX_RESAMPLES`], else a ValueError.
fn resample_count(value: &Bound<'_, PyAny>) -> PyResult<usize> {
    count("resamples", value, 2, MAX_RESAMPLES)
}

/// A bootstrap interval of the metric named `metric` (`ece`, `rms_ce`, `mce`,
/// `adaptive_ece`, `classwise_ece`, `nll`, `brier`, `accuracy`,
/// `auroc_misclassification`, `auroc_ovr`): rows resampled with replacement
/// `resamples` times from `seed` (the same interval on every platform), and
/// the bias-corrected and accelerated (BCa) interval of the resampled values,
/// `scipy.stats.bootstrap`'s default (BC, without the jackknife's
/// acceleration, above `resamples` rows). A metric biased upwards on
/// resamples (a binned error on a small set) gets an interval moved down by
/// the bias, which can lie below the estimate; an estimate below every
/// resampled value has no interval (a CalibrationError). Returns
/// `(estimate, lower, upper)`.
#[pyfunction]
#[pyo3(signature = (metric, probs, labels, *, resamples=1000, level=0.95, seed=0, n_bins=15, edges="right-closed", variant="interpolated", tolerance=1e-3))]
#[allow(clippy::too_many_arguments)]
fn bootstrap(
    metric: &str,
    probs: &Bound<'_, PyAny>,
    labels: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = resample_count)] resamples: usize,
    level: f64,
    seed: u64,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    edges: &str,
    variant: &str,
    tolerance: f64,
) -> PyResult<(f64, f64, f64)> {
    let metric = Metric::named(metric)?;
    let options = metric_options(n_bins, edges, variant, tolerance)?;
    let resampling = BootstrapOptions {
        resamples,
        level,
        seed,
    };
    let interval = on_predictions(probs, labels, tolerance, |view, labels| {
        with_view!(view, |v| metrics::bootstrap(
            v.view(),
            labels,
            &resampling,
            |p, l| metric.of(p, l, &options)
        ))
    })?;
    Ok((interval.estimate, interval.lower, interval.upper))
}

/// Every metric of `csam metrics` in one dict (fractions, not percent),
/// keyed by the names `bootstrap` takes (`adaptive_ece` where `csam metrics`
/// writes `adaece`, `rms_ce` for its `ece_l2`); `None` where a metric is
/// undefined (an AUROC on a single class) or needs logits (`tce`).
#[pyfunction]
#[pyo3(signature = (probs, labels, *, n_bins=15, edges="right-closed", variant="interpolated", tolerance=1e-3))]
fn summarize<'py>(
    py: Python<'py>,
    probs: &Bound<'py, PyAny>,
    labels: &Bound<'py, PyAny>,
    #[pyo3(from_py_with = bin_count)] n_bins: usize,
    edges: &str,
    variant: &str,
    tolerance: f64,
) -> PyResult<Bound<'py, PyDict>> {
    let options = metric_options(n_bins, edges, variant, tolerance)?;
    // In the array's own type, as the single metrics are (float32 stays
    // float32).
    let summary = on_predictions(probs, labels, tolerance, |view, labels| {
        with_view!(view, |v| metrics::summary::summarize(
            v.view(),
            labels,
            &options
        ))
    })?;
    let out = PyDict::new(py);
    for (cli_name, value) in summary.values() {
        out.set_item(Metric::python_name(cli_name), value)?;
    }
    Ok(out)
}

/// Row-wise softmax of logits, computed stably (log-sum-exp).
#[pyfunction]
fn softmax<'py>(
    py: Python<'py>,
    logits: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyArray2<f64>>> {
    let matrix = Matrix::new(logits, "logits")?;
    let view = matrix.view()?;
    let probabilities = py.detach(|| {
        let logits = view.to_f64();
        csam_calib::scores::validate_logits(logits.view())?;
        Ok::<_, CalibError>(csam_calib::scores::softmax(logits.view()))
    });
    to_numpy(py, probabilities.map_err(from_calib)?)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for function in [
        wrap_pyfunction!(ece, m)?,
        wrap_pyfunction!(adaptive_ece, m)?,
        wrap_pyfunction!(classwise_ece, m)?,
        wrap_pyfunction!(auroc_ood, m)?,
        wrap_pyfunction!(tce, m)?,
        wrap_pyfunction!(reliability_diagram, m)?,
        wrap_pyfunction!(bootstrap, m)?,
        wrap_pyfunction!(summarize, m)?,
        wrap_pyfunction!(softmax, m)?,
    ] {
        m.add_function(function)?;
    }
    register_unbinned(m)
}
