//! Colours and text sizes shared by the figures.

use plotters::prelude::*;

/// Bars (matplotlib's default blue).
pub(super) const BAR: RGBColor = RGBColor(31, 119, 180);
/// The calibration gap, and the accuracy line of the histogram.
pub(super) const GAP: RGBColor = RGBColor(214, 39, 40);
pub(super) const TITLE_SIZE: u32 = 28;
pub(super) const AXIS_SIZE: u32 = 22;
pub(super) const LABEL_SIZE: u32 = 16;
pub(super) const FONT: &str = "sans-serif";
