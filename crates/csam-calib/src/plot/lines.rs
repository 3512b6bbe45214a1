//! Line charts (a value against epochs, rho or gamma, one line per method or
//! setting) and grouped bar charts (a value per method, one bar per
//! calibrator): the figures of experiment reports, in the style of the
//! calibration figures.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::render::Figure;
use super::style::{AXIS_SIZE, FONT, LABEL_SIZE, TITLE_SIZE};
use crate::error::{CalibError, Result};

/// One labelled line of a [`LineChart`]: `(x, y)` points in drawing order.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub label: String,
    /// The points.
    pub points: Vec<(f64, f64)>,
}

/// Lines with a marker at every point, a legend, and axes spanning the data.
#[derive(Debug, Clone, PartialEq)]
pub struct LineChart {
    /// The title above the chart.
    pub title: String,
    /// What the x axis shows.
    pub x_label: String,
    /// What the y axis shows.
    pub y_label: String,
    /// The lines, drawn in order with the colours of [`PALETTE`].
    pub series: Vec<Series>,
    /// Start the y axis at 0 when no value is negative: calibration errors
    /// are read against zero; accuracies near 90% are not.
    pub y_from_zero: bool,
}

/// Bars of several series side by side per group (e.g. one group per method,
/// one bar per post-hoc calibrator, as in the paper's Figure 3a-b).
#[derive(Debug, Clone, PartialEq)]
pub struct BarChart {
    /// The title above the chart.
    pub title: String,
    /// What the y axis shows.
    pub y_label: String,
    /// The group names along the x axis.
    pub groups: Vec<String>,
    /// `(legend entry, one value per group)`.
    pub series: Vec<(String, Vec<f64>)>,
}

/// Distinct colours (matplotlib's tab10 order), cycled when there are more
/// series than colours.
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The line chart as SVG or PNG bytes. Refuses a chart without points and
/// any non-finite coordinate.
pub fn line_chart(chart: &LineChart, format: super::ImageFormat) -> Result<Vec<u8>> {
    let points: Vec<(f64, f64)> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().copied())
        .collect();
    if points.is_empty() {
        return Err(CalibError::Empty(format!(
            "{}: no points to draw",
            chart.title
        )));
    }
    if let Some(bad) = points
        .iter()
        .find(|(x, y)| !x.is_finite() || !y.is_finite())
    {
        return Err(CalibError::InvalidArgument(format!(
            "{}: the point {bad:?} is not finite",
            chart.title
        )));
    }
    let x = padded(points.iter().map(|p| p.0), false);
    let y = padded(points.iter().map(|p| p.1), chart.y_from_zero);
    let y = with_legend_room(y, chart.series.len());
    let whole_x = points.iter().all(|p| p.0.fract() == 0.0);
    super::render::render(
        &Lines {
            chart,
            x,
            y,
            whole_x,
        },
        format,
    )
}

/// The bar chart as SVG or PNG bytes. Refuses a series whose length differs
/// from the number of groups and any non-finite value.
pub fn bar_chart(chart: &BarChart, format: super::ImageFormat) -> Result<Vec<u8>> {
    for (label, values) in &chart.series {
        if values.len() != chart.groups.len() {
            return Err(CalibError::InvalidArgument(format!(
                "{}: series {label} has {} values for {} groups",
                chart.title,
                values.len(),
                chart.groups.len()
            )));
        }
        if values.iter().any(|v| !v.is_finite()) {
            return Err(CalibError::InvalidArgument(format!(
                "{}: series {label} has a non-finite value",
                chart.title
            )));
        }
    }
    if chart.groups.is_empty() || chart.series.is_empty() {
        return Err(CalibError::Empty(format!(
            "{}: no bars to draw",
            chart.title
        )));
    }
    let y = padded(
        chart.series.iter().flat_map(|(_, v)| v.iter().copied()),
        true,
    );
    let y = with_legend_room(y, chart.series.len());
    super::render::render(&Bars { chart, y }, format)
}

/// The range of `values` widened by 5% on each side (by 0.5 when they are all
/// equal); starting at 0 when `from_zero` and no value is negative.
fn padded(values: impl Iterator<Item = f64>, from_zero: bool) -> (f64, f64) {
    let (lo, hi) = values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let span = hi - lo;
    let pad = if span > 0.0 { 0.05 * span } else { 0.5 };
    let lo = if from_zero && lo >= 0.0 {
        0.0
    } else {
        lo - pad
    };
    (lo, hi + pad)
}

/// The y range `(lo, hi)` raised so that the legend box of `entries` lines
/// (drawn in the upper right corner) sits above every bar and point instead
/// of covering them: the box takes about `ENTRY_HEIGHT` pixels per entry
/// plus its padding out of a plot area about `PLOT_HEIGHT` pixels high.
fn with_legend_room((lo, hi): (f64, f64), entries: usize) -> (f64, f64) {
    const PLOT_HEIGHT: f64 = 440.0;
    const ENTRY_HEIGHT: f64 = 24.0;
    const PADDING: f64 = 30.0;
    let share = ((entries as f64 * ENTRY_HEIGHT + PADDING) / PLOT_HEIGHT).min(0.6);
    // The new top t leaves `share` of (t - lo) above hi.
    (lo, (hi - share * lo) / (1.0 - share))
}

/// Labels whole numbers only (epochs), and no tick between them.
fn whole_number_label(x: &f64) -> String {
    match x.fract() == 0.0 {
        true => format!("{x:.0}"),
        false => String::new(),
    }
}

struct Lines<'a> {
    chart: &'a LineChart,
    x: (f64, f64),
    y: (f64, f64),
    /// Every x is a whole number (epochs): label the axis without decimals.
    whole_x: bool,
}

fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

impl Figure for Lines<'_> {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let mut chart = ChartBuilder::on(root)
            .caption(&self.chart.title, (FONT, TITLE_SIZE))
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(75)
            .build_cartesian_2d(self.x.0..self.x.1, self.y.0..self.y.1)
            .map_err(err)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc(self.chart.x_label.as_str())
            .y_desc(self.chart.y_label.as_str())
            .axis_desc_style((FONT, AXIS_SIZE))
            .label_style((FONT, LABEL_SIZE))
            .light_line_style(WHITE.mix(0.0));
        if self.whole_x {
            // At most one tick per whole number, so that no label is lost.
            let span = (self.x.1 - self.x.0).floor() as usize + 1;
            mesh.x_labels(span.min(12))
                .x_label_formatter(&whole_number_label);
        }
        mesh.draw().map_err(err)?;
        for (i, series) in self.chart.series.iter().enumerate() {
            let style = colour(i).stroke_width(3);
            chart
                .draw_series(LineSeries::new(series.points.iter().copied(), style))
                .map_err(err)?
                .label(series.label.as_str())
                .legend(move |(lx, ly)| PathElement::new([(lx, ly), (lx + 18, ly)], style));
            chart
                .draw_series(
                    series
                        .points
                        .iter()
                        .map(|&p| Circle::new(p, 4, colour(i).filled())),
                )
                .map_err(err)?;
        }
        super::frame::legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

struct Bars<'a> {
    chart: &'a BarChart,
    y: (f64, f64),
}

impl Figure for Bars<'_> {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        let groups = &self.chart.groups;
        let n_series = self.chart.series.len() as f64;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.chart.title, (FONT, TITLE_SIZE))
            .margin(20)
            .x_label_area_size(55)
            .y_label_area_size(75)
            .build_cartesian_2d(-0.5f64..groups.len() as f64 - 0.5, self.y.0..self.y.1)
            .map_err(err)?;
        let group_name = |x: &f64| {
            let index = x.round();
            match (index - x).abs() < 1e-6 && index >= 0.0 {
                true => groups.get(index as usize).cloned().unwrap_or_default(),
                false => String::new(),
            }
        };
        chart
            .configure_mesh()
            .x_labels(groups.len().max(2) * 2 + 1)
            .x_label_formatter(&group_name)
            .disable_x_mesh()
            .y_desc(self.chart.y_label.as_str())
            .axis_desc_style((FONT, AXIS_SIZE))
            .label_style((FONT, LABEL_SIZE))
            .light_line_style(WHITE.mix(0.0))
            .draw()
            .map_err(err)?;
        // Each group spans 0.8 of its unit; the series share it equally.
        let width = 0.8 / n_series;
        for (s, (label, values)) in self.chart.series.iter().enumerate() {
            let fill = colour(s).filled();
            let left = |g: usize| g as f64 - 0.4 + s as f64 * width;
            chart
                .draw_series(values.iter().enumerate().flat_map(|(g, &v)| {
                    let corners = [(left(g), 0f64.max(self.y.0)), (left(g) + width, v)];
                    [
                        Rectangle::new(corners, fill),
                        Rectangle::new(corners, BLACK.stroke_width(1)),
                    ]
                }))
                .map_err(err)?
                .label(label.as_str())
                .legend(move |(lx, ly)| Rectangle::new([(lx, ly - 6), (lx + 14, ly + 6)], fill));
        }
        super::frame::legend(&mut chart, SeriesLabelPosition::UpperRight)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plot::ImageFormat;

    fn chart() -> LineChart {
        LineChart {
            title: "ECE over epochs".into(),
            x_label: "Epoch".into(),
            y_label: "ECE (%)".into(),
            series: vec![
                Series {
                    label: "SGD".into(),
                    points: vec![(1.0, 3.0), (2.0, 4.5)],
                },
                Series {
                    label: "CSAM".into(),
                    points: vec![(1.0, 2.0), (2.0, 1.0)],
                },
            ],
            y_from_zero: true,
        }
    }

    #[test]
    fn svg_line_chart_has_title_axes_and_every_legend_entry() {
        let svg = String::from_utf8(line_chart(&chart(), ImageFormat::Svg).unwrap()).unwrap();
        for text in ["ECE over epochs", "Epoch", "ECE (%)", "SGD", "CSAM"] {
            assert!(svg.contains(text), "missing {text}");
        }
        // One marker per point.
        assert_eq!(svg.matches("<circle").count(), 4);
    }

    #[test]
    fn empty_or_non_finite_lines_are_refused() {
        let mut empty = chart();
        empty.series.iter_mut().for_each(|s| s.points.clear());
        assert!(matches!(
            line_chart(&empty, ImageFormat::Svg),
            Err(CalibError::Empty(_))
        ));
        let mut nan = chart();
        nan.series[1].points[0].1 = f64::NAN;
        assert!(line_chart(&nan, ImageFormat::Png).is_err());
    }

    #[test]
    fn bar_chart_names_groups_and_refuses_ragged_series() {
        let bars = BarChart {
            title: "ECE after post-hoc calibration".into(),
            y_label: "ECE (%)".into(),
            groups: vec!["SGD".into(), "SAM".into()],
            series: vec![
                ("raw".into(), vec![3.0, 2.0]),
                ("temperature".into(), vec![1.0, 1.5]),
            ],
        };
        let svg = String::from_utf8(bar_chart(&bars, ImageFormat::Svg).unwrap()).unwrap();
        for text in ["SGD", "SAM", "raw", "temperature", "ECE (%)"] {
            assert!(svg.contains(text), "missing {text}");
        }
        let png = bar_chart(&bars, ImageFormat::Png).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let ragged = BarChart {
            series: vec![("raw".into(), vec![3.0])],
            ..bars
        };
        assert!(bar_chart(&ragged, ImageFormat::Svg).is_err());
    }

    #[test]
    fn epochs_are_labelled_as_whole_numbers() {
        let mut long = chart();
        long.series[0].points = (1..=20).map(|e| (f64::from(e), 1.0)).collect();
        for (chart, whole) in [(chart(), ["1", "2"]), (long, ["10", "20"])] {
            let svg = String::from_utf8(line_chart(&chart, ImageFormat::Svg).unwrap()).unwrap();
            // The SVG writes each text's content on its own line.
            let texts: Vec<&str> = svg.lines().map(str::trim).collect();
            for label in whole {
                assert!(texts.contains(&label), "no tick {label}: {svg}");
            }
        }
        assert_eq!(whole_number_label(&3.0), "3");
        assert_eq!(whole_number_label(&2.5), "");
    }

    #[test]
    fn the_legend_gets_room_above_the_data() {
        for entries in [1, 4, 8] {
            let (lo, top) = with_legend_room((1.0, 10.0), entries);
            assert_eq!(lo, 1.0);
            // The box's share of the plot's height lies above the highest value.
            let free = (top - 10.0) / (top - lo);
            let needed = (entries as f64 * 24.0 + 30.0) / 440.0;
            assert!((free - needed.min(0.6)).abs() < 1e-12, "{entries}: {free}");
        }
    }

    #[test]
    fn ranges_are_padded_and_start_at_zero_for_non_negative_values() {
        assert_eq!(padded([1.0, 3.0].into_iter(), true), (0.0, 3.1));
        assert_eq!(padded([1.0, 3.0].into_iter(), false), (0.9, 3.1));
        assert_eq!(padded([2.0].into_iter(), false), (1.5, 2.5));
        assert_eq!(padded([-1.0, 1.0].into_iter(), true), (-1.1, 1.1));
    }
}
