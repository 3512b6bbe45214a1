//! The theory section of a comparison's report (paper §4): the fraction of
//! SAM / CSAM steps where Lemma 2's bound held, per run, and the tracked
//! quantities over training, for comparisons run with `--track-theory`.

use super::figure::write_figure;
use super::html::{self, Cell};
use super::Section;
use crate::error::Result;
use crate::experiment::compare_dir::CompareDir;
use crate::experiment::method::{Method, Prediction};
use crate::experiment::results::CompareResults;
use csam_calib::plot::line_chart;
use csam_train::spec::OptimizerFamily;
use csam_train::theory::{read_theory, theory_charts, TheorySummary, THEORY_PLOTS};

/// The section, or None when the comparison tracked no theory (or has no
/// SAM / CSAM run to track).
pub fn section(dir: &CompareDir, results: &CompareResults) -> Result<Option<Section>> {
    let tracked: Vec<Method> = results
        .settings
        .methods
        .iter()
        .copied()
        .filter(|m| matches!(m.rule, OptimizerFamily::Sam | OptimizerFamily::Csam))
        .filter(|m| m.prediction == Prediction::Single)
        .collect();
    if !results.settings.base.track_theory || tracked.is_empty() {
        return Ok(None);
    }
    let percent = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{:.1}", 100.0 * x));
    let number = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.3}"));
    let mut rows = Vec::new();
    let mut figures = Vec::new();
    for &method in &tracked {
        let finished = (results.settings.seeds.iter().copied())
            .filter(|&seed| !results.diverged_at(method, seed));
        for (index, seed) in finished.enumerate() {
            let records = read_theory(&dir.run(method.training(), seed, 0))?;
            let summary = TheorySummary::of(&records);
            let below =
                (summary.steps > 0).then(|| summary.p_tilde_below_p as f64 / summary.steps as f64);
            rows.push(
                [
                    method.to_string().to_uppercase(),
                    seed.to_string(),
                    summary.steps.to_string(),
                    percent(summary.lemma2_fraction),
                    percent(below),
                    number(summary.mean_lambda),
                    number(summary.mean_lambda_0),
                ]
                .into_iter()
                .map(Cell::plain)
                .collect::<Vec<_>>(),
            );
            if index > 0 {
                continue;
            }
            // The probabilities with the bound, and lambda / lambda_0 (Figure 2c).
            for (stem, chart) in THEORY_PLOTS.iter().zip(theory_charts(&records)?).take(2) {
                let name = method.to_string().to_uppercase();
                figures.push(write_figure(
                    dir.root(),
                    &format!("{stem}-{method}"),
                    format!("{name}, seed {seed}: {}", chart.title),
                    |format| line_chart(&chart, format),
                )?);
            }
        }
    }
    let header: Vec<String> = [
        "Method",
        "Seed",
        "Steps",
        "Lemma 2 held (%)",
        "p~_y <= p_y (%)",
        "mean lambda",
        "mean lambda_0",
    ]
    .map(String::from)
    .to_vec();
    Ok(Some(Section {
        id: "theory".into(),
        title: "Theory diagnostics (paper Section 4)".into(),
        body: format!(
            "{}{}{}",
            html::paragraph(
                "Per perturbed step, on the mini-batch: geometric means p_y and p~_y of the \
                 true-class probability at theta and at theta~ = theta + rho g/||g||; Lemma 2 \
                 holds where p~_y <= exp(-rho ||g||/2) p_y; lambda = (1-p~_y)/(1-p_y) and its \
                 lower bound lambda_0 (docs/theory.md)."
            ),
            html::table("theory", "Lemma 2 over training, per run", &header, &rows),
            html::grid(&figures)
        ),
    }))
}
