//! Reliability diagrams and confidence histograms, as SVG or PNG.
//!
//! Both figures are drawn from [`BinStats`] (the same bins the binned metrics
//! use, e.g. from [`crate::metrics::reliability_diagram`]), in the style of Guo et al. (2017), "On
//! Calibration of Modern Neural Networks", Figure 1:
//!
//! * [`write_reliability_diagram`]: per-bin accuracy bars, the gap between a
//!   bin's accuracy and its mean confidence as a red segment on top of (or
//!   inside) the bar, the diagonal of perfect calibration, axes "Confidence" /
//!   "Accuracy", the ECE in the title;
//! * [`write_confidence_histogram`]: the fraction of samples per bin, with
//!   vertical lines at the accuracy and the mean confidence;
//! * [`line_chart`] and [`bar_chart`]: a value against epochs or a
//!   hyperparameter, one line per series, and grouped bars, for experiment
//!   reports.
//!
//! Text is drawn with a bundled font (DejaVu Sans, `assets/fonts`, licence
//! alongside), so PNGs render identically on machines without system fonts.
//! Files are written atomically; the format follows the extension (`.svg`,
//! `.png`).

mod frame;
mod histogram;
mod lines;
mod reliability;
mod render;
mod style;

use std::path::Path;

pub use lines::{bar_chart, line_chart, BarChart, LineChart, Series, PALETTE};

use crate::binning::{Bin, BinStats};
use crate::error::{CalibError, Result};
use crate::io::write_atomically;

/// Image formats the plots are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageFormat {
    Svg,
    Png,
}

impl ImageFormat {
    /// The format named by the extension of `path` (`.svg` or `.png`).
    pub fn from_path(path: &Path) -> Result<Self> {
        match path
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            Some("svg") => Ok(ImageFormat::Svg),
            Some("png") => Ok(ImageFormat::Png),
            _ => Err(CalibError::InvalidArgument(format!(
                "{}: plots are written as .svg or .png",
                path.display()
            ))),
        }
    }
}

/// The reliability diagram of `stats` as SVG or PNG bytes. The title reads
/// `"{title} (ECE x.xx%)"`; `ece` is a fraction (normally
/// `stats.calibration_error(Norm::L1)`, passed in so that the title shows the
/// number the caller reports).
pub fn reliability_diagram(
    stats: &BinStats,
    title: &str,
    ece: f64,
    format: ImageFormat,
) -> Result<Vec<u8>> {
    let bins = checked_bins(stats)?;
    let title = format!("{title} (ECE {:.2}%)", 100.0 * ece);
    render::render(
        &reliability::Reliability {
            bins,
            title: &title,
        },
        format,
    )
}

/// The confidence histogram of `stats` as SVG or PNG bytes: the fraction of
/// all samples (`count / n_samples`) per bin, and dashed lines at the accuracy
/// and the mean confidence of the binned samples.
pub fn confidence_histogram(stats: &BinStats, title: &str, format: ImageFormat) -> Result<Vec<u8>> {
    let bins = checked_bins(stats)?;
    let histogram = histogram::Histogram {
        bins,
        n_samples: stats.n_samples,
        title,
    };
    render::render(&histogram, format)
}

/// Writes [`reliability_diagram`] to `path` (format from the extension), atomically.
pub fn write_reliability_diagram(
    path: &Path,
    stats: &BinStats,
    title: &str,
    ece: f64,
) -> Result<()> {
    let bytes = reliability_diagram(stats, title, ece, ImageFormat::from_path(path)?)?;
    write_atomically(path, &bytes)
}

/// Writes [`confidence_histogram`] to `path` (format from the extension), atomically.
pub fn write_confidence_histogram(path: &Path, stats: &BinStats, title: &str) -> Result<()> {
    let bytes = confidence_histogram(stats, title, ImageFormat::from_path(path)?)?;
    write_atomically(path, &bytes)
}

/// Writes [`line_chart`] to `path` (format from the extension), atomically.
pub fn write_line_chart(path: &Path, chart: &LineChart) -> Result<()> {
    let bytes = line_chart(chart, ImageFormat::from_path(path)?)?;
    write_atomically(path, &bytes)
}

/// The bins of `stats`, if they can be drawn: edges ordered in [0, 1], at most
/// `count` hits, a mean score in [0, 1], and at least one sample.
fn checked_bins(stats: &BinStats) -> Result<&[Bin]> {
    let bins = &stats.bins[..];
    let binned: usize = bins.iter().map(|b| b.count).sum();
    if binned == 0 || stats.n_samples < binned {
        return Err(CalibError::Empty(format!(
            "nothing to plot: {binned} samples in the bins, n_samples = {}",
            stats.n_samples
        )));
    }
    for (i, b) in bins.iter().enumerate() {
        let in_unit = |x: f64| (0.0..=1.0).contains(&x);
        let mean_ok = b.mean_confidence().is_none_or(in_unit);
        if !(in_unit(b.lo) && in_unit(b.hi) && b.lo <= b.hi && b.hits <= b.count && mean_ok) {
            return Err(CalibError::InvalidArgument(format!(
                "bin {i} cannot be plotted: {b:?}"
            )));
        }
    }
    Ok(bins)
}

/// Narrowest bar drawn, as a fraction of the confidence axis.
const MIN_BAR_WIDTH: f64 = 0.008;

/// The x extent of a bin's bar: its edges, except that a bin narrower than
/// [`MIN_BAR_WIDTH`] (the one-point bin `[1, 1]` of the left-closed
/// convention) is widened to the left so that it stays visible.
fn bar_edges(bin: &Bin) -> (f64, f64) {
    (bin.lo.min(bin.hi - MIN_BAR_WIDTH), bin.hi)
}

/// (accuracy, mean confidence) of all binned samples.
fn overall_accuracy_and_confidence(bins: &[Bin]) -> (f64, f64) {
    let count: usize = bins.iter().map(|b| b.count).sum();
    let hits: usize = bins.iter().map(|b| b.hits).sum();
    let score: f64 = bins.iter().map(|b| b.sum_confidence).sum();
    (hits as f64 / count as f64, score / count as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binning::Binning;

    /// 15 equal-width bins of an overconfident model: confidence c is right
    /// with probability about c - 0.1.
    fn stats() -> BinStats {
        let pairs = (0..400).map(|i| {
            let c = 0.3 + 0.7 * (i as f64 / 400.0);
            (c, (i * 37 % 100) as f64 / 100.0 < c - 0.1)
        });
        BinStats::from_pairs(&Binning::default(), pairs).unwrap()
    }

    #[test]
    fn overall_statistics_pool_the_bins() {
        let pairs = [(0.55, false), (0.95, true), (0.95, true), (0.95, true)];
        let s = BinStats::from_pairs(&Binning::default(), pairs).unwrap();
        let (acc, conf) = overall_accuracy_and_confidence(&s.bins);
        // Sums of 4 terms <= 1 and one division: <= 5 * 2.2e-16 * 4 ~ 4.4e-15 of round-off.
        assert!((acc - 0.75).abs() < 1e-12 && (conf - 0.85).abs() < 1e-12);
    }

    #[test]
    fn one_point_bins_get_a_visible_bar() {
        let pairs = [(1.0, true), (0.5, false)];
        let binning = Binning::EqualWidth {
            n_bins: 10,
            edges: crate::binning::EdgeConvention::LeftClosedWithOneBin,
        };
        let s = BinStats::from_pairs(&binning, pairs).unwrap();
        let last = s.bins.last().unwrap();
        assert_eq!((last.lo, last.hi, last.count), (1.0, 1.0, 1));
        assert_eq!(bar_edges(last), (1.0 - MIN_BAR_WIDTH, 1.0));
        assert_eq!(bar_edges(&s.bins[5]), (0.5, 0.6));
    }

    #[test]
    fn svg_has_title_axes_and_legend() {
        let svg = String::from_utf8(
            reliability_diagram(&stats(), "raw", 0.0321, ImageFormat::Svg).unwrap(),
        )
        .unwrap();
        for text in ["raw (ECE 3.21%)", "Confidence", "Accuracy", "Gap"] {
            assert!(svg.contains(text), "missing {text}");
        }
        let svg =
            String::from_utf8(confidence_histogram(&stats(), "raw", ImageFormat::Svg).unwrap())
                .unwrap();
        for text in [
            "Fraction of samples",
            "Confidence",
            "Accuracy",
            "Avg. confidence",
        ] {
            assert!(svg.contains(text), "missing {text}");
        }
    }

    #[test]
    fn an_underconfident_bin_gets_its_own_legend_entry() {
        let entry = "Gap inside the bar (underconfident)";
        let overconfident = reliability_diagram(&stats(), "raw", 0.03, ImageFormat::Svg).unwrap();
        assert!(!String::from_utf8(overconfident).unwrap().contains(entry));
        // Confidence about 0.35, all right: the gap lies inside the bar.
        let pairs = (0..40).map(|i| (0.3 + 0.1 * (i as f64 / 40.0), true));
        let under = BinStats::from_pairs(&Binning::default(), pairs).unwrap();
        let svg = reliability_diagram(&under, "raw", 0.65, ImageFormat::Svg).unwrap();
        assert!(String::from_utf8(svg).unwrap().contains(entry));
    }

    #[test]
    fn png_is_a_decodable_image_with_drawn_text() {
        let bytes = reliability_diagram(&stats(), "raw", 0.05, ImageFormat::Png).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(&bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut pixels = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut pixels).unwrap();
        assert_eq!((info.width, info.height), render::SIZE);
        // The title band (top 40 px) holds only text: some pixels there must be dark.
        let row_bytes = info.width as usize * 3;
        let dark = pixels[..40 * row_bytes]
            .chunks(3)
            .filter(|p| p.iter().all(|&c| c < 100))
            .count();
        assert!(dark > 50, "the title was not rendered ({dark} dark pixels)");
    }

    #[test]
    fn refuses_empty_or_invalid_bins_and_unknown_extensions() {
        let mut empty = stats();
        empty.bins.iter_mut().for_each(|b| b.count = 0);
        assert!(matches!(
            reliability_diagram(&empty, "t", 0.0, ImageFormat::Svg),
            Err(CalibError::Empty(_))
        ));
        let mut bad = stats();
        let last = bad.bins.len() - 1;
        bad.bins[last].hits = bad.bins[last].count + 1;
        assert!(confidence_histogram(&bad, "t", ImageFormat::Svg).is_err());
        let mut nan = stats();
        nan.bins[last].sum_confidence = f64::NAN;
        assert!(reliability_diagram(&nan, "t", 0.0, ImageFormat::Png).is_err());
        assert!(ImageFormat::from_path(Path::new("a.jpg")).is_err());
    }

    #[test]
    fn writes_both_formats_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("r.svg");
        let png = dir.path().join("h.PNG");
        write_reliability_diagram(&svg, &stats(), "raw", 0.1).unwrap();
        write_confidence_histogram(&png, &stats(), "raw").unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
        assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
}
