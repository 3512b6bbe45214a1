//! Turns a figure into SVG or PNG bytes, with the bundled font registered.

use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::ImageFormat;
use crate::error::{CalibError, Result};

/// Width and height of every figure, in pixels.
pub(super) const SIZE: (u32, u32) = (800, 600);

/// DejaVu Sans (Bitstream Vera licence, see assets/fonts/DejaVuSans-LICENSE.txt).
static FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSans.ttf");

/// A figure that can draw itself on any plotters backend.
pub(super) trait Figure {
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> std::result::Result<(), String>;
}

/// Draws `figure` and encodes it in `format`.
pub(super) fn render(figure: &impl Figure, format: ImageFormat) -> Result<Vec<u8>> {
    register_font()?;
    match format {
        ImageFormat::Svg => {
            let mut svg = String::new();
            {
                let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
                draw_and_present(figure, &root)?;
            }
            Ok(svg.into_bytes())
        }
        ImageFormat::Png => {
            let (w, h) = SIZE;
            let mut rgb = vec![0u8; w as usize * h as usize * 3];
            {
                let root = BitMapBackend::with_buffer(&mut rgb, SIZE).into_drawing_area();
                draw_and_present(figure, &root)?;
            }
            encode_png(&rgb, w, h)
        }
    }
}

fn draw_and_present<DB: DrawingBackend>(
    figure: &impl Figure,
    root: &DrawingArea<DB, Shift>,
) -> Result<()> {
    root.fill(&WHITE).map_err(plot_error)?;
    figure.draw(root).map_err(CalibError::Plot)?;
    root.present().map_err(plot_error)
}

/// Makes the bundled font the "sans-serif" family (plotters' default), once.
fn register_font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    });
    if ok {
        Ok(())
    } else {
        Err(CalibError::Plot(
            "the bundled font could not be loaded".into(),
        ))
    }
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(rgb))
        .map_err(|e| CalibError::Plot(format!("PNG encoding: {e}")))?;
    Ok(out)
}

/// Plotters' drawing errors as crate errors.
pub(super) fn plot_error(e: impl std::fmt::Display) -> CalibError {
    CalibError::Plot(e.to_string())
}
