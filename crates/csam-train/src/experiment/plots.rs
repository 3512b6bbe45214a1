//! The figures of a comparison: per method, the reliability diagram and the
//! confidence histogram of one run's raw test predictions (15 equal-width
//! bins, the bins of the table's ECE; paper-notes §2), as SVG and PNG, drawn
//! by the calibration crate's [`csam_calib::plot`].

use std::path::{Path, PathBuf};

use csam_calib::binning::Norm;
use csam_calib::metrics::reliability_diagram;
use csam_calib::metrics::summary::MetricOptions;
use csam_calib::plot::{write_confidence_histogram, write_reliability_diagram};
use ndarray::ArrayView2;

use crate::train::{OptimizerFamily, TrainError};

/// The image formats every figure is written in.
const EXTENSIONS: [&str; 2] = ["svg", "png"];

/// Writes `reliability-<method>-seed<seed>.{svg,png}` and
/// `confidence-<method>-seed<seed>.{svg,png}` into `dir` (created if
/// missing), each atomically; returns their paths.
pub fn write_method_plots(
    dir: &Path,
    method: OptimizerFamily,
    seed: u64,
    probabilities: ArrayView2<'_, f64>,
    labels: &[usize],
) -> Result<Vec<PathBuf>, TrainError> {
    let failed = |e: csam_calib::CalibError| TrainError::Metrics(format!("plots: {e}"));
    let stats = reliability_diagram(
        probabilities,
        labels,
        &MetricOptions::default().equal_width(),
    )
    .map_err(failed)?;
    std::fs::create_dir_all(dir).map_err(TrainError::io("create plot directory", dir))?;
    let title = format!("{}, seed {seed}, test", method.to_string().to_uppercase());
    let ece = stats.calibration_error(Norm::L1);
    let mut written = Vec::new();
    for extension in EXTENSIONS {
        let reliability = dir.join(format!("reliability-{method}-seed{seed}.{extension}"));
        write_reliability_diagram(&reliability, &stats, &title, ece).map_err(failed)?;
        let confidence = dir.join(format!("confidence-{method}-seed{seed}.{extension}"));
        write_confidence_histogram(&confidence, &stats, &title).map_err(failed)?;
        written.extend([reliability, confidence]);
    }
    Ok(written)
}
