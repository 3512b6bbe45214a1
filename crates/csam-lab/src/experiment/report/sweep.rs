//! The report of a sweep (`csam sweep`, `csam report DIR`): the rho x gamma
//! table, and each metric against rho (one line per gamma: the paper's rho
//! figure) and against gamma (one line per rho: its gamma figure), means
//! over seeds.

use csam_calib::plot::{line_chart, LineChart, Series};

use super::figure::write_figure;
use super::html::{self, Cell};
use super::{Report, Section};
use crate::experiment::base::{data_name, model_name};
use crate::experiment::sweep::dir::SweepDir;
use crate::experiment::sweep::results::{
    caption, cell_text, gamma_header, SweepMetric, SweepResults,
};

use crate::error::Result;

/// Writes the figures and `report.html` of the sweep in `dir`.
pub fn write(dir: &SweepDir, results: &SweepResults) -> Result<()> {
    let base = &results.settings.base;
    let report = Report {
        title: format!("csam sweep: {} on {}", model_name(base), data_name(base)),
        intro: caption(results),
        sections: sections(dir, results)?,
    };
    report.write(&dir.join("report.html"))
}

/// The sections of the report, in page order.
pub fn sections(dir: &SweepDir, results: &SweepResults) -> Result<Vec<Section>> {
    Ok(vec![table_section(results), figures_section(dir, results)?])
}

/// The rho x gamma table; each cell carries its exact mean and std as
/// `data-` attributes.
fn table_section(results: &SweepResults) -> Section {
    let settings = &results.settings;
    let header: Vec<String> = ["Metric".to_string(), "rho".to_string()]
        .into_iter()
        .chain(settings.gammas.iter().map(|&g| gamma_header(g)))
        .collect();
    let mut rows = Vec::new();
    for metric in SweepMetric::ALL {
        for &rho in &settings.rhos {
            let mut row = vec![Cell::plain(metric.header()), Cell::plain(rho.to_string())];
            for &gamma in &settings.gammas {
                let value = results.cell(rho, gamma).and_then(|c| c.get(metric));
                let mut data = vec![
                    ("metric", metric.key().to_string()),
                    ("rho", rho.to_string()),
                    ("gamma", gamma.to_string()),
                ];
                if let Some(value) = value {
                    data.push(("mean", value.mean.to_string()));
                    data.push(("std", value.std.map(|s| s.to_string()).unwrap_or_default()));
                }
                row.push(Cell {
                    text: cell_text(results, rho, gamma, metric),
                    data,
                });
            }
            rows.push(row);
        }
    }
    Section {
        id: "table".into(),
        title: "rho x gamma".into(),
        body: html::table("sweep", &caption(results), &header, &rows),
    }
}

/// Every metric against rho and against gamma.
fn figures_section(dir: &SweepDir, results: &SweepResults) -> Result<Section> {
    let settings = &results.settings;
    let scale = |metric: SweepMetric| if metric.in_percent() { 100.0 } else { 1.0 };
    let point = |metric: SweepMetric, rho: f64, gamma: f64| {
        results
            .cell(rho, gamma)
            .and_then(|c| c.get(metric))
            .map(|v| v.mean * scale(metric))
    };
    let mut figures = Vec::new();
    for metric in SweepMetric::ALL {
        let per_gamma: Vec<Series> = settings
            .gammas
            .iter()
            .map(|&gamma| Series {
                label: gamma_header(gamma),
                points: settings
                    .rhos
                    .iter()
                    .filter_map(|&rho| Some((rho, point(metric, rho, gamma)?)))
                    .collect(),
            })
            .collect();
        let per_rho: Vec<Series> = settings
            .rhos
            .iter()
            .map(|&rho| Series {
                label: format!("rho={rho}"),
                points: settings
                    .gammas
                    .iter()
                    .filter_map(|&gamma| Some((gamma, point(metric, rho, gamma)?)))
                    .collect(),
            })
            .collect();
        for (axis, series) in [("rho", per_gamma), ("gamma", per_rho)] {
            let chart = LineChart {
                title: format!("{} vs {axis}", metric.header()),
                x_label: axis.to_string(),
                y_label: metric.header().to_string(),
                series,
                y_from_zero: metric == SweepMetric::Ece,
            };
            figures.push(write_figure(
                dir.root(),
                &format!("{}-vs-{axis}", metric.key()),
                format!(
                    "{} on the test set against {axis}, mean over seeds",
                    metric.header()
                ),
                |format| line_chart(&chart, format),
            )?);
        }
    }
    Ok(Section {
        id: "figures".into(),
        title: "Against rho and gamma".into(),
        body: format!(
            "{}{}",
            html::paragraph(
                "The paper's perturbation-radius figure (accuracy, ECE and H(p_y) against rho) \
                 and its gamma figure (accuracy and ECE against gamma), one line per value of \
                 the other hyperparameter."
            ),
            html::grid(&figures)
        ),
    })
}
