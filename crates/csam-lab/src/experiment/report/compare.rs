//! The report of a comparison (`csam compare`, `csam report DIR`): the
//! paper's table, per method the confidence histogram and reliability
//! diagram side by side (Figure 1), ECE after post-hoc calibration (Figure
//! 3a-b), ECE and TCE over training (Figure 3c-d), and the distribution of
//! predictive entropy. Figures come from the first seed's test predictions
//! (single-run figures) or from the means over seeds (bars and curves).

use csam_calib::binning::Norm;
use csam_calib::metrics::summary::MetricOptions;
use csam_calib::metrics::{entropies, reliability_diagram};
use csam_calib::plot::{
    bar_chart, confidence_histogram, line_chart, reliability_diagram as reliability_figure,
    BarChart, LineChart, Series,
};
use ndarray::Array2;

use super::figure::write_figure;
use super::html::{self, Cell};
use super::{epochs, Report, Section};
use crate::experiment::base::{data_name, model_name};
use crate::experiment::compare_dir::CompareDir;
use crate::experiment::method::Method;
use crate::experiment::posthoc::test_probabilities;
use crate::experiment::results::{CompareResults, Metric};
use crate::experiment::table;
use csam_train::train::rundir::RunDir;
use csam_train::train::TrainError;

use crate::error::{LabError, Result};

/// Bins of the entropy histogram.
const ENTROPY_BINS: usize = 20;

/// Writes the figures and `report.html` of the comparison in `dir`.
pub fn write(dir: &CompareDir, results: &CompareResults) -> Result<()> {
    let report = Report {
        title: format!(
            "csam compare: {} on {}",
            model_name(&results.settings.base),
            data_name(&results.settings.base)
        ),
        intro: table::caption(&results.settings),
        sections: sections(dir, results)?,
    };
    report.write(&dir.report())
}

/// The test predictions of one method's first seed.
struct MethodPredictions {
    method: Method,
    seed: u64,
    probabilities: Array2<f64>,
    labels: Vec<usize>,
}

/// The sections of the report, in page order. A new section (e.g. the
/// theory diagnostics of `--track-theory` runs) is one more push here.
pub fn sections(dir: &CompareDir, results: &CompareResults) -> Result<Vec<Section>> {
    let mut predictions = Vec::new();
    for &method in &results.settings.methods {
        // The first seed that finished (runs are seed-major); a method
        // every seed of which diverged has no figures.
        let Some(seed) = results
            .settings
            .seeds
            .iter()
            .copied()
            .find(|&seed| !results.diverged_at(method, seed))
        else {
            continue;
        };
        let record = results
            .runs
            .iter()
            .find(|run| run.method == method && run.seed == seed)
            .ok_or_else(|| LabError::MissingResult {
                method: method.to_string(),
                seed,
            })?;
        let run_dir = RunDir::new(dir.root().join(&record.run_dir));
        let (probabilities, labels) = test_probabilities(&run_dir)?;
        predictions.push(MethodPredictions {
            method,
            seed,
            probabilities,
            labels,
        });
    }
    let mut sections = vec![
        table_section(results),
        calibration_section(dir, &predictions, &results.settings.base.metrics)?,
        posthoc_section(dir, results)?,
    ];
    sections.extend(cost_section(dir, results)?);
    sections.extend(training_section(dir, results)?);
    sections.push(entropy_section(dir, &predictions)?);
    sections.extend(super::theory::section(dir, results)?);
    Ok(sections)
}

/// The paper-style table: mean ± std per method and metric; each cell also
/// carries the exact mean and std (fractions) as `data-` attributes.
fn table_section(results: &CompareResults) -> Section {
    let header: Vec<String> = std::iter::once("Method".to_string())
        .chain(Metric::ALL.iter().map(|m| match m.in_percent() {
            true => format!("{} (%)", m.header()),
            false => m.header().to_string(),
        }))
        .collect();
    let rows: Vec<Vec<Cell>> = results
        .aggregates
        .iter()
        .map(|aggregate| {
            std::iter::once(Cell::plain(table::method_label(aggregate)))
                .chain(Metric::ALL.iter().map(|&metric| {
                    let value = aggregate.get(metric);
                    let mut data = vec![
                        ("method", aggregate.method.to_string()),
                        ("metric", metric.key().to_string()),
                    ];
                    if let Some(value) = value {
                        data.push(("mean", value.mean.to_string()));
                        data.push(("std", value.std.map(|s| s.to_string()).unwrap_or_default()));
                    }
                    Cell {
                        text: table::aggregate_cell(aggregate, metric),
                        data,
                    }
                }))
                .collect()
        })
        .collect();
    Section {
        id: "table".into(),
        title: "Results".into(),
        body: html::table(
            "results",
            &table::caption(&results.settings),
            &header,
            &rows,
        ),
    }
}

/// Per method: confidence histogram and reliability diagram (Figure 1).
fn calibration_section(
    dir: &CompareDir,
    predictions: &[MethodPredictions],
    metrics: &MetricOptions,
) -> Result<Section> {
    let options = metrics.equal_width();
    // A method's two figures side by side (or one above the other on a
    // narrow page), so that a row never pairs two methods.
    let mut figures = Vec::new();
    for p in predictions {
        let stats = reliability_diagram(p.probabilities.view(), &p.labels, &options).map_err(
            TrainError::metrics_of(format!("reliability of {}", p.method)),
        )?;
        let name = p.method.to_string().to_uppercase();
        let title = format!("{name}, seed {}, test", p.seed);
        let ece = stats.calibration_error(Norm::L1);
        let stem = format!("{}-seed{}", p.method, p.seed);
        figures.push(write_figure(
            dir.root(),
            &format!("confidence-{stem}"),
            format!("{name}: fraction of test samples per confidence bin"),
            |format| confidence_histogram(&stats, &title, format),
        )?);
        figures.push(write_figure(
            dir.root(),
            &format!("reliability-{stem}"),
            format!("{name}: accuracy per confidence bin (15 equal-width bins)"),
            |format| reliability_figure(&stats, &title, ece, format),
        )?);
    }
    Ok(Section {
        id: "calibration".into(),
        title: "Confidence histograms and reliability diagrams".into(),
        body: format!(
            "{}{}",
            html::paragraph(
                "The paper's Figure 1, per method: the test confidence histogram beside the \
                 reliability diagram of the first seed. A well calibrated model has its \
                 average confidence on its accuracy and its bars on the diagonal."
            ),
            html::grid(&figures)
        ),
    })
}

/// ECE before and after each post-hoc calibrator, per method (Figure 3a-b).
fn posthoc_section(dir: &CompareDir, results: &CompareResults) -> Result<Section> {
    let columns = [
        ("raw", Metric::Ece),
        ("temperature (TCE)", Metric::Tce),
        ("isotonic", Metric::EceIsotonic),
        ("histogram binning", Metric::EceHistogram),
    ];
    // A method every seed of which diverged has no bars.
    let finished = || results.aggregates.iter().filter(|a| !a.seeds.is_empty());
    let groups: Vec<String> = finished()
        .map(|a| a.method.to_string().to_uppercase())
        .collect();
    let series: Vec<(String, Vec<f64>)> = columns
        .iter()
        .map(|(label, metric)| {
            let values = finished()
                .map(|a| a.get(*metric).map_or(0.0, |v| 100.0 * v.mean))
                .collect();
            (label.to_string(), values)
        })
        .collect();
    let chart = BarChart {
        title: "Test ECE after post-hoc calibration".into(),
        y_label: "ECE (%)".into(),
        groups,
        series,
    };
    let figure = write_figure(
        dir.root(),
        "posthoc-ece",
        "Mean test ECE over seeds, raw and after each calibrator fitted on the validation split",
        |format| bar_chart(&chart, format),
    )?;
    Ok(Section {
        id: "posthoc".into(),
        title: "Post-hoc calibration".into(),
        body: format!(
            "{}{}",
            html::paragraph(
                "The paper's Figure 3a-b: the columns TCE, ECE iso and ECE hist of the table, \
                 next to the raw ECE."
            ),
            html::grid(&[figure])
        ),
    })
}

/// ECE and TCE of every epoch's weights (Figure 3c-d); none when no method
/// is one network (ensembles and MC-Dropout have no weights of their own per
/// epoch).
fn training_section(dir: &CompareDir, results: &CompareResults) -> Result<Option<Section>> {
    let curves = epochs::read(dir.root(), results)?;
    if curves.ece.is_empty() {
        return Ok(None);
    }
    let line = |what: &str, series: Vec<Series>| LineChart {
        title: format!("{what} during training ({})", curves.split),
        x_label: "Epoch".into(),
        y_label: format!("{what} (%)"),
        series,
        y_from_zero: true,
    };
    let ece = line("ECE", curves.ece.clone());
    let mut figures = vec![write_figure(
        dir.root(),
        "ece-epochs",
        format!(
            "{} ECE of each epoch's weights, mean over seeds",
            curves.split
        ),
        |format| line_chart(&ece, format),
    )?];
    if let Some(tce) = &curves.tce {
        let tce = line("TCE", tce.clone());
        figures.push(write_figure(
            dir.root(),
            "tce-epochs",
            "Test ECE after a temperature fitted on that epoch's validation logits, mean over seeds",
            |format| line_chart(&tce, format),
        )?);
    }
    let note = match curves.tce {
        Some(_) => {
            "The paper's Figure 3c-d: test ECE and TCE of the weights after every epoch \
                    (the loop logs them per epoch; the best checkpoint is still chosen on \
                    validation only)."
        }
        None => {
            "Some runs were trained before the loop logged per-epoch test metrics: the \
                 validation ECE is shown, and no TCE. Retrain them to see the paper's Figure 3c-d."
        }
    };
    Ok(Some(Section {
        id: "training".into(),
        title: "Calibration during training".into(),
        body: format!("{}{}", html::paragraph(note), html::grid(&figures)),
    }))
}

/// Test ECE against training time, one point per method (the mean over
/// seeds of each): what each method's calibration costs. None when no
/// method has both a time ratio and an ECE.
fn cost_section(dir: &CompareDir, results: &CompareResults) -> Result<Option<Section>> {
    let Some(costs) = table::costs(&results.runs, &results.settings.methods) else {
        return Ok(None);
    };
    let series: Vec<Series> = costs
        .rows
        .iter()
        .filter_map(|cost| {
            let ece = results
                .aggregates
                .iter()
                .find(|a| a.method == cost.method)?
                .get(Metric::Ece)?;
            Some(Series {
                label: cost.method.to_string().to_uppercase(),
                points: vec![(cost.ratio?, 100.0 * ece.mean)],
            })
        })
        .collect();
    if series.is_empty() {
        return Ok(None);
    }
    let reference = costs.reference.to_string().to_uppercase();
    let chart = LineChart {
        title: "Test ECE against training time".into(),
        x_label: format!("Training time / {reference}'s"),
        y_label: "ECE (%)".into(),
        series,
        y_from_zero: true,
    };
    let figure = write_figure(
        dir.root(),
        "ece-cost",
        format!(
            "Mean test ECE over seeds against the mean training time over {reference}'s (cost.md)"
        ),
        |format| line_chart(&chart, format),
    )?;
    Ok(Some(Section {
        id: "cost".into(),
        title: "Calibration against cost".into(),
        body: format!(
            "{}{}",
            html::paragraph(
                "One point per method: lower is better calibrated, further left is cheaper. \
                 Runs trained at once share the machine's cores, so the times are of the \
                 machine as it was."
            ),
            html::grid(&[figure])
        ),
    }))
}

/// The distribution of predictive entropy, one line per method.
fn entropy_section(dir: &CompareDir, predictions: &[MethodPredictions]) -> Result<Section> {
    let mut series = Vec::new();
    let mut max_entropy = 0.0f64;
    for p in predictions {
        let values = entropies(p.probabilities.view())
            .map_err(TrainError::metrics_of(format!("entropy of {}", p.method)))?;
        let top = (p.probabilities.ncols() as f64).ln();
        max_entropy = max_entropy.max(top);
        let mean = values.iter().sum::<f64>() / values.len().max(1) as f64;
        series.push(Series {
            label: format!("{} (mean {mean:.3})", p.method.to_string().to_uppercase()),
            points: histogram(&values, top),
        });
    }
    let chart = LineChart {
        title: "Predictive entropy (test)".into(),
        x_label: "Entropy of the predicted distribution (nats)".into(),
        y_label: "Fraction of samples".into(),
        series,
        y_from_zero: true,
    };
    let figure = write_figure(
        dir.root(),
        "entropy",
        format!(
            "Fraction of test samples per entropy bin ({ENTROPY_BINS} bins from 0 to ln K = \
             {max_entropy:.2} nats), first seed"
        ),
        |format| line_chart(&chart, format),
    )?;
    Ok(Section {
        id: "entropy".into(),
        title: "Entropy of predictions".into(),
        body: format!(
            "{}{}",
            html::paragraph(
                "The paper's argument: SAM raises the entropy of the predictive distribution \
                 (Theorem 1), and CSAM more so. Overconfident models pile up near 0 nats."
            ),
            html::grid(&[figure])
        ),
    })
}

/// `(bin centre, fraction of values)` of [`ENTROPY_BINS`] equal bins on
/// `[0, top]`; values above `top` (rounding) count in the last bin.
fn histogram(values: &[f64], top: f64) -> Vec<(f64, f64)> {
    let width = top / ENTROPY_BINS as f64;
    let mut counts = [0usize; ENTROPY_BINS];
    for &v in values {
        let bin = ((v / width) as usize).min(ENTROPY_BINS - 1);
        counts[bin] += 1;
    }
    let n = values.len().max(1) as f64;
    counts
        .iter()
        .enumerate()
        .map(|(i, &c)| ((i as f64 + 0.5) * width, c as f64 / n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_histogram_counts_fractions_per_bin() {
        // top 2: bins of width 0.1; 0.05 -> bin 0, 0.15 -> bin 1, 2.0 -> last.
        let points = histogram(&[0.05, 0.15, 0.15, 2.0], 2.0);
        assert_eq!(points.len(), ENTROPY_BINS);
        // A bin centre is (0 + 0.5) * width, width a quotient: 2 roundings of 0.1.
        assert!((points[0].0 - 0.05).abs() < 1e-12);
        assert_eq!(points[0].1, 0.25);
        assert_eq!(points[1].1, 0.5);
        assert_eq!(points[ENTROPY_BINS - 1].1, 0.25);
        // Fractions 1/4, 1/2, 1/4 and zeros: an exact sum.
        assert!((points.iter().map(|p| p.1).sum::<f64>() - 1.0).abs() < 1e-12);
    }
}
