//! Area under the ROC curve, exact: the Mann-Whitney statistic with ties
//! counted one half (equivalently, average ranks), never a thresholded
//! approximation. The calibration literature means three different AUROCs by
//! the name (crates/csam-calib/README.md, "AUROC: three kinds"); each has
//! its own function here:
//!
//! * [`auroc_misclassification`]: can the confidence tell right from wrong?
//! * [`auroc_ood`]: can a score tell in-distribution from out-of-distribution inputs?
//! * [`auroc_ovr`]: one-vs-rest macro average of the class probabilities.

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use super::check_predictions;
use crate::error::{CalibError, Result};
use crate::parallel::{fold_rows, Threads};
use crate::radix::{self, RadixKey};
use crate::scores::{for_each_top_class, probability_error, Real};

/// `P(score of a positive > score of a negative) + P(equal) / 2` over all
/// positive-negative pairs: `O(N log N)`, exact for any ties. Fails on a NaN
/// score, on mismatched lengths, or when there is no positive or no negative.
pub fn auroc(scores: &[f64], positive: &[bool]) -> Result<f64> {
    if scores.len() != positive.len() {
        return Err(CalibError::ShapeMismatch(format!(
            "{} scores for {} labels",
            scores.len(),
            positive.len()
        )));
    }
    if let Some(i) = scores.iter().position(|s| s.is_nan()) {
        return Err(CalibError::InvalidArgument(format!("score {i} is NaN")));
    }
    let (mut positives, mut negatives) = (Vec::new(), Vec::new());
    for (&score, &is_positive) in scores.iter().zip(positive) {
        match is_positive {
            true => positives.push(tie_key(score)),
            false => negatives.push(tie_key(score)),
        }
    }
    mann_whitney(positives, negatives, "AUROC", Threads::ONE)
}

/// The sort key of a score: its order key in its own width
/// ([`radix::order_key`]), with `-0.0` read as `0.0` (they tie).
#[inline]
fn tie_key<T: Real>(score: T) -> T::Key {
    (score + T::ZERO).order_key()
}

/// The AUROC of positives and negatives given by their [`tie_key`]s: each
/// list sorted once (the two at once on two threads when `threads` allows),
/// then one linear merge that counts, for every distinct positive score, the
/// negatives below it and those tied with it. Undefined (an error naming
/// `metric`) when either list is empty.
fn mann_whitney<K: RadixKey>(
    mut positives: Vec<K>,
    mut negatives: Vec<K>,
    metric: &'static str,
    threads: Threads,
) -> Result<f64> {
    if positives.is_empty() || negatives.is_empty() {
        return Err(CalibError::Undefined {
            metric,
            reason: format!(
                "it needs both classes, got {} positives and {} negatives",
                positives.len(),
                negatives.len()
            ),
        });
    }
    if threads.get() > 1 {
        std::thread::scope(|scope| {
            scope.spawn(|| radix::sort(&mut negatives));
            radix::sort(&mut positives);
        });
    } else {
        radix::sort(&mut positives);
        radix::sort(&mut negatives);
    }
    // Twice the number of (positive, negative) pairs won, ties counting 1: exact in u128.
    let mut doubled_wins: u128 = 0;
    let mut below = 0; // negatives with a smaller score than the current group
    for group in positives.chunk_by(|a, b| a == b) {
        let score = group[0];
        below += count_while(&negatives[below..], |n| n < score);
        let tied = count_while(&negatives[below..], |n| n == score);
        doubled_wins += group.len() as u128 * (2 * below as u128 + tied as u128);
    }
    Ok(doubled_wins as f64 / (2.0 * positives.len() as f64 * negatives.len() as f64))
}

/// The length of the prefix of `keys` that `holds`: a forward walk (the
/// merge in [`mann_whitney`] visits every negative once in all), not a
/// binary search per positive score, which misses the cache on large lists.
#[inline]
fn count_while<K: RadixKey>(keys: &[K], holds: impl Fn(K) -> bool) -> usize {
    keys.iter()
        .position(|&key| !holds(key))
        .unwrap_or(keys.len())
}

/// Misclassification detection: positives are the correct predictions, the
/// score is the confidence (max probability). Undefined (an error) when every
/// prediction is right, or every one wrong. [`par_auroc_misclassification`]
/// on one thread.
pub fn auroc_misclassification<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    par_auroc_misclassification(probs, labels, Threads::ONE)
}

/// [`auroc_misclassification`] with the rows split across `threads` (see
/// [`crate::parallel`]): the same bits for any thread count (the AUROC is
/// counted over the sorted scores).
pub fn par_auroc_misclassification<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    threads: Threads,
) -> Result<f64> {
    check_predictions(probs, labels)?;
    let pass = |probs: ArrayView2<'_, T>, labels: &[usize]| {
        // Room for every row in either list (address space only until written).
        let rows = probs.nrows();
        let (mut right, mut wrong) = (Vec::with_capacity(rows), Vec::with_capacity(rows));
        for_each_top_class(probs, |row, predicted, confidence| {
            match predicted == labels[row] {
                true => right.push(tie_key(confidence)),
                false => wrong.push(tie_key(confidence)),
            }
            Ok(())
        })?;
        Ok((right, wrong))
    };
    let merge = |(mut right, mut wrong): (Vec<T::Key>, Vec<T::Key>), (more_right, more_wrong)| {
        right.extend(more_right);
        wrong.extend(more_wrong);
        (right, wrong)
    };
    let (right, wrong) = fold_rows(probs, labels, threads, pass, merge)?;
    mann_whitney(right, wrong, "misclassification AUROC", threads)
}

/// The per-sample score used to separate in-distribution from OOD inputs;
/// higher means "more in-distribution".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OodScore {
    /// The maximum class probability.
    #[default]
    MaxProbability,
    /// `sum_k p_k ln p_k` (minus the predictive entropy, `0 ln 0 = 0`).
    NegativeEntropy,
}

impl OodScore {
    fn of_rows<T: Real>(self, probs: ArrayView2<'_, T>) -> Result<Vec<f64>> {
        match self {
            OodScore::MaxProbability => {
                let mut scores = Vec::with_capacity(probs.nrows());
                for_each_top_class(probs, |_, _, confidence| {
                    scores.push(confidence.into());
                    Ok(())
                })?;
                Ok(scores)
            }
            OodScore::NegativeEntropy => probs
                .outer_iter()
                .enumerate()
                .map(|(row, values)| Ok(-super::scoring::row_entropy(values, row)?))
                .collect(),
        }
    }
}

/// OOD detection: in-distribution rows are the positives, OOD rows the
/// negatives, ranked by `score`. Both matrices need rows and the same classes.
pub fn auroc_ood<T: Real>(
    in_distribution: ArrayView2<'_, T>,
    out_of_distribution: ArrayView2<'_, T>,
    score: OodScore,
) -> Result<f64> {
    if in_distribution.ncols() != out_of_distribution.ncols() {
        return Err(CalibError::ShapeMismatch(format!(
            "in-distribution probabilities have {} classes, OOD ones {}",
            in_distribution.ncols(),
            out_of_distribution.ncols()
        )));
    }
    let mut scores = score.of_rows(in_distribution)?;
    let n_in = scores.len();
    scores.extend(score.of_rows(out_of_distribution)?);
    let positive: Vec<bool> = (0..scores.len()).map(|i| i < n_in).collect();
    auroc(&scores, &positive).map_err(|e| rename(e, "OOD AUROC"))
}

/// One-vs-rest macro AUROC: for each class `k`, the AUROC of `p_k` with
/// positives `y = k`, averaged over classes. A class absent from `labels` (no
/// positive) or making up all of them (no negative) has no AUROC and is
/// skipped; if no class is left the metric is undefined (an error).
pub fn auroc_ovr<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let n = labels.len();
    let mut per_class = Vec::new();
    for (class, column) in probs.columns().into_iter().enumerate() {
        let positive: Vec<bool> = labels.iter().map(|&y| y == class).collect();
        let n_positive = positive.iter().filter(|&&p| p).count();
        if n_positive == 0 || n_positive == n {
            continue;
        }
        let scores = column
            .iter()
            .enumerate()
            .map(|(row, &value)| {
                let value: f64 = value.into();
                if (0.0..=1.0).contains(&value) {
                    Ok(value)
                } else {
                    Err(probability_error(row, class, value))
                }
            })
            .collect::<Result<Vec<f64>>>()?;
        per_class.push(auroc(&scores, &positive)?);
    }
    if per_class.is_empty() {
        return Err(CalibError::Undefined {
            metric: "one-vs-rest AUROC",
            reason: "no class has both positives and negatives among the labels".into(),
        });
    }
    Ok(per_class.iter().sum::<f64>() / per_class.len() as f64)
}

/// Names the specific AUROC in an "undefined" error.
fn rename(error: CalibError, metric: &'static str) -> CalibError {
    match error {
        CalibError::Undefined { reason, .. } => CalibError::Undefined { metric, reason },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::test_support::two_class;
    use ndarray::array;
    use proptest::prelude::*;

    #[test]
    fn hand_computed_with_ties() {
        // Positives 0.8, 0.5; negatives 0.5, 0.2. Pairs: (0.8>0.5) 1, (0.8>0.2) 1,
        // (0.5=0.5) 1/2, (0.5>0.2) 1 -> 3.5 / 4.
        let a = auroc(&[0.8, 0.5, 0.5, 0.2], &[true, true, false, false]).unwrap();
        assert_eq!(a, 0.875);
        assert_eq!(auroc(&[0.3, 0.3], &[true, false]).unwrap(), 0.5);
    }

    #[test]
    fn degenerate_input_is_an_error_not_nan() {
        let (probs, labels) = two_class(&[(0.9, true), (0.7, true)]);
        assert!(matches!(
            auroc_misclassification(probs.view(), &labels),
            Err(CalibError::Undefined {
                metric: "misclassification AUROC",
                ..
            })
        ));
        assert!(auroc(&[f64::NAN, 0.1], &[true, false]).is_err());
        assert!(matches!(
            auroc_ovr(array![[0.6, 0.4], [0.7, 0.3]].view(), &[0, 0]),
            Err(CalibError::Undefined { .. })
        ));
    }

    #[test]
    fn misclassification_by_hand() {
        // Correct at 0.9 and 0.6, wrong at 0.7: pairs (0.9>0.7) 1, (0.6<0.7) 0.
        let (probs, labels) = two_class(&[(0.9, true), (0.6, true), (0.7, false)]);
        assert_eq!(auroc_misclassification(probs.view(), &labels).unwrap(), 0.5);
    }

    #[test]
    fn ood_by_hand() {
        let inside = array![[0.9_f32, 0.1], [0.6, 0.4]];
        let outside = array![[0.5_f32, 0.5], [0.7, 0.3]];
        // Max prob: in {0.9, 0.6} vs out {0.5, 0.7}: 1 + 1 + 1 + 0 = 3 / 4.
        let a = auroc_ood(inside.view(), outside.view(), OodScore::MaxProbability).unwrap();
        assert_eq!(a, 0.75);
        // Negative entropy is monotone in max prob for two classes: same ranking.
        let b = auroc_ood(inside.view(), outside.view(), OodScore::NegativeEntropy).unwrap();
        assert_eq!(b, 0.75);
    }

    #[test]
    fn ovr_skips_absent_classes() {
        // Class 2 never occurs: averaged over classes 0 and 1 only.
        let probs = array![[0.6, 0.3, 0.1], [0.2, 0.5, 0.3], [0.5, 0.1, 0.4]];
        let labels = [0, 1, 0];
        // Class 0: positives {0.6, 0.5} vs {0.2}: 1. Class 1: {0.5} vs {0.3, 0.1}: 1.
        assert_eq!(auroc_ovr(probs.view(), &labels).unwrap(), 1.0);
        let labels = [1, 0, 0];
        // Class 0: {0.2, 0.5} vs {0.6}: 0. Class 1: {0.3} vs {0.5, 0.1}: 1/2.
        assert_eq!(auroc_ovr(probs.view(), &labels).unwrap(), 0.25);
    }

    proptest! {
        #[test]
        fn equals_the_count_over_all_pairs(
            samples in prop::collection::vec((prop_oneof![
                (0u8..12).prop_map(|s| f64::from(s) / 4.0 - 1.0),
                Just(-0.0), Just(0.0), Just(f64::INFINITY), Just(f64::NEG_INFINITY),
                any::<f64>().prop_filter("not NaN", |s| !s.is_nan()),
            ], any::<bool>()), 2..400)
        ) {
            // The definition, pair by pair: wins count 1, ties 1/2.
            let mut doubled_wins = 0u64;
            for &(p, _) in samples.iter().filter(|s| s.1) {
                for &(n, _) in samples.iter().filter(|s| !s.1) {
                    doubled_wins += if p > n { 2 } else { u64::from(p == n) };
                }
            }
            let n_positive = samples.iter().filter(|s| s.1).count();
            let pairs = 2.0 * n_positive as f64 * (samples.len() - n_positive) as f64;
            let scores: Vec<f64> = samples.iter().map(|s| s.0).collect();
            let positive: Vec<bool> = samples.iter().map(|s| s.1).collect();
            match auroc(&scores, &positive) {
                Ok(a) => prop_assert_eq!(a, doubled_wins as f64 / pairs),
                Err(_) => prop_assert!(n_positive == 0 || n_positive == samples.len()),
            }
        }

        #[test]
        fn reversed_scores_give_one_minus_auroc(
            samples in prop::collection::vec((0u8..20, any::<bool>()), 2..200)
        ) {
            let scores: Vec<f64> = samples.iter().map(|s| f64::from(s.0) / 20.0).collect();
            let positive: Vec<bool> = samples.iter().map(|s| s.1).collect();
            let reversed: Vec<f64> = scores.iter().map(|s| -s).collect();
            match (auroc(&scores, &positive), auroc(&reversed, &positive)) {
                (Ok(a), Ok(b)) => {
                    prop_assert!((0.0..=1.0).contains(&a));
                    // a and b are exact pair counts over one exact total, each divided once:
                    // |a + b - 1| <= 3 * 2.2e-16; a miscounted pair moves it by >= 1 / 20000.
                    prop_assert!((a + b - 1.0).abs() < 1e-12);
                }
                (Err(_), Err(_)) => prop_assert!(positive.iter().all(|&p| p) || positive.iter().all(|&p| !p)),
                _ => prop_assert!(false, "one direction failed"),
            }
        }
    }
}
