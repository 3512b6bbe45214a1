//! Figures of a theory log over training (SVG and PNG, drawn by
//! [`csam_calib::plot::write_line_chart`]), written into the run directory.

use std::path::{Path, PathBuf};

use csam_calib::plot::{write_line_chart, LineChart, Series};

use super::record::TheoryRecord;
use crate::train::TrainError;

/// The figures, by file stem: the probabilities with Lemma 2's bound, lambda
/// and lambda_0 (paper Figure 2c), H(p_y), and ||g||.
pub const THEORY_PLOTS: [&str; 4] = [
    "theory-probabilities",
    "theory-lambda",
    "theory-entropy",
    "theory-grad-norm",
];

/// The figures of [`THEORY_PLOTS`], in that order, as charts (x: the
/// global step); the HTML report draws the same charts. Refuses an empty log.
pub fn theory_charts(records: &[TheoryRecord]) -> Result<Vec<LineChart>, TrainError> {
    if records.is_empty() {
        return Err(TrainError::Metrics(
            "theory plots: the log holds no step".to_string(),
        ));
    }
    let series = |label: &str, value: fn(&TheoryRecord) -> Option<f64>| Series {
        label: label.to_string(),
        points: records
            .iter()
            .filter_map(|r| {
                let y = value(r).filter(|y| y.is_finite())?;
                Some((r.global_step as f64, y))
            })
            .collect(),
    };
    // lambda and lambda_0 are >= 1 where defined: read against 1, not 0.
    let chart = |title: &str, y_label: &str, series: Vec<Series>| LineChart {
        title: title.to_string(),
        x_label: "Step".to_string(),
        y_label: y_label.to_string(),
        y_from_zero: !title.starts_with("lambda"),
        series,
    };
    Ok(vec![
        chart(
            "True-class probability (geometric mean over the batch)",
            "Probability",
            vec![
                series("p_y at theta", |r| Some(r.p_y)),
                series("p~_y at theta~", |r| Some(r.p_y_tilde)),
                series("Lemma 2 bound exp(-rho|g|/2) p_y", |r| Some(r.bound)),
            ],
        ),
        chart(
            "lambda and its lower bound lambda_0",
            "Coefficient",
            vec![
                series("lambda", |r| r.lambda),
                series("lambda_0", |r| r.lambda_0),
            ],
        ),
        chart(
            "Binary entropy H(p_y)",
            "Entropy (nats)",
            vec![series("H(p_y)", |r| Some(r.entropy))],
        ),
        chart(
            "Gradient norm at theta",
            "||g||",
            vec![series("||g||", |r| Some(r.grad_norm))],
        ),
    ])
}

/// Writes `<stem>.svg` and `<stem>.png` for every stem of [`THEORY_PLOTS`]
/// into `dir`, atomically, and returns their paths.
pub fn write_theory_plots(
    dir: &Path,
    records: &[TheoryRecord],
) -> Result<Vec<PathBuf>, TrainError> {
    let charts = theory_charts(records)?;
    let mut written = Vec::new();
    for (stem, chart) in THEORY_PLOTS.iter().zip(&charts) {
        for extension in ["svg", "png"] {
            let path = dir.join(format!("{stem}.{extension}"));
            write_line_chart(&path, chart)
                .map_err(|e| TrainError::Metrics(format!("{}: {e}", path.display())))?;
            written.push(path);
        }
    }
    Ok(written)
}
