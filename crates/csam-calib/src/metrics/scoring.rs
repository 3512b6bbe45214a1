//! Per-sample scores averaged over the data: NLL, Brier score, accuracy, mean
//! confidence and mean predictive entropy (natural logarithms throughout).

use ndarray::{ArrayView1, ArrayView2};

use super::{check_predictions, confidence_hits, mean_of};
use crate::error::{CalibError, Result};
use crate::scores::{log_softmax_at, probability_error, validate_logits, Real};

/// Negative log-likelihood `-(1/N) sum_i ln clip(p_{i, y_i}, eps, 1 - eps)`
/// with `eps = 2^-52`, float64's machine epsilon: scikit-learn's `log_loss`
/// convention for float64 probabilities (since 1.5; checked against 1.9.1's
/// `_log_loss`), which clips to `[eps, 1 - eps]`, does not renormalise the
/// clipped rows (it only warns when a row does not sum to 1) and scores the
/// true class alone. A true-class probability of exactly 0 costs
/// `-ln eps = 36.04` instead of infinity, and of exactly 1 costs `eps`.
///
/// Float32 probabilities are clipped as their float64 values, not at float32's
/// epsilon (`2^-23`, where scikit-learn clips float32 input): the softmax of
/// float32 logits puts true classes well below `2^-23` on confidently wrong
/// rows, and the clip there would take 1% off the cross-entropy those logits
/// give (0.2124 instead of 0.2145 on the CLI's digits fixture). Below `2^-52`
/// (a logit margin of 36) the two part.
///
/// Why not a clamp at `f64::MIN_POSITIVE` (a cost of 708.4), as before:
/// calibrators that put exactly 0 on a class (histogram binning, isotonic
/// regression) let a handful of rows dominate the mean (NLLs of 17.98 and
/// 7.99 were reported after them), and the value matched no other library.
/// The sum runs in `f64`. Prefer [`nll_from_logits`] when logits exist: it
/// needs no clip.
pub fn nll<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let (lowest, highest) = (f64::EPSILON, 1.0 - f64::EPSILON);
    let per_row = labels.iter().enumerate().map(|(row, &label)| {
        let p = checked(probs[[row, label]].into(), row, label)?;
        Ok(-p.clamp(lowest, highest).ln())
    });
    mean_of(per_row, labels.len())
}

/// Negative log-likelihood from logits: `(1/N) sum_i (logsumexp(z_i) - z_{i, y_i})`,
/// the cross-entropy loss, exact for any finite logits (no clamp needed).
pub fn nll_from_logits(logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<f64> {
    validate_logits(logits)?;
    check_predictions(logits, labels)?;
    let per_row = logits
        .outer_iter()
        .zip(labels)
        .map(|(row, &label)| Ok(-log_softmax_at(row, label)));
    mean_of(per_row, labels.len())
}

/// Multi-class Brier score `(1/N) sum_i sum_k (p_{ik} - 1[y_i = k])^2`, in
/// `[0, 2]` (the original definition of Brier, 1950). Some libraries divide by
/// `K` as well, or score only the binary top-label event; this one does neither.
pub fn brier<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let per_row = probs
        .outer_iter()
        .zip(labels)
        .enumerate()
        .map(|(row, (values, &label))| {
            values.iter().enumerate().try_fold(0.0, |acc, (k, &p)| {
                let p = checked(p.into(), row, k)?;
                let target = if k == label { 1.0 } else { 0.0 };
                Ok(acc + (p - target) * (p - target))
            })
        });
    mean_of(per_row, labels.len())
}

/// Fraction of rows whose prediction (first argmax) equals the label.
pub fn accuracy<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let per_row = confidence_hits(probs, labels).map(|pair| Ok(f64::from(u8::from(pair?.1))));
    mean_of(per_row, labels.len())
}

/// Mean confidence `(1/N) sum_i max_k p_{ik}`.
pub fn mean_confidence<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let per_row = confidence_hits(probs, labels).map(|pair| Ok(pair?.0));
    mean_of(per_row, labels.len())
}

/// Mean predictive entropy `(1/N) sum_i -sum_k p_{ik} ln p_{ik}` in nats,
/// with `0 ln 0 = 0`.
pub fn mean_entropy<T: Real>(probs: ArrayView2<'_, T>) -> Result<f64> {
    let n = probs.nrows();
    if n == 0 || probs.ncols() == 0 {
        return Err(CalibError::Empty(
            "no predictions to take the entropy of".into(),
        ));
    }
    let per_row = probs
        .outer_iter()
        .enumerate()
        .map(|(row, values)| row_entropy(values, row));
    mean_of(per_row, n)
}

/// The predictive entropy `-sum_k p_{ik} ln p_{ik}` of every row, in nats
/// (`0 ln 0 = 0`): the distribution whose mean is [`mean_entropy`].
pub fn entropies<T: Real>(probs: ArrayView2<'_, T>) -> Result<Vec<f64>> {
    probs
        .outer_iter()
        .enumerate()
        .map(|(row, values)| row_entropy(values, row))
        .collect()
}

/// Binary entropy `H(p) = -p ln p - (1 - p) ln(1 - p)` in nats, `0 ln 0 = 0`
/// (the paper's Theorem 1, where `p` is the true-class probability).
pub fn binary_entropy(p: f64) -> f64 {
    let term = |q: f64| if q > 0.0 { -q * q.ln() } else { 0.0 };
    term(p) + term(1.0 - p)
}

/// Mean binary entropy of the true-class probability, `(1/N) sum_i H(p_{i, y_i})`:
/// the paper's `H(p_y)` of its perturbation-radius figure, averaged over
/// examples (not of the geometric mean over a batch, which the per-step
/// theory diagnostics use). Largest (ln 2) when every `p_y` is 1/2.
pub fn mean_true_class_entropy<T: Real>(probs: ArrayView2<'_, T>, labels: &[usize]) -> Result<f64> {
    check_predictions(probs, labels)?;
    let per_row = labels.iter().enumerate().map(|(row, &label)| {
        let p = checked(probs[[row, label]].into(), row, label)?;
        Ok(binary_entropy(p))
    });
    mean_of(per_row, labels.len())
}

/// `-sum_k p_k ln p_k` of one row, `0 ln 0 = 0`; `row` names it in errors.
pub(crate) fn row_entropy<T: Real>(values: ArrayView1<'_, T>, row: usize) -> Result<f64> {
    values.iter().enumerate().try_fold(0.0, |acc, (k, &p)| {
        let p = checked(p.into(), row, k)?;
        Ok(if p > 0.0 { acc - p * p.ln() } else { acc })
    })
}

/// `value` if it is a probability (finite, in `[0, 1]`), else the error naming it.
fn checked(value: f64, row: usize, col: usize) -> Result<f64> {
    if (0.0..=1.0).contains(&value) {
        Ok(value)
    } else {
        Err(probability_error(row, col, value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;

    /// f64 round-off bar for the hand-computed values below: each side is at most
    /// a dozen roundings and libm `ln` calls (each <= 1 ulp, at most 2.2e-16 at
    /// these magnitudes, often scaled down by p <= 0.5), a few 1e-16 in all; a
    /// wrong class or term moves a value by more than 1e-2.
    const FEW_ROUNDINGS: f64 = 1e-15;

    #[test]
    fn true_class_entropy_by_hand() {
        assert_eq!(binary_entropy(0.0), 0.0);
        assert_eq!(binary_entropy(1.0), 0.0);
        assert!((binary_entropy(0.5) - std::f64::consts::LN_2).abs() < FEW_ROUNDINGS);
        // p_y = 0.5 and 0.9: (ln 2 + H(0.9)) / 2, H(0.9) = -0.9 ln 0.9 - 0.1 ln 0.1.
        let probs = array![[0.5, 0.5], [0.1, 0.9]];
        let h9 = -0.9f64 * 0.9f64.ln() - 0.1f64 * 0.1f64.ln();
        let got = mean_true_class_entropy(probs.view(), &[0, 1]).unwrap();
        assert!((got - (std::f64::consts::LN_2 + h9) / 2.0).abs() < FEW_ROUNDINGS);
        // The true class, not the predicted one: p_y = 0.1 has the same H as 0.9.
        let wrong = mean_true_class_entropy(probs.view(), &[1, 0]).unwrap();
        assert!((wrong - got).abs() < FEW_ROUNDINGS);
        assert!(mean_true_class_entropy(probs.view(), &[0, 2]).is_err());
    }

    #[test]
    fn entropies_average_to_the_mean_entropy() {
        let probs = array![[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1.0, 0.0, 0.0]];
        let each = entropies(probs.view()).unwrap();
        assert_eq!(each.len(), 3);
        assert!((each[0] - std::f64::consts::LN_2).abs() < FEW_ROUNDINGS);
        assert_eq!(each[2], 0.0);
        let mean = each.iter().sum::<f64>() / 3.0;
        assert!((mean - mean_entropy(probs.view()).unwrap()).abs() < FEW_ROUNDINGS);
    }

    #[test]
    fn nll_by_hand_and_clipped_as_scikit_learn_does() {
        let probs = array![[0.5, 0.5], [0.25, 0.75]];
        let expected = -(0.5_f64.ln() + 0.75_f64.ln()) / 2.0;
        assert!((nll(probs.view(), &[0, 1]).unwrap() - expected).abs() < FEW_ROUNDINGS);
        // p_y = 0 costs -ln(2^-52) = 52 ln 2 = 36.04, in f64 and f32 alike;
        // p_y = 1 costs -ln(1 - 2^-52), about 2^-52.
        // Each side: a few roundings and an ln (<= 1 ulp each) of values
        // <= 37, so 8 ulps of 37; the old clamp's 708 misses by 670.
        let tolerance = 8.0 * 37.0 * f64::EPSILON;
        let certain = array![[1.0, 0.0], [1.0, 0.0], [0.25, 0.75]];
        let expected = (52.0 * std::f64::consts::LN_2 + f64::EPSILON - 0.75_f64.ln()) / 3.0;
        let loss = nll(certain.view(), &[1, 0, 1]).unwrap();
        assert!((loss - expected).abs() < tolerance, "{loss} vs {expected}");
        let single = array![[1.0f32, 0.0]];
        let expected = 52.0 * std::f64::consts::LN_2;
        let loss = nll(single.view(), &[1]).unwrap();
        assert!((loss - expected).abs() < tolerance, "{loss} vs {expected}");
        // -ln(1 - 2^-52) = 2^-52 + 2^-105 + ..., 2^-52 to within an ulp (2^-104).
        let sure = nll(array![[1.0, 0.0]].view(), &[0]).unwrap();
        assert!(
            (sure - f64::EPSILON).abs() <= 2.0 * f64::EPSILON * f64::EPSILON,
            "{sure}"
        );
    }

    #[test]
    fn nll_from_logits_matches_probabilities() {
        // Logits (0, ln 3): p = (1/4, 3/4).
        let logits = array![[0.0, 3.0_f64.ln()], [1000.0, -1000.0]];
        let loss = nll_from_logits(logits.view(), &[1, 0]).unwrap();
        assert!((loss - (-(0.75_f64.ln()) / 2.0)).abs() < FEW_ROUNDINGS);
        // Huge equal logits keep the ln 2 that logsumexp(z) - z_y would round away.
        let huge = array![[1e300, 1e300]];
        assert_eq!(nll_from_logits(huge.view(), &[0]).unwrap(), 2.0_f64.ln());
        assert!(nll_from_logits(array![[f64::NAN, 0.0]].view(), &[0]).is_err());
    }

    #[test]
    fn brier_by_hand() {
        // Row 0: (0.7 - 1)^2 + 0.2^2 + 0.1^2 = 0.14; row 1: 0.7^2 + (0.2 - 1)^2 + 0.1^2 = 1.14.
        let probs = array![[0.7, 0.2, 0.1], [0.7, 0.2, 0.1]];
        // Six squares summed and halved, values <= 1.2: ~8 * 2.2e-16 of round-off;
        // the wrong target in a row moves the score by >= 0.2.
        assert!((brier(probs.view(), &[0, 1]).unwrap() - 0.64).abs() < 1e-12);
    }

    #[test]
    fn accuracy_confidence_entropy_by_hand() {
        let probs = array![[0.7_f32, 0.3], [0.5, 0.5], [0.0, 1.0]];
        let labels = [0, 1, 1];
        // Row 1 ties: the prediction is class 0, so wrong.
        assert!((accuracy(probs.view(), &labels).unwrap() - 2.0 / 3.0).abs() < FEW_ROUNDINGS);
        let conf = (0.7_f32 as f64 + 0.5 + 1.0) / 3.0;
        assert!((mean_confidence(probs.view(), &labels).unwrap() - conf).abs() < FEW_ROUNDINGS);
        let (a, b) = (0.7_f32 as f64, 0.3_f32 as f64);
        let h = (-(a * a.ln() + b * b.ln()) + 2.0_f64.ln() + 0.0) / 3.0;
        // Five ln terms summed in another order, values <= 1.4: ~10 * 2.2e-16.
        assert!((mean_entropy(probs.view()).unwrap() - h).abs() < 1e-12);
    }

    #[test]
    fn bad_entries_are_named() {
        let probs = array![[0.5, 0.5], [-0.1, 1.1]];
        assert!(matches!(
            brier(probs.view(), &[0, 0]),
            Err(CalibError::NegativeProbability { row: 1, col: 0, .. })
        ));
        assert!(matches!(
            nll(probs.view(), &[0, 0]),
            Err(CalibError::NegativeProbability { row: 1, col: 0, .. })
        ));
        assert!(mean_entropy(probs.view()).is_err());
    }
}
