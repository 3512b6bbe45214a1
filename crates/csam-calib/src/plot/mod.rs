//! Reliability diagrams and confidence histograms, as SVG or PNG.
//!
//! Both figures are drawn from per-bin statistics (the same bins the binned
//! metrics use, paper-notes §2), in the style of Guo et al. (2017), "On
//! Calibration of Modern Neural Networks", Figure 1:
//!
//! * [`write_reliability_diagram`]: per-bin accuracy bars, the gap between a
//!   bin's accuracy and its mean confidence as a red segment on top of (or
//!   inside) the bar, the diagonal of perfect calibration, axes "Confidence" /
//!   "Accuracy", the ECE in the title;
//! * [`write_confidence_histogram`]: the fraction of samples per bin, with
//!   vertical lines at the accuracy and the mean confidence.
//!
//! Text is drawn with a bundled font (DejaVu Sans, `assets/fonts`, licence
//! alongside), so PNGs render identically on machines without system fonts.
//! Files are written atomically; the format follows the extension (`.svg`,
//! `.png`).

mod histogram;
mod reliability;
mod render;
mod style;

use std::path::Path;

use crate::error::{CalibError, Result};
use crate::io::write_atomically;

/// One bin of reliability data: the confidence interval it covers and the
/// statistics of the samples that fell into it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlotBin {
    /// Lower edge of the bin (confidence).
    pub lo: f64,
    /// Upper edge of the bin.
    pub hi: f64,
    /// Number of samples in the bin.
    pub count: usize,
    /// Mean confidence of those samples (ignored when `count` is 0).
    pub mean_confidence: f64,
    /// Fraction of them that were classified correctly (ignored when `count` is 0).
    pub accuracy: f64,
}

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

/// The reliability diagram of `bins` as SVG or PNG bytes. The title reads
/// `"{title} (ECE x.xx%)"`; `ece` is a fraction.
pub fn reliability_diagram(
    bins: &[PlotBin],
    title: &str,
    ece: f64,
    format: ImageFormat,
) -> Result<Vec<u8>> {
    check_bins(bins)?;
    let title = format!("{title} (ECE {:.2}%)", 100.0 * ece);
    render::render(
        &reliability::Reliability {
            bins,
            title: &title,
        },
        format,
    )
}

/// The confidence histogram of `bins` as SVG or PNG bytes: the fraction of
/// samples per bin, and dashed lines at the accuracy and the mean confidence
/// (count-weighted averages over the bins).
pub fn confidence_histogram(bins: &[PlotBin], title: &str, format: ImageFormat) -> Result<Vec<u8>> {
    check_bins(bins)?;
    render::render(&histogram::Histogram { bins, title }, format)
}

/// Writes [`reliability_diagram`] to `path` (format from the extension), atomically.
pub fn write_reliability_diagram(
    path: &Path,
    bins: &[PlotBin],
    title: &str,
    ece: f64,
) -> Result<()> {
    let bytes = reliability_diagram(bins, title, ece, ImageFormat::from_path(path)?)?;
    write_atomically(path, &bytes)
}

/// Writes [`confidence_histogram`] to `path` (format from the extension), atomically.
pub fn write_confidence_histogram(path: &Path, bins: &[PlotBin], title: &str) -> Result<()> {
    let bytes = confidence_histogram(bins, title, ImageFormat::from_path(path)?)?;
    write_atomically(path, &bytes)
}

/// Bins must lie in [0, 1], be ordered, hold finite statistics, and not all be empty.
fn check_bins(bins: &[PlotBin]) -> Result<()> {
    if bins.iter().all(|b| b.count == 0) {
        return Err(CalibError::Empty("no samples in any bin to plot".into()));
    }
    for (i, b) in bins.iter().enumerate() {
        let in_unit = |x: f64| (0.0..=1.0).contains(&x);
        let stats_ok = b.count == 0 || (in_unit(b.mean_confidence) && in_unit(b.accuracy));
        if !(in_unit(b.lo) && in_unit(b.hi) && b.lo <= b.hi && stats_ok) {
            return Err(CalibError::InvalidArgument(format!(
                "plot bin {i} is not a valid bin: {b:?}"
            )));
        }
    }
    Ok(())
}

/// Count-weighted (accuracy, mean confidence) over all non-empty bins.
fn overall_accuracy_and_confidence(bins: &[PlotBin]) -> (f64, f64) {
    let n: f64 = bins.iter().map(|b| b.count as f64).sum();
    let weighted = |f: fn(&PlotBin) -> f64| {
        bins.iter()
            .filter(|b| b.count > 0)
            .map(|b| b.count as f64 * f(b))
            .sum::<f64>()
            / n
    };
    (weighted(|b| b.accuracy), weighted(|b| b.mean_confidence))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins() -> Vec<PlotBin> {
        (0..10)
            .map(|i| {
                let lo = i as f64 / 10.0;
                PlotBin {
                    lo,
                    hi: lo + 0.1,
                    count: if i < 3 { 0 } else { 10 * i },
                    mean_confidence: lo + 0.05,
                    accuracy: (lo + 0.05 - 0.1).max(0.0),
                }
            })
            .collect()
    }

    #[test]
    fn overall_statistics_are_count_weighted() {
        let b = [
            PlotBin {
                lo: 0.5,
                hi: 0.6,
                count: 1,
                mean_confidence: 0.55,
                accuracy: 0.0,
            },
            PlotBin {
                lo: 0.9,
                hi: 1.0,
                count: 3,
                mean_confidence: 0.95,
                accuracy: 1.0,
            },
        ];
        let (acc, conf) = overall_accuracy_and_confidence(&b);
        assert!((acc - 0.75).abs() < 1e-12 && (conf - 0.85).abs() < 1e-12);
    }

    #[test]
    fn svg_has_title_axes_and_legend() {
        let svg = String::from_utf8(
            reliability_diagram(&bins(), "raw", 0.0321, ImageFormat::Svg).unwrap(),
        )
        .unwrap();
        for text in ["raw (ECE 3.21%)", "Confidence", "Accuracy", "Gap"] {
            assert!(svg.contains(text), "missing {text}");
        }
        let svg =
            String::from_utf8(confidence_histogram(&bins(), "raw", ImageFormat::Svg).unwrap())
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
    fn png_is_a_decodable_image_with_drawn_text() {
        let bytes = reliability_diagram(&bins(), "raw", 0.05, ImageFormat::Png).unwrap();
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
        let mut empty = bins();
        empty.iter_mut().for_each(|b| b.count = 0);
        assert!(matches!(
            reliability_diagram(&empty, "t", 0.0, ImageFormat::Svg),
            Err(CalibError::Empty(_))
        ));
        let mut bad = bins();
        bad[5].accuracy = f64::NAN;
        assert!(confidence_histogram(&bad, "t", ImageFormat::Svg).is_err());
        assert!(ImageFormat::from_path(Path::new("a.jpg")).is_err());
    }

    #[test]
    fn writes_both_formats_by_extension() {
        let dir = tempfile::tempdir().unwrap();
        let svg = dir.path().join("r.svg");
        let png = dir.path().join("h.PNG");
        write_reliability_diagram(&svg, &bins(), "raw", 0.1).unwrap();
        write_confidence_histogram(&png, &bins(), "raw").unwrap();
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
        assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
}
