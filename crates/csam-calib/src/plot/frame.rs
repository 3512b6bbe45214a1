//! The frame every figure shares: title, axes on the unit confidence range,
//! axis descriptions, and the legend box.

use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::style::{AXIS_SIZE, FONT, LABEL_SIZE, TITLE_SIZE};

/// A chart with confidence in [0, 1] on the x axis.
pub(super) type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// What the y axis shows.
pub(super) struct YAxis<'a> {
    pub description: &'a str,
    pub max: f64,
}

/// Draws the title and the axes ("Confidence" on x) and returns the chart.
pub(super) fn chart<'a, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
    y: YAxis<'_>,
) -> Result<Chart<'a, DB>, String> {
    let mut chart = ChartBuilder::on(root)
        .caption(title, (FONT, TITLE_SIZE))
        .margin(20)
        .x_label_area_size(55)
        .y_label_area_size(75)
        .build_cartesian_2d(0f64..1f64, 0f64..y.max)
        .map_err(|e| e.to_string())?;
    chart
        .configure_mesh()
        .x_desc("Confidence")
        .y_desc(y.description)
        .axis_desc_style((FONT, AXIS_SIZE))
        .label_style((FONT, LABEL_SIZE))
        .light_line_style(WHITE)
        .draw()
        .map_err(|e| e.to_string())?;
    Ok(chart)
}

/// Draws the legend box of the labelled series at `position`.
pub(super) fn legend<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FONT, LABEL_SIZE))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| e.to_string())
}
