//! Turning logits into probabilities and checking predictions before any metric
//! reads them.
//!
//! Softmax and log-softmax use the log-sum-exp shift (subtract the row maximum),
//! so finite logits of any size give finite probabilities that sum to 1.
//! Validators return an error naming the first offending row (and column).

use ndarray::{Array2, ArrayView1, ArrayView2, Zip};

use crate::error::{CalibError, Result};

/// Element types a metric accepts: `f32` or `f64`. Metrics read values through
/// `Into<f64>` and accumulate in `f64`; comparisons run in the type itself.
pub trait Real:
    Copy + Send + Sync + Into<f64> + PartialOrd + std::ops::Add<Output = Self> + 'static
{
    /// 0 in this type.
    const ZERO: Self;
    /// 1 in this type.
    const ONE: Self;
    /// `value` rounded to this type (to nearest, as `as` does).
    fn from_f64(value: f64) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn from_f64(value: f64) -> Self {
        value
    }
}

/// Row-wise softmax `p_k = exp(z_k - m) / sum_j exp(z_j - m)` with `m = max_j z_j`.
///
/// Logits must be finite (see [`validate_logits`]); then every row is finite and
/// sums to 1 up to rounding, however large the logits. The result has the
/// logits' element type: each entry is computed in `f64` and rounded once, so
/// `f32` logits give `f32` probabilities without an `f64` copy of the matrix.
pub fn softmax<T: Real>(logits: ArrayView2<'_, T>) -> Array2<T> {
    let mut out = logits.to_owned();
    for mut row in out.rows_mut() {
        let (m, ln_sum) = shifted_log_sum_exp(row.view());
        row.mapv_inplace(|z| T::from_f64(((z.into() - m) - ln_sum).exp()));
    }
    out
}

/// Row-wise log-softmax `z_k - logsumexp(z)`, computed as
/// `(z_k - m) - ln sum_j exp(z_j - m)` with `m = max_j z_j`, so huge logits keep
/// full precision. Logits must be finite.
pub fn log_softmax(logits: ArrayView2<'_, f64>) -> Array2<f64> {
    let mut out = logits.to_owned();
    for mut row in out.rows_mut() {
        let (m, ln_sum) = shifted_log_sum_exp(row.view());
        row.mapv_inplace(|z| (z - m) - ln_sum);
    }
    out
}

/// `ln softmax(z)_k` of one row of finite logits, as in [`log_softmax`].
pub fn log_softmax_at(row: ArrayView1<'_, f64>, k: usize) -> f64 {
    let (m, ln_sum) = shifted_log_sum_exp(row);
    (row[k] - m) - ln_sum
}

/// `ln sum_k exp(z_k)` of one row of finite logits, computed as `m + ln sum_k
/// exp(z_k - m)` with `m = max_k z_k` so that no term overflows.
pub fn log_sum_exp(row: ArrayView1<'_, f64>) -> f64 {
    let (m, ln_sum) = shifted_log_sum_exp(row);
    m + ln_sum
}

/// `(m, ln sum_k exp(z_k - m))` with `m = max_k z_k`: `logsumexp(z)` is their sum,
/// kept apart so that callers subtract `m` from logits before adding `ln sum`.
fn shifted_log_sum_exp<T: Real>(row: ArrayView1<'_, T>) -> (f64, f64) {
    let m = row.fold(f64::NEG_INFINITY, |acc, &z| acc.max(z.into()));
    (m, row.fold(0.0, |acc, &z| acc + (z.into() - m).exp()).ln())
}

/// `ln p` elementwise with `p` clamped below at `f64::MIN_POSITIVE`, so a
/// probability of exactly 0 gives about -708.4 instead of `-inf`. Softmax of the
/// result gives back `p` (up to the clamp): this is how a model that saved only
/// probabilities is fed to a calibrator that wants logits.
pub fn log_probabilities<T: Real>(probs: ArrayView2<'_, T>) -> Array2<f64> {
    probs.mapv(|p| p.into().max(f64::MIN_POSITIVE).ln())
}

/// The predicted class (first index of the maximum, as numpy's `argmax`) and its
/// probability, the confidence. Fails if any entry of the row is NaN or outside
/// `[0, 1]`; `row_index` names the row in the error.
pub fn top_class<T: Real>(row: ArrayView1<'_, T>, row_index: usize) -> Result<(usize, f64)> {
    if let Some(found) = row.as_slice().and_then(scan_valid_row) {
        return Ok(found);
    }
    // Strided rows, and rows the fast scan refused: find the first bad entry.
    let mut best = (0, f64::NEG_INFINITY);
    for (col, &value) in row.iter().enumerate() {
        let value: f64 = value.into();
        if !(0.0..=1.0).contains(&value) {
            return Err(probability_error(row_index, col, value));
        }
        if value > best.1 {
            best = (col, value);
        }
    }
    if row.is_empty() {
        return Err(CalibError::Empty(format!("row {row_index} has no classes")));
    }
    Ok(best)
}

/// Fast path of [`top_class`] for a contiguous row: lane-wise max, min and sum
/// in the element type (which the compiler vectorises; a NaN turns the sum
/// NaN), then the first index of the max. `None` if the row is empty or any
/// entry is not in `[0, 1]`.
#[inline]
fn scan_valid_row<T: Real>(row: &[T]) -> Option<(usize, f64)> {
    const LANES: usize = 16;
    let first = *row.first()?;
    let (mut max, mut min, mut sum) = ([first; LANES], [first; LANES], [T::ZERO; LANES]);
    let chunks = row.chunks_exact(LANES);
    let tail = chunks.remainder();
    for chunk in chunks {
        for lane in 0..LANES {
            let v = chunk[lane];
            max[lane] = if v > max[lane] { v } else { max[lane] };
            min[lane] = if v < min[lane] { v } else { min[lane] };
            sum[lane] = sum[lane] + v;
        }
    }
    for (lane, &v) in tail.iter().enumerate() {
        max[lane] = if v > max[lane] { v } else { max[lane] };
        min[lane] = if v < min[lane] { v } else { min[lane] };
        sum[lane] = sum[lane] + v;
    }
    let top = max.iter().fold(first, |a, &b| if b > a { b } else { a });
    let bottom = min.iter().fold(first, |a, &b| if b < a { b } else { a });
    let total: f64 = sum.iter().map(|&v| v.into()).sum();
    // Every entry is in the sum, so any NaN (also a first one, where max and
    // min start) makes the total NaN.
    if bottom < T::ZERO || top > T::ONE || total.is_nan() {
        return None;
    }
    // First index of the max: whole chunks compared without branches, then
    // the position inside the first chunk that holds it.
    let (offset, chunk) = row
        .chunks(LANES)
        .enumerate()
        .find(|(_, chunk)| chunk.iter().fold(false, |seen, &v| seen | (v == top)))?;
    let index = offset * LANES + chunk.iter().position(|&v| v == top)?;
    Some((index, top.into()))
}

/// The error for a single entry that is not a probability.
pub(crate) fn probability_error(row: usize, col: usize, value: f64) -> CalibError {
    if value.is_finite() {
        if value < 0.0 {
            CalibError::NegativeProbability { row, col, value }
        } else {
            CalibError::InvalidArgument(format!(
                "probability {value} at row {row}, column {col} is above 1"
            ))
        }
    } else {
        CalibError::NonFinite { row, col, value }
    }
}

/// Checks an `N x K` probability matrix: at least one row and one column, every
/// entry finite and in `[0, 1]`, every row summing to 1 within `tolerance`
/// (absolute). The error names the first offending row.
pub fn validate_probabilities<T: Real>(probs: ArrayView2<'_, T>, tolerance: f64) -> Result<()> {
    check_not_empty(probs.dim(), "probabilities")?;
    for (row_index, row) in probs.rows().into_iter().enumerate() {
        let mut sum = 0.0;
        for (col, &value) in row.iter().enumerate() {
            let value: f64 = value.into();
            if !(0.0..=1.0).contains(&value) {
                return Err(probability_error(row_index, col, value));
            }
            sum += value;
        }
        if (sum - 1.0).abs() > tolerance {
            return Err(CalibError::NotNormalised {
                row: row_index,
                sum,
                tolerance,
            });
        }
    }
    Ok(())
}

/// Checks an `N x K` logit matrix: at least one row and one column, every entry
/// finite. The error names the first NaN or infinity.
pub fn validate_logits<T: Real>(logits: ArrayView2<'_, T>) -> Result<()> {
    check_not_empty(logits.dim(), "logits")?;
    let mut first_bad = None;
    Zip::indexed(logits).for_each(|(row, col), &value| {
        let value: f64 = value.into();
        if !value.is_finite() && first_bad.is_none() {
            first_bad = Some(CalibError::NonFinite { row, col, value });
        }
    });
    first_bad.map_or(Ok(()), Err)
}

/// Checks that there is one label per row and each label is in `0..n_classes`.
pub fn validate_labels(labels: &[usize], n_rows: usize, n_classes: usize) -> Result<()> {
    if labels.len() != n_rows {
        return Err(CalibError::ShapeMismatch(format!(
            "{} labels for {n_rows} rows",
            labels.len()
        )));
    }
    match labels.iter().position(|&label| label >= n_classes) {
        None => Ok(()),
        Some(row) => Err(CalibError::LabelOutOfRange {
            row,
            // A usize label that does not fit in i64 is reported as i64::MAX.
            label: i64::try_from(labels[row]).unwrap_or(i64::MAX),
            n_classes,
        }),
    }
}

/// Converts labels read from a file (`i64`, as numpy and PyTorch store them) into
/// class indices, failing on the first label outside `0..n_classes`.
pub fn labels_from_i64(labels: &[i64], n_classes: usize) -> Result<Vec<usize>> {
    labels
        .iter()
        .enumerate()
        .map(|(row, &label)| match usize::try_from(label) {
            Ok(class) if class < n_classes => Ok(class),
            _ => Err(CalibError::LabelOutOfRange {
                row,
                label,
                n_classes,
            }),
        })
        .collect()
}

fn check_not_empty((rows, cols): (usize, usize), what: &str) -> Result<()> {
    if rows == 0 || cols == 0 {
        return Err(CalibError::Empty(format!(
            "{what} matrix is {rows} x {cols}; it needs at least one row and one class"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use proptest::prelude::*;

    #[test]
    fn softmax_matches_hand_computation() {
        // exp(0), exp(ln 3) over 1 + 3.
        let p = softmax(array![[0.0, 3.0_f64.ln()]].view());
        assert!((p[[0, 0]] - 0.25).abs() < 1e-15);
        assert!((p[[0, 1]] - 0.75).abs() < 1e-15);
    }

    #[test]
    fn float32_softmax_is_the_float64_one_rounded_once() {
        let logits = array![[0.5_f32, -1.25, 3.0], [1e30, -1e30, 0.0]];
        let narrow = softmax(logits.view());
        let wide = softmax(logits.mapv(f64::from).view());
        assert_eq!(narrow, wide.mapv(|p| p as f32));
    }

    #[test]
    fn log_softmax_of_huge_logits_is_finite() {
        let l = log_softmax(array![[1e300, -1e300, 0.0]].view());
        assert_eq!(l[[0, 0]], 0.0);
        assert_eq!(l[[0, 1]], -2e300);
        assert_eq!(l[[0, 2]], -1e300);
        let row = array![1e300, 1e300];
        assert_eq!(log_softmax_at(row.view(), 1), -(2.0_f64.ln()));
    }

    #[test]
    fn log_probabilities_clamps_zero() {
        let l = log_probabilities(array![[0.0, 1.0]].view());
        assert_eq!(l[[0, 0]], f64::MIN_POSITIVE.ln());
        assert_eq!(l[[0, 1]], 0.0);
        let back = softmax(l.view());
        assert!(back[[0, 0]] < 1e-300 && back[[0, 1]] == 1.0);
    }

    #[test]
    fn top_class_takes_first_maximum_and_rejects_bad_entries() {
        assert_eq!(
            top_class(array![0.4_f32, 0.2, 0.4].view(), 0).unwrap(),
            (0, 0.4_f32 as f64)
        );
        assert!(matches!(
            top_class(array![0.5, f64::NAN, 0.5].view(), 7),
            Err(CalibError::NonFinite { row: 7, col: 1, .. })
        ));
        assert!(matches!(
            top_class(array![f64::NAN, 0.5].view(), 4),
            Err(CalibError::NonFinite { row: 4, col: 0, .. })
        ));
        assert!(matches!(
            top_class(array![1.5, -0.5].view(), 2),
            Err(CalibError::InvalidArgument(_))
        ));
    }

    #[test]
    fn validate_probabilities_names_the_row() {
        let ok = array![[0.5, 0.5], [0.1, 0.9]];
        assert!(validate_probabilities(ok.view(), 1e-9).is_ok());
        let off = array![[0.5, 0.5], [0.2, 0.9]];
        assert!(matches!(
            validate_probabilities(off.view(), 1e-6),
            Err(CalibError::NotNormalised { row: 1, .. })
        ));
        let neg = array![[0.5_f32, -0.2]];
        assert!(matches!(
            validate_probabilities(neg.view(), 1e-6),
            Err(CalibError::NegativeProbability { row: 0, col: 1, .. })
        ));
        let nan = array![[0.5, 0.5], [f64::NAN, 1.0]];
        assert!(matches!(
            validate_probabilities(nan.view(), 1e-6),
            Err(CalibError::NonFinite { row: 1, col: 0, .. })
        ));
        let empty = Array2::<f64>::zeros((0, 3));
        assert!(matches!(
            validate_probabilities(empty.view(), 1e-6),
            Err(CalibError::Empty(_))
        ));
    }

    #[test]
    fn validate_logits_rejects_infinity() {
        assert!(validate_logits(array![[1e30, -1e30]].view()).is_ok());
        assert!(matches!(
            validate_logits(array![[0.0, 1.0], [f64::INFINITY, 0.0]].view()),
            Err(CalibError::NonFinite { row: 1, col: 0, .. })
        ));
    }

    #[test]
    fn labels_are_checked() {
        assert!(validate_labels(&[0, 2], 2, 3).is_ok());
        assert!(matches!(
            validate_labels(&[0, 3], 2, 3),
            Err(CalibError::LabelOutOfRange {
                row: 1,
                label: 3,
                ..
            })
        ));
        assert!(matches!(
            validate_labels(&[0], 2, 3),
            Err(CalibError::ShapeMismatch(_))
        ));
        assert_eq!(labels_from_i64(&[2, 0], 3).unwrap(), vec![2, 0]);
        assert!(matches!(
            labels_from_i64(&[0, -1], 3),
            Err(CalibError::LabelOutOfRange {
                row: 1,
                label: -1,
                ..
            })
        ));
    }

    proptest! {
        #[test]
        fn fast_and_strided_row_scans_agree(
            mut values in prop::collection::vec(prop_oneof![0.0..=1.0_f64, Just(0.5), Just(0.0)], 1..70),
            corrupt in prop::option::of((any::<prop::sample::Index>(), prop_oneof![Just(-0.1), Just(f64::NAN), Just(1.5)])),
        ) {
            if let Some((at, bad)) = corrupt {
                let i = at.index(values.len());
                values[i] = bad;
            }
            // A column of a 2-row matrix is strided, so it takes the slow path.
            let k = values.len();
            let two_rows = Array2::from_shape_fn((k, 2), |(i, _)| values[i]);
            let strided = top_class(two_rows.column(0), 3);
            let contiguous = top_class(ndarray::ArrayView1::from(&values[..]), 3);
            match (strided, contiguous) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
                (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                (a, b) => prop_assert!(false, "{:?} vs {:?}", a, b),
            }
        }

        #[test]
        fn softmax_rows_sum_to_one_for_huge_logits(
            rows in prop::collection::vec(prop::collection::vec(-1e300..1e300_f64, 1..8), 1..8)
        ) {
            let k = rows[0].len();
            let flat: Vec<f64> = rows.iter().flat_map(|r| r.iter().cycle().take(k).copied()).collect();
            let logits = Array2::from_shape_vec((rows.len(), k), flat).unwrap();
            let p = softmax(logits.view());
            for row in p.rows() {
                prop_assert!(row.iter().all(|v| v.is_finite() && (0.0..=1.0).contains(v)));
                prop_assert!((row.sum() - 1.0).abs() < 1e-12);
            }
        }
    }
}
