//! Bootstrap confidence intervals for any metric of `(probs, labels)`.
//!
//! Rows are resampled with replacement (`N` draws from `N` rows, a ChaCha8
//! generator seeded with `seed`, so the same seed gives the same interval on
//! every platform), the metric is evaluated on each resample, and the interval
//! is the percentile interval: the `(1 - level) / 2` and `(1 + level) / 2`
//! quantiles of the resampled values, linearly interpolated (numpy's default).

use ndarray::{ArrayView2, Axis};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

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

/// A metric's value on the full data and its bootstrap percentile interval.
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
/// resamples. A resample on which the metric fails (e.g. an AUROC resample
/// with no wrong prediction) fails the whole call, naming the resample.
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
    // One value that is always defined gives exactly one interval.
    intervals.into_iter().flatten().next().ok_or_else(|| {
        CalibError::InvalidArgument("bootstrap: the metric gave no value".to_string())
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
/// data or on any resample: an interval over the resamples where it happens
/// to be defined would be biased. An error of `metrics` fails the call.
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
    let n = labels.len();
    if n != probs.nrows() {
        return Err(CalibError::ShapeMismatch(format!(
            "{n} labels for {} rows",
            probs.nrows()
        )));
    }
    let estimates = metrics(probs, labels)?;
    let mut draws: Vec<Option<Vec<f64>>> = estimates
        .iter()
        .map(|e| e.map(|_| Vec::with_capacity(options.resamples)))
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(options.seed);
    let mut rows = vec![0usize; n];
    for resample in 0..options.resamples {
        // Draws as u64 so the sequence does not depend on the pointer width.
        rows.iter_mut()
            .for_each(|r| *r = rng.random_range(0..n as u64) as usize);
        let sample_probs = probs.select(Axis(0), &rows);
        let sample_labels: Vec<usize> = rows.iter().map(|&r| labels[r]).collect();
        let values = metrics(sample_probs.view(), &sample_labels).map_err(|e| {
            CalibError::InvalidArgument(format!("bootstrap resample {resample}: {e}"))
        })?;
        if values.len() != draws.len() {
            return Err(CalibError::InvalidArgument(format!(
                "bootstrap resample {resample}: {} metric values, {} on the data",
                values.len(),
                draws.len()
            )));
        }
        for (slot, value) in draws.iter_mut().zip(values) {
            match (slot.as_mut(), value) {
                (Some(values), Some(value)) => values.push(value),
                _ => *slot = None,
            }
        }
    }
    let tail = (1.0 - options.level) / 2.0;
    Ok(estimates
        .into_iter()
        .zip(draws)
        .map(|(estimate, values)| {
            let (estimate, mut values) = (estimate?, values?);
            values.sort_unstable_by(f64::total_cmp);
            Some(ConfidenceInterval {
                estimate,
                lower: quantile(&values, tail),
                upper: quantile(&values, 1.0 - tail),
                level: options.level,
            })
        })
        .collect())
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
    use crate::metrics::scoring::{accuracy, brier};
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

    #[test]
    fn quantile_interpolates() {
        assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.5), 2.5);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 0.0), 1.0);
        assert_eq!(quantile(&[1.0, 2.0, 3.0], 1.0), 3.0);
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
