//! The confidence histogram: how many predictions fall in each confidence bin,
//! the lower panel of a reliability diagram. Binned by the shared
//! [`BinCollector`], so its bins are those of the ECE.

use ndarray::ArrayView2;
use serde::{Deserialize, Serialize};

use crate::binning::{BinCollector, Binning};
use crate::error::{CalibError, Result};
use crate::scores::{for_each_top_class, Real};

/// One bar of the confidence histogram.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HistogramBar {
    /// Lower edge.
    pub lo: f64,
    /// Upper edge.
    pub hi: f64,
    /// Number of predictions whose confidence falls in the bin.
    pub count: usize,
    /// `count / N`, `N` all predictions (including any that fall in no bin).
    pub fraction: f64,
}

/// Counts of the confidence (max probability) per bin; needs no labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceHistogram {
    /// The bars, in increasing confidence.
    pub bars: Vec<HistogramBar>,
    /// Number of predictions.
    pub n_samples: usize,
}

/// Bins the confidence of every row of `probs`.
pub fn confidence_histogram<T: Real>(
    probs: ArrayView2<'_, T>,
    binning: &Binning,
) -> Result<ConfidenceHistogram> {
    if probs.ncols() == 0 {
        return Err(CalibError::Empty("probabilities have no classes".into()));
    }
    let mut collector = BinCollector::new(binning)?;
    for_each_top_class(probs, |_, _, confidence| {
        collector.push(confidence.into(), false)
    })?;
    let stats = collector.finish()?;
    let n = stats.n_samples as f64;
    let bars = stats
        .bins
        .iter()
        .map(|bin| HistogramBar {
            lo: bin.lo,
            hi: bin.hi,
            count: bin.count,
            fraction: bin.count as f64 / n,
        })
        .collect();
    Ok(ConfidenceHistogram {
        bars,
        n_samples: stats.n_samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{array, Array2};

    #[test]
    fn counts_confidences_per_bin() {
        let probs = array![[0.9, 0.1], [0.2, 0.8], [0.85, 0.15], [0.5, 0.5]];
        let binning = Binning::EqualWidth {
            n_bins: 5,
            edges: Default::default(),
        };
        let h = confidence_histogram(probs.view(), &binning).unwrap();
        let counts: Vec<usize> = h.bars.iter().map(|b| b.count).collect();
        // Bins (0,.2] (.2,.4] (.4,.6] (.6,.8] (.8,1]: 0.5 | 0.8 | 0.9, 0.85.
        assert_eq!(counts, vec![0, 0, 1, 1, 2]);
        assert_eq!(h.bars[4].fraction, 0.5);
        assert!(confidence_histogram(Array2::<f64>::zeros((0, 2)).view(), &binning).is_err());
    }
}
