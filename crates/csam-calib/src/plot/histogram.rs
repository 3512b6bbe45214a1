//! The confidence histogram (Guo et al. 2017, Figure 1, top row).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::frame::{self, YAxis};
use super::render::Figure;
use super::style::{BAR, RED};
use super::{bar_edges, overall_accuracy_and_confidence};
use crate::binning::Bin;

/// Fraction of samples per bin, with the accuracy and mean confidence marked.
pub(super) struct Histogram<'a> {
    pub bins: &'a [Bin],
    /// Denominator of the fractions: every sample, binned or not.
    pub n_samples: usize,
    pub title: &'a str,
}

impl Figure for Histogram<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let total = self.n_samples as f64;
        let fraction = |b: &Bin| b.count as f64 / total;
        let top = self.bins.iter().map(fraction).fold(0.0, f64::max);
        let y_max = (top * 1.15).clamp(0.05, 1.0);
        let (accuracy, confidence) = overall_accuracy_and_confidence(self.bins);

        let mut chart = frame::chart(
            root,
            self.title,
            YAxis {
                description: "Fraction of samples",
                max: y_max,
            },
        )?;
        chart
            .draw_series(self.bins.iter().filter(|b| b.count > 0).flat_map(|b| {
                let (lo, hi) = bar_edges(b);
                let corners = [(lo, 0.0), (hi, fraction(b))];
                [
                    Rectangle::new(corners, BAR.filled()),
                    Rectangle::new(corners, BLACK.stroke_width(1)),
                ]
            }))
            .map_err(err)?;
        for (x, name, colour) in [
            (accuracy, "Accuracy", RED),
            (confidence, "Avg. confidence", BLACK),
        ] {
            let style = colour.stroke_width(3);
            chart
                .draw_series(DashedLineSeries::new([(x, 0.0), (x, y_max)], 10, 6, style))
                .map_err(err)?
                .label(format!("{name} ({:.1}%)", 100.0 * x))
                .legend(move |(lx, ly)| PathElement::new([(lx, ly), (lx + 18, ly)], style));
        }
        frame::legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}
