//! Line charts of quantities over training (x: step or epoch), e.g. the
//! paper's Figure 2c (lambda and lambda_0 over training).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::render::Figure;
use super::style::{AXIS_SIZE, BAR, FONT, LABEL_SIZE, RED, TITLE_SIZE};

/// One labelled line: `(x, y)` points in drawing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend text.
    pub label: String,
    /// The points; non-finite ones are skipped.
    pub points: Vec<(f64, f64)>,
}

/// A line chart: title, axis descriptions and its series.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub series: Vec<Series>,
}

/// Line colours, in series order (matplotlib's first four).
const COLOURS: [RGBColor; 4] = [BAR, RED, RGBColor(44, 160, 44), RGBColor(255, 127, 14)];

impl LineChart {
    /// The x and y ranges covering every finite point, padded so that a
    /// constant series is still drawn; None without a finite point.
    pub(super) fn ranges(&self) -> Option<((f64, f64), (f64, f64))> {
        let points: Vec<(f64, f64)> = self.finite_points().flatten().collect();
        let span = |values: Vec<f64>, pad: f64| {
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let margin = if hi > lo {
                (hi - lo) * pad
            } else {
                lo.abs().max(1.0) * 0.05
            };
            (lo - margin, hi + margin)
        };
        (!points.is_empty()).then(|| {
            (
                span(points.iter().map(|p| p.0).collect(), 0.0),
                span(points.iter().map(|p| p.1).collect(), 0.05),
            )
        })
    }

    fn finite_points(&self) -> impl Iterator<Item = impl Iterator<Item = (f64, f64)> + '_> + '_ {
        self.series.iter().map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|(x, y)| x.is_finite() && y.is_finite())
        })
    }
}

impl Figure for LineChart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let ((x_lo, x_hi), (y_lo, y_hi)) =
            self.ranges().ok_or("nothing to plot: no finite point")?;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, TITLE_SIZE))
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(85)
            .build_cartesian_2d(x_lo..x_hi, y_lo..y_hi)
            .map_err(|e| e.to_string())?;
        chart
            .configure_mesh()
            .x_desc(&self.x_desc)
            .y_desc(&self.y_desc)
            .axis_desc_style((FONT, AXIS_SIZE))
            .label_style((FONT, LABEL_SIZE))
            .light_line_style(WHITE)
            .draw()
            .map_err(|e| e.to_string())?;
        for ((series, points), colour) in self
            .series
            .iter()
            .zip(self.finite_points())
            .zip(COLOURS.iter().cycle())
        {
            let style = colour.stroke_width(2);
            chart
                .draw_series(LineSeries::new(points, style))
                .map_err(err)?
                .label(series.label.as_str())
                .legend(move |(lx, ly)| PathElement::new([(lx, ly), (lx + 18, ly)], style));
        }
        super::frame::legend(&mut chart)
    }
}
