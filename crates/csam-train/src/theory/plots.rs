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

/// The most points a line gets: longer logs are averaged over windows of
/// consecutive steps, since thousands of noisy per-step values hide the
/// trend the paper's figures show (and bloat the SVG).
const MAX_POINTS: usize = 250;

/// `(mean step, mean value)` of the steps of `chunk` where `value` is
/// defined and finite; None where it is nowhere.
fn window_mean(
    chunk: &[TheoryRecord],
    value: fn(&TheoryRecord) -> Option<f64>,
) -> Option<(f64, f64)> {
    let defined: Vec<(f64, f64)> = chunk
        .iter()
        .filter_map(|r| Some((r.global_step as f64, value(r).filter(|y| y.is_finite())?)))
        .collect();
    let n = defined.len() as f64;
    (!defined.is_empty()).then(|| {
        let (x, y) = defined
            .iter()
            .fold((0.0, 0.0), |(sx, sy), (x, y)| (sx + x, sy + y));
        (x / n, y / n)
    })
}

/// The figures of [`THEORY_PLOTS`], in that order, as charts (x: the
/// global step; logs longer than [`MAX_POINTS`] steps averaged over windows
/// of consecutive steps); the HTML report draws the same charts. Refuses an
/// empty log.
pub fn theory_charts(records: &[TheoryRecord]) -> Result<Vec<LineChart>, TrainError> {
    if records.is_empty() {
        return Err(TrainError::EmptyTheoryLog);
    }
    let window = records.len().div_ceil(MAX_POINTS);
    let series = |label: &str, value: fn(&TheoryRecord) -> Option<f64>| Series {
        label: label.to_string(),
        points: records
            .chunks(window)
            .filter_map(|chunk| window_mean(chunk, value))
            .collect(),
    };
    // lambda and lambda_0 are >= 1 where defined: read against 1, not 0.
    let chart = |title: &str, y_label: &str, series: Vec<Series>| LineChart {
        title: title.to_string(),
        x_label: match window {
            1 => "Step".to_string(),
            _ => format!("Step (means over windows of {window} steps)"),
        },
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
                .map_err(TrainError::metrics_of(path.display().to_string()))?;
            written.push(path);
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(global_step: usize, lambda: Option<f64>) -> TheoryRecord {
        TheoryRecord {
            epoch: 1,
            global_step,
            p_y: 0.5,
            p_y_tilde: 0.4,
            grad_norm: 1.0,
            bound: 0.45,
            lemma2_holds: true,
            lambda,
            lambda_0: None,
            entropy: 0.69,
        }
    }

    #[test]
    fn window_means_skip_undefined_values() {
        let chunk = [record(0, Some(1.0)), record(1, None), record(2, Some(3.0))];
        // Means of small integers: exact in f64.
        assert_eq!(window_mean(&chunk, |r| r.lambda), Some((1.0, 2.0)));
        assert_eq!(window_mean(&chunk, |r| r.lambda_0), None);
    }

    #[test]
    fn long_logs_are_averaged_down_to_at_most_max_points() {
        let long: Vec<TheoryRecord> = (0..1000).map(|i| record(i, Some(i as f64))).collect();
        let charts = theory_charts(&long).unwrap();
        let lambda = &charts[1].series[0].points;
        assert!(lambda.len() <= MAX_POINTS, "{} points", lambda.len());
        // Windows of 4 consecutive steps: the first is steps 0..=3.
        // (0 + 1 + 2 + 3) / 4 = 1.5: exact.
        assert_eq!(lambda[0], (1.5, 1.5));
        let short: Vec<TheoryRecord> = (0..10).map(|i| record(i, Some(1.0))).collect();
        assert_eq!(theory_charts(&short).unwrap()[1].series[0].points.len(), 10);
    }
}
