//! A report figure: written as SVG and PNG under the experiment's `plots/`
//! (atomically, for papers) and embedded in the page as inline SVG.

use std::path::Path;

use csam_calib::plot::ImageFormat;

use crate::error::{LabError, Result};
use csam_train::train::atomic::write_atomic;
use csam_train::train::TrainError;

/// A figure ready for the page.
#[derive(Debug, Clone, PartialEq)]
pub struct Embedded {
    /// The SVG markup (an `<svg>` element).
    pub svg: String,
    /// The caption, plain text.
    pub caption: String,
    /// The files it was written to, relative to the experiment directory.
    pub files: Vec<String>,
}

/// Draws a figure with `draw` in both formats, writes
/// `<root>/plots/<stem>.{svg,png}` and returns the embedded figure.
pub fn write_figure(
    root: &Path,
    stem: &str,
    caption: impl Into<String>,
    draw: impl Fn(ImageFormat) -> csam_calib::Result<Vec<u8>>,
) -> Result<Embedded> {
    let plots = root.join("plots");
    std::fs::create_dir_all(&plots).map_err(TrainError::io("create plot directory", &plots))?;
    let mut svg = String::new();
    let mut files = Vec::new();
    for (format, extension) in [(ImageFormat::Svg, "svg"), (ImageFormat::Png, "png")] {
        let bytes = draw(format).map_err(TrainError::metrics_of(format!("figure {stem}")))?;
        let relative = format!("plots/{stem}.{extension}");
        write_atomic(&root.join(&relative), &bytes)?;
        if format == ImageFormat::Svg {
            svg = String::from_utf8(bytes).map_err(|source| LabError::SvgNotUtf8 {
                stem: stem.to_string(),
                source,
            })?;
        }
        files.push(relative);
    }
    Ok(Embedded {
        svg: inline_svg(&svg),
        caption: caption.into(),
        files,
    })
}

/// The `<svg>` element of an SVG document (any XML prolog dropped), for
/// embedding in HTML.
fn inline_svg(document: &str) -> String {
    match document.find("<svg") {
        Some(start) => document[start..].trim_end().to_string(),
        None => document.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prolog_is_dropped() {
        assert_eq!(
            inline_svg("<?xml version=\"1.0\"?>\n<svg a=\"1\"></svg>\n"),
            "<svg a=\"1\"></svg>"
        );
    }
}
