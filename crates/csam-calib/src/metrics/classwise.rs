//! The equal-width bins of classwise ECE, all classes in one pass over the
//! matrix: per class `k` the bins of `p_k` with hit `y = k`.
//!
//! The bins are flat `bin x class` arrays (100 classes and 16 bins take
//! 12.8 KB per array, in the L1 cache), filled row by row. Most entries of a
//! row of `K` probabilities lie in the first bin (a row summing to 1 has
//! fewer than `M` entries above `1/M`), so the first bin is filled without a
//! branch or a scattered add: two comparisons in the entries' own type
//! against [`first_bin_in`] decide membership, and the entry, or zero, is
//! added to its class's first-bin sum. The first bin's count is not kept per
//! entry: it is the number of rows less the entries of the class that took
//! the scalar path. Those, the entries outside the first bin, are found by
//! scanning again the groups of [`LANES`] entries that hold any (one flag per
//! group), and go through the range check, the bin index and a scattered add.
//!
//! At the baseline x86-64 target (SSE2) the compiler turns the first-bin loop
//! into branch-free scalar code for groups of 8; for groups of 16 it
//! vectorises it, but the `f32` to `f64` widening and mask shuffles made that
//! slower (3.2x the benchmark's read-only pass against 3.1x, measured before
//! the rows were prefetched), and groups of 4 slower still (3.4x).
//!
//! Each `(bin, class)` sum still adds its entries in row order, and adding
//! `+0.0` to a sum that is never `-0.0` changes no bit, so the statistics are
//! those of one [`crate::binning::BinCollector`] per class, to the bit
//! (tested), and the first bad entry is found in row-major order.

use ndarray::ArrayView2;

use crate::binning::{BinStats, EqualWidthIndex};
use crate::error::Result;
use crate::prefetch;
use crate::scores::{probability_error, Real};

/// Entries per group of the first-bin pass (see the module documentation).
const LANES: usize = 8;

/// Per `(bin, class)` count, sum of `p_k` and hits of a block of rows.
#[derive(Debug, Clone)]
pub(super) struct ClasswiseBins {
    n_classes: usize,
    /// `bin x class`; the first bin's counts exclude the contiguous rows,
    /// whose first-bin counts are `fast_rows - others[class]`.
    counts: Vec<usize>,
    sums: Vec<f64>,
    hits: Vec<usize>,
    /// Rows read by the first-bin pass.
    fast_rows: usize,
    /// Per class, the entries of those rows that took the scalar path.
    others: Vec<usize>,
}

impl ClasswiseBins {
    /// The bins of the rows of `probs` (whose labels are `labels`), or the
    /// error naming the first entry (row-major) that is NaN or outside `[0, 1]`.
    pub(super) fn of_rows<T: Real>(
        probs: ArrayView2<'_, T>,
        labels: &[usize],
        index: &EqualWidthIndex,
    ) -> Result<Self> {
        let n_classes = probs.ncols();
        let n_bins = index.empty_bins().len();
        let mut bins = ClasswiseBins {
            n_classes,
            counts: vec![0; n_bins * n_classes],
            sums: vec![0.0; n_bins * n_classes],
            hits: vec![0; n_bins * n_classes],
            fast_rows: 0,
            others: vec![0; n_classes],
        };
        let first_bin = first_bin_in(index);
        let all = probs.as_slice();
        for (row, (values, &label)) in probs.outer_iter().zip(labels).enumerate() {
            if let Some(all) = all {
                prefetch::ahead(all, row * n_classes, n_classes);
            }
            match values.as_slice() {
                Some(values) => bins.add_row(values, row, index, first_bin)?,
                None => {
                    for (class, &value) in values.iter().enumerate() {
                        bins.add_entry(row, class, value.into(), index)?;
                    }
                }
            }
            if let Some(bin) = index.of(values[label].into()) {
                bins.hits[bin * n_classes + label] += 1;
            }
        }
        Ok(bins)
    }

    /// One contiguous row: the first-bin pass group by group, each group
    /// that holds other entries scanned again for them.
    #[inline]
    fn add_row<T: Real>(
        &mut self,
        values: &[T],
        row: usize,
        index: &EqualWidthIndex,
        first_bin: (T, T),
    ) -> Result<()> {
        self.fast_rows += 1;
        let n_classes = values.len();
        let (groups, tail) = values.as_chunks::<LANES>();
        for (group, entries) in groups.iter().enumerate() {
            let sums = &mut self.sums[..n_classes].as_chunks_mut::<LANES>().0[group];
            if add_first_bin(entries, sums, first_bin) {
                self.add_others(entries, group * LANES, row, index, first_bin)?;
            }
        }
        let start = n_classes - tail.len();
        if add_first_bin(tail, &mut self.sums[start..n_classes], first_bin) {
            self.add_others(tail, start, row, index, first_bin)?;
        }
        Ok(())
    }

    /// The entries of `values` (classes `start..`) outside the first bin, by
    /// the scalar path.
    fn add_others<T: Real>(
        &mut self,
        values: &[T],
        start: usize,
        row: usize,
        index: &EqualWidthIndex,
        first_bin: (T, T),
    ) -> Result<()> {
        for (class, &value) in (start..).zip(values) {
            if !in_first_bin(value, first_bin) {
                self.others[class] += 1;
                self.add_entry(row, class, value.into(), index)?;
            }
        }
        Ok(())
    }

    /// Adds the bins of the rows that follow this block's: counts and hits
    /// add exactly, each sum becomes `self + later`.
    pub(super) fn merge(mut self, later: ClasswiseBins) -> Self {
        for (a, b) in self.counts.iter_mut().zip(&later.counts) {
            *a += b;
        }
        for (a, b) in self.sums.iter_mut().zip(&later.sums) {
            *a += b;
        }
        for (a, b) in self.hits.iter_mut().zip(&later.hits) {
            *a += b;
        }
        for (a, b) in self.others.iter_mut().zip(&later.others) {
            *a += b;
        }
        self.fast_rows += later.fast_rows;
        self
    }

    /// One [`BinStats`] per class, every sample counted in `n_samples`.
    pub(super) fn into_stats(self, index: &EqualWidthIndex, n_samples: usize) -> Vec<BinStats> {
        let template = index.empty_bins();
        (0..self.n_classes)
            .map(|class| {
                let mut bins = template.clone();
                for (b, bin) in bins.iter_mut().enumerate() {
                    let at = b * self.n_classes + class;
                    bin.count = self.counts[at];
                    if b == 0 {
                        bin.count += self.fast_rows - self.others[class];
                    }
                    bin.sum_confidence = self.sums[at];
                    bin.hits = self.hits[at];
                }
                BinStats { bins, n_samples }
            })
            .collect()
    }

    /// One entry by the scalar path: checked, binned, added.
    #[inline]
    fn add_entry(
        &mut self,
        row: usize,
        class: usize,
        value: f64,
        index: &EqualWidthIndex,
    ) -> Result<()> {
        if !(0.0..=1.0).contains(&value) {
            return Err(probability_error(row, class, value));
        }
        if let Some(bin) = index.of(value) {
            let at = bin * self.n_classes + class;
            self.counts[at] += 1;
            self.sums[at] += value;
        }
        Ok(())
    }
}

/// Adds every entry of `values` that lies in the first bin (see
/// [`in_first_bin`]) to its class's sum, without a branch; returns whether
/// any entry lies outside it (NaN and out-of-range entries among them).
#[inline(always)]
fn add_first_bin<T: Real>(values: &[T], sums: &mut [f64], first_bin: (T, T)) -> bool {
    let mut others = false;
    for (&value, sum) in values.iter().zip(sums) {
        let first = in_first_bin(value, first_bin);
        *sum += (if first { value } else { T::ZERO }).into();
        others |= !first;
    }
    others
}

/// `lo < value <= hi`: `value` lies in the first bin, given the bounds of
/// [`first_bin_in`]. False for NaN.
#[inline(always)]
fn in_first_bin<T: Real>(value: T, (lo, hi): (T, T)) -> bool {
    (lo < value) & (value <= hi)
}

/// The first bin of `index` as bounds in `T`: an entry `x` of type `T` lies
/// in it exactly when `lo < x <= hi`, with `lo` the largest `T` not above the
/// open lower bound of [`EqualWidthIndex::first_bin`] and `hi` the largest
/// `T` below its open upper bound. Comparing in `T` spares widening every
/// entry to `f64` before the test.
fn first_bin_in<T: Real>(index: &EqualWidthIndex) -> (T, T) {
    let (lo, hi) = index.first_bin();
    let at_most = |bound: f64| {
        let nearest = T::from_f64(bound);
        if nearest.into() > bound {
            nearest.next_down()
        } else {
            nearest
        }
    };
    let below_hi = at_most(hi);
    let below_hi = if below_hi.into() == hi {
        below_hi.next_down()
    } else {
        below_hi
    };
    (at_most(lo), below_hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::{Binning, EdgeConvention};

    /// The bounds in `T` are exact: every `T` next to a bound, and every
    /// representable edge, is in the first bin exactly when the bin index
    /// says so. (Bounds that left out part of the first bin would only send
    /// those entries to the scalar path, which bins them correctly, so that
    /// half guards the speed; bounds that took in more would be wrong, which
    /// the classwise tests against one collector per class also catch.)
    fn first_bin_bounds_are_tight<T: Real>(neighbours: fn(T) -> [T; 3]) {
        for n_bins in 1..60 {
            for edges in [
                EdgeConvention::RightClosed,
                EdgeConvention::LeftClosedWithOneBin,
            ] {
                let binning = Binning::EqualWidth { n_bins, edges };
                let Ok(Some(index)) = EqualWidthIndex::of_binning(&binning) else {
                    panic!("an equal-width scheme has an index");
                };
                let (lo, hi) = first_bin_in::<T>(&index);
                let edge = T::from_f64(1.0 / n_bins as f64);
                for x in [lo, hi, edge, T::ZERO, T::ONE]
                    .into_iter()
                    .flat_map(neighbours)
                {
                    let value: f64 = x.into();
                    if (0.0..=1.0).contains(&value) {
                        let expected = index.of(value) == Some(0);
                        assert_eq!(
                            in_first_bin(x, (lo, hi)),
                            expected,
                            "{value} of {n_bins} {edges:?}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn first_bin_bounds_are_tight_in_f32_and_f64() {
        first_bin_bounds_are_tight::<f32>(|x| [x.next_down(), x, x.next_up()]);
        first_bin_bounds_are_tight::<f64>(|x| [x.next_down(), x, x.next_up()]);
    }
}
