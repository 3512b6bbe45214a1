//! Turning logits into probabilities and checking predictions before any metric
//! reads them.
//!
//! Softmax and log-softmax use the log-sum-exp shift (subtract the row maximum),
//! so finite logits of any size give finite probabilities that sum to 1.
//! Validators return an error naming the first offending row (and column).

use ndarray::{Array2, ArrayView1, ArrayView2};

use crate::error::{CalibError, Result};
use crate::prefetch;
use crate::row_scan::{entries_and_sum, row_scanner, scan_row, EntryCheck, LaneBits, Top};

/// Element types a metric accepts: `f32` or `f64` (the trait is sealed).
/// Metrics read values through `Into<f64>` and accumulate in `f64`;
/// comparisons run in the type itself or on its bits.
pub trait Real:
    Copy + Send + Sync + Into<f64> + PartialOrd + std::ops::Add<Output = Self> + LaneBits + 'static
{
    /// 0 in this type.
    const ZERO: Self;
    /// 1 in this type.
    const ONE: Self;
    /// The type's machine epsilon, as `f64`.
    const EPSILON: f64;
    /// `value` rounded to this type (to nearest, as `as` does).
    fn from_f64(value: f64) -> Self;
    /// The next value of this type towards minus infinity (`f32::next_down`).
    fn next_down(self) -> Self;
}

impl Real for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const EPSILON: f64 = f32::EPSILON as f64;
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    fn next_down(self) -> Self {
        f32::next_down(self)
    }
}

impl Real for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    const EPSILON: f64 = f64::EPSILON;
    fn from_f64(value: f64) -> Self {
        value
    }
    fn next_down(self) -> Self {
        f64::next_down(self)
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
    if let Some(values) = row.as_slice().filter(|values| !values.is_empty()) {
        let mut check = EntryCheck::new();
        let top = scan_row(values, &mut check);
        if check.passed() && in_unit_interval(top.value) {
            return Ok((top.index, top.value.into()));
        }
    }
    // Strided rows, and rows the fast scan refused: find the first bad entry.
    checked_top_class(row, row_index)
}

/// [`top_class`] one entry at a time: the reference the fast scan falls back
/// on to name the first bad entry.
fn checked_top_class<T: Real>(row: ArrayView1<'_, T>, row_index: usize) -> Result<(usize, f64)> {
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

/// Calls `visit(row, predicted, confidence)` for every row of `probs` in
/// order, as [`top_class`] would give them, in one pass over the matrix at
/// memory speed; fails with [`top_class`]'s error at the first bad entry.
///
/// Per row, one branch-free pass finds the maximum and its first index
/// (module `row_scan`); on x86-64 CPUs with AVX2 the scan is written in AVX2
/// instructions (the same operations, so the same results). The checks of the other entries
/// (none below 0, none NaN) run lane-wise over a block of rows and are reduced
/// once per block; a block that fails them is scanned again entry by entry to
/// name the first bad one. `visit` therefore only ever sees confidences in
/// `[0, 1]`, but may see rows of a block that is refused afterwards.
pub fn for_each_top_class<T: Real>(
    probs: ArrayView2<'_, T>,
    mut visit: impl FnMut(usize, usize, T) -> Result<()>,
) -> Result<()> {
    let k = probs.ncols();
    let Some(values) = probs.as_slice().filter(|_| k > 0) else {
        for (row, values) in probs.outer_iter().enumerate() {
            let (predicted, _) = checked_top_class(values, row)?;
            visit(row, predicted, values[predicted])?;
        }
        return Ok(());
    };
    scan_blocks(probs, values, &mut visit, row_scanner())
}

/// The pass of [`for_each_top_class`] over the rows of a contiguous `probs`
/// (`values`, its entries in order), each row scanned by `scan_row`.
fn scan_blocks<T: Real>(
    probs: ArrayView2<'_, T>,
    values: &[T],
    visit: &mut impl FnMut(usize, usize, T) -> Result<()>,
    scan_row: fn(&[T], &mut EntryCheck<T>) -> Top<T>,
) -> Result<()> {
    /// Rows per block: a few hundred KB, so a refused block is re-read from cache.
    const BLOCK_ROWS: usize = 512;
    let (n_rows, k) = probs.dim();
    for (block, rows) in values.chunks(BLOCK_ROWS * k).enumerate() {
        let first_row = block * BLOCK_ROWS;
        let mut check = EntryCheck::new();
        for (offset, row) in rows.chunks_exact(k).enumerate() {
            prefetch::ahead(values, (first_row + offset) * k, k);
            let top = first_of_a_zero_row(scan_row(row, &mut check), row);
            if !in_unit_interval(top.value) {
                let row_index = first_row + offset;
                return Err(first_bad_entry(probs, first_row..=row_index)
                    .unwrap_or_else(|| probability_error(row_index, 0, top.value.into())));
            }
            visit(first_row + offset, top.index, top.value)?;
        }
        if !check.passed() {
            let last_row = (first_row + BLOCK_ROWS).min(n_rows) - 1;
            if let Some(error) = first_bad_entry(probs, first_row..=last_row) {
                return Err(error);
            }
        }
    }
    Ok(())
}

/// `top`, unless the row's maximum is zero: then the row's first entry.
///
/// The scan ranks `+0.0` above `-0.0` (their bit patterns differ) where the
/// floats tie, and the entry-by-entry scan keeps the first of equal entries.
/// A block holding `-0.0` fails the lane check but has no bad entry, so the
/// rows it visited stand: in a row of zeros (the only row where `-0.0` can
/// tie with the maximum) the first entry is what [`top_class`] gives.
#[inline(always)]
fn first_of_a_zero_row<T: Real>(top: Top<T>, row: &[T]) -> Top<T> {
    if top.value == T::ZERO {
        Top {
            value: row[0],
            index: 0,
        }
    } else {
        top
    }
}

/// The first entry of `rows` that is NaN or outside `[0, 1]`, as an error.
fn first_bad_entry<T: Real>(
    probs: ArrayView2<'_, T>,
    rows: std::ops::RangeInclusive<usize>,
) -> Option<CalibError> {
    rows.filter_map(|row| checked_top_class(probs.row(row), row).err())
        .next()
}

/// `0 <= value <= 1` (false for NaN).
#[inline]
fn in_unit_interval<T: Real>(value: T) -> bool {
    value >= T::ZERO && value <= T::ONE
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
    // A NaN tolerance would pass every row (no comparison with NaN fails),
    // a negative one none.
    if tolerance.is_nan() || tolerance < 0.0 {
        return Err(CalibError::InvalidArgument(format!(
            "tolerance must be a number >= 0, got {tolerance}"
        )));
    }
    check_not_empty(probs.dim(), "probabilities")?;
    // Bound on how far the lane-wise sum in `T` and the sequential sum in f64
    // below can differ (entries in [0, 1]): a row whose lane-wise sum is
    // nearer the tolerance than this is decided by the sequential sum.
    let margin = (probs.ncols() as f64 + 2.0) * (T::EPSILON + f64::EPSILON) * 2.0;
    let all = probs.as_slice();
    for (row_index, row) in probs.rows().into_iter().enumerate() {
        if let Some(all) = all {
            prefetch::ahead(all, row_index * probs.ncols(), probs.ncols());
        }
        if let Some(values) = row.as_slice() {
            let (entries_valid, sum) = entries_and_sum(values);
            if entries_valid && (sum - 1.0).abs() <= tolerance - margin * sum.max(1.0) {
                continue;
            }
        }
        check_row_sum(row, row_index, tolerance)?;
    }
    Ok(())
}

/// One row of [`validate_probabilities`], entry by entry, the sum in f64.
fn check_row_sum<T: Real>(row: ArrayView1<'_, T>, row_index: usize, tolerance: f64) -> Result<()> {
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
    Ok(())
}

/// Checks an `N x K` logit matrix: at least one row and one column, every entry
/// finite. The error names the first NaN or infinity (in row-major order).
pub fn validate_logits<T: Real>(logits: ArrayView2<'_, T>) -> Result<()> {
    check_not_empty(logits.dim(), "logits")?;
    // Fast path: `0 * v` is 0 for a finite `v` and NaN for an infinity or a
    // NaN, so one lane-wise sum over contiguous entries says whether all are
    // finite; only a matrix that fails is searched for its first bad entry.
    if let Some(values) = logits.as_slice() {
        let mut lanes = [0.0_f64; 8];
        let (groups, tail) = values.as_chunks::<8>();
        for group in groups {
            for lane in 0..8 {
                let v: f64 = group[lane].into();
                lanes[lane] += 0.0 * v;
            }
        }
        for (lane, &v) in tail.iter().enumerate() {
            let v: f64 = v.into();
            lanes[lane] += 0.0 * v;
        }
        if lanes.iter().all(|&lane| lane == 0.0) {
            return Ok(());
        }
    }
    // The first bad entry in row-major order, whatever the memory layout.
    for (row, values) in logits.outer_iter().enumerate() {
        for (col, &value) in values.iter().enumerate() {
            let value: f64 = value.into();
            if !value.is_finite() {
                return Err(CalibError::NonFinite { row, col, value });
            }
        }
    }
    Ok(())
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
    use ndarray::{array, ShapeBuilder};
    use proptest::prelude::*;

    #[test]
    fn softmax_matches_hand_computation() {
        // exp(0), exp(ln 3) over 1 + 3.
        let p = softmax(array![[0.0, 3.0_f64.ln()]].view());
        // <= 4 f64 roundings (libm exp within 1 ulp) of values < 1.4: < 5e-16.
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
        // e^(ln MIN_POSITIVE - 0) is 2.2e-308 up to a few ulps, far below 1e-300.
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
    fn a_nan_or_negative_tolerance_is_refused() {
        // Rows summing to 4.5 would pass a NaN tolerance unchecked.
        let off = array![[0.7, 3.8]];
        for tolerance in [f64::NAN, -1.0] {
            assert!(matches!(
                validate_probabilities(off.view(), tolerance),
                Err(CalibError::InvalidArgument(_))
            ));
        }
        assert!(validate_probabilities(off.view(), f64::INFINITY).is_err());
        assert!(validate_probabilities(array![[0.5, 0.5]].view(), 0.0).is_ok());
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
        fn block_scan_matches_the_entry_by_entry_scan(
            rows in 1usize..1200,
            k in 1usize..40,
            seed in any::<u64>(),
            corrupt in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(-0.1), Just(f64::NAN), Just(1.5), Just(-0.0)]), 0..3),
        ) {
            // Ties (values on a grid of 1/8) and edge values 0 and 1; the
            // corrupt entries (up to two) may sit in any block, also a later one.
            use rand::{Rng, SeedableRng};
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
            let mut probs = Array2::from_shape_fn((rows, k), |_| f64::from(rng.random_range(0..=8u8)) / 8.0);
            for (at, bad) in corrupt {
                let i = at.index(rows * k);
                probs[[i / k, i % k]] = bad;
            }
            // The same matrix in column-major order: strided rows, entry-by-entry path.
            let mut strided = Array2::zeros((rows, k).f());
            strided.assign(&probs);
            let visit_all = |view: ArrayView2<'_, f64>| {
                let mut seen = Vec::new();
                for_each_top_class(view, |row, predicted, confidence| {
                    seen.push((row, predicted, confidence.to_bits()));
                    Ok(())
                }).map(|()| seen)
            };
            // The scan compiled without AVX2 (the fallback on older CPUs).
            let mut portable = Vec::new();
            let portable = scan_blocks(probs.view(), probs.as_slice().unwrap(), &mut |row, predicted, confidence: f64| {
                portable.push((row, predicted, confidence.to_bits()));
                Ok(())
            }, scan_row).map(|()| portable);
            let fast = visit_all(probs.view());
            for other in [visit_all(strided.view()), portable] {
                match (&fast, other) {
                    (Ok(a), Ok(b)) => prop_assert_eq!(a, &b),
                    (Err(a), Err(b)) => prop_assert_eq!(a.to_string(), b.to_string()),
                    (a, b) => prop_assert!(false, "{:?} vs {:?}", a.as_ref().map(|v| v.len()), b.map(|v| v.len())),
                }
            }
            let f32_probs = probs.mapv(|v| v as f32);
            for tolerance in [1e-6, 0.3] {
                let fast = validate_probabilities(f32_probs.view(), tolerance).map_err(|e| e.to_string());
                let reference = f32_probs.rows().into_iter().enumerate()
                    .try_for_each(|(row, values)| check_row_sum(values, row, tolerance))
                    .map_err(|e| e.to_string());
                prop_assert_eq!(fast, reference);
            }
        }

        #[test]
        fn logit_check_names_the_same_entry_contiguous_or_strided(
            rows in 1usize..12,
            k in 1usize..20,
            bad in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(f64::MAX), Just(-f64::MAX)]), 0..3),
        ) {
            // f64::MAX is finite (0 * v = 0): only NaN and the infinities fail.
            let mut logits = Array2::from_shape_fn((rows, k), |(i, j)| (i * k + j) as f64 - 7.5);
            for (at, value) in bad {
                let i = at.index(rows * k);
                logits[[i / k, i % k]] = value;
            }
            let mut strided = Array2::zeros((rows, k).f());
            strided.assign(&logits);
            let fast = validate_logits(logits.view()).map_err(|e| e.to_string());
            let slow = validate_logits(strided.view()).map_err(|e| e.to_string());
            prop_assert_eq!(&fast, &slow);
            prop_assert_eq!(fast.is_ok(), logits.iter().all(|v| v.is_finite()));
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
                // <= 7 quotients (0.5 ulp each) by a sum of <= 7 terms, then a sum of
                // <= 7: < 3 * 7 * 2.2e-16 ~ 5e-15.
                prop_assert!((row.sum() - 1.0).abs() < 1e-12);
            }
        }
    }
}
