//! Binned calibration errors: ECE, MCE, RMS error, AdaECE and classwise ECE
//! (conventions: crates/csam-calib/README.md, "Metric conventions"), all read
//! off [`BinStats`].
//!
//! `ECE = sum_b |B_b| / N * |acc(B_b) - conf(B_b)|`, empty bins contribute 0;
//! `N` counts every sample, also those that fall in no bin.
//!
//! Worked cases (15 equal-width bins, l1), which the tests check:
//! confidences {1.0, 0.95} with correctness {no, yes} give 0.475 right-closed
//! and 0.525 left-closed-with-one-bin; {0.8, 0.85} with {no, yes} give 0.475
//! and 0.325.

use ndarray::ArrayView2;

use super::check_predictions;
use super::classwise::ClasswiseBins;
use crate::binning::{AdaptiveVariant, BinCollector, BinStats, Binning, EqualWidthIndex, Norm};
use crate::error::Result;
use crate::parallel::{fold_rows, Threads};
use crate::scores::{for_each_top_class, probability_error, Real};

/// Reliability-diagram data: per bin of confidence (max probability), its count,
/// mean confidence and accuracy. One pass over the matrix for equal-width bins.
/// [`par_reliability_diagram`] on one thread.
pub fn reliability_diagram<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
) -> Result<BinStats> {
    par_reliability_diagram(probs, labels, binning, Threads::ONE)
}

/// [`reliability_diagram`] with the rows split across `threads` (see
/// [`crate::parallel`]): equal-mass bins have the same bits for any thread
/// count, equal-width bins' sums can differ in the last bits.
pub fn par_reliability_diagram<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    threads: Threads,
) -> Result<BinStats> {
    check_predictions(probs, labels)?;
    let pass = |probs: ArrayView2<'_, T>, labels: &[usize]| {
        let mut collector = BinCollector::new(binning)?;
        collector.reserve(probs.nrows());
        for_each_top_class(probs, |row, predicted, confidence| {
            collector.push(confidence.into(), predicted == labels[row])
        })?;
        // Equal-mass pairs sorted here, on this chunk's thread.
        collector.sort_pairs();
        Ok(collector)
    };
    let merge = |mut earlier: BinCollector, later| {
        earlier.merge(later);
        earlier
    };
    fold_rows(probs, labels, threads, pass, merge)?.finish()
}

/// Expected calibration error of the confidence with the given binning and
/// norm: l1 is the ECE, l2 the RMS calibration error, max the MCE. With
/// [`Binning::EqualMass`] this is the adaptive ECE. [`par_ece`] on one thread.
pub fn ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    norm: Norm,
) -> Result<f64> {
    par_ece(probs, labels, binning, norm, Threads::ONE)
}

/// [`ece`] with the rows split across `threads` (see [`par_reliability_diagram`]).
pub fn par_ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    norm: Norm,
    threads: Threads,
) -> Result<f64> {
    Ok(par_reliability_diagram(probs, labels, binning, threads)?.calibration_error(norm))
}

/// Adaptive ECE: the l1 ECE over `n_bins` equal-mass bins of the confidence
/// (see [`AdaptiveVariant`] for the two ways of choosing them).
/// [`par_adaptive_ece`] on one thread.
pub fn adaptive_ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    n_bins: usize,
    variant: AdaptiveVariant,
) -> Result<f64> {
    par_adaptive_ece(probs, labels, n_bins, variant, Threads::ONE)
}

/// [`adaptive_ece`] with the rows split across `threads`: the same bits for
/// any thread count (the bins are read off the sorted confidences).
pub fn par_adaptive_ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    n_bins: usize,
    variant: AdaptiveVariant,
    threads: Threads,
) -> Result<f64> {
    let binning = Binning::EqualMass { n_bins, variant };
    par_ece(probs, labels, &binning, Norm::L1, threads)
}

/// Per class `k`, the bin statistics of `p_k` (not the max) with hit `y = k`,
/// all classes filled in one pass over the matrix.
/// [`par_classwise_bin_stats`] on one thread.
pub fn classwise_bin_stats<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
) -> Result<Vec<BinStats>> {
    par_classwise_bin_stats(probs, labels, binning, Threads::ONE)
}

/// [`classwise_bin_stats`] with the rows split across `threads` (see
/// [`crate::parallel`]): equal-mass bins have the same bits for any thread
/// count, equal-width bins' sums can differ in the last bits.
pub fn par_classwise_bin_stats<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    threads: Threads,
) -> Result<Vec<BinStats>> {
    check_predictions(probs, labels)?;
    match EqualWidthIndex::of_binning(binning)? {
        Some(index) => {
            let pass = |probs: ArrayView2<'_, T>, labels: &[usize]| {
                ClasswiseBins::of_rows(probs, labels, &index)
            };
            let bins = fold_rows(probs, labels, threads, pass, ClasswiseBins::merge)?;
            Ok(bins.into_stats(&index, labels.len()))
        }
        None => {
            let pass = |probs: ArrayView2<'_, T>, labels: &[usize]| {
                classwise_collectors(probs, labels, binning)
            };
            let merge = |mut earlier: Vec<BinCollector>, later: Vec<BinCollector>| {
                earlier.iter_mut().zip(later).for_each(|(a, b)| a.merge(b));
                earlier
            };
            let collectors = fold_rows(probs, labels, threads, pass, merge)?;
            collectors.into_iter().map(BinCollector::finish).collect()
        }
    }
}

/// Classwise bins through one [`BinCollector`] per class (equal-mass bins).
fn classwise_collectors<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
) -> Result<Vec<BinCollector>> {
    let mut collectors = vec![BinCollector::new(binning)?; probs.ncols()];
    for (row, (values, &label)) in probs.outer_iter().zip(labels).enumerate() {
        for (class, (&value, collector)) in values.iter().zip(&mut collectors).enumerate() {
            let value: f64 = value.into();
            collector
                .push(value, class == label)
                .map_err(|_| probability_error(row, class, value))?;
        }
    }
    // Sorted on this chunk's thread, merged after.
    collectors.iter_mut().for_each(BinCollector::sort_pairs);
    Ok(collectors)
}

/// Classwise ECE: the mean over the `K` classes of the l1 calibration error of
/// `p_k` against `1[y = k]` (15 equal-width bins in the paper's tables).
/// [`par_classwise_ece`] on one thread.
pub fn classwise_ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
) -> Result<f64> {
    par_classwise_ece(probs, labels, binning, Threads::ONE)
}

/// [`classwise_ece`] with the rows split across `threads` (see
/// [`par_classwise_bin_stats`]).
pub fn par_classwise_ece<T: Real>(
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    threads: Threads,
) -> Result<f64> {
    let per_class = par_classwise_bin_stats(probs, labels, binning, threads)?;
    let k = per_class.len() as f64;
    Ok(per_class
        .iter()
        .map(|stats| stats.calibration_error(Norm::L1))
        .sum::<f64>()
        / k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::EdgeConvention;
    use crate::error::CalibError;
    use crate::metrics::test_support::{mixed_entries, two_class};
    use ndarray::{array, Array2, ShapeBuilder};
    use proptest::prelude::*;

    const RIGHT: Binning = Binning::EqualWidth {
        n_bins: 15,
        edges: EdgeConvention::RightClosed,
    };
    const LEFT: Binning = Binning::EqualWidth {
        n_bins: 15,
        edges: EdgeConvention::LeftClosedWithOneBin,
    };

    /// f64 round-off bar: an ECE here is <= 100 weights and gaps summed over
    /// <= 15 bins, error <= 100 * 2.2e-16 ~ 2.2e-14 of a value <= 1 in any
    /// order; a wrong bin or hit moves it by >= 1/100.
    const ROUNDOFF: f64 = 1e-12;

    fn ece_of(cases: &[(f64, bool)], binning: &Binning, norm: Norm) -> f64 {
        let (probs, labels) = two_class(cases);
        ece(probs.view(), &labels, binning, norm).unwrap()
    }

    #[test]
    fn readme_worked_case_one() {
        let cases = [(1.0, false), (0.95, true)];
        assert!((ece_of(&cases, &RIGHT, Norm::L1) - 0.475).abs() < ROUNDOFF);
        assert!((ece_of(&cases, &LEFT, Norm::L1) - 0.525).abs() < ROUNDOFF);
    }

    #[test]
    fn readme_worked_case_two() {
        let cases = [(0.8, false), (0.85, true)];
        assert!((ece_of(&cases, &RIGHT, Norm::L1) - 0.475).abs() < ROUNDOFF);
        assert!((ece_of(&cases, &LEFT, Norm::L1) - 0.325).abs() < ROUNDOFF);
    }

    #[test]
    fn l2_and_max_on_the_worked_case() {
        // Right-closed: bins {0.8: gap 0.8} and {0.85: gap 0.15}, weights 1/2.
        let cases = [(0.8, false), (0.85, true)];
        let rms = (0.5 * 0.64 + 0.5 * 0.0225_f64).sqrt();
        assert!((ece_of(&cases, &RIGHT, Norm::L2) - rms).abs() < ROUNDOFF);
        assert!((ece_of(&cases, &RIGHT, Norm::Max) - 0.8).abs() < ROUNDOFF);
    }

    #[test]
    fn f32_input_is_accepted() {
        let probs = array![[0.75_f32, 0.25], [0.25, 0.75]];
        // Both confidences 0.75 (exact in f32), one right one wrong: |0.5 - 0.75|.
        let e = ece(probs.view(), &[0, 0], &RIGHT, Norm::L1).unwrap();
        assert!((e - 0.25).abs() < ROUNDOFF);
    }

    #[test]
    fn adaptive_ece_by_hand() {
        // Confidences 0.6, 0.7, 0.8, 0.9; correct: no, yes, yes, yes. M = 2.
        let cases = [(0.6, false), (0.7, true), (0.8, true), (0.9, true)];
        let (probs, labels) = two_class(&cases);
        // Interpolated: edges 0.6, 0.8, 0.9; 0.6 dropped; bins {0.7, 0.8}, {0.9}.
        let interpolated =
            adaptive_ece(probs.view(), &labels, 2, AdaptiveVariant::Interpolated).unwrap();
        let expected = 0.5 * (1.0 - 0.75) + 0.25 * (1.0 - 0.9);
        assert!((interpolated - expected).abs() < ROUNDOFF);
        // Chunked: {0.6, 0.7} acc 0.5, {0.8, 0.9} acc 1.
        let chunked = adaptive_ece(probs.view(), &labels, 2, AdaptiveVariant::Chunked).unwrap();
        let expected = 0.5 * (0.65 - 0.5) + 0.5 * (1.0 - 0.85);
        assert!((chunked - expected).abs() < ROUNDOFF);
    }

    #[test]
    fn classwise_ece_by_hand() {
        // Row 0: p = (0.7, 0.3), y = 0; row 1: p = (0.4, 0.6), y = 0.
        let probs = array![[0.7, 0.3], [0.4, 0.6]];
        // Class 0: 0.7 hit, 0.4 hit, separate bins: (0.3 + 0.6) / 2.
        // Class 1: 0.3 miss, 0.6 miss: (0.3 + 0.6) / 2.
        let e = classwise_ece(probs.view(), &[0, 0], &RIGHT).unwrap();
        assert!((e - 0.45).abs() < ROUNDOFF);
    }

    #[test]
    fn reliability_diagram_reports_bins() {
        let (probs, labels) = two_class(&[(0.8, false), (0.85, true)]);
        let stats = reliability_diagram(probs.view(), &labels, &RIGHT).unwrap();
        assert_eq!(stats.bins[11].count, 1);
        assert_eq!(stats.bins[11].accuracy(), Some(0.0));
        assert_eq!(stats.bins[12].mean_confidence(), Some(0.85));
        assert_eq!(stats.bins[0].accuracy(), None);
    }

    #[test]
    fn bad_input_is_refused() {
        let probs = array![[0.5, 0.5]];
        assert!(matches!(
            ece(probs.view(), &[0, 1], &RIGHT, Norm::L1),
            Err(CalibError::ShapeMismatch(_))
        ));
        assert!(matches!(
            ece(probs.view(), &[2], &RIGHT, Norm::L1),
            Err(CalibError::LabelOutOfRange { .. })
        ));
        let empty = Array2::<f64>::zeros((0, 2));
        assert!(matches!(
            ece(empty.view(), &[], &RIGHT, Norm::L1),
            Err(CalibError::Empty(_))
        ));
        let nan = array![[0.5, f64::NAN]];
        assert!(matches!(
            classwise_ece(nan.view(), &[0], &RIGHT),
            Err(CalibError::NonFinite { row: 0, col: 1, .. })
        ));
        assert!(matches!(
            ece(nan.view(), &[0], &RIGHT, Norm::L1),
            Err(CalibError::NonFinite { row: 0, col: 1, .. })
        ));
    }

    /// The classwise bins of one [`BinCollector`] per class, the reference.
    fn classwise_collected<T: Real>(
        probs: ArrayView2<'_, T>,
        labels: &[usize],
        binning: &Binning,
    ) -> std::result::Result<Vec<BinStats>, String> {
        classwise_collectors(probs, labels, binning)
            .and_then(|collectors| collectors.into_iter().map(BinCollector::finish).collect())
            .map_err(|e| e.to_string())
    }

    fn cases_strategy() -> impl Strategy<Value = Vec<(f64, bool)>> {
        prop::collection::vec((0.5..=1.0_f64, any::<bool>()), 1..100)
    }

    proptest! {
        #[test]
        fn classwise_single_pass_equals_one_collector_per_class(
            rows in 1usize..200,
            k in 1usize..40,
            n_bins in 1usize..20,
            seed in any::<u64>(),
            left in any::<bool>(),
            corrupt in prop::collection::vec((any::<prop::sample::Index>(), prop_oneof![Just(f64::NAN), Just(-0.1), Just(1.5), Just(-f64::from_bits(1)), Just(f64::INFINITY)]), 0..3),
        ) {
            // Entries on a grid of 1/30 (0 and 1 among them), on the edges
            // k / M and a few ulps either side, -0.0, and anywhere; up to two
            // bad entries. Groups of 16 lanes and a shorter last group (k up to 39).
            let probs = mixed_entries(rows, k, n_bins, seed, &corrupt);
            let labels: Vec<usize> = (0..rows).map(|row| (row * 7 + seed as usize) % k).collect();
            let edges = if left { EdgeConvention::LeftClosedWithOneBin } else { EdgeConvention::RightClosed };
            let binning = Binning::EqualWidth { n_bins, edges };
            let reference = classwise_collected(probs.view(), &labels, &binning);
            let mut strided = Array2::zeros((rows, k).f());
            strided.assign(&probs);
            for view in [probs.view(), strided.view()] {
                let fast = classwise_bin_stats(view, &labels, &binning).map_err(|e| e.to_string());
                prop_assert_eq!(&fast, &reference); // every count and every sum, to the bit
            }
            let narrow = probs.mapv(|v| v as f32);
            let fast = classwise_bin_stats(narrow.view(), &labels, &binning).map_err(|e| e.to_string());
            let reference = classwise_collected(narrow.view(), &labels, &binning);
            prop_assert_eq!(fast, reference);
        }

        #[test]
        fn ece_is_in_unit_interval_and_order_free(
            cases in cases_strategy(),
            scheme in 0usize..4,
            rotate in 0usize..100,
        ) {
            let binning = [
                RIGHT,
                LEFT,
                Binning::EqualMass { n_bins: 15, variant: AdaptiveVariant::Interpolated },
                Binning::EqualMass { n_bins: 15, variant: AdaptiveVariant::Chunked },
            ][scheme];
            let mut shuffled = cases.clone();
            shuffled.reverse();
            let len = shuffled.len();
            shuffled.rotate_left(rotate % len);
            for norm in [Norm::L1, Norm::L2, Norm::Max] {
                let a = ece_of(&cases, &binning, norm);
                let b = ece_of(&shuffled, &binning, norm);
                prop_assert!((0.0..=1.0).contains(&a));
                prop_assert!((a - b).abs() < ROUNDOFF, "{a} vs {b}");
            }
        }
    }
}
