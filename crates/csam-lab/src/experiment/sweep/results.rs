//! The numbers of a sweep: one [`SweepRecord`] per run, one [`SweepCell`] per
//! (rho, gamma) with mean ± sample std over seeds of test accuracy, ECE and
//! mean H(p_y), and the files they are written to.
//!
//! `results.json` ([`SweepResults`], schema [`SCHEMA`]; fractions, H in
//! nats): `settings` (as in `sweep.json`), `runs[]` (`rho`, `gamma`, `seed`,
//! `optimizer`, `run_dir`, `best_epoch`, `train_wall_time_s`, `test`: every
//! metric of the calibration crate's `MetricSummary`, `h_py`), `diverged[]`
//! (left out when no run diverged: `rho`, `gamma`, `seed`, `run_dir`,
//! `epoch`, `step`, `reason`, `last_good_epoch`; see
//! [`crate::experiment::diverged`]), `cells[]` (`rho`, `gamma`,
//! `diverged_seeds` when some diverged, `metrics.<key>.{mean,std,n}` for
//! every [`SweepMetric`] over the finished seeds).

use std::collections::BTreeMap;
use std::path::Path;

use csam_calib::metrics::mean_true_class_entropy;
use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};

use super::settings::SweepSettings;
use crate::error::Result;
use crate::experiment::base::{data_name, model_name};
use crate::experiment::diverged::{noted, DivergedRun};
use crate::experiment::posthoc::test_probabilities;
use crate::experiment::results::{mean_std, MeanStd};
use crate::experiment::table::{counted, mean_std_text};
use csam_train::spec::OptimizerFamily;
use csam_train::train::rundir::RunDir;
use csam_train::train::{RunSummary, TrainError};

/// The `schema` tag of a sweep's `results.json`.
pub const SCHEMA: &str = "csam-sweep/1";

/// The numbers of one run of the grid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRecord {
    /// Perturbation radius.
    pub rho: f64,
    /// CSAM's gamma (0: SAM).
    pub gamma: f64,
    /// The run's seed.
    pub seed: u64,
    /// SAM (gamma = 0) or CSAM.
    pub optimizer: OptimizerFamily,
    /// The run directory, relative to the sweep directory.
    pub run_dir: String,
    /// 1-based epoch of the best checkpoint (by validation NLL).
    pub best_epoch: usize,
    /// Training and evaluation time of the run, over all resumes.
    pub train_wall_time_s: f64,
    /// Test metrics of the best checkpoint.
    pub test: MetricSummary,
    /// Mean binary entropy of the test true-class probability, nats.
    pub h_py: f64,
}

impl SweepRecord {
    /// The record of the finished run in `path` (its summary, plus H(p_y)
    /// from its test logits).
    pub fn of_run(
        path: &Path,
        run_dir: String,
        rho: f64,
        gamma: f64,
        summary: RunSummary,
    ) -> Result<SweepRecord> {
        let (probabilities, labels) = test_probabilities(&RunDir::new(path))?;
        let h_py = mean_true_class_entropy(probabilities.view(), &labels).map_err(
            TrainError::metrics_of(format!("H(p_y) of {}", path.display())),
        )?;
        Ok(SweepRecord {
            rho,
            gamma,
            seed: summary.seed,
            optimizer: summary.optimizer,
            run_dir,
            best_epoch: summary.best_epoch,
            train_wall_time_s: summary.wall_time_s,
            test: summary.test,
            h_py,
        })
    }
}

/// A number of the sweep table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SweepMetric {
    /// Test accuracy.
    Accuracy,
    /// Test ECE (15 equal-width bins).
    Ece,
    /// Mean H(p_y) on the test set.
    Hpy,
}

impl SweepMetric {
    /// Every metric, in table order (the paper's: accuracy, then ECE).
    pub const ALL: [SweepMetric; 3] = [SweepMetric::Accuracy, SweepMetric::Ece, SweepMetric::Hpy];

    /// The key in `results.json` and the CSV files.
    pub fn key(self) -> &'static str {
        match self {
            SweepMetric::Accuracy => "accuracy",
            SweepMetric::Ece => "ece",
            SweepMetric::Hpy => "h_py",
        }
    }

    /// The name in tables and figures, with its unit.
    pub fn header(self) -> &'static str {
        match self {
            SweepMetric::Accuracy => "Test acc (%)",
            SweepMetric::Ece => "ECE (%)",
            SweepMetric::Hpy => "H(p_y) (nats)",
        }
    }

    /// Shown in percent (accuracy, ECE) or as it is (H).
    pub fn in_percent(self) -> bool {
        self != SweepMetric::Hpy
    }

    /// The value in `run`.
    pub fn of(self, run: &SweepRecord) -> f64 {
        match self {
            SweepMetric::Accuracy => run.test.accuracy,
            SweepMetric::Ece => run.test.ece,
            SweepMetric::Hpy => run.h_py,
        }
    }
}

/// A run of the sweep: what identifies a diverged one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SweepRun {
    /// Perturbation radius.
    pub rho: f64,
    /// CSAM's gamma (0: SAM).
    pub gamma: f64,
    /// The run's seed.
    pub seed: u64,
}

/// One (rho, gamma) cell: every metric's mean ± std over its finished seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepCell {
    /// Perturbation radius.
    pub rho: f64,
    /// CSAM's gamma.
    pub gamma: f64,
    /// The seeds whose run diverged (absent from files written before
    /// runs could diverge); no metrics when every seed did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged_seeds: Vec<u64>,
    /// Mean ± std per [`SweepMetric::key`].
    pub metrics: BTreeMap<String, MeanStd>,
}

impl SweepCell {
    /// The aggregate of `metric`.
    pub fn get(&self, metric: SweepMetric) -> Option<&MeanStd> {
        self.metrics.get(metric.key())
    }

    /// The number of seeds that finished (0 when every one diverged).
    pub fn finished(&self) -> usize {
        self.metrics.values().map(|v| v.n).max().unwrap_or(0)
    }
}

/// The cells of `runs` and of the runs that `diverged`, rho-major in the
/// order of the settings; a cell without runs is left out.
pub fn cells(
    settings: &SweepSettings,
    runs: &[SweepRecord],
    diverged: &[DivergedRun<SweepRun>],
) -> Vec<SweepCell> {
    let mut cells = Vec::new();
    for &rho in &settings.rhos {
        for &gamma in &settings.gammas {
            let mine: Vec<&SweepRecord> = runs
                .iter()
                .filter(|r| r.rho == rho && r.gamma == gamma)
                .collect();
            let diverged_seeds: Vec<u64> = diverged
                .iter()
                .filter(|d| d.run.rho == rho && d.run.gamma == gamma)
                .map(|d| d.run.seed)
                .collect();
            let metrics: BTreeMap<String, MeanStd> = SweepMetric::ALL
                .iter()
                .filter_map(|&m| {
                    let values: Vec<f64> = mine.iter().map(|r| m.of(r)).collect();
                    Some((m.key().to_string(), mean_std(&values)?))
                })
                .collect();
            if !mine.is_empty() || !diverged_seeds.is_empty() {
                cells.push(SweepCell {
                    rho,
                    gamma,
                    diverged_seeds,
                    metrics,
                });
            }
        }
    }
    cells
}

/// The content of a sweep's `results.json` (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepResults {
    /// [`SCHEMA`].
    pub schema: String,
    /// Version of csam that wrote the file.
    pub csam_version: String,
    /// The sweep's settings.
    pub settings: SweepSettings,
    /// Wall time of the invocation that wrote the file (reused runs cost ~0).
    pub wall_time_s: f64,
    /// One record per finished run, seed-major.
    pub runs: Vec<SweepRecord>,
    /// The runs that diverged, seed-major (absent from files written
    /// before runs could diverge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<DivergedRun<SweepRun>>,
    /// One cell per (rho, gamma), rho-major.
    pub cells: Vec<SweepCell>,
}

impl SweepResults {
    /// The cell of (rho, gamma).
    pub fn cell(&self, rho: f64, gamma: f64) -> Option<&SweepCell> {
        self.cells.iter().find(|c| c.rho == rho && c.gamma == gamma)
    }
}

/// The column header of a gamma: `gamma=0 (SAM)`, `gamma=1`.
pub fn gamma_header(gamma: f64) -> String {
    match gamma == 0.0 {
        true => "gamma=0 (SAM)".to_string(),
        false => format!("gamma={gamma}"),
    }
}

/// The caption of the table.
pub fn caption(results: &SweepResults) -> String {
    let s = &results.settings.base;
    let seeds: Vec<String> = results.settings.seeds.iter().map(u64::to_string).collect();
    format!(
        "CSAM over rho x gamma on {} ({} validation examples held out), model {}, {}, \
         batch {}, lr {}, weight decay {}; gamma = 0 is SAM. Test metrics of the best \
         checkpoint (validation NLL), mean ± sample std over {} ({}). Accuracy and ECE \
         (15 equal-width bins) in percent; H(p_y): binary entropy of the true-class \
         probability, averaged over test examples, in nats.",
        data_name(s),
        s.data.val_size,
        model_name(s),
        counted(s.epochs, "epoch"),
        s.batch_size,
        s.optim.lr,
        s.optim.weight_decay,
        counted(seeds.len(), "seed"),
        seeds.join(", ")
    )
}

/// The paper's rho x gamma table in Markdown: one row per (metric, rho), one
/// column per gamma, after the caption and a blank line.
pub fn markdown(results: &SweepResults) -> String {
    let settings = &results.settings;
    let header: Vec<String> = ["Metric".to_string(), "rho".to_string()]
        .into_iter()
        .chain(settings.gammas.iter().map(|&g| gamma_header(g)))
        .collect();
    let mut out = format!(
        "{}\n\n| {} |\n|:--|--:|{}\n",
        caption(results),
        header.join(" | "),
        "--:|".repeat(settings.gammas.len())
    );
    for metric in SweepMetric::ALL {
        for &rho in &settings.rhos {
            let cells: Vec<String> = settings
                .gammas
                .iter()
                .map(|&gamma| cell_text(results, rho, gamma, metric))
                .collect();
            out.push_str(&format!(
                "| {} | {rho} | {} |\n",
                metric.header(),
                cells.join(" | ")
            ));
        }
    }
    out
}

/// The table's text of `metric` at (`rho`, `gamma`): `mean ± std`, with
/// how many seeds diverged when some did, `diverged` when all did, `n/a`
/// for a cell without runs.
pub fn cell_text(results: &SweepResults, rho: f64, gamma: f64, metric: SweepMetric) -> String {
    let cell = results.cell(rho, gamma);
    let text = mean_std_text(cell.and_then(|c| c.get(metric)), metric.in_percent());
    match cell {
        Some(cell) => noted(text, cell.finished(), cell.diverged_seeds.len()),
        None => text,
    }
}

/// `results.csv`: one row per run (`rho,gamma,seed,optimizer,run_dir,
/// best_epoch,train_wall_time_s` and every [`SweepMetric::key`], fractions).
pub fn runs_csv(runs: &[SweepRecord]) -> String {
    let mut out = String::from("rho,gamma,seed,optimizer,run_dir,best_epoch,train_wall_time_s");
    for metric in SweepMetric::ALL {
        out.push(',');
        out.push_str(metric.key());
    }
    out.push('\n');
    for run in runs {
        out.push_str(&format!(
            "{},{},{},{},{},{},{}",
            run.rho,
            run.gamma,
            run.seed,
            run.optimizer,
            run.run_dir,
            run.best_epoch,
            run.train_wall_time_s
        ));
        for metric in SweepMetric::ALL {
            out.push_str(&format!(",{}", metric.of(run)));
        }
        out.push('\n');
    }
    out
}

/// `cells.csv`: one row per cell (`rho,gamma,n` and `<key>_mean,<key>_std`
/// per [`SweepMetric`]; std empty for a single seed).
pub fn cells_csv(cells: &[SweepCell]) -> String {
    let mut out = String::from("rho,gamma,n");
    for metric in SweepMetric::ALL {
        out.push_str(&format!(",{0}_mean,{0}_std", metric.key()));
    }
    out.push('\n');
    for cell in cells {
        out.push_str(&format!("{},{},{}", cell.rho, cell.gamma, cell.finished()));
        for metric in SweepMetric::ALL {
            match cell.get(metric) {
                Some(v) => out.push_str(&format!(
                    ",{},{}",
                    v.mean,
                    v.std.map(|s| s.to_string()).unwrap_or_default()
                )),
                None => out.push_str(",,"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::diverged::tests::nan_at;
    use crate::experiment::results::tests::flat_summary;

    fn record(rho: f64, gamma: f64, seed: u64, accuracy: f64, h_py: f64) -> SweepRecord {
        SweepRecord {
            rho,
            gamma,
            seed,
            optimizer: SweepSettings::optimizer(gamma),
            run_dir: super::super::SweepDir::relative_run(rho, gamma, seed),
            best_epoch: 1,
            train_wall_time_s: 1.0,
            test: MetricSummary {
                accuracy,
                ..flat_summary(0.02)
            },
            h_py,
        }
    }

    fn results() -> SweepResults {
        let settings = SweepSettings {
            seeds: vec![0, 1],
            rhos: vec![0.05, 0.1],
            gammas: vec![0.0, 1.0],
            ..SweepSettings::default()
        };
        let runs = vec![
            record(0.05, 0.0, 0, 0.80, 0.1),
            record(0.05, 1.0, 0, 0.90, 0.2),
            record(0.05, 0.0, 1, 0.84, 0.3),
            record(0.1, 1.0, 1, 0.70, 0.4),
        ];
        SweepResults {
            schema: SCHEMA.into(),
            csam_version: "0".into(),
            cells: cells(&settings, &runs, &[]),
            settings,
            wall_time_s: 1.0,
            runs,
            diverged: Vec::new(),
        }
    }

    #[test]
    fn cells_aggregate_over_seeds_per_rho_and_gamma() {
        let results = results();
        assert_eq!(results.cells.len(), 3, "(0.1, 0) has no run");
        let sam = results.cell(0.05, 0.0).unwrap();
        let accuracy = sam.get(SweepMetric::Accuracy).unwrap();
        // Means and sample stds of 2 seeds: < 10 f64 roundings of values < 1, < 1e-15.
        assert!((accuracy.mean - 0.82).abs() < 1e-12);
        assert!((accuracy.std.unwrap() - 0.04 / 2f64.sqrt()).abs() < 1e-12);
        assert!((sam.get(SweepMetric::Hpy).unwrap().mean - 0.2).abs() < 1e-12);
        assert_eq!(
            results
                .cell(0.1, 1.0)
                .unwrap()
                .get(SweepMetric::Ece)
                .unwrap()
                .n,
            1
        );
        assert!(results.cell(0.1, 0.0).is_none());
    }

    #[test]
    fn table_has_a_row_per_metric_and_rho_and_a_column_per_gamma() {
        let table = markdown(&results());
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[2], "| Metric | rho | gamma=0 (SAM) | gamma=1 |");
        assert_eq!(lines[3], "|:--|--:|--:|--:|");
        assert_eq!(lines.len(), 4 + 3 * 2);
        // accuracy 82 ± 2.83 % at rho 0.05, gamma 0; one seed at (0.05, 1).
        assert_eq!(lines[4], "| Test acc (%) | 0.05 | 82.00 ± 2.83 | 90.00 |");
        assert_eq!(lines[5], "| Test acc (%) | 0.1 | n/a | 70.00 |");
        assert_eq!(lines[8], "| H(p_y) (nats) | 0.05 | 0.200 ± 0.141 | 0.200 |");
    }

    #[test]
    fn a_cell_with_diverged_seeds_says_how_many_and_one_with_none_finished_says_diverged() {
        let mut results = results();
        let diverged = |rho, gamma, seed| DivergedRun {
            run: SweepRun { rho, gamma, seed },
            run_dir: super::super::SweepDir::relative_run(rho, gamma, seed),
            divergence: nan_at(1, 1),
        };
        results.diverged = vec![
            diverged(0.1, 0.0, 0),
            diverged(0.1, 0.0, 1),
            diverged(0.1, 1.0, 0),
        ];
        results.cells = cells(&results.settings, &results.runs, &results.diverged);
        assert_eq!(results.cells.len(), 4);
        assert_eq!(results.cell(0.1, 0.0).unwrap().finished(), 0);
        let table = markdown(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[5],
            "| Test acc (%) | 0.1 | diverged | 70.00 (1 of 2 seeds; 1 diverged) |"
        );
        let cells = cells_csv(&results.cells);
        assert!(cells.lines().any(|l| l == "0.1,0,0,,,,,,"), "{cells}");
    }

    #[test]
    fn csv_files_have_a_row_per_run_and_per_cell() {
        let results = results();
        let runs = runs_csv(&results.runs);
        let lines: Vec<&str> = runs.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[0],
            "rho,gamma,seed,optimizer,run_dir,best_epoch,train_wall_time_s,accuracy,ece,h_py"
        );
        assert!(
            lines[1].starts_with("0.05,0,0,sam,runs/rho0.05-gamma0-seed0,"),
            "{}",
            lines[1]
        );
        assert!(lines[1].ends_with(",0.8,0.02,0.1"), "{}", lines[1]);
        let cells = cells_csv(&results.cells);
        let lines: Vec<&str> = cells.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("rho,gamma,n,accuracy_mean,accuracy_std,"));
        assert!(lines[3].starts_with("0.1,1,1,0.7,,"), "{}", lines[3]);
    }
}
