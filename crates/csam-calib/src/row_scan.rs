//! The per-row work of the row scans: the largest entry of a contiguous row,
//! the first index that holds it (numpy's `argmax`) and the lane-wise checks of
//! every entry, in one branch-free pass that the compiler vectorises.
//!
//! The entries are read in groups of [`LANES`]. Lane `j` keeps the largest
//! entry it has seen (`v > max` replaces it, so the first of equal entries
//! stays) and the number of the group where it first saw it. Across lanes,
//! the largest value is the row's maximum `m`, and the first index of `m` is
//! the least `group * LANES + j` over the lanes whose maximum equals `m`: each
//! such lane holds the first position of `m` among its own entries. This is
//! the index the entry-by-entry scan finds (`v > best` from the first entry),
//! without a second pass over the row or a branch per entry.
//!
//! The group numbers are kept in the entries' own type, so that the
//! selections run on lanes of one width; they are exact integers as long as
//! the row has fewer than `2 / epsilon` groups (`2^24` for `f32`, over 134
//! million entries); longer rows are scanned entry by entry.

use crate::scores::Real;

/// Lanes of the row scans: wide enough for the compiler to vectorise them.
pub(crate) const LANES: usize = 8;

/// Lane-wise running minimum and sum of the entries scanned: an entry below 0
/// lowers the minimum under 0, a NaN turns the sum NaN (an entry above 1 is
/// caught by the row maximum). Reduced once per block of rows.
pub(crate) struct EntryCheck<T> {
    min: [T; LANES],
    sum: [T; LANES],
}

impl<T: Real> EntryCheck<T> {
    pub(crate) fn new() -> Self {
        EntryCheck {
            min: [T::ZERO; LANES],
            sum: [T::ZERO; LANES],
        }
    }

    /// No entry scanned was below 0 or NaN.
    pub(crate) fn passed(&self) -> bool {
        let min = self
            .min
            .iter()
            .fold(T::ZERO, |a, &b| if b < a { b } else { a });
        min >= T::ZERO && !self.sum().is_nan()
    }

    /// The sum of the entries scanned, in `f64`.
    pub(crate) fn sum(&self) -> f64 {
        self.sum.iter().map(|&v| v.into()).sum()
    }

    #[inline(always)]
    fn add(&mut self, lane: usize, v: T) {
        self.min[lane] = if v < self.min[lane] {
            v
        } else {
            self.min[lane]
        };
        self.sum[lane] = self.sum[lane] + v;
    }
}

/// The largest entry of a row and the first index holding it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Top<T> {
    /// `row[index]`; NaN or outside `[0, 1]` when the row is not a row of
    /// probabilities (`index` is then meaningless).
    pub value: T,
    /// The first index of the largest entry (NaN entries are skipped, as
    /// `v > best` skips them).
    pub index: usize,
}

/// The [`Top`] of a non-empty contiguous row; every entry also goes through
/// `check`.
#[inline(always)]
pub(crate) fn scan_row<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    scan::<T, true>(row, check)
}

/// The largest entry of a non-empty contiguous row (NaN entries skipped,
/// unless the first is NaN), without its index: [`scan_row`] less the
/// lanes' positions, for passes that only check entries.
#[inline(always)]
pub(crate) fn scan_max<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> T {
    scan::<T, false>(row, check).value
}

/// [`scan_row`], keeping the positions only if `INDEX` (else the index is 0
/// and the value the maximum, whichever zero it is if that is `+-0`).
#[inline(always)]
fn scan<T: Real, const INDEX: bool>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    let (groups, tail) = row.as_chunks::<LANES>();
    if groups.len() as f64 >= 2.0 / T::EPSILON {
        return scan_entries(row, check);
    }
    let first = row[0];
    let mut max = [first; LANES];
    // The group in which each lane's maximum first appeared (as `T`, exact).
    let mut at = [T::ZERO; LANES];
    let mut group_number = T::ZERO;
    for group in groups {
        for lane in 0..LANES {
            let v = group[lane];
            let greater = v > max[lane];
            max[lane] = if greater { v } else { max[lane] };
            if INDEX {
                at[lane] = if greater { group_number } else { at[lane] };
            }
            check.add(lane, v);
        }
        group_number = group_number + T::ONE;
    }
    for (lane, &v) in tail.iter().enumerate() {
        if v > max[lane] {
            max[lane] = v;
            at[lane] = group_number;
        }
        check.add(lane, v);
    }
    let top = max.iter().fold(first, |a, &b| if b > a { b } else { a });
    if !INDEX {
        return Top {
            value: top,
            index: 0,
        };
    }
    let mut index = usize::MAX;
    for lane in 0..LANES {
        // Through i64: one instruction (the group number is below 2^53).
        let position = (at[lane].into() as i64 as usize) * LANES + lane;
        index = if max[lane] == top {
            index.min(position)
        } else {
            index
        };
    }
    match row.get(index) {
        Some(&value) => Top { value, index },
        // No lane holds `top`: the first entry is NaN (and so is `top`).
        None => Top {
            value: top,
            index: 0,
        },
    }
}

/// [`scan_row`] one entry at a time, for rows too long for exact group numbers.
#[inline(never)]
fn scan_entries<T: Real>(row: &[T], check: &mut EntryCheck<T>) -> Top<T> {
    let mut top = Top {
        value: row[0],
        index: 0,
    };
    for (index, &v) in row.iter().enumerate() {
        if v > top.value {
            top = Top { value: v, index };
        }
        check.add(index % LANES, v);
    }
    top
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The entry-by-entry reference: the first index of the maximum (`v > best`).
    fn reference<T: Real>(row: &[T]) -> Top<T> {
        let mut check = EntryCheck::new();
        scan_entries(row, &mut check)
    }

    fn same<T: Real>(a: Top<T>, b: Top<T>) -> bool {
        let (x, y): (f64, f64) = (a.value.into(), b.value.into());
        a.index == b.index && x.to_bits() == y.to_bits()
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
    fn zeros_of_either_sign_give_the_first_entry() {
        for row in [[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0]] {
            let mut long = row.repeat(11);
            long[30] = -0.0;
            for r in [&row[..], &long[..]] {
                let top = scan_row(r, &mut EntryCheck::new());
                assert!(same(top, reference(r)), "{r:?}");
                assert_eq!(top.index, 0);
            }
        }
    }

    proptest! {
        #[test]
        fn scan_equals_the_entry_by_entry_scan(
            values in prop::collection::vec(prop_oneof![
                (0u8..=8).prop_map(|v| f64::from(v) / 8.0),
                Just(-0.0), Just(f64::NAN), Just(-0.5), Just(1.5),
                0.0..=1.0_f64,
            ], 1..150),
        ) {
            let top = scan_row(&values, &mut EntryCheck::new());
            let expected = reference(&values);
            // A NaN first entry: the scan reports NaN, the index does not matter.
            if values[0].is_nan() {
                prop_assert!(top.value.is_nan());
            } else {
                prop_assert!(same(top, expected), "{:?} vs {:?}", top, expected);
            }
            let narrow: Vec<f32> = values.iter().map(|&v| v as f32).collect();
            let top = scan_row(&narrow, &mut EntryCheck::new());
            if !values[0].is_nan() {
                prop_assert!(same(top, reference(&narrow)));
            }
            // The checks see every entry once, in either scan.
            let (mut a, mut b) = (EntryCheck::new(), EntryCheck::new());
            scan_row(&values, &mut a);
            scan_entries(&values, &mut b);
            prop_assert_eq!(a.passed(), b.passed());
            prop_assert_eq!(a.passed(), values.iter().all(|v| (0.0..).contains(v)));
        }
    }
}
