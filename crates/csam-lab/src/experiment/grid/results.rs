//! The numbers of a grid: one [`GridRecord`] per run, one [`GridCell`] per
//! (lr, weight decay) with its validation metrics over seeds, the chosen pair
//! ([`best`]) and the table they are written to.
//!
//! `results.json` ([`GridResults`], schema [`SCHEMA`]; fractions):
//! `settings` (as in `grid.json`), `runs[]` (`lr`, `weight_decay`, `seed`,
//! `run_dir`, `best_epoch`, `train_wall_time_s`, `val`: every metric of the
//! calibration crate's `MetricSummary` of the best checkpoint), `diverged[]`
//! (left out when no run diverged: `lr`, `weight_decay`, `seed`, `run_dir`,
//! `epoch`, `step`, `reason`, `last_good_epoch`; see
//! [`crate::experiment::diverged`]), `cells[]` (`lr`, `weight_decay`,
//! `accuracy`, `nll`, `ece`, `train_wall_time_s`: `{mean,std,n}` over the
//! finished seeds, `best_epochs`, `diverged_seeds` when some diverged; a
//! pair every seed of which diverged has no cell), `best` (`lr`,
//! `weight_decay`).

use csam_calib::metrics::summary::MetricSummary;
use serde::{Deserialize, Serialize};

use super::settings::{short, GridPoint, GridSettings};
use crate::experiment::base::{data_name, model_name};
use crate::experiment::diverged::{noted, DivergedRun, DIVERGED};
use crate::experiment::results::{mean_std, MeanStd};
use crate::experiment::table::{counted, mean_std_text};
use csam_train::train::RunSummary;

/// The `schema` tag of a grid's `results.json`.
pub const SCHEMA: &str = "csam-grid/1";

/// The numbers of one run of the grid: what its best checkpoint scored on
/// the validation split (the test split plays no part in the choice).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridRecord {
    /// The pair it trained with.
    #[serde(flatten)]
    pub point: GridPoint,
    /// The run's seed.
    pub seed: u64,
    /// The run directory, relative to the grid directory.
    pub run_dir: String,
    /// 1-based epoch of the best checkpoint (by validation NLL).
    pub best_epoch: usize,
    /// Training and evaluation time of the run, over all resumes.
    pub train_wall_time_s: f64,
    /// Validation metrics of the best checkpoint.
    pub val: MetricSummary,
}

impl GridRecord {
    /// The record of the run in `run_dir` trained at `point`.
    pub fn of_summary(run_dir: String, point: GridPoint, summary: RunSummary) -> GridRecord {
        GridRecord {
            point,
            seed: summary.seed,
            run_dir,
            best_epoch: summary.best_epoch,
            train_wall_time_s: summary.wall_time_s,
            val: summary.val,
        }
    }
}

/// A run of the grid: what identifies a diverged one.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridRun {
    /// The pair it trained with.
    #[serde(flatten)]
    pub point: GridPoint,
    /// The run's seed.
    pub seed: u64,
}

/// One (lr, weight decay) pair over its finished seeds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridCell {
    /// The pair.
    #[serde(flatten)]
    pub point: GridPoint,
    /// The seeds whose run diverged (absent from files written before
    /// runs could diverge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged_seeds: Vec<u64>,
    /// Validation accuracy, mean ± sample std over seeds.
    pub accuracy: MeanStd,
    /// Validation NLL.
    pub nll: MeanStd,
    /// Validation ECE.
    pub ece: MeanStd,
    /// Best epoch of each seed, in seed order.
    pub best_epochs: Vec<usize>,
    /// Training time of a run.
    pub train_wall_time_s: MeanStd,
}

/// The cells of `runs`, lr-major in the order of the settings, each with
/// its seeds that `diverged`; a pair without finished runs is left out.
pub fn cells(
    settings: &GridSettings,
    runs: &[GridRecord],
    diverged: &[DivergedRun<GridRun>],
) -> Vec<GridCell> {
    settings
        .pairs()
        .into_iter()
        .filter_map(|point| {
            let mine: Vec<&GridRecord> = runs.iter().filter(|r| r.point == point).collect();
            let of = |value: fn(&GridRecord) -> f64| {
                mean_std(&mine.iter().map(|r| value(r)).collect::<Vec<_>>())
            };
            Some(GridCell {
                point,
                diverged_seeds: diverged_seeds(diverged, point),
                accuracy: of(|r| r.val.accuracy)?,
                nll: of(|r| r.val.nll)?,
                ece: of(|r| r.val.ece)?,
                best_epochs: mine.iter().map(|r| r.best_epoch).collect(),
                train_wall_time_s: of(|r| r.train_wall_time_s)?,
            })
        })
        .collect()
}

/// The seeds of `point` that diverged.
fn diverged_seeds(diverged: &[DivergedRun<GridRun>], point: GridPoint) -> Vec<u64> {
    diverged
        .iter()
        .filter(|d| d.run.point == point)
        .map(|d| d.run.seed)
        .collect()
}

/// The chosen cell: the highest mean validation accuracy (the criterion of
/// the paper's protocol, fixed before the grid runs); among equal
/// accuracies the lower mean validation NLL, then the first in table order.
/// A pair that diverged on a seed is chosen only when every pair did (its
/// mean is over the seeds that finished, and its learning rate is unsafe).
/// None when there are no cells.
pub fn best(cells: &[GridCell]) -> Option<&GridCell> {
    cells.iter().reduce(|chosen, cell| {
        let better = cell
            .diverged_seeds
            .is_empty()
            .cmp(&chosen.diverged_seeds.is_empty())
            .then(cell.accuracy.mean.total_cmp(&chosen.accuracy.mean))
            .then(chosen.nll.mean.total_cmp(&cell.nll.mean))
            .is_gt();
        if better {
            cell
        } else {
            chosen
        }
    })
}

/// The content of a grid's `results.json` (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridResults {
    /// [`SCHEMA`].
    pub schema: String,
    /// Version of csam that wrote the file.
    pub csam_version: String,
    /// The grid's settings.
    pub settings: GridSettings,
    /// Wall time of the invocation that wrote the file (reused runs cost ~0).
    pub wall_time_s: f64,
    /// One record per finished run, seed-major.
    pub runs: Vec<GridRecord>,
    /// The runs that diverged, seed-major (absent from files written
    /// before runs could diverge).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub diverged: Vec<DivergedRun<GridRun>>,
    /// One cell per pair, lr-major.
    pub cells: Vec<GridCell>,
    /// The chosen pair ([`best`]).
    pub best: GridPoint,
}

/// The caption of the table.
pub fn caption(results: &GridResults) -> String {
    let settings = &results.settings;
    let s = &settings.base;
    let seeds: Vec<String> = settings.seeds.iter().map(u64::to_string).collect();
    format!(
        "{} over lr x weight decay on {} ({} validation examples held out), model {}, {}, \
         batch {}. Validation metrics of the best checkpoint (lowest validation NLL), \
         percent except NLL, mean ± sample std over {} ({}); seconds: training time of a \
         run. Chosen (bold): the highest mean validation accuracy, ties broken by the lower \
         mean validation NLL.",
        settings.method.to_string().to_uppercase(),
        data_name(s),
        s.data.val_size,
        model_name(s),
        counted(s.epochs, "epoch"),
        s.batch_size,
        counted(seeds.len(), "seed"),
        seeds.join(", ")
    )
}

/// `mean ± std` with `decimals` (just the mean for one seed).
fn number(value: &MeanStd, decimals: usize) -> String {
    match value.std {
        Some(std) => format!("{:.*} ± {:.*}", decimals, value.mean, decimals, std),
        None => format!("{:.*}", decimals, value.mean),
    }
}

/// The table in Markdown: the caption, a blank line, then one row per pair
/// (lr-major), the chosen pair and its accuracy in bold; a pair some of
/// whose seeds diverged says how many beside its accuracy, one all of
/// whose seeds diverged says `diverged` in every number's column.
pub fn markdown(results: &GridResults) -> String {
    let mut out = format!(
        "{}\n\n| lr | weight decay | val accuracy (%) | val NLL | val ECE (%) | best epoch | \
         seconds |\n|---|---|---|---|---|---|---|\n",
        caption(results)
    );
    for point in results.settings.pairs() {
        let pair = (short(point.lr), short(point.weight_decay));
        let Some(cell) = results.cells.iter().find(|c| c.point == point) else {
            if !diverged_seeds(&results.diverged, point).is_empty() {
                let mut row = vec![pair.0, pair.1];
                row.extend(vec![DIVERGED.to_string(); 5]);
                out.push_str(&format!("| {} |\n", row.join(" | ")));
            }
            continue;
        };
        let bold = |text: String| match cell.point == results.best {
            true => format!("**{text}**"),
            false => text,
        };
        let epochs: Vec<String> = cell.best_epochs.iter().map(usize::to_string).collect();
        let accuracy = noted(
            bold(mean_std_text(Some(&cell.accuracy), true)),
            cell.accuracy.n,
            cell.diverged_seeds.len(),
        );
        out.push_str(&format!(
            "| {} | {} | {accuracy} | {} | {} | {} | {} |\n",
            bold(pair.0),
            bold(pair.1),
            mean_std_text(Some(&cell.nll), false),
            mean_std_text(Some(&cell.ece), true),
            epochs.join(", "),
            number(&cell.train_wall_time_s, 1),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::diverged::tests::nan_at;
    use crate::experiment::results::tests::flat_summary;

    fn record(lr: f64, weight_decay: f64, seed: u64, accuracy: f64, nll: f64) -> GridRecord {
        let point = GridPoint { lr, weight_decay };
        GridRecord {
            point,
            seed,
            run_dir: super::super::GridDir::relative_run(point, seed),
            best_epoch: 3 + seed as usize,
            train_wall_time_s: 2.0,
            val: MetricSummary {
                accuracy,
                nll,
                ..flat_summary(0.02)
            },
        }
    }

    fn settings(seeds: Vec<u64>) -> GridSettings {
        let defaults = GridSettings::default();
        GridSettings {
            seeds,
            lrs: vec![0.01, 0.1],
            weight_decays: vec![1e-4, 5e-4],
            ..defaults
        }
    }

    fn chosen(runs: &[GridRecord], seeds: Vec<u64>) -> GridPoint {
        best(&cells(&settings(seeds), runs, &[])).unwrap().point
    }

    #[test]
    fn the_best_pair_has_the_highest_mean_accuracy_over_seeds() {
        // Accuracies of seeds 0 and 1 per pair: (0.1, 1e-4) has the best
        // single run but not the best mean.
        let accuracies = [
            ((0.01, 1e-4), [0.80, 0.80]),
            ((0.01, 5e-4), [0.85, 0.85]),
            ((0.1, 1e-4), [0.90, 0.78]),
            ((0.1, 5e-4), [0.70, 0.70]),
        ];
        let runs: Vec<GridRecord> = (0..2)
            .flat_map(|seed| {
                accuracies.iter().map(move |&((lr, wd), accuracy)| {
                    record(lr, wd, seed, accuracy[seed as usize], 0.5)
                })
            })
            .collect();
        let point = chosen(&runs, vec![0, 1]);
        assert_eq!((point.lr, point.weight_decay), (0.01, 5e-4));
    }

    #[test]
    fn equal_accuracy_is_broken_by_lower_nll_then_table_order() {
        let runs = [
            record(0.01, 1e-4, 0, 0.85, 0.40),
            record(0.01, 5e-4, 0, 0.85, 0.35),
            record(0.1, 1e-4, 0, 0.85, 0.35),
            record(0.1, 5e-4, 0, 0.60, 0.10),
        ];
        let point = chosen(&runs, vec![0]);
        assert_eq!(
            (point.lr, point.weight_decay),
            (0.01, 5e-4),
            "lower NLL beats the first row; equal NLL keeps the earlier row"
        );
        assert!(best(&[]).is_none());
    }

    fn diverged(lr: f64, weight_decay: f64, seed: u64) -> DivergedRun<GridRun> {
        let point = GridPoint { lr, weight_decay };
        DivergedRun {
            run: GridRun { point, seed },
            run_dir: super::super::GridDir::relative_run(point, seed),
            divergence: nan_at(2, 1),
        }
    }

    #[test]
    fn a_pair_that_diverged_is_marked_and_chosen_only_when_every_pair_did() {
        // (0.1, 1e-4) has the best accuracy but diverged on seed 1; (0.1,
        // 5e-4) diverged on both seeds and has no cell.
        let runs = vec![
            record(0.01, 1e-4, 0, 0.80, 0.5),
            record(0.01, 1e-4, 1, 0.82, 0.5),
            record(0.01, 5e-4, 0, 0.79, 0.5),
            record(0.01, 5e-4, 1, 0.79, 0.5),
            record(0.1, 1e-4, 0, 0.90, 0.5),
        ];
        let failed = vec![
            diverged(0.1, 1e-4, 1),
            diverged(0.1, 5e-4, 0),
            diverged(0.1, 5e-4, 1),
        ];
        let settings = settings(vec![0, 1]);
        let cells = cells(&settings, &runs, &failed);
        assert_eq!(cells.len(), 3);
        assert_eq!(cells[2].diverged_seeds, vec![1]);
        let best = best(&cells).unwrap().point;
        assert_eq!((best.lr, best.weight_decay), (0.01, 1e-4));
        assert_eq!(
            super::best(&cells[2..]).unwrap().point,
            cells[2].point,
            "diverged on a seed, but the only pair"
        );
        let results = GridResults {
            schema: SCHEMA.into(),
            csam_version: "0".into(),
            settings,
            wall_time_s: 1.0,
            runs,
            diverged: failed,
            cells,
            best,
        };
        let table = markdown(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4 + 4);
        assert_eq!(
            lines[6],
            "| 0.1 | 1e-4 | 90.00 (1 of 2 seeds; 1 diverged) | 0.500 | 2.00 | 3 | 2.0 |"
        );
        assert_eq!(
            lines[7],
            "| 0.1 | 5e-4 | diverged | diverged | diverged | diverged | diverged |"
        );
        let json = serde_json::to_string(&results).unwrap();
        assert_eq!(serde_json::from_str::<GridResults>(&json).unwrap(), results);
    }

    #[test]
    fn cells_aggregate_seeds_and_leave_out_pairs_without_runs() {
        let runs = [
            record(0.01, 1e-4, 0, 0.80, 0.5),
            record(0.01, 1e-4, 1, 0.84, 0.7),
        ];
        let cells = cells(&settings(vec![0, 1]), &runs, &[]);
        assert_eq!(cells.len(), 1);
        // Means of 2 seeds: 2 f64 roundings of values < 1.6, < 5e-16.
        assert!((cells[0].accuracy.mean - 0.82).abs() < 1e-12);
        assert!((cells[0].nll.mean - 0.6).abs() < 1e-12);
        assert_eq!(cells[0].accuracy.n, 2);
        assert_eq!(cells[0].best_epochs, vec![3, 4]);
    }

    #[test]
    fn table_bolds_the_chosen_pair_and_writes_small_values_as_exponents() {
        let runs = vec![
            record(0.01, 1e-4, 0, 0.8655, 0.3777),
            record(0.01, 5e-4, 0, 0.8675, 0.3773),
            record(0.1, 1e-4, 0, 0.8715, 0.4266),
            record(0.1, 5e-4, 0, 0.8555, 0.3994),
        ];
        let settings = settings(vec![0]);
        let cells = cells(&settings, &runs, &[]);
        let best = best(&cells).unwrap().point;
        let results = GridResults {
            schema: SCHEMA.into(),
            csam_version: "0".into(),
            settings,
            wall_time_s: 1.0,
            runs,
            diverged: Vec::new(),
            cells,
            best,
        };
        let table = markdown(&results);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("SGD over lr x weight decay on "));
        assert_eq!(lines.len(), 4 + 4);
        assert_eq!(
            lines[2],
            "| lr | weight decay | val accuracy (%) | val NLL | val ECE (%) | best epoch | seconds |"
        );
        assert_eq!(lines[4], "| 0.01 | 1e-4 | 86.55 | 0.378 | 2.00 | 3 | 2.0 |");
        assert_eq!(
            lines[6],
            "| **0.1** | **1e-4** | **87.15** | 0.427 | 2.00 | 3 | 2.0 |"
        );
        assert_eq!(
            (short(0.0), short(1e-3), short(0.05)),
            ("0".into(), "1e-3".into(), "0.05".into())
        );
        let json = serde_json::to_string(&results).unwrap();
        assert_eq!(serde_json::from_str::<GridResults>(&json).unwrap(), results);
    }
}
