//! Bootstrap confidence intervals for any metric of `(probs, labels)`.
//!
//! Rows are resampled with replacement (`N` draws from `N` rows, a ChaCha8
//! generator seeded with `seed`, so the same seed gives the same interval on
//! every platform) and the metric is evaluated on each resample. The interval
//! is the bias-corrected and accelerated (BCa) interval of Efron (1987, "Better
//! bootstrap confidence intervals", JASA 82(397)), the default method of
//! `scipy.stats.bootstrap`, computed as scipy computes it: its ends are the
//! resampled values' quantiles (linearly interpolated, numpy's default) at
//!
//! `Phi(z0 + (z0 + z) / (1 - a (z0 + z)))` for `z = Phi^-1((1 - level) / 2)`
//! and for `z = Phi^-1((1 + level) / 2)`,
//!
//! where `z0 = Phi^-1(share of the resampled values below the estimate, ties
//! counting half)` is the bias correction and `a = sum d_i^3 / (6 (sum
//! d_i^2)^(3/2))`, `d_i` = (mean of the jackknife values) - (the metric without
//! row `i`), the acceleration. With `z0 = a = 0` the levels are
//! `(1 -+ level) / 2`: the plain percentile interval.
//!
//! Why not the percentile interval: a binned calibration error is biased
//! upwards, and more so on a resample (its duplicated rows leave the bins
//! emptier and noisier), so the resampled values sit mostly above the estimate
//! and the percentile interval reports that upward shift as if it were
//! sampling spread (an ECE of 1.60% with an interval of [1.74, 2.13]). BCa
//! reads the shift as bias (`z0 < 0`) and moves both ends down. It cannot
//! promise to contain the estimate: for any `a` with `1 - a (z0 + z) > 0`,
//! its interval contains the estimate exactly when `|z0| < |z|`, as the
//! percentile interval does (and the basic interval `2 estimate - q`). Where
//! nearly every resample lies above the estimate, the BCa interval lies below
//! it: the metric's population value is likely smaller than the biased
//! estimate.
//!
//! The jackknife costs `N` evaluations of the metric on `N - 1` rows, so it
//! runs only when that costs no more than the resamples themselves (`N <=
//! resamples`); above, `a = 0`: the bias-corrected (BC) interval, whose levels
//! differ from BCa's by `O(a)`, and `a` shrinks as `N^(-1/2)` for a smooth
//! metric.
//!
//! An estimate below (above) every resampled value has `z0 = -inf` (`+inf`):
//! both levels are then 0 (1), a zero-width interval at the smallest
//! (largest) resampled value, which would claim a certainty the data do not
//! give (scipy returns NaN or that point). Such a metric has no interval
//! ([`bootstrap_each`] gives `None`, [`bootstrap`] an error): it is biased by
//! more than it varies, and none of the three intervals would contain its
//! estimate.

use ndarray::{ArrayView2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::normal;
use crate::error::{CalibError, Result};
use crate::scores::Real;

/// How many resamples, at which confidence level, from which seed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapOptions {
    /// Number of resamples (at least 2).
    pub resamples: usize,
    /// Coverage of the interval, in `(0, 1)`.
    pub level: f64,
    /// Seed of the resampling generator.
    pub seed: u64,
}

impl Default for BootstrapOptions {
    /// 1000 resamples, 95 % interval, seed 0.
    fn default() -> Self {
        BootstrapOptions {
            resamples: 1000,
            level: 0.95,
            seed: 0,
        }
    }
}

/// A metric's value on the full data and its bootstrap BCa interval (BC,
/// without the acceleration, above `resamples` rows; see the module
/// documentation). The interval corrects for the metric's bias, so for a
/// biased metric (a binned calibration error on a small set) it can lie
/// wholly below the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceInterval {
    /// The metric on the original data.
    pub estimate: f64,
    /// Lower end of the interval.
    pub lower: f64,
    /// Upper end of the interval.
    pub upper: f64,
    /// The coverage asked for.
    pub level: f64,
}

/// Evaluates `metric` on the data and on `options.resamples` bootstrap
/// resamples (and on the `N` leave-one-out sets when `N <= resamples`). A
/// resample on which the metric fails (e.g. an AUROC resample with no wrong
/// prediction) fails the whole call, naming the resample; an estimate outside
/// every resampled value is [`CalibError::Undefined`] (module documentation).
pub fn bootstrap<T, F>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &BootstrapOptions,
    metric: F,
) -> Result<ConfidenceInterval>
where
    T: Real,
    F: Fn(ArrayView2<'_, T>, &[usize]) -> Result<f64>,
{
    let intervals = bootstrap_each(probs, labels, options, |p, l| Ok(vec![Some(metric(p, l)?)]))?;
    // The metric is always defined, so the one interval is missing only when
    // the estimate lies outside every resampled value.
    intervals
        .into_iter()
        .flatten()
        .next()
        .ok_or_else(|| CalibError::Undefined {
            metric: "the bootstrap interval",
            reason: format!(
                "the estimate lies outside all {} resampled values (the metric is biased \
                 by more than it varies), so BCa cannot place it",
                options.resamples
            ),
        })
}

/// The most resamples a caller should ask for: 10^7 intervals' worth of
/// metric values fit in memory; the CLI and the Python package refuse more.
pub const MAX_RESAMPLES: usize = 10_000_000;

/// [`bootstrap`] for several metrics at once, on the same resamples (each
/// resample is drawn and copied once, however many metrics read it).
///
/// `metrics` gives one value per metric, the same number every time, and
/// `None` where a metric is undefined on its input (an AUROC with a single
/// class, say). A metric's interval is `None` when it is undefined on the
/// data, on any resample or on any leave-one-out set (an interval over the
/// sets where it happens to be defined would be biased), or when its estimate
/// lies outside every resampled value (module documentation). An error of
/// `metrics` fails the call.
pub fn bootstrap_each<T, F>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &BootstrapOptions,
    metrics: F,
) -> Result<Vec<Option<ConfidenceInterval>>>
where
    T: Real,
    F: Fn(ArrayView2<'_, T>, &[usize]) -> Result<Vec<Option<f64>>>,
{
    check_options(options, labels.len(), probs.nrows())?;
    let estimates = metrics(probs, labels)?;
    let resampled = resampled_values(probs, labels, options, &metrics, estimates.len())?;
    let accelerations = match labels.len() <= options.resamples {
        true => jackknife_accelerations(probs, labels, &metrics, estimates.len())?,
        false => vec![Some(0.0); estimates.len()],
    };
    Ok(estimates
        .into_iter()
        .zip(resampled)
        .zip(accelerations)
        .map(|((estimate, values), acceleration)| {
            bca_interval(estimate?, values?, acceleration?, options.level)
        })
        .collect())
}

/// The `metrics` of [`bootstrap_each`]: a value, or `None`, per metric.
trait Metrics<T>: Fn(ArrayView2<'_, T>, &[usize]) -> Result<Vec<Option<f64>>> {}

impl<T, F> Metrics<T> for F where F: Fn(ArrayView2<'_, T>, &[usize]) -> Result<Vec<Option<f64>>> {}

/// Refuses fewer than 2 resamples, a level outside `(0, 1)`, no rows, and
/// `n_labels != n_rows`.
fn check_options(options: &BootstrapOptions, n_labels: usize, n_rows: usize) -> Result<()> {
    if options.resamples < 2 {
        return Err(CalibError::InvalidArgument(format!(
            "bootstrap needs at least 2 resamples, got {}",
            options.resamples
        )));
    }
    if !(options.level > 0.0 && options.level < 1.0) {
        return Err(CalibError::InvalidArgument(format!(
            "bootstrap level must be in (0, 1), got {}",
            options.level
        )));
    }
    if n_labels != n_rows {
        return Err(CalibError::ShapeMismatch(format!(
            "{n_labels} labels for {n_rows} rows"
        )));
    }
    if n_rows == 0 {
        return Err(CalibError::Empty("no rows to resample".to_string()));
    }
    Ok(())
}

/// Each metric's values on the resamples, `None` for a metric undefined on
/// the data or on some resample.
fn resampled_values<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    options: &BootstrapOptions,
    metrics: &impl Metrics<T>,
    count: usize,
) -> Result<Vec<Option<Vec<f64>>>> {
    let n = labels.len();
    let mut slots = empty_slots(count, options.resamples);
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut rows = vec![0usize; n];
    for resample in 0..options.resamples {
        // Draws as u64 so the sequence does not depend on the pointer width.
        rows.iter_mut()
            .for_each(|r| *r = rng.random_range(0..n as u64) as usize);
        let name = || format!("bootstrap resample {resample}");
        collect_values(probs, labels, &rows, metrics, &mut slots, name)?;
    }
    Ok(slots)
}

/// Each metric's jackknife acceleration `a` (module documentation), `None`
/// for a metric undefined on some leave-one-out set; `0` when `N < 2` (no
/// leave-one-out set has a row).
fn jackknife_accelerations<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    metrics: &impl Metrics<T>,
    count: usize,
) -> Result<Vec<Option<f64>>> {
    let n = labels.len();
    if n < 2 {
        return Ok(vec![Some(0.0); count]);
    }
    let mut slots = empty_slots(count, n);
    // All rows but `left_out`; moving on to the next row left out puts the
    // previous one back in its place.
    let mut rows: Vec<usize> = (1..n).collect();
    for left_out in 0..n {
        if left_out > 0 {
            rows[left_out - 1] = left_out - 1;
        }
        let name = || format!("bootstrap jackknife (row {left_out} left out)");
        collect_values(probs, labels, &rows, metrics, &mut slots, name)?;
    }
    Ok(slots
        .into_iter()
        .map(|values| values.map(|v| acceleration(&v)))
        .collect())
}

/// `count` empty value lists, each with room for `capacity` values.
fn empty_slots(count: usize, capacity: usize) -> Vec<Option<Vec<f64>>> {
    (0..count)
        .map(|_| Some(Vec::with_capacity(capacity)))
        .collect()
}

/// Evaluates `metrics` on the rows `rows` of the data and appends each value
/// to its slot; a slot whose metric is undefined there becomes `None`.
/// `name` names the set in errors.
fn collect_values<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    rows: &[usize],
    metrics: &impl Metrics<T>,
    slots: &mut [Option<Vec<f64>>],
    name: impl Fn() -> String,
) -> Result<()> {
    let sample_probs = probs.select(Axis(0), rows);
    let sample_labels: Vec<usize> = rows.iter().map(|&r| labels[r]).collect();
    let values = metrics(sample_probs.view(), &sample_labels)
        .map_err(|e| CalibError::InvalidArgument(format!("{}: {e}", name())))?;
    if values.len() != slots.len() {
        return Err(CalibError::InvalidArgument(format!(
            "{}: {} metric values, {} on the data",
            name(),
            values.len(),
            slots.len()
        )));
    }
    for (slot, value) in slots.iter_mut().zip(values) {
        match (slot.as_mut(), value) {
            (Some(values), Some(value)) => values.push(value),
            _ => *slot = None,
        }
    }
    Ok(())
}

/// `a = sum d_i^3 / (6 (sum d_i^2)^(3/2))`, `d_i = mean - jackknife_i`
/// (Efron 1987, eq. 6.6; scipy's `_bca_interval`); 0 where every value is
/// the same (the metric does not move, so there is nothing to accelerate;
/// scipy gives NaN there).
fn acceleration(jackknife: &[f64]) -> f64 {
    let mean = jackknife.iter().sum::<f64>() / jackknife.len() as f64;
    let (cubes, squares) = jackknife.iter().fold((0.0, 0.0), |(c, s), &v| {
        let d = mean - v;
        (c + d * d * d, s + d * d)
    });
    match squares > 0.0 {
        true => cubes / (6.0 * squares.powf(1.5)),
        false => 0.0,
    }
}

/// The BCa interval (module documentation) of `estimate` from its resampled
/// `values` and the acceleration `a`; `None` when the estimate lies outside
/// every value.
fn bca_interval(
    estimate: f64,
    mut values: Vec<f64>,
    a: f64,
    level: f64,
) -> Option<ConfidenceInterval> {
    values.sort_unstable_by(f64::total_cmp);
    let z0 = bias_correction(&values, estimate);
    if z0.is_infinite() {
        return None;
    }
    let tail = (1.0 - level) / 2.0;
    let end = |z: f64| quantile(&values, bca_level(z0, a, z));
    Some(ConfidenceInterval {
        estimate,
        lower: end(normal::quantile(tail)),
        upper: end(normal::quantile(1.0 - tail)),
        level,
    })
}

/// `z0 = Phi^-1(share of sorted values below the estimate)`, a value equal to
/// the estimate counting half (scipy's `_percentile_of_score`); `-+inf` when
/// the estimate lies below (above) every value.
fn bias_correction(sorted: &[f64], estimate: f64) -> f64 {
    let below = sorted.partition_point(|&v| v < estimate);
    let not_above = sorted.partition_point(|&v| v <= estimate);
    normal::quantile((below + not_above) as f64 / (2 * sorted.len()) as f64)
}

/// The quantile level `Phi(z0 + (z0 + z) / (1 - a (z0 + z)))` at which BCa
/// takes the end that the percentile interval takes at `Phi(z)`, for a
/// finite `z0`.
fn bca_level(z0: f64, a: f64, z: f64) -> f64 {
    let shifted = z0 + z;
    normal::cdf(z0 + shifted / (1.0 - a * shifted))
}

/// The `q` quantile of sorted values, linear interpolation between order
/// statistics at position `q (n - 1)` (numpy's `quantile` default).
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let position = q * (sorted.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    sorted[below] + (sorted[above] - sorted[below]) * (position - below as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::{Binning, Norm};
    use crate::metrics::ece;
    use crate::metrics::scoring::{accuracy, brier};
    use crate::metrics::test_support::two_class;
    use ndarray::Array2;

    fn data() -> (Array2<f64>, Vec<usize>) {
        let probs = Array2::from_shape_fn((200, 2), |(i, k)| {
            let p = 0.5 + (i % 50) as f64 / 100.0;
            if k == 0 {
                p
            } else {
                1.0 - p
            }
        });
        let labels = (0..200).map(|i| usize::from(i % 4 == 0)).collect();
        (probs, labels)
    }

    /// `rows` two-class rows with confidences spread evenly over `(0.5, 1)`,
    /// each right with probability `confidence - gap`: a true ECE of `gap`
    /// (every bin's accuracy is its mean confidence less `gap`), with few rows
    /// per bin so that the binned ECE is biased upwards.
    fn miscalibrated_by(gap: f64, rows: usize, seed: u64) -> (Array2<f64>, Vec<usize>) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let cases: Vec<(f64, bool)> = (0..rows)
            .map(|_| {
                let confidence = 0.5 + 0.5 * rng.random::<f64>();
                (confidence, rng.random::<f64>() < confidence - gap)
            })
            .collect();
        two_class(&cases)
    }

    fn binned_ece(probs: ArrayView2<'_, f64>, labels: &[usize]) -> Result<f64> {
        ece(probs, labels, &Binning::default(), Norm::L1)
    }

    /// The plain percentile interval of the same resamples, as the crate
    /// computed it before BCa.
    fn percentile_interval(
        probs: ArrayView2<'_, f64>,
        labels: &[usize],
        options: &BootstrapOptions,
    ) -> (f64, f64, Vec<f64>) {
        let metric = |p: ArrayView2<'_, f64>, l: &[usize]| Ok(vec![Some(binned_ece(p, l)?)]);
        let mut values = resampled_values(probs, labels, options, &metric, 1)
            .unwrap()
            .remove(0)
            .unwrap();
        values.sort_unstable_by(f64::total_cmp);
        let tail = (1.0 - options.level) / 2.0;
        (
            quantile(&values, tail),
            quantile(&values, 1.0 - tail),
            values,
        )
    }

    #[test]
    fn quantile_interpolates() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.0), 1.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 1.0), 3.0);
    }

    #[test]
    fn without_bias_or_acceleration_bca_is_the_percentile_interval() {
        for z in [-1.96, -0.5, 0.0, 1.2] {
            assert_eq!(bca_level(0.0, 0.0, z), normal::cdf(z));
        }
        // The estimate is the median of symmetric values: z0 = 0.
        let values: Vec<f64> = (0..=100).map(f64::from).collect();
        let interval = bca_interval(50.0, values.clone(), 0.0, 0.9).unwrap();
        assert_eq!(bias_correction(&values, 50.0), 0.0);
        // Levels 0.05 and 0.95 through Phi(Phi^-1(.)): a few ulps off, times 100.
        let slack = 100.0 * 8.0 * f64::EPSILON;
        assert!((interval.lower - 5.0).abs() <= slack, "{interval:?}");
        assert!((interval.upper - 95.0).abs() <= slack, "{interval:?}");
    }

    #[test]
    fn bias_correction_counts_ties_half_and_saturates() {
        let values = [1.0, 2.0, 2.0, 3.0];
        // Below 2: one value, equal: two, so the share is (1 + 2 / 2) / 4 = 1/2.
        assert_eq!(bias_correction(&values, 2.0), 0.0);
        assert_eq!(bias_correction(&values, 0.5), f64::NEG_INFINITY);
        assert_eq!(bias_correction(&values, 3.5), f64::INFINITY);
        // The estimate outside every resampled value: no interval.
        assert_eq!(bca_interval(0.5, values.to_vec(), 0.1, 0.95), None);
        assert_eq!(bca_interval(3.5, values.to_vec(), -0.1, 0.95), None);
        assert!(bca_interval(1.0, values.to_vec(), 0.1, 0.95).is_some());
    }

    #[test]
    fn acceleration_by_hand() {
        // Mean 1, d = (1, 1, -2): sum d^3 = -6, sum d^2 = 6, a = -6 / (6 * 6^1.5).
        let a = acceleration(&[0.0, 0.0, 3.0]);
        assert!((a + 6f64.powf(-1.5)).abs() <= 4.0 * f64::EPSILON, "{a}");
        assert_eq!(acceleration(&[0.25; 5]), 0.0);
        // |a| <= 1/6 always (sum |d|^3 <= (sum d^2)^1.5).
        assert!(acceleration(&[0.0, 0.0, 0.0, 1.0]).abs() <= 1.0 / 6.0);
    }

    /// The ends of scipy.stats.bootstrap(method="BCa") from the same
    /// bootstrap distribution and jackknife values (fixtures/gen_bca_fixtures.py).
    #[test]
    fn bca_matches_scipy() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/metrics/bca.json");
        let text = std::fs::read_to_string(path).expect("the fixture is committed");
        let fixture: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let numbers = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array()
                .expect("a list")
                .iter()
                .map(|x| x.as_f64().expect("a number"))
                .collect()
        };
        for case in fixture["cases"].as_array().expect("cases") {
            let name = case["name"].as_str().expect("a name");
            let values = numbers(&case["bootstrap_distribution"]);
            let a = acceleration(&numbers(&case["jackknife"]));
            let number = |key: &str| case[key].as_f64().expect("a number");
            let interval = bca_interval(number("estimate"), values, a, number("level")).unwrap();
            // Both sides interpolate between the same order statistics (values
            // <= 2.5, gaps <= 0.2); the levels agree to ~1e-15 (ndtr / ndtri
            // to a few ulps, sums of <= 150 jackknife terms), which moves a
            // position among <= 400 values by < 1e-12: 1e-12 of a value is ample,
            // while a level off by one resample moves an end by a gap.
            let tolerance = 1e-12;
            assert!(
                (interval.lower - number("lower")).abs() <= tolerance,
                "{name}: {interval:?}"
            );
            assert!(
                (interval.upper - number("upper")).abs() <= tolerance,
                "{name}: {interval:?}"
            );
        }
    }

    #[test]
    fn an_upward_biased_metric_gets_an_interval_moved_down() {
        // 120 rows over the 8 bins above 0.5: ~15 a bin, ECE biased upwards.
        let (probs, labels) = miscalibrated_by(0.03, 120, 5);
        let options = BootstrapOptions {
            resamples: 400,
            level: 0.9,
            seed: 1,
        };
        let (percentile_lower, percentile_upper, values) =
            percentile_interval(probs.view(), &labels, &options);
        let ci = bootstrap(probs.view(), &labels, &options, binned_ece).unwrap();
        let above = values.iter().filter(|&&v| v > ci.estimate).count();
        assert!(
            2 * above > values.len(),
            "the data is not of the biased kind"
        );
        // BCa moves both ends against the bias; the percentile interval does not.
        assert!(ci.lower < percentile_lower, "{ci:?} vs {percentile_lower}");
        assert!(ci.upper < percentile_upper, "{ci:?} vs {percentile_upper}");
        assert!(ci.lower < ci.upper);
    }

    #[test]
    fn bca_covers_the_true_error_of_a_biased_ece_more_often() {
        // 30 data sets whose population ECE is 0.03 (see `miscalibrated_by`):
        // the binned ECE and its resamples sit above 0.03, so the percentile
        // interval rarely covers it; BCa, moved down by the bias, more often.
        // A set whose estimate lies below every resample has no BCa interval
        // (the Undefined error), which covers nothing.
        let (gap, options) = (
            0.03,
            BootstrapOptions {
                resamples: 200,
                level: 0.9,
                seed: 0,
            },
        );
        let (mut bca, mut percentile) = (0, 0);
        for seed in 0..30 {
            let (probs, labels) = miscalibrated_by(gap, 200, 100 + seed);
            let (lower, upper, _) = percentile_interval(probs.view(), &labels, &options);
            percentile += usize::from(lower <= gap && gap <= upper);
            match bootstrap(probs.view(), &labels, &options, binned_ece) {
                Ok(ci) => bca += usize::from(ci.lower <= gap && gap <= ci.upper),
                Err(CalibError::Undefined { .. }) => {}
                Err(other) => panic!("{other}"),
            }
        }
        assert!(
            bca > percentile,
            "BCa covers {bca} of 30, the percentile interval {percentile}"
        );
    }

    #[test]
    fn an_estimate_below_every_resample_has_no_interval() {
        // Distinct rows: the number of repeated rows is 0 on the data and
        // positive on every resample of 100 draws from 100 rows.
        let probs = Array2::from_shape_fn((100, 2), |(i, k)| {
            let p = 0.5 + i as f64 / 200.0;
            if k == 0 {
                p
            } else {
                1.0 - p
            }
        });
        let labels = vec![0; 100];
        let repeats = |p: ArrayView2<'_, f64>, _: &[usize]| {
            let mut first: Vec<f64> = p.column(0).to_vec();
            first.sort_unstable_by(f64::total_cmp);
            Ok(first.windows(2).filter(|w| w[0] == w[1]).count() as f64)
        };
        let options = BootstrapOptions {
            resamples: 50,
            ..Default::default()
        };
        let e = bootstrap(probs.view(), &labels, &options, repeats).unwrap_err();
        assert!(matches!(e, CalibError::Undefined { .. }), "{e}");
        assert!(
            e.to_string().contains("outside all 50 resampled values"),
            "{e}"
        );
        let each = bootstrap_each(probs.view(), &labels, &options, |p, l| {
            Ok(vec![Some(repeats(p, l)?), Some(accuracy(p, l)?)])
        })
        .unwrap();
        assert!(each[0].is_none() && each[1].is_some(), "{each:?}");
    }

    #[test]
    fn interval_brackets_the_estimate_and_is_deterministic() {
        let (probs, labels) = data();
        let options = BootstrapOptions {
            resamples: 200,
            level: 0.9,
            seed: 7,
        };
        let a = bootstrap(probs.view(), &labels, &options, accuracy).unwrap();
        assert_eq!(a.estimate, 0.75);
        assert!(a.lower < a.estimate && a.estimate < a.upper);
        // Binomial standard error sqrt(.75 * .25 / 200) = 0.031: the 90 % interval
        // is about +-0.05 wide; allow a generous margin: each end, a quantile of 200
        // resamples, has a standard error of ~0.005, so 0.05 and 0.16 are > 7 away.
        assert!(a.upper - a.lower > 0.05 && a.upper - a.lower < 0.16);
        let b = bootstrap(probs.view(), &labels, &options, accuracy).unwrap();
        assert_eq!(a, b);
        let other_seed = BootstrapOptions { seed: 8, ..options };
        let c = bootstrap(probs.view(), &labels, &other_seed, accuracy).unwrap();
        assert_ne!(a, c);
    }

    #[test]
    fn several_metrics_share_the_resamples_of_single_ones() {
        let (probs, labels) = data();
        let options = BootstrapOptions {
            resamples: 50,
            level: 0.8,
            seed: 3,
        };
        let both = bootstrap_each(probs.view(), &labels, &options, |p, l| {
            Ok(vec![Some(accuracy(p, l)?), Some(brier(p, l)?)])
        })
        .unwrap();
        let alone = [
            bootstrap(probs.view(), &labels, &options, accuracy).unwrap(),
            bootstrap(probs.view(), &labels, &options, brier).unwrap(),
        ];
        assert_eq!(both, alone.map(Some));
    }

    #[test]
    fn a_metric_undefined_on_one_resample_has_no_interval() {
        let (probs, labels) = data();
        let options = BootstrapOptions {
            resamples: 20,
            ..Default::default()
        };
        // The second metric is defined on the data and the first 10 resamples only.
        let calls = std::cell::Cell::new(0);
        let intervals = bootstrap_each(probs.view(), &labels, &options, |p, l| {
            calls.set(calls.get() + 1);
            Ok(vec![
                Some(accuracy(p, l)?),
                (calls.get() <= 11).then_some(1.0),
            ])
        })
        .unwrap();
        assert!(intervals[0].is_some());
        assert_eq!(intervals[1], None);
    }

    #[test]
    fn bad_options_are_refused() {
        let (probs, labels) = data();
        let few = BootstrapOptions {
            resamples: 1,
            ..Default::default()
        };
        assert!(bootstrap(probs.view(), &labels, &few, accuracy).is_err());
        let level = BootstrapOptions {
            level: 1.0,
            ..Default::default()
        };
        assert!(bootstrap(probs.view(), &labels, &level, accuracy).is_err());
    }
}
