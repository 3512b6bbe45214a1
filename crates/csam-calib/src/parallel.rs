//! Splitting a metric's pass over the rows of a prediction matrix across
//! threads (scoped standard-library threads, no pool).
//!
//! The rows are cut into `min(threads, N)` contiguous chunks, sized as
//! numpy's `array_split` (the first `N mod t` one row longer), so the cut
//! depends only on `N` and the thread count. Each chunk is reduced to a
//! partial result on its own thread; the partials are merged in chunk order
//! on the calling thread. What this guarantees:
//!
//! * the same input and thread count give the same bits, however the threads
//!   are scheduled;
//! * one thread is the sequential pass itself (no thread is started);
//! * integer parts (counts, hits, sorted keys) are the same for any thread
//!   count, so results that depend only on them or on sorted keys (AdaECE,
//!   the misclassification AUROC) have the same bits for any thread count;
//! * a float sum over rows becomes, with `t` threads, the sum of `t` partial
//!   sums, each in row order: equal-width ECE and classwise ECE can move in
//!   the last bits between thread counts (tested within `1e-12`).
//!
//! A chunk that fails (a NaN, say) makes the whole pass run again on one
//! thread, so the error names the same first bad entry as the sequential pass.

use std::num::NonZeroUsize;
use std::ops::Range;

use ndarray::{s, ArrayView2};

use crate::error::{CalibError, Result};
use crate::scores::Real;

/// How many threads a metric may use for its pass over the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Threads(NonZeroUsize);

impl Threads {
    /// One thread: the sequential pass.
    pub const ONE: Threads = Threads(NonZeroUsize::MIN);

    /// `n` threads; fails for 0.
    pub fn new(n: usize) -> Result<Self> {
        NonZeroUsize::new(n).map(Threads).ok_or_else(|| {
            CalibError::InvalidArgument("the thread count must be at least 1".into())
        })
    }

    /// As many threads as the machine offers to this process
    /// ([`std::thread::available_parallelism`]), one if that is unknown.
    pub fn available() -> Self {
        Threads(std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN))
    }

    /// The thread count.
    pub fn get(self) -> usize {
        self.0.get()
    }
}

impl Default for Threads {
    /// [`Threads::ONE`].
    fn default() -> Self {
        Threads::ONE
    }
}

/// The contiguous row ranges of `n_rows` rows for `threads` threads (see the
/// module documentation); one range, possibly empty, when `n_rows <= 1`.
fn row_chunks(n_rows: usize, threads: Threads) -> Vec<Range<usize>> {
    let chunks = threads.get().min(n_rows).max(1);
    let (base, extra) = (n_rows / chunks, n_rows % chunks);
    let mut start = 0;
    (0..chunks)
        .map(|chunk| {
            let end = start + base + usize::from(chunk < extra);
            let range = start..end;
            start = end;
            range
        })
        .collect()
}

/// `pass` over contiguous row chunks of `probs` (with their labels), one per
/// thread, the partials folded in chunk order by `merge`. With one chunk this
/// is `pass(probs, labels)`. A failing chunk makes the result that of
/// `pass(probs, labels)`, so errors are those of the sequential pass.
/// `labels` must have one entry per row.
pub(crate) fn fold_rows<T, A, P, M>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    threads: Threads,
    pass: P,
    merge: M,
) -> Result<A>
where
    T: Real,
    A: Send,
    P: Fn(ArrayView2<'_, T>, &[usize]) -> Result<A> + Sync,
    M: Fn(A, A) -> A,
{
    let chunks = row_chunks(probs.nrows(), threads);
    if chunks.len() == 1 {
        return pass(probs, labels);
    }
    let run = |rows: &Range<usize>| pass(probs.slice(s![rows.clone(), ..]), &labels[rows.clone()]);
    let partials: Vec<Result<A>> = std::thread::scope(|scope| {
        let spawned: Vec<_> = chunks[1..]
            .iter()
            .map(|rows| scope.spawn(move || run(rows)))
            .collect();
        let first = run(&chunks[0]);
        std::iter::once(first)
            .chain(spawned.into_iter().map(|handle| {
                handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }))
            .collect()
    });
    let mut merged = None;
    for partial in partials {
        let Ok(partial) = partial else {
            return pass(probs, labels);
        };
        merged = Some(match merged {
            None => partial,
            Some(earlier) => merge(earlier, partial),
        });
    }
    merged.map_or_else(|| pass(probs, labels), Ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::{AdaptiveVariant, BinStats, Binning, EdgeConvention, Norm};
    use crate::metrics::test_support::mixed_entries;
    use crate::metrics::{
        calibration_error::par_classwise_bin_stats, par_auroc_misclassification, par_ece,
        par_reliability_diagram,
    };
    use proptest::prelude::*;

    /// Counts and hits equal, sums within `1e-12` (relative to the count).
    /// Two orders of summing `c <= 300` confidences in `[0, 1]` differ by at most
    /// `2 * c * eps * c <= c * 1.4e-13` (f64 eps = 2.2e-16), below `1e-12 * c`.
    fn close(a: &BinStats, b: &BinStats) -> bool {
        a.n_samples == b.n_samples
            && a.bins.len() == b.bins.len()
            && a.bins.iter().zip(&b.bins).all(|(x, y)| {
                (x.lo, x.hi, x.count, x.hits) == (y.lo, y.hi, y.count, y.hits)
                    && (x.sum_confidence - y.sum_confidence).abs() <= 1e-12 * x.count.max(1) as f64
            })
    }

    /// The outcome of a metric as comparable text: the value's bits, or the error.
    fn bits<V: std::fmt::Debug>(result: Result<V>) -> String {
        match result {
            Ok(value) => format!("{value:?}"),
            Err(error) => format!("error: {error}"),
        }
    }

    #[test]
    fn chunks_cover_the_rows_in_order_like_array_split() {
        for n_rows in 0..40 {
            for threads in 1..10 {
                let chunks = row_chunks(n_rows, Threads::new(threads).unwrap());
                assert_eq!(chunks.len(), threads.min(n_rows).max(1));
                assert_eq!(chunks[0].start, 0);
                assert_eq!(chunks.last().map(|c| c.end), Some(n_rows));
                for pair in chunks.windows(2) {
                    assert_eq!(pair[0].end, pair[1].start);
                    assert!(pair[0].len() >= pair[1].len());
                    assert!(pair[0].len() - pair[1].len() <= 1);
                }
            }
        }
        assert!(Threads::new(0).is_err());
    }

    proptest! {
        #[test]
        fn threaded_metrics_equal_the_sequential_ones(
            rows in prop_oneof![1usize..8, 1usize..300],
            k in 1usize..24,
            seed in any::<u64>(),
            left in any::<bool>(),
            corrupt in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(f64::NAN), Just(-0.5), Just(1.5)]), 0..2),
        ) {
            // Ties on a grid of 1/30, 0, -0.0, 1, bin edges and their
            // neighbours; sometimes a bad entry (the errors must agree too).
            let probs = mixed_entries(rows, k, 15, seed, &corrupt).mapv(|v| v as f32);
            let labels: Vec<usize> = (0..rows).map(|row| (row * 5 + seed as usize % 7) % k).collect();
            let (p, y) = (probs.view(), &labels[..]);
            let edges = if left { EdgeConvention::LeftClosedWithOneBin } else { EdgeConvention::RightClosed };
            let width = Binning::EqualWidth { n_bins: 15, edges };
            let masses = [AdaptiveVariant::Interpolated, AdaptiveVariant::Chunked]
                .map(|variant| Binning::EqualMass { n_bins: 15, variant });
            let one = Threads::ONE;
            for threads in [1, 2, 3, 7].map(|t| Threads::new(t).unwrap()) {
                // Sorted keys and integer counts: the same bits for any thread count.
                for mass in &masses {
                    prop_assert_eq!(bits(par_reliability_diagram(p, y, mass, threads)), bits(par_reliability_diagram(p, y, mass, one)));
                    prop_assert_eq!(bits(par_classwise_bin_stats(p, y, mass, threads)), bits(par_classwise_bin_stats(p, y, mass, one)));
                }
                prop_assert_eq!(bits(par_auroc_misclassification(p, y, threads)), bits(par_auroc_misclassification(p, y, one)));
                // Equal-width sums: partial sums per chunk, within 1e-12.
                match (par_reliability_diagram(p, y, &width, threads), par_reliability_diagram(p, y, &width, one)) {
                    (Ok(a), Ok(b)) => {
                        prop_assert!(close(&a, &b), "{:?} vs {:?}", a, b);
                        for norm in [Norm::L1, Norm::L2, Norm::Max] {
                            let (x, z) = (a.calibration_error(norm), b.calibration_error(norm));
                            // Each bin's mean confidence moves by <= 2 * 300 * eps ~ 1.4e-13
                            // (see `close`), so each norm of the gaps moves by no more.
                            prop_assert!((x - z).abs() <= 1e-12, "{} vs {}", x, z);
                        }
                    }
                    (a, b) => prop_assert_eq!(bits(a), bits(b)),
                }
                match (par_classwise_bin_stats(p, y, &width, threads), par_classwise_bin_stats(p, y, &width, one)) {
                    (Ok(a), Ok(b)) => prop_assert!(a.iter().zip(&b).all(|(a, b)| close(a, b))),
                    (a, b) => prop_assert_eq!(bits(a), bits(b)),
                }
                // Twice the same thread count: the same bits.
                prop_assert_eq!(bits(par_ece(p, y, &width, Norm::L1, threads)), bits(par_ece(p, y, &width, Norm::L1, threads)));
            }
        }
    }
}
