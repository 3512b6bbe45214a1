//! Files written by `csam metrics`: plots (`--plot DIR`) and fitted calibrators
//! (`--save-calibrators DIR`).

use std::path::{Path, PathBuf};

use anyhow::Context;
use csam_calib::binning::Binning;
use csam_calib::calibrators::registry::FittedCalibrator;
use csam_calib::io::write_atomically;
use csam_calib::metrics::reliability_diagram;
use csam_calib::plot::{write_confidence_histogram, write_reliability_diagram};
use csam_calib::scores::Real;
use ndarray::ArrayView2;

/// Writes `DIR/NAME-reliability.{svg,png}` and `DIR/NAME-confidence.{svg,png}`
/// for one column (`raw` or a calibrator), binned with `binning`. Returns the paths.
pub fn write_plots<T: Real>(
    dir: &Path,
    name: &str,
    probs: ArrayView2<'_, T>,
    labels: &[usize],
    binning: &Binning,
    ece: f64,
) -> anyhow::Result<Vec<PathBuf>> {
    let stats = reliability_diagram(probs, labels, binning)
        .with_context(|| format!("binning the {name} predictions for the plots"))?;
    let mut written = Vec::new();
    for ext in ["svg", "png"] {
        let reliability = dir.join(format!("{name}-reliability.{ext}"));
        write_reliability_diagram(&reliability, &stats, name, ece)?;
        let confidence = dir.join(format!("{name}-confidence.{ext}"));
        write_confidence_histogram(&confidence, &stats, name)?;
        written.extend([reliability, confidence]);
    }
    Ok(written)
}

/// Writes `DIR/NAME.json` for a fitted calibrator (readable by
/// `FittedCalibrator::from_json`). Returns the path.
pub fn save_calibrator(dir: &Path, calibrator: &FittedCalibrator) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{}.json", calibrator.kind().name()));
    let json = calibrator.to_json()?;
    write_atomically(&path, json.as_bytes())?;
    Ok(path)
}

/// Creates `dir` (and its parents) for `what`.
pub fn create_dir(dir: &Path, what: &str) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("{what}: cannot create the directory {}", dir.display()))
}
