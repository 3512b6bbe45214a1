//! Colours and text sizes shared by the figures.

use plotters::prelude::*;

/// Bars (matplotlib's default blue).
pub(super) const BAR: RGBColor = RGBColor(31, 119, 180);
/// The accuracy line of the histogram, and the outline of the gap segments.
pub(super) const RED: RGBColor = RGBColor(214, 39, 40);
/// Opacity of the red gap segment: translucent as in Guo et al.'s figures, so
/// that inside an accuracy bar (underconfidence) the bar still shows through.
pub(super) const GAP_OPACITY: f64 = 0.4;
pub(super) const TITLE_SIZE: u32 = 28;
pub(super) const AXIS_SIZE: u32 = 22;
pub(super) const LABEL_SIZE: u32 = 16;
pub(super) const FONT: &str = "sans-serif";
