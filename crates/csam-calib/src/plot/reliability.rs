//! The reliability diagram (Guo et al. 2017, Figure 1, bottom row).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::bar_edges;
use super::frame::{self, YAxis};
use super::render::Figure;
use super::style::{BAR, GAP_OPACITY, RED};
use crate::binning::Bin;

/// Accuracy bars per bin, the gap to the bin's mean confidence, the diagonal.
pub(super) struct Reliability<'a> {
    pub bins: &'a [Bin],
    pub title: &'a str,
}

impl Figure for Reliability<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let mut chart = frame::chart(
            root,
            self.title,
            YAxis {
                description: "Accuracy",
                max: 1.0,
            },
        )?;

        let filled: Vec<Bar> = self.bins.iter().filter_map(Bar::of).collect();
        chart
            .draw_series(
                filled
                    .iter()
                    .map(|b| Rectangle::new([(b.lo, 0.0), (b.hi, b.accuracy)], BAR.filled())),
            )
            .map_err(err)?
            .label("Accuracy")
            .legend(|(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], BAR.filled()));
        // The translucent gap shows the bar through it where the model is
        // underconfident (the gap lies inside the accuracy bar): a darker
        // shade, which gets its own legend entry.
        let gap = RED.mix(GAP_OPACITY).filled();
        let (under, over): (Vec<&Bar>, Vec<&Bar>) =
            filled.iter().partition(|b| b.accuracy > b.confidence);
        chart
            .draw_series(over.iter().map(|b| Rectangle::new(b.gap(), gap)))
            .map_err(err)?
            .label("Gap to mean confidence")
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], gap));
        let under_series = chart
            .draw_series(under.iter().map(|b| Rectangle::new(b.gap(), gap)))
            .map_err(err)?;
        if !under.is_empty() {
            let shade = blend(RED, GAP_OPACITY, BAR).filled();
            under_series
                .label("Gap inside the bar (underconfident)")
                .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 18, y + 6)], shade));
        }
        chart
            .draw_series(filled.iter().map(|b| {
                Rectangle::new(
                    [(b.lo, 0.0), (b.hi, b.accuracy.max(b.confidence))],
                    BLACK.stroke_width(1),
                )
            }))
            .map_err(err)?;
        chart
            .draw_series(
                filled
                    .iter()
                    .map(|b| Rectangle::new(b.gap(), RED.stroke_width(2))),
            )
            .map_err(err)?;
        let diagonal = BLACK.mix(0.7).stroke_width(2);
        chart
            .draw_series(DashedLineSeries::new(
                [(0.0, 0.0), (1.0, 1.0)],
                10,
                6,
                diagonal,
            ))
            .map_err(err)?
            .label("Perfect calibration")
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 18, y)], diagonal));
        frame::legend(&mut chart, SeriesLabelPosition::UpperLeft)
    }
}

/// `top` at opacity `alpha` over `bottom`: the colour the two make on screen.
fn blend(top: RGBColor, alpha: f64, bottom: RGBColor) -> RGBColor {
    let mix = |t: u8, b: u8| (alpha * f64::from(t) + (1.0 - alpha) * f64::from(b)).round() as u8;
    RGBColor(
        mix(top.0, bottom.0),
        mix(top.1, bottom.1),
        mix(top.2, bottom.2),
    )
}

/// A non-empty bin as drawn.
struct Bar {
    lo: f64,
    hi: f64,
    accuracy: f64,
    confidence: f64,
}

impl Bar {
    fn of(bin: &Bin) -> Option<Self> {
        let (lo, hi) = bar_edges(bin);
        Some(Bar {
            lo,
            hi,
            accuracy: bin.accuracy()?,
            confidence: bin.mean_confidence()?,
        })
    }

    /// Corners of the segment between accuracy and mean confidence.
    fn gap(&self) -> [(f64, f64); 2] {
        let (lo, hi) = if self.accuracy < self.confidence {
            (self.accuracy, self.confidence)
        } else {
            (self.confidence, self.accuracy)
        };
        [(self.lo, lo), (self.hi, hi)]
    }
}
