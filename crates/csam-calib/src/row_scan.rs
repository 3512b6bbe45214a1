//! The per-row work of the row scans: the largest entry of a contiguous row,
//! the first index that holds it (numpy's `argmax`) and the lane-wise checks of
//! every entry, in one branch-free pass that the compiler vectorises.
//!
//! The scan compares the entries' bit patterns as signed integers
//! ([`LaneBits`]) instead of the floats: for floats in `[0, 1]` other than
//! `-0.0` the integer order is the float order, and an integer maximum is one
//! single-cycle instruction where a float maximum or sum waits four cycles
//! for the previous one. Every entry outside that range shows in the bits:
//! a negative entry (`-0.0` and negative NaNs included) has a negative
//! pattern, which the lane-wise minimum of [`EntryCheck`] catches; an entry
//! above 1 (infinity and positive NaNs included) has a pattern above 1's, so
//! it is the row's maximum, which callers check to lie in `[0, 1]`. A row
//! that passes both is therefore a row of probabilities and its maximum and
//! index are those of the floats; a row that fails is handed to the
//! entry-by-entry check, which also accepts `-0.0`.
//!
//! The entries are read in groups of [`LANES`]. Lane `j` keeps the largest
//! pattern it has seen (`v > max` replaces it, so the first of equal entries
//! stays) and the number of the group where it first saw it. Across lanes,
//! the largest value is the row's maximum `m`, and the first index of `m` is
//! the least `group * LANES + j` over the lanes whose maximum equals `m`: each
//! such lane holds the first position of `m` among its own entries. This is
//! the index the entry-by-entry scan finds (`v > best` from the first entry),
//! without a second pass over the row or a branch per entry.

#[cfg(target_arch = "x86_64")]
mod avx2;

use crate::radix::{self, RadixKey};
use crate::scores::Real;

/// Lanes of the row scans: wide enough for the compiler to vectorise them.
pub(crate) const LANES: usize = 8;

/// The bit pattern of a float as a signed integer of its width, the unit of
/// the row scans. Implemented for `f32` and `f64` only (it seals [`Real`]).
pub trait LaneBits: Copy {
    /// `i32` for `f32`, `i64` for `f64`.
    type Bits: Copy + Ord + std::fmt::Debug + std::ops::Add<Output = Self::Bits>;
    /// The pattern of `0.0`, and the integer 0.
    const ZERO_BITS: Self::Bits;
    /// The largest integer of the type.
    const MAX_INT: Self::Bits;
    /// The pattern of `self`, reinterpreted as signed.
    fn lane_bits(self) -> Self::Bits;
    /// The float of a pattern.
    fn from_lane_bits(bits: Self::Bits) -> Self;
    /// The radix-sort key of the type's width (`u32` for `f32`).
    type Key: RadixKey;
    /// The key whose unsigned order is the float's total order
    /// ([`radix::order_key`]), in the type's width.
    fn order_key(self) -> Self::Key;
    /// [`scan_row`] in AVX2 instructions (module `avx2`).
    ///
    /// # Safety
    /// The CPU must run AVX2 instructions.
    #[cfg(target_arch = "x86_64")]
    unsafe fn scan_row_avx2(row: &[Self], check: &mut EntryCheck<Self>) -> Top<Self>;
    /// A position in a row as an integer of the type (wrapping past
    /// [`MAX_INT`](Self::MAX_INT), which callers rule out).
    fn int(position: usize) -> Self::Bits;
    /// The position back.
    fn position(int: Self::Bits) -> usize;
}

/// `LaneBits` for a float type: its signed and unsigned integers of the same
/// width, its order key and its AVX2 scan.
macro_rules! lane_bits {
    ($float:ty, $signed:ty, $unsigned:ty, $order_key:path, $scan_avx2:path) => {
        impl LaneBits for $float {
            type Bits = $signed;
            const ZERO_BITS: $signed = 0;
            const MAX_INT: $signed = <$signed>::MAX;
            #[inline(always)]
            fn lane_bits(self) -> $signed {
                self.to_bits() as $signed
            }
            #[inline(always)]
            fn from_lane_bits(bits: $signed) -> Self {
                <$float>::from_bits(bits as $unsigned)
            }
            type Key = $unsigned;
            #[inline(always)]
            fn order_key(self) -> $unsigned {
                $order_key(self)
            }
            #[cfg(target_arch = "x86_64")]
            unsafe fn scan_row_avx2(row: &[Self], check: &mut EntryCheck<Self>) -> Top<Self> {
                // SAFETY: the caller's contract.
                unsafe { $scan_avx2(row, check) }
            }
            #[inline(always)]
            fn int(position: usize) -> $signed {
                position as $signed
            }
            #[inline(always)]
            fn position(int: $signed) -> usize {
                int as usize
            }
        }
    };
}

lane_bits!(f32, i32, u32, radix::order_key_f32, avx2::scan_f32);
lane_bits!(f64, i64, u64, radix::order_key, avx2::scan_f64);

/// Lane-wise running minimum of the patterns scanned: a negative entry, `-0.0`
/// or a negative NaN turns it negative (an entry above 1 or a positive NaN is
/// caught by the row maximum). Reduced once per block of rows.
pub struct EntryCheck<T: LaneBits> {
    min: [T::Bits; LANES],
}

impl<T: LaneBits> EntryCheck<T> {
    pub(crate) fn new() -> Self {
        EntryCheck {
            min: [T::ZERO_BITS; LANES],
        }
    }

    /// No entry scanned had a negative pattern: none was below 0, `-0.0` or
    /// a negative NaN.
    pub(crate) fn passed(&self) -> bool {
        self.min.iter().all(|&m| m >= T::ZERO_BITS)
    }

    #[inline(always)]
    fn add(&mut self, lane: usize, bits: T::Bits) {
        self.min[lane] = self.min[lane].min(bits);
    }
}

/// The largest entry of a row and the first index holding it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Top<T> {
    /// `row[index]`; outside `[0, 1]` (NaN included) when an entry of the row
    /// is above 1 or NaN.
    pub value: T,
    /// The first index of the largest entry.
    pub index: usize,
}

/// The [`Top`] of a non-empty contiguous row; every entry also goes through
/// `check`. Equal to the entry-by-entry scan's whenever `check` passes and
/// the value lies in `[0, 1]`.
#[inline(always)]
pub(crate) fn scan_row<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    scan(row, check)
}

/// A function pointer to [`scan_row`] in the widest instructions this CPU
/// runs: AVX2 on x86-64 CPUs that have it (module `avx2`; the same
/// operations on the same lanes, so the same result), else the portable
/// scan, compiled as a function of its own.
pub(crate) fn row_scanner<T: Real>() -> fn(&[T], &mut EntryCheck<T>) -> Top<T> {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        return scan_row_avx2_present;
    }
    scan_row_portable
}

/// [`scan_row`] for the baseline instruction set, not inlined.
#[inline(never)]
pub(crate) fn scan_row_portable<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    scan_row(row, check)
}

/// The AVX2 scan. Only [`row_scanner`] hands it out, and only after finding
/// AVX2 on the CPU.
#[cfg(target_arch = "x86_64")]
fn scan_row_avx2_present<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    // SAFETY: `row_scanner` returns this function only when the CPU has AVX2.
    unsafe { T::scan_row_avx2(row, check) }
}

/// The row-sum check's pass over a non-empty contiguous row: whether every
/// entry lies in `[0, 1]` (`-0.0` among them),
/// and the row's sum. It runs on the floats: their lane-wise maximum,
/// minimum and sum are single instructions in every x86-64 build (integer
/// ones on 32-bit lanes need SSE4.1). A NaN entry turns the sum NaN. The sum
/// is added lane-wise in `T` (group by group, the tail into the first lanes)
/// and the lanes then in `f64`: within `(len + 2) * 2 * (T::EPSILON +
/// f64::EPSILON)` of the exact sum for entries in `[0, 1]`.
#[inline(always)]
pub(crate) fn entries_and_sum<T: Real>(row: &[T]) -> (bool, f64) {
    let (groups, tail) = row.as_chunks::<LANES>();
    let mut lanes = SumLanes {
        max: [row[0]; LANES],
        min: [T::ZERO; LANES],
        sum: [T::ZERO; LANES],
    };
    for group in groups {
        for (lane, &v) in group.iter().enumerate() {
            lanes.add(lane, v);
        }
    }
    for (lane, &v) in tail.iter().enumerate() {
        lanes.add(lane, v);
    }
    let SumLanes { max, min, sum } = lanes;
    let sum: f64 = sum.iter().map(|&v| v.into()).sum();
    let in_range = max.iter().all(|&v| v <= T::ONE) && min.iter().all(|&v| v >= T::ZERO);
    (in_range && !sum.is_nan(), sum)
}

/// The lanes of [`entries_and_sum`].
struct SumLanes<T> {
    max: [T; LANES],
    min: [T; LANES],
    sum: [T; LANES],
}

impl<T: Real> SumLanes<T> {
    #[inline(always)]
    fn add(&mut self, lane: usize, v: T) {
        self.max[lane] = if v > self.max[lane] {
            v
        } else {
            self.max[lane]
        };
        self.min[lane] = if v < self.min[lane] {
            v
        } else {
            self.min[lane]
        };
        self.sum[lane] = self.sum[lane] + v;
    }
}

/// [`scan_row`].
#[inline(always)]
fn scan<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    let (groups, tail) = row.as_chunks::<LANES>();
    // Positions are kept in the patterns' integer type.
    if row.len() < LANES || row.len() > T::position(T::MAX_INT) {
        return scan_entries(row, check);
    }
    let first = row[0].lane_bits();
    let mut max = [first; LANES];
    // Where each lane's maximum first appeared.
    let mut at = [T::ZERO_BITS; LANES];
    let mut positions: [T::Bits; LANES] = std::array::from_fn(T::int);
    let step = T::int(LANES);
    for group in groups {
        scan_group(group, positions, &mut max, &mut at, check);
        positions = positions.map(|p| p + step);
    }
    if !tail.is_empty() {
        // The last `LANES` entries, which overlap the groups: an entry seen
        // again in another lane changes no result (a lane takes it only if it
        // is above that lane's maximum, with its own position, and the first
        // position of the row's maximum stays the least one holding it).
        // Scanning the tail entry by entry instead would take the lanes out
        // of their register.
        let start = row.len() - LANES;
        if let Some(window) = row[start..].first_chunk::<LANES>() {
            let positions = std::array::from_fn(|lane| T::int(start + lane));
            scan_group(window, positions, &mut max, &mut at, check);
        }
    }
    let top = fold_halves(max, |a, b| a.max(b));
    let value = T::from_lane_bits(top);
    let candidates = std::array::from_fn(|lane| {
        if max[lane] == top {
            at[lane]
        } else {
            T::MAX_INT
        }
    });
    Top {
        value,
        index: T::position(fold_halves(candidates, |a, b| a.min(b))),
    }
}

/// Reduces the lanes pairwise, halves at a time (`LANES / 2` pairs, then
/// half as many): the shape the compiler turns into vector shuffles.
#[inline(always)]
fn fold_halves<B: Copy>(mut lanes: [B; LANES], combine: impl Fn(B, B) -> B) -> B {
    let mut width = LANES / 2;
    while width > 0 {
        for lane in 0..width {
            lanes[lane] = combine(lanes[lane], lanes[lane + width]);
        }
        width /= 2;
    }
    lanes[0]
}

/// One group of a row: each lane's maximum pattern, the position where it
/// was first seen, and the check.
#[inline(always)]
fn scan_group<T: Real>(
    group: &[T; LANES],
    positions: [T::Bits; LANES],
    max: &mut [T::Bits; LANES],
    at: &mut [T::Bits; LANES],
    check: &mut EntryCheck<T>,
) {
    for lane in 0..LANES {
        let v = group[lane].lane_bits();
        let greater = v > max[lane];
        max[lane] = if greater { v } else { max[lane] };
        at[lane] = if greater { positions[lane] } else { at[lane] };
        check.add(lane, v);
    }
}

/// [`scan_row`] one entry at a time, for rows shorter than [`LANES`] and rows
/// longer than the patterns' integers can number.
#[inline(never)]
fn scan_entries<T: LaneBits>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    let mut top = Top {
        value: row[0],
        index: 0,
    };
    for (index, &v) in row.iter().enumerate() {
        if v.lane_bits() > top.value.lane_bits() {
            top = Top { value: v, index };
        }
        check.add(index % LANES, v.lane_bits());
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The entry-by-entry reference on the floats: the first index of the
    /// maximum (`v > best`), and whether every entry lies in `[0, 1]`.
    fn reference<T: Real>(row: &[T]) -> (Top<T>, bool) {
        let mut top = Top {
            value: row[0],
            index: 0,
        };
        for (index, &v) in row.iter().enumerate() {
            if v > top.value {
                top = Top { value: v, index };
            }
        }
        let valid = row.iter().all(|&v| v >= T::ZERO && v <= T::ONE);
        (top, valid)
    }

    fn same<T: Real>(a: Top<T>, b: Top<T>) -> bool {
        let (x, y): (f64, f64) = (a.value.into(), b.value.into());
        a.index == b.index && x.to_bits() == y.to_bits()
    }

    /// The scan's verdict: the row passed the lane checks and its maximum
    /// lies in `[0, 1]`.
    fn accepted<T: Real>(top: Top<T>, check: &EntryCheck<T>) -> bool {
        check.passed() && top.value >= T::ZERO && top.value <= T::ONE
    }

    #[test]
    fn ties_keep_the_first_index_in_any_lane() {
        // The maximum in lane 3 of group 2 and in lane 1 of group 4, then
        // also in lane 6 of group 1.
        let mut row = vec![0.25_f32; 6 * LANES];
        row[2 * LANES + 3] = 0.5;
        row[4 * LANES + 1] = 0.5;
        let top = scan_row(&row, &mut EntryCheck::new());
        assert_eq!((top.index, top.value), (2 * LANES + 3, 0.5));
        row[LANES + 6] = 0.5;
        assert_eq!(scan_row(&row, &mut EntryCheck::new()).index, LANES + 6);
        // All equal: index 0; in the tail only: its first position.
        let top = scan_row(&[0.5_f64; 37], &mut EntryCheck::new());
        assert_eq!(top.index, 0);
        let mut row = vec![0.0_f64; 37];
        row[35] = 1.0;
        row[33] = 1.0;
        assert_eq!(scan_row(&row, &mut EntryCheck::new()).index, 33);
    }

    #[test]
    fn every_kind_of_bad_entry_is_caught() {
        let bad_f32 = [
            -0.25,
            -0.0,
            1.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
        ];
        for scan in [scan_row_portable, row_scanner::<f32>()] {
            for bad in bad_f32 {
                for at in [0, 5, 17, 36] {
                    let mut row = vec![0.25_f32; 37];
                    row[at] = bad;
                    let mut check = EntryCheck::new();
                    let top = scan(&row, &mut check);
                    assert!(!accepted(top, &check), "{bad} at {at}");
                }
            }
        }
        for scan in [scan_row_portable, row_scanner::<f64>()] {
            for at in [0, 3, 12, 19] {
                let mut row = vec![0.5_f64; 20];
                row[at] = -f64::NAN;
                let mut check = EntryCheck::new();
                assert!(!accepted(scan(&row, &mut check), &check), "at {at}");
            }
        }
    }

    proptest! {
        #[test]
        fn scan_equals_the_entry_by_entry_scan(
            mut values in prop::collection::vec(prop_oneof![
                // Few distinct values, so that the maximum is often tied.
                (0u8..=8).prop_map(|v| f64::from(v) / 8.0),
                0.0..=1.0_f64,
            ], 1..150),
            bad in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![
                Just(-0.0), Just(f64::NAN), Just(-f64::NAN), Just(-0.5), Just(1.5),
                Just(f64::INFINITY),
            ]), 0..3),
        ) {
            let len = values.len();
            for (at, value) in bad {
                values[at.index(len)] = value;
            }
            // Accepted rows are rows of probabilities, with the reference's
            // maximum and index; rows of probabilities are accepted unless
            // they hold a `-0.0` (left to the entry-by-entry check). Both
            // scans: the portable one and the one this CPU runs (AVX2 here).
            let has_negative_zero = values.iter().any(|v| v.to_bits() == (-0.0_f64).to_bits());
            let narrow: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            both_scans_agree_with_the_reference(&values, has_negative_zero)?;
            both_scans_agree_with_the_reference(&narrow, has_negative_zero)?;
            // The row-sum check's pass: its verdict on the entries, and the
            // lanes' sum within its stated bound of the sequential one.
            let (entries_valid, sum) = entries_and_sum(&values);
            prop_assert_eq!(entries_valid, reference(&values).1);
            if entries_valid {
                let exact: f64 = values.iter().sum();
                // entries_and_sum's documented bound on |lanes - exact sum|; the
                // sequential reference's own (n - 1) * eps fits in the factor 2 (the
                // lanes' error is <= (n / LANES + LANES) * eps), and a dropped entry
                // moves the sum by far more.
                let bound = (values.len() as f64 + 2.0) * 2.0 * (f64::EPSILON + f64::EPSILON);
                prop_assert!((sum - exact).abs() <= bound * exact.max(1.0));
            }
            // The entry-by-entry scan of very long rows agrees with the lanes.
            let (mut a, mut b) = (EntryCheck::new(), EntryCheck::new());
            let lanes = scan_row(&values, &mut a);
            let entries = scan_entries(&values, &mut b);
            prop_assert_eq!(a.passed(), b.passed());
            if accepted(lanes, &a) {
                prop_assert!(same(lanes, entries));
            }
        }
    }

    /// The portable scan and the one this CPU runs (AVX2 here) accept
    /// exactly the rows of probabilities without a `-0.0`, with the
    /// reference's maximum and index.
    fn both_scans_agree_with_the_reference<T: Real + std::fmt::Debug>(
        row: &[T],
        has_negative_zero: bool,
    ) -> Result<(), TestCaseError> {
        let (expected, valid) = reference(row);
        for scan in [scan_row_portable, row_scanner::<T>()] {
            let mut check = EntryCheck::new();
            let top = scan(row, &mut check);
            prop_assert_eq!(accepted(top, &check), valid && !has_negative_zero);
            if accepted(top, &check) {
                prop_assert!(same(top, expected), "{:?} vs {:?}", top, expected);
            }
        }
        Ok(())
    }
}
