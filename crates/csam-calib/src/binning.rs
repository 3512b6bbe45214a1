//! The one binning implementation behind every binned metric (its edge
//! conventions: crates/csam-calib/README.md, "Metric conventions").
//!
//! A [`Binning`] scheme turns `(score, hit)` pairs into [`BinStats`]: per bin its
//! edges, count, summed score and summed hits. ECE (l1, l2, max), AdaECE,
//! classwise ECE, the reliability diagram and the confidence histogram are all
//! read off `BinStats`; nothing else in the crate bins.
//!
//! * Equal width: `M` bins with edges `k / M` (`k / M` rounded once to `f64`).
//!   The bin of a score is computed directly from `score * M` (then checked
//!   against the exact edges), so building the statistics is one pass, no search.
//! * Equal mass: edges from the sorted scores, `O(N log N)`.
//!
//! A score must lie in `[0, 1]`. Scores that fall in no bin (exactly 0 under
//! [`EdgeConvention::RightClosed`], the smallest score under
//! [`AdaptiveVariant::Interpolated`]) still count in [`BinStats::n_samples`], the
//! denominator of every bin weight, as in the reference code of lineage (a).

use serde::{Deserialize, Serialize};

use crate::error::{CalibError, Result};
use crate::pair_keys::{pair_of, PairKeys};

/// Which side of an equal-width bin is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EdgeConvention {
    /// Bins `(k/M, (k+1)/M]`; a score of exactly 0 falls in no bin. Lineage (a)
    /// (temperature-scaling and focal-loss calibration code), the paper's tables.
    #[default]
    RightClosed,
    /// Bins `[k/M, (k+1)/M)` plus an extra `(M+1)`-th bin holding scores of
    /// exactly 1.0 (the convention of a popular metrics library).
    LeftClosedWithOneBin,
}

/// How equal-mass (adaptive) bin edges are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdaptiveVariant {
    /// Lineage (a): with `s` the `N` sorted scores, edge `j` is `s` linearly
    /// interpolated at position `j * (N / M)` (numpy `interp(linspace(0, N, M+1),
    /// arange(N), s)`; positions past `N - 1` give `s[N-1]`), bins `(lo, hi]`.
    /// The smallest score (and any tie with it) is never counted.
    #[default]
    Interpolated,
    /// `M` chunks of consecutive sorted samples, sizes as numpy's `array_split`
    /// (the first `N mod M` chunks one larger); every sample counted. Samples are
    /// sorted by score, then misses before hits, so the result does not depend on
    /// the input order. Bin edges are the chunk's smallest and largest score.
    Chunked,
}

/// A binning scheme for scores in `[0, 1]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Binning {
    /// `n_bins` bins of width `1 / n_bins`.
    EqualWidth {
        n_bins: usize,
        edges: EdgeConvention,
    },
    /// `n_bins` bins holding (about) the same number of samples.
    EqualMass {
        n_bins: usize,
        variant: AdaptiveVariant,
    },
}

impl Default for Binning {
    /// 15 equal-width bins, right-closed: the paper's ECE.
    fn default() -> Self {
        Binning::EqualWidth {
            n_bins: 15,
            edges: EdgeConvention::RightClosed,
        }
    }
}

impl Binning {
    /// The number of bins the scheme asks for (the extra bin of
    /// [`EdgeConvention::LeftClosedWithOneBin`] not included).
    pub fn n_bins(&self) -> usize {
        match *self {
            Binning::EqualWidth { n_bins, .. } | Binning::EqualMass { n_bins, .. } => n_bins,
        }
    }
}

/// Statistics of one bin: a bar of the reliability diagram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    /// Lower edge.
    pub lo: f64,
    /// Upper edge.
    pub hi: f64,
    /// Number of samples in the bin.
    pub count: usize,
    /// Sum of their scores: confidences, or `p_k` for classwise ECE.
    pub sum_confidence: f64,
    /// Number of hits (correct predictions, or `y = k` for classwise ECE).
    pub hits: usize,
}

impl Bin {
    fn empty(lo: f64, hi: f64) -> Self {
        Bin {
            lo,
            hi,
            count: 0,
            sum_confidence: 0.0,
            hits: 0,
        }
    }

    fn add(&mut self, score: f64, hit: bool) {
        self.count += 1;
        self.sum_confidence += score;
        self.hits += usize::from(hit);
    }

    /// Mean score (confidence, or `p_k` for classwise ECE) of the bin; `None` for an empty bin.
    pub fn mean_confidence(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_confidence / self.count as f64)
    }

    /// Fraction of hits (accuracy) in the bin; `None` for an empty bin.
    pub fn accuracy(&self) -> Option<f64> {
        (self.count > 0).then(|| self.hits as f64 / self.count as f64)
    }

    /// `|accuracy - mean score|`; `None` for an empty bin.
    pub fn gap(&self) -> Option<f64> {
        Some((self.accuracy()? - self.mean_confidence()?).abs())
    }
}

/// How the per-bin gaps are combined into one calibration error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Norm {
    /// `sum_b w_b |acc_b - conf_b|`, the ECE.
    #[default]
    L1,
    /// `sqrt(sum_b w_b (acc_b - conf_b)^2)`, the RMS calibration error.
    L2,
    /// `max_b |acc_b - conf_b|` over non-empty bins, the MCE.
    Max,
}

/// Per-bin statistics of a set of `(score, hit)` pairs: the reliability diagram.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BinStats {
    /// The bins, in increasing score order.
    pub bins: Vec<Bin>,
    /// All samples offered, including those that fell in no bin: the
    /// denominator of the bin weights `w_b = count_b / n_samples`.
    pub n_samples: usize,
}

impl BinStats {
    /// Bins `(score, hit)` pairs. Fails on an empty input, `n_bins == 0`, or a
    /// score that is NaN or outside `[0, 1]` (naming its position).
    pub fn from_pairs(
        binning: &Binning,
        pairs: impl IntoIterator<Item = (f64, bool)>,
    ) -> Result<Self> {
        let mut collector = BinCollector::new(binning)?;
        for (score, hit) in pairs {
            collector.push(score, hit)?;
        }
        collector.finish()
    }

    /// The calibration error `sum_b w_b |acc_b - conf_b|` (or its l2 / max form,
    /// see [`Norm`]) with `w_b = count_b / n_samples`; empty bins contribute 0.
    /// An input whose samples all fall in no bin gives `0.0` (see [`sum`]).
    pub fn calibration_error(&self, norm: Norm) -> f64 {
        let n = self.n_samples as f64;
        let weighted = self
            .bins
            .iter()
            .filter_map(|bin| Some((bin.count as f64 / n, bin.gap()?)));
        match norm {
            Norm::L1 => sum(weighted.map(|(w, gap)| w * gap)),
            Norm::L2 => sum(weighted.map(|(w, gap)| w * gap * gap)).sqrt(),
            Norm::Max => weighted.map(|(_, gap)| gap).fold(0.0, f64::max),
        }
    }
}

/// The sum of `terms`, `+0.0` when there are none: `Iterator::sum` of no
/// `f64` is `-0.0`, which would print as "-0.00%".
fn sum(terms: impl Iterator<Item = f64>) -> f64 {
    terms.fold(0.0, |acc, t| acc + t)
}

/// Accumulates `(score, hit)` pairs one at a time into [`BinStats`]: equal-width
/// bins are filled as the pairs arrive, equal-mass pairs are kept and sorted at
/// the end. Several collectors can be fed from one pass over a matrix (classwise
/// ECE keeps one per class).
#[derive(Debug, Clone)]
pub struct BinCollector {
    state: CollectorState,
    offered: usize,
}

#[derive(Debug, Clone)]
enum CollectorState {
    EqualWidth {
        index: EqualWidthIndex,
        bins: Vec<Bin>,
    },
    EqualMass {
        n_bins: usize,
        variant: AdaptiveVariant,
        /// The pairs, sorted at the end (or by each thread's collector).
        pairs: PairKeys,
    },
}

impl BinCollector {
    /// An empty collector; fails if the scheme asks for no bins.
    pub fn new(binning: &Binning) -> Result<Self> {
        check_n_bins(binning)?;
        let state = match *binning {
            Binning::EqualWidth { n_bins, edges } => {
                let index = EqualWidthIndex::new(n_bins, edges);
                CollectorState::EqualWidth {
                    bins: index.empty_bins(),
                    index,
                }
            }
            Binning::EqualMass { n_bins, variant } => CollectorState::EqualMass {
                n_bins,
                variant,
                pairs: PairKeys::default(),
            },
        };
        Ok(BinCollector { state, offered: 0 })
    }

    /// Adds one pair. Fails if `score` is NaN or outside `[0, 1]`.
    #[inline]
    pub fn push(&mut self, score: f64, hit: bool) -> Result<()> {
        if !(0.0..=1.0).contains(&score) {
            return Err(CalibError::InvalidArgument(format!(
                "score {score} of sample {} is not in [0, 1]",
                self.offered
            )));
        }
        self.offered += 1;
        match &mut self.state {
            CollectorState::EqualWidth { index, bins } => {
                if let Some(i) = index.of(score) {
                    bins[i].add(score, hit);
                }
            }
            CollectorState::EqualMass { pairs, .. } => pairs.push(score, hit),
        }
        Ok(())
    }

    /// Makes room for `additional` more pairs of an equal-mass scheme (no
    /// effect on equal-width bins, which keep no pairs), in either width
    /// (address space only until written).
    pub(crate) fn reserve(&mut self, additional: usize) {
        if let CollectorState::EqualMass { pairs, .. } = &mut self.state {
            pairs.reserve(additional);
        }
    }

    /// Sorts the equal-mass pairs collected so far (nothing to do for
    /// equal-width bins): a pass on several threads sorts each thread's
    /// pairs on that thread, and [`BinCollector::merge`] merges them.
    pub(crate) fn sort_pairs(&mut self) {
        if let CollectorState::EqualMass { pairs, .. } = &mut self.state {
            pairs.sort();
        }
    }

    /// Takes in the pairs of `later`, a collector of the same scheme fed the
    /// pairs that follow this one's: counts and hits add exactly, each bin's
    /// sum becomes `self + later`, equal-mass pairs are appended (merged
    /// when both are sorted; the order of the pairs does not matter).
    pub(crate) fn merge(&mut self, later: BinCollector) {
        self.offered += later.offered;
        match (&mut self.state, later.state) {
            (
                CollectorState::EqualWidth { bins, .. },
                CollectorState::EqualWidth { bins: more, .. },
            ) => {
                for (bin, more) in bins.iter_mut().zip(more) {
                    bin.count += more.count;
                    bin.sum_confidence += more.sum_confidence;
                    bin.hits += more.hits;
                }
            }
            (
                CollectorState::EqualMass { pairs, .. },
                CollectorState::EqualMass { pairs: more, .. },
            ) => pairs.append(more),
            _ => unreachable!("collectors of one scheme are merged"),
        }
    }

    /// The statistics of everything pushed; fails if nothing was.
    pub fn finish(self) -> Result<BinStats> {
        if self.offered == 0 {
            return Err(CalibError::Empty("no samples to bin".into()));
        }
        let bins = match self.state {
            CollectorState::EqualWidth { bins, .. } => bins,
            CollectorState::EqualMass {
                n_bins,
                variant,
                pairs,
            } => {
                let keys = pairs.into_sorted();
                match variant {
                    AdaptiveVariant::Interpolated => interpolated_bins(&keys, n_bins),
                    AdaptiveVariant::Chunked => chunked_bins(&keys, n_bins),
                }
            }
        };
        Ok(BinStats {
            bins,
            n_samples: self.offered,
        })
    }
}

/// The equal-width bins of a [`Binning::EqualWidth`]: which bin a score falls
/// in. Kept apart from [`BinCollector`] for loops that fill many sets of bins
/// at once (classwise ECE fills one per class).
#[derive(Debug, Clone)]
pub struct EqualWidthIndex {
    convention: EdgeConvention,
    /// `M` as `f64`.
    scale: f64,
    /// `k / M` for `k = 0..=M`, computed once.
    edges: Vec<f64>,
}

impl EqualWidthIndex {
    /// The index of an equal-width scheme, `None` for an equal-mass one;
    /// fails if the scheme asks for no bins.
    pub fn of_binning(binning: &Binning) -> Result<Option<Self>> {
        check_n_bins(binning)?;
        Ok(match *binning {
            Binning::EqualWidth { n_bins, edges } => Some(EqualWidthIndex::new(n_bins, edges)),
            Binning::EqualMass { .. } => None,
        })
    }

    fn new(n_bins: usize, convention: EdgeConvention) -> Self {
        EqualWidthIndex {
            convention,
            scale: n_bins as f64,
            edges: (0..=n_bins).map(|k| k as f64 / n_bins as f64).collect(),
        }
    }

    /// The bins, all empty: `M`, plus the bin of 1.0 under
    /// [`EdgeConvention::LeftClosedWithOneBin`].
    pub fn empty_bins(&self) -> Vec<Bin> {
        let mut bins: Vec<Bin> = self
            .edges
            .windows(2)
            .map(|w| Bin::empty(w[0], w[1]))
            .collect();
        if self.convention == EdgeConvention::LeftClosedWithOneBin {
            bins.push(Bin::empty(1.0, 1.0));
        }
        bins
    }

    /// The bin of a score in `[0, 1]` (in `0..empty_bins().len()`), `None`
    /// when it falls in no bin.
    ///
    /// When `score * M` is more than `1e-9` away from an integer, the rounding
    /// of the product and of the edges (relative `2^-53`) cannot move the score
    /// across an edge, so the bin is `floor(score * M)` under both conventions
    /// (computed through `i64`, whose conversions are single instructions,
    /// unlike `usize`'s). Scores on or next to an edge, 0 and 1 among them,
    /// go through [`equal_width_index`].
    #[inline]
    pub fn of(&self, score: f64) -> Option<usize> {
        const CLEAR: f64 = 1e-9;
        let scaled = score * self.scale;
        let floor = scaled as i64;
        let fraction = scaled - floor as f64; // exact
        if fraction > CLEAR && fraction < 1.0 - CLEAR {
            return Some(floor as usize); // 0 <= floor < M: score is in [0, 1]
        }
        equal_width_index(score, &self.edges, self.convention)
    }

    /// Open bounds `(lo, hi)` of the first bin: a score (any `f64`, NaN
    /// included) lies in bin 0 exactly when `lo < score < hi`. The bin is
    /// `(0, 1/M]` right-closed and `[0, 1/M)` left-closed; the bounds are the
    /// neighbouring floats that turn each closed end into an open one, so
    /// that loops test membership with two comparisons and no branch.
    pub fn first_bin(&self) -> (f64, f64) {
        let upper = self.edges[1];
        match self.convention {
            EdgeConvention::RightClosed => (0.0, upper.next_up()),
            // The float below -0.0 is the negative of the smallest subnormal.
            EdgeConvention::LeftClosedWithOneBin => ((-0.0_f64).next_down(), upper),
        }
    }
}

/// The most bins a caller should ask for: far beyond any use (a reliability
/// diagram of 100,000 bins), and small enough that the bins' edges and
/// statistics fit in memory. The CLI and the Python package refuse more
/// before any binning is built.
pub const MAX_BINS: usize = 100_000;

/// Refuses a scheme that asks for no bins.
fn check_n_bins(binning: &Binning) -> Result<()> {
    if binning.n_bins() == 0 {
        return Err(CalibError::InvalidArgument(
            "the number of bins must be at least 1".into(),
        ));
    }
    Ok(())
}

/// The equal-width bin of `score` in `[0, 1]` given the `M + 1` edges `k / M`:
/// a guess from `score * M`, corrected by one step against the exact edges (the
/// product's rounding can be off by at most one bin). `None` when the score
/// falls in no bin. [`EqualWidthIndex::of`] calls it only for scores on or
/// next to an edge.
#[inline(never)]
fn equal_width_index(score: f64, edges: &[f64], convention: EdgeConvention) -> Option<usize> {
    let n_bins = edges.len() - 1;
    let scaled = score * n_bins as f64;
    match convention {
        EdgeConvention::RightClosed => {
            if score <= 0.0 {
                return None;
            }
            // Bin i is (edges[i], edges[i+1]]; ceil(scaled) - 1 in 0..n_bins.
            let mut i = ceil(scaled).clamp(1, n_bins) - 1;
            if score <= edges[i] {
                i -= 1; // i > 0 here: edges[0] = 0 < score.
            } else if score > edges[i + 1] {
                i += 1; // i + 1 < n_bins here: edges[n_bins] = 1 >= score.
            }
            Some(i)
        }
        EdgeConvention::LeftClosedWithOneBin => {
            if score >= 1.0 {
                return Some(n_bins);
            }
            // Bin i is [edges[i], edges[i+1]); floor(scaled) in 0..n_bins.
            let mut i = (scaled as usize).min(n_bins - 1); // floor: scaled >= 0
            if score < edges[i] {
                i -= 1; // i > 0 here: edges[0] = 0 <= score.
            } else if score >= edges[i + 1] {
                i += 1; // i + 1 < n_bins here: edges[n_bins] = 1 > score.
            }
            Some(i)
        }
    }
}

/// `ceil(x)` of a finite `x >= 0` as an index, by the truncating cast (without
/// SSE4.1, `f64::ceil` is a call into libm, the slowest step of binning).
#[inline]
fn ceil(x: f64) -> usize {
    let floor = x as usize;
    floor + usize::from((floor as f64) < x)
}

/// The score of a [`pair_key`](crate::pair_keys::pair_key).
#[inline]
fn score_of_pair(key: u64) -> f64 {
    pair_of(key).0
}

/// Lineage (a) equal-mass bins over pairs sorted by score (as sorted
/// [`pair_key`](crate::pair_keys::pair_key)s): edges interpolated as numpy's `interp(linspace(0, N, M +
/// 1), arange(N), sorted)`, bins `(lo, hi]`.
fn interpolated_bins(sorted: &[u64], n_bins: usize) -> Vec<Bin> {
    let n = sorted.len();
    let score = |i: usize| score_of_pair(sorted[i]);
    let step = n as f64 / n_bins as f64;
    let interpolate = |j: usize| {
        // numpy's linspace: position j * step, the last one exactly n.
        let position = if j == n_bins {
            n as f64
        } else {
            j as f64 * step
        };
        let last = (n - 1) as f64;
        if position >= last {
            return score(n - 1);
        }
        let i = position.floor() as usize;
        if position == i as f64 {
            score(i)
        } else {
            (score(i + 1) - score(i)) * (position - i as f64) + score(i)
        }
    };
    let edges: Vec<f64> = (0..=n_bins).map(interpolate).collect();
    let mut bins: Vec<Bin> = edges.windows(2).map(|w| Bin::empty(w[0], w[1])).collect();
    // Sorted scores and non-decreasing edges: walk both once.
    let mut b = 0;
    for (score, hit) in sorted
        .iter()
        .map(|&key| pair_of(key))
        .filter(|&(s, _)| s > edges[0])
    {
        while score > bins[b].hi {
            b += 1; // Stays in range: the last edge is the largest score.
        }
        bins[b].add(score, hit);
    }
    bins
}

/// Equal-count chunks of the sorted pairs (as sorted [`pair_key`](crate::pair_keys::pair_key)s), sizes as
/// numpy's `array_split`.
fn chunked_bins(sorted: &[u64], n_bins: usize) -> Vec<Bin> {
    let (base, extra) = (sorted.len() / n_bins, sorted.len() % n_bins);
    let mut start = 0;
    (0..n_bins)
        .map(|b| {
            let chunk = &sorted[start..start + base + usize::from(b < extra)];
            start += chunk.len();
            let (lo, hi) = match (chunk.first(), chunk.last()) {
                (Some(&first), Some(&last)) => (score_of_pair(first), score_of_pair(last)),
                // An empty chunk (fewer samples than bins) sits at the previous edge.
                _ => {
                    let at = start
                        .checked_sub(1)
                        .map_or(0.0, |i| score_of_pair(sorted[i]));
                    (at, at)
                }
            };
            let mut bin = Bin::empty(lo, hi);
            chunk.iter().for_each(|&key| {
                let (score, hit) = pair_of(key);
                bin.add(score, hit);
            });
            bin
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn width(edges: EdgeConvention) -> Binning {
        Binning::EqualWidth { n_bins: 15, edges }
    }

    fn mass(n_bins: usize, variant: AdaptiveVariant) -> Binning {
        Binning::EqualMass { n_bins, variant }
    }

    #[test]
    fn right_closed_puts_edges_in_the_lower_bin_and_drops_zero() {
        let stats = BinStats::from_pairs(
            &width(EdgeConvention::RightClosed),
            [(0.0, true), (0.8, false), (1.0, true), (1.0 / 15.0, true)],
        )
        .unwrap();
        assert_eq!(stats.n_samples, 4);
        assert_eq!(stats.bins.len(), 15);
        assert_eq!(stats.bins[0].count, 1); // 1/15 in (0, 1/15]
        assert_eq!(stats.bins[11].count, 1); // 0.8 = 12/15 in (11/15, 12/15]
        assert_eq!(stats.bins[14].count, 1); // 1.0
        assert_eq!(stats.bins.iter().map(|b| b.count).sum::<usize>(), 3);
    }

    #[test]
    fn left_closed_puts_edges_in_the_upper_bin_and_one_apart() {
        let stats = BinStats::from_pairs(
            &width(EdgeConvention::LeftClosedWithOneBin),
            [(0.0, true), (0.8, false), (1.0, true), (0.9999, true)],
        )
        .unwrap();
        assert_eq!(stats.bins.len(), 16);
        assert_eq!(stats.bins[0].count, 1);
        assert_eq!(stats.bins[12].count, 1);
        assert_eq!(stats.bins[14].count, 1);
        assert_eq!(stats.bins[15].count, 1);
        assert_eq!((stats.bins[15].lo, stats.bins[15].hi), (1.0, 1.0));
    }

    #[test]
    fn every_edge_lands_in_the_right_bin() {
        for n_bins in 1..60 {
            let edges: Vec<f64> = (0..=n_bins).map(|k| k as f64 / n_bins as f64).collect();
            for (k, &e) in edges.iter().enumerate() {
                let right = equal_width_index(e, &edges, EdgeConvention::RightClosed);
                assert_eq!(right, k.checked_sub(1), "right-closed, edge {k}/{n_bins}");
                let left = equal_width_index(e, &edges, EdgeConvention::LeftClosedWithOneBin);
                assert_eq!(left, Some(k), "left-closed, edge {k}/{n_bins}");
            }
        }
    }

    #[test]
    fn norms_combine_gaps() {
        // Bin (0.4, 0.467]: conf 0.45, acc 1 (gap 0.55, weight 1/2);
        // bin (0.867, 0.933]: conf 0.9, acc 0 (gap 0.9, weight 1/2).
        let stats =
            BinStats::from_pairs(&Binning::default(), [(0.45, true), (0.9, false)]).unwrap();
        // <= 6 f64 roundings of values below 1 a side (0.5 ulp <= 5.5e-17 each):
        // < 7e-16; a sample in another bin changes these by >= 0.1.
        assert!((stats.calibration_error(Norm::L1) - 0.725).abs() < 1e-15);
        let rms = (0.5 * 0.55 * 0.55 + 0.5 * 0.9 * 0.9_f64).sqrt();
        assert!((stats.calibration_error(Norm::L2) - rms).abs() < 1e-15);
        assert!((stats.calibration_error(Norm::Max) - 0.9).abs() < 1e-15);
    }

    #[test]
    fn samples_in_no_bin_give_positive_zero() {
        // One sample: the interpolated scheme never counts the smallest
        // score, and right-closed equal-width bins never count a score of 0.
        for (binning, score) in [
            (mass(15, AdaptiveVariant::Interpolated), 0.88),
            (width(EdgeConvention::RightClosed), 0.0),
        ] {
            let stats = BinStats::from_pairs(&binning, [(score, true)]).unwrap();
            for norm in [Norm::L1, Norm::L2, Norm::Max] {
                let error = stats.calibration_error(norm);
                assert!(
                    error == 0.0 && error.is_sign_positive(),
                    "{binning:?} {norm:?}: {error}"
                );
            }
        }
    }

    #[test]
    fn interpolated_mass_bins_follow_numpy_interp() {
        // N = 4, M = 2: positions 0, 2, 4 -> edges s[0], s[2], s[3].
        let pairs = [(0.9, true), (0.1, false), (0.5, true), (0.3, false)];
        let stats = BinStats::from_pairs(&mass(2, AdaptiveVariant::Interpolated), pairs).unwrap();
        assert_eq!(stats.n_samples, 4);
        assert_eq!((stats.bins[0].lo, stats.bins[0].hi), (0.1, 0.5));
        assert_eq!((stats.bins[0].count, stats.bins[0].hits), (2, 1)); // 0.3, 0.5
        assert_eq!((stats.bins[1].count, stats.bins[1].hits), (1, 1)); // 0.9
                                                                       // N = 4, M = 3: positions 0, 4/3, 8/3, 4.
        let stats = BinStats::from_pairs(&mass(3, AdaptiveVariant::Interpolated), pairs).unwrap();
        let e1 = 0.3 + (0.5 - 0.3) * (4.0 / 3.0 - 1.0);
        // numpy's interp formula, <= 5 roundings of values below 1 a side: < 6e-16.
        assert!((stats.bins[0].hi - e1).abs() < 1e-15);
        assert_eq!(
            stats.bins.iter().map(|b| b.count).collect::<Vec<_>>(),
            vec![1, 1, 1]
        );
    }

    #[test]
    fn chunked_mass_bins_count_everything() {
        let pairs = [
            (0.9, true),
            (0.1, false),
            (0.5, true),
            (0.3, false),
            (0.7, true),
        ];
        let stats = BinStats::from_pairs(&mass(2, AdaptiveVariant::Chunked), pairs).unwrap();
        assert_eq!(stats.bins[0].count, 3); // array_split: 3 + 2
        assert_eq!((stats.bins[0].lo, stats.bins[0].hi), (0.1, 0.5));
        assert_eq!((stats.bins[1].count, stats.bins[1].hits), (2, 2));
        let few = BinStats::from_pairs(&mass(4, AdaptiveVariant::Chunked), [(0.2, true)]).unwrap();
        assert_eq!(
            few.bins.iter().map(|b| b.count).collect::<Vec<_>>(),
            vec![1, 0, 0, 0]
        );
    }

    #[test]
    fn bad_input_is_refused() {
        let none: [(f64, bool); 0] = [];
        assert!(matches!(
            BinStats::from_pairs(&Binning::default(), none),
            Err(CalibError::Empty(_))
        ));
        assert!(BinStats::from_pairs(&Binning::default(), [(f64::NAN, true)]).is_err());
        assert!(BinStats::from_pairs(&Binning::default(), [(1.5, true)]).is_err());
        assert!(BinStats::from_pairs(
            &Binning::EqualWidth {
                n_bins: 0,
                edges: EdgeConvention::RightClosed
            },
            [(0.5, true)]
        )
        .is_err());
    }

    proptest! {
        #[test]
        fn fast_bin_index_and_first_bin_equal_the_corrected_guess(
            n_bins in 1usize..60,
            k in 0usize..60,
            ulps in -3i64..=3,
            u in 0.0..=1.0_f64,
            left in any::<bool>(),
        ) {
            let convention = if left { EdgeConvention::LeftClosedWithOneBin } else { EdgeConvention::RightClosed };
            let index = EqualWidthIndex::new(n_bins, convention);
            let (lo, hi) = index.first_bin();
            // Edges (the first bin's upper one among them), their neighbours
            // a few ulps away, 0, -0, subnormals, and any score.
            let edge = k.min(n_bins) as f64 / n_bins as f64;
            let near = f64::from_bits((edge.to_bits() as i64 + ulps).max(0) as u64).clamp(0.0, 1.0);
            let first_edge = f64::from_bits((index.edges[1].to_bits() as i64 + ulps) as u64).min(1.0);
            let tiny = f64::from_bits(ulps.unsigned_abs());
            for score in [edge, near, first_edge, 0.0, -0.0, tiny, u, f64::from(u as f32)] {
                let expected = equal_width_index(score, &index.edges, convention);
                prop_assert_eq!(index.of(score), expected, "score {}", score);
                prop_assert_eq!(lo < score && score < hi, expected == Some(0), "score {}", score);
            }
            for outside in [f64::NAN, -tiny.max(f64::from_bits(1)), 1.0_f64.next_up(), -1.0] {
                prop_assert!(!(lo < outside && outside < hi), "{}", outside);
            }
        }

        #[test]
        fn every_scheme_bins_each_sample_at_most_once_and_within_its_edges(
            pairs in prop::collection::vec((0.0..=1.0_f64, any::<bool>()), 1..200),
            n_bins in 1usize..30,
            scheme in 0usize..4,
        ) {
            let binning = [
                width(EdgeConvention::RightClosed),
                width(EdgeConvention::LeftClosedWithOneBin),
                mass(n_bins, AdaptiveVariant::Interpolated),
                mass(n_bins, AdaptiveVariant::Chunked),
            ][scheme];
            let stats = BinStats::from_pairs(&binning, pairs.iter().copied()).unwrap();
            let counted: usize = stats.bins.iter().map(|b| b.count).sum();
            prop_assert!(counted <= pairs.len());
            if matches!(binning, Binning::EqualMass { variant: AdaptiveVariant::Chunked, .. }
                | Binning::EqualWidth { edges: EdgeConvention::LeftClosedWithOneBin, .. }) {
                prop_assert_eq!(counted, pairs.len());
            }
            for bin in stats.bins.iter().filter(|b| b.count > 0) {
                let mean = bin.mean_confidence().unwrap();
                prop_assert!(bin.lo <= mean + 1e-12 && mean <= bin.hi + 1e-12);
            }
            let ece = stats.calibration_error(Norm::L1);
            prop_assert!((0.0..=1.0).contains(&ece));
            prop_assert!(ece <= stats.calibration_error(Norm::L2) + 1e-12);
            prop_assert!(stats.calibration_error(Norm::L2) <= stats.calibration_error(Norm::Max) + 1e-12);
        }
    }
}
