//! The results table of a comparison, in Markdown (printed and saved as
//! `table.md`): one row per method, one column per [`Metric`], each cell
//! `mean ± std` over seeds (docs/conventions.md, "Experiment protocol"), in percent except NLL and Brier.
//! A method some of whose seeds diverged is named with how many
//! (`SAM (2 of 3 seeds; 1 diverged)`), its numbers over the others; one all
//! of whose seeds diverged says `diverged` in every column (see
//! [`super::diverged`]).

use super::base::{data_name, model_name};
use super::compare_settings::{CompareSettings, ShiftRequest};
use super::diverged::{noted, DIVERGED};
use super::method::Method;
use super::results::{mean_std, MeanStd, MethodAggregate, Metric, RunRecord};
use crate::shift::report::SeverityMetrics;
use csam_train::spec::OptimizerFamily;

/// `n` and `noun`, plural unless `n` is 1 ("1 seed", "3 seeds").
pub fn counted(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// The caption: data, model, training length, shared hyperparameters, the
/// number of seeds and how to read the columns.
pub fn caption(settings: &CompareSettings) -> String {
    let base = &settings.base;
    let seeds: Vec<String> = settings.seeds.iter().map(u64::to_string).collect();
    format!(
        "Test metrics on {} ({} validation examples held out of the training part), model {}, \
         {}, batch {}, lr {}, weight decay {}, rho {}, gamma {}. Mean ± sample std over \
         {} ({}). Percent except NLL and Brier. ECE / CW-ECE / TCE: 15 equal-width bins; \
         AdaECE: 15 equal-mass bins; TCE, ECE iso, ECE hist: ECE after temperature scaling, \
         isotonic regression, histogram binning fitted on the validation split; AUROC mis: \
         misclassification detection by confidence; AUROC ovr: one-vs-rest macro.",
        data_name(base),
        base.data.val_size,
        model_name(base),
        counted(base.epochs, "epoch"),
        base.batch_size,
        base.optim.lr,
        base.optim.weight_decay,
        settings.rho,
        settings.gamma,
        counted(seeds.len(), "seed"),
        seeds.join(", "),
    )
}

/// `mean ± std` of `value` in the metric's unit: percent with 2 decimals,
/// or 3 decimals for NLL and Brier; just the mean when there is no std
/// (a single seed), `n/a` when there is no value.
pub fn cell(metric: Metric, value: Option<&MeanStd>) -> String {
    mean_std_text(value, metric.in_percent())
}

/// `mean ± std` of `value`: in percent with 2 decimals when `in_percent`,
/// else as it is with 3 decimals; just the mean when there is no std, `n/a`
/// when there is no value.
pub fn mean_std_text(value: Option<&MeanStd>, in_percent: bool) -> String {
    let Some(value) = value else {
        return "n/a".to_string();
    };
    let (scale, decimals) = if in_percent { (100.0, 2) } else { (1.0, 3) };
    match value.std {
        Some(std) => format!(
            "{:.*} ± {:.*}",
            decimals,
            value.mean * scale,
            decimals,
            std * scale
        ),
        None => format!("{:.*}", decimals, value.mean * scale),
    }
}

/// The row label of `aggregate`: the method, with how many of its seeds
/// diverged when some did (`SAM (2 of 3 seeds; 1 diverged)`); every seed
/// diverged shows in its cells instead ([`aggregate_cell`]).
pub fn method_label(aggregate: &MethodAggregate) -> String {
    let method = aggregate.method.to_string().to_uppercase();
    match aggregate.seeds.len() {
        0 => method,
        finished => noted(method, finished, aggregate.diverged_seeds.len()),
    }
}

/// The [`cell`] of `metric` in `aggregate`, or `diverged` when every seed
/// of the method diverged.
pub fn aggregate_cell(aggregate: &MethodAggregate, metric: Metric) -> String {
    match aggregate.seeds.is_empty() {
        true => DIVERGED.to_string(),
        false => cell(metric, aggregate.get(metric)),
    }
}

/// The Markdown table of [`Metric::ALL`]: the caption, a blank line, then
/// the header, the alignment row and one row per aggregate.
pub fn markdown(caption: &str, aggregates: &[MethodAggregate]) -> String {
    markdown_of(caption, aggregates, Metric::ALL)
}

/// The caption of the shift table: what the corrupted and OOD columns are.
pub fn shift_caption(settings: &CompareSettings, shift: &ShiftRequest) -> String {
    let corrupted = shift.corruptions.as_ref().map_or_else(
        || "no corrupted data".to_string(),
        |dir| {
            format!(
                "corrupted: {}, the mean over its corruptions and severities",
                dir.display()
            )
        },
    );
    let ood = shift.ood.as_deref().map_or_else(
        || "no OOD set".to_string(),
        |ood| {
            format!(
                "OOD: the test split against {ood}'s, scored by maximum probability and by entropy"
            )
        },
    );
    format!(
        "Under shift: {} ({}; {}). Mean ± sample std over {}; percent except NLL; ECE: \
         15 equal-width bins.",
        data_name(&settings.base),
        corrupted,
        ood,
        counted(settings.seeds.len(), "seed"),
    )
}

/// The per-severity table of the corrupted data: one row per method, one
/// column per severity, each cell `accuracy / ECE` in percent, the means
/// over the method's runs (and over corruptions); empty when no run was
/// evaluated on corrupted data.
pub fn severity_markdown(runs: &[RunRecord], methods: &[Method]) -> String {
    let per_severity = |run: &RunRecord| {
        let corruptions = run.shift.as_ref()?.corruptions.as_ref()?;
        Some(corruptions.per_severity.clone())
    };
    let Some(levels) = runs.iter().find_map(per_severity) else {
        return String::new();
    };
    let header: Vec<String> = levels
        .iter()
        .map(|level| format!("severity {} acc / ECE (%)", level.severity))
        .collect();
    let mut out = format!(
        "| Method | {} |\n|:--|{}\n",
        header.join(" | "),
        "--:|".repeat(levels.len())
    );
    for &method in methods {
        let mine: Vec<Vec<SeverityMetrics>> = runs
            .iter()
            .filter(|run| run.method == method)
            .filter_map(per_severity)
            .collect();
        if mine.is_empty() {
            continue;
        }
        let cells: Vec<String> = (0..levels.len())
            .map(|k| {
                let mean = |value: fn(&SeverityMetrics) -> f64| {
                    100.0 * mine.iter().map(|levels| value(&levels[k])).sum::<f64>()
                        / mine.len() as f64
                };
                format!(
                    "{:.2} / {:.2}",
                    mean(|s| s.metrics.accuracy),
                    mean(|s| s.metrics.ece)
                )
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} |\n",
            method.to_string().to_uppercase(),
            cells.join(" | ")
        ));
    }
    out
}

/// The cost table: per method, the training time of its runs (mean ± std
/// over seeds, seconds; an ensemble's summed over its members), that mean
/// over the reference method's (SGD when the comparison has it, else its
/// first method) and the share of steps that ran SAM's second pass, in
/// percent. Wall times are of the machine as it was: runs trained at once
/// (`--jobs`) share its cores.
pub fn cost_markdown(runs: &[RunRecord], methods: &[Method]) -> String {
    let Some(costs) = costs(runs, methods) else {
        return String::new();
    };
    let reference = costs.reference.to_string().to_uppercase();
    let mut out = format!(
        "Cost: training time per run (every epoch's training and validation, over all \
         resumes; an ensemble's summed over its members), its mean over {reference}'s, and the \
         share of steps that ran SAM's second pass (`train.second_pass` in metrics.jsonl, the \
         mean over epochs and seeds). Runs trained at once share the machine's cores.\n\n\
         | Method | Train time (s) | Time / {reference}'s | Second pass (% of steps) |\n\
         |:--|--:|--:|--:|\n",
    );
    for cost in &costs.rows {
        let ratio = cost
            .ratio
            .map_or_else(|| "n/a".to_string(), |r| format!("{r:.2}"));
        let second_pass = cost
            .second_pass
            .map_or_else(|| "n/a".to_string(), |p| format!("{:.0}", 100.0 * p.mean));
        let time = match cost.time.std {
            Some(std) => format!("{:.1} ± {:.1}", cost.time.mean, std),
            None => format!("{:.1}", cost.time.mean),
        };
        out.push_str(&format!(
            "| {} | {time} | {ratio} | {second_pass} |\n",
            cost.method.to_string().to_uppercase()
        ));
    }
    out
}

/// The training cost of every method of a comparison, against a reference.
#[derive(Debug, Clone, PartialEq)]
pub struct Costs {
    /// The method the times are divided by: SGD when the comparison has it,
    /// else its first method.
    pub reference: Method,
    /// One row per method with runs, in the comparison's order.
    pub rows: Vec<Cost>,
}

/// One method's training cost over its seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Cost {
    pub method: Method,
    /// Training time per run, seconds (an ensemble's summed over its members).
    pub time: MeanStd,
    /// The mean time over the reference's (None when the reference has no run).
    pub ratio: Option<f64>,
    /// The share of steps that ran SAM's second pass (None when a run's log
    /// predates the field).
    pub second_pass: Option<MeanStd>,
}

/// The cost of each method of `methods` from `runs`, which `cost.md` and
/// the report's figure of calibration against cost both read; None for a
/// comparison without methods.
pub fn costs(runs: &[RunRecord], methods: &[Method]) -> Option<Costs> {
    let sgd = Method::cross_entropy(OptimizerFamily::Sgd);
    let &reference = methods.iter().find(|&&m| m == sgd).or(methods.first())?;
    let times_of = |method: Method| -> Vec<f64> {
        runs.iter()
            .filter(|run| run.method == method)
            .map(|run| run.train_wall_time_s)
            .collect()
    };
    let reference_time = mean_std(&times_of(reference)).map(|t| t.mean);
    let rows = methods
        .iter()
        .filter_map(|&method| {
            let time = mean_std(&times_of(method))?;
            let passes: Option<Vec<f64>> = runs
                .iter()
                .filter(|run| run.method == method)
                .map(|run| run.second_pass)
                .collect();
            Some(Cost {
                method,
                ratio: reference_time.map(|r| time.mean / r),
                time,
                second_pass: passes.and_then(|p| mean_std(&p)),
            })
        })
        .collect();
    Some(Costs { reference, rows })
}

/// The Markdown table of `metrics` (see [`markdown`]).
pub fn markdown_of(caption: &str, aggregates: &[MethodAggregate], metrics: &[Metric]) -> String {
    let header: Vec<String> = std::iter::once("Method".to_string())
        .chain(metrics.iter().map(|m| match m.in_percent() {
            true => format!("{} (%)", m.header()),
            false => m.header().to_string(),
        }))
        .collect();
    let align: Vec<&str> = std::iter::once(":--")
        .chain(metrics.iter().map(|_| "--:"))
        .collect();
    let mut out = format!(
        "{caption}\n\n| {} |\n|{}|\n",
        header.join(" | "),
        align.join("|")
    );
    for aggregate in aggregates {
        let cells: Vec<String> = std::iter::once(method_label(aggregate))
            .chain(metrics.iter().map(|&m| aggregate_cell(aggregate, m)))
            .collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::diverged::{tests::nan_at, DivergedRun};
    use crate::experiment::results::tests::{record, sgd_sam_csam};
    use crate::experiment::results::{aggregate, MethodSeed, ShiftRecord};
    use crate::shift::report::{CorruptionReport, ShiftMetrics};

    #[test]
    fn a_caption_counts_one_seed_and_one_epoch_in_the_singular() {
        assert_eq!(counted(1, "seed"), "1 seed");
        assert_eq!(counted(0, "seed"), "0 seeds");
        assert_eq!(counted(3, "epoch"), "3 epochs");
        let mut one = CompareSettings {
            seeds: vec![4],
            ..CompareSettings::default()
        };
        one.base.epochs = 1;
        let text = caption(&one);
        assert!(
            text.contains("1 epoch,") && text.contains("over 1 seed (4)"),
            "{text}"
        );
    }

    /// A record of `method` whose two severities have accuracy `accuracy`
    /// and ECE `accuracy / 10`.
    fn corrupted(method: Method, seed: u64, accuracy: [f64; 2]) -> RunRecord {
        let level = |severity: u8, accuracy: f64| SeverityMetrics {
            severity,
            n: 10,
            metrics: ShiftMetrics {
                accuracy,
                ece: accuracy / 10.0,
                nll: 1.0,
            },
        };
        let per_severity = vec![level(1, accuracy[0]), level(2, accuracy[1])];
        RunRecord {
            shift: Some(ShiftRecord {
                corruptions: Some(CorruptionReport {
                    dir: "c".into(),
                    corruptions: Vec::new(),
                    mean: per_severity[0].metrics,
                    per_severity,
                }),
                ood: None,
            }),
            ..record(method, seed, 0.9, 0.01)
        }
    }

    #[test]
    fn severity_table_averages_each_severity_over_a_methods_runs() {
        let (sgd, csam) = (
            Method::cross_entropy(OptimizerFamily::Sgd),
            Method::cross_entropy(OptimizerFamily::Csam),
        );
        let runs = vec![
            corrupted(sgd, 0, [0.8, 0.6]),
            corrupted(sgd, 1, [0.9, 0.5]),
            corrupted(csam, 0, [0.7, 0.4]),
        ];
        let table = severity_markdown(&runs, &[sgd, csam]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| Method | severity 1 acc / ECE (%) | severity 2 acc / ECE (%) |"
        );
        assert_eq!(lines[2], "| SGD | 85.00 / 8.50 | 55.00 / 5.50 |");
        assert_eq!(lines[3], "| CSAM | 70.00 / 7.00 | 40.00 / 4.00 |");
        assert_eq!(severity_markdown(&[record(sgd, 0, 0.9, 0.01)], &[sgd]), "");
    }

    #[test]
    fn cost_table_divides_by_sgds_mean_time_and_averages_second_passes() {
        let (sgd, csam) = (
            Method::cross_entropy(OptimizerFamily::Sgd),
            Method::cross_entropy(OptimizerFamily::Csam),
        );
        let run = |method, seed, time, second_pass| RunRecord {
            train_wall_time_s: time,
            second_pass,
            ..record(method, seed, 0.9, 0.01)
        };
        let runs = vec![
            run(csam, 0, 30.0, Some(0.5)),
            run(sgd, 0, 10.0, Some(0.0)),
            run(csam, 1, 36.0, Some(0.25)),
            run(sgd, 1, 14.0, Some(0.0)),
        ];
        // CSAM first: the reference is still SGD (mean 12 s); CSAM's mean 33 s.
        let table = cost_markdown(&runs, &[csam, sgd]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[2],
            "| Method | Train time (s) | Time / SGD's | Second pass (% of steps) |"
        );
        assert_eq!(lines[4], "| CSAM | 33.0 ± 4.2 | 2.75 | 38 |");
        assert_eq!(lines[5], "| SGD | 12.0 ± 2.8 | 1.00 | 0 |");
        // Without SGD the first method is the reference; a log without the
        // field leaves the share unknown rather than zero.
        let old = vec![run(csam, 0, 30.0, None), run(csam, 1, 36.0, Some(0.5))];
        let lines: Vec<String> = cost_markdown(&old, &[csam])
            .lines()
            .map(String::from)
            .collect();
        assert!(lines[2].contains("Time / CSAM's"), "{}", lines[2]);
        assert_eq!(lines[4], "| CSAM | 33.0 ± 4.2 | 1.00 | n/a |");
        assert_eq!(cost_markdown(&[], &[]), "");
    }

    #[test]
    fn cells_scale_and_round_by_metric() {
        let value = MeanStd {
            mean: 0.85123,
            std: Some(0.00456),
            n: 3,
        };
        assert_eq!(cell(Metric::Accuracy, Some(&value)), "85.12 ± 0.46");
        assert_eq!(cell(Metric::Nll, Some(&value)), "0.851 ± 0.005");
        let single = MeanStd {
            std: None,
            n: 1,
            ..value
        };
        assert_eq!(cell(Metric::Ece, Some(&single)), "85.12");
        assert_eq!(cell(Metric::Brier, None), "n/a");
    }

    #[test]
    fn a_method_with_diverged_seeds_says_how_many_and_one_with_none_finished_says_diverged() {
        let [sgd, sam, csam] = sgd_sam_csam();
        let runs = vec![
            record(sgd, 0, 0.80, 0.02),
            record(sgd, 1, 0.84, 0.04),
            record(csam, 0, 0.90, 0.01),
        ];
        let diverged = |method, seed| DivergedRun {
            run: MethodSeed { method, seed },
            run_dir: format!("runs/{method}-seed{seed}"),
            divergence: nan_at(1, 2),
        };
        let failed = vec![diverged(sam, 0), diverged(csam, 1), diverged(sam, 1)];
        let aggregates = aggregate(&runs, &failed, &[sgd, sam, csam]);
        assert_eq!(aggregates[1].seeds, Vec::<u64>::new());
        assert_eq!(aggregates[1].diverged_seeds, vec![0, 1]);
        let table = markdown_of("Caption.", &aggregates, &[Metric::Accuracy, Metric::Nll]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[4], "| SGD | 82.00 ± 2.83 | 0.820 ± 0.028 |");
        assert_eq!(lines[5], "| SAM | diverged | diverged |");
        // CSAM's numbers are those of its one finished seed.
        assert_eq!(
            lines[6],
            "| CSAM (1 of 2 seeds; 1 diverged) | 90.00 | 0.900 |"
        );
        // Files written before runs could diverge read back without them.
        let json = serde_json::to_value(&aggregates[0]).unwrap();
        assert!(json.get("diverged_seeds").is_none(), "{json}");
        let back: MethodAggregate = serde_json::from_value(json).unwrap();
        assert_eq!(back, aggregates[0]);
    }

    #[test]
    fn table_has_one_row_per_method_and_every_column() {
        let runs = vec![
            record(Method::cross_entropy(OptimizerFamily::Sgd), 0, 0.80, 0.02),
            record(Method::cross_entropy(OptimizerFamily::Sgd), 1, 0.84, 0.04),
            record(Method::cross_entropy(OptimizerFamily::Csam), 0, 0.90, 0.01),
        ];
        let aggregates = aggregate(
            &runs,
            &[],
            &[
                Method::cross_entropy(OptimizerFamily::Sgd),
                Method::cross_entropy(OptimizerFamily::Csam),
            ],
        );
        let table = markdown("Caption.", &aggregates);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines[0], "Caption.");
        assert_eq!(lines[1], "");
        assert!(
            lines[2].starts_with("| Method | Acc (%) | ECE (%) |"),
            "{}",
            lines[2]
        );
        assert!(lines[2].contains("| NLL | Brier |"), "{}", lines[2]);
        assert!(lines[2].ends_with("| ECE hist (%) |"), "{}", lines[2]);
        let columns = |line: &str| line.matches('|').count();
        assert_eq!(columns(lines[3]), Metric::ALL.len() + 2);
        assert_eq!(lines.len(), 6);
        // SGD accuracy: mean 82, sample std 4 / sqrt 2 = 2.83 (percent).
        assert!(
            lines[4].starts_with("| SGD | 82.00 ± 2.83 | "),
            "{}",
            lines[4]
        );
        // CSAM has one seed: means only; TCE 1 %, ECE hist 0.25 %.
        assert!(
            lines[5].starts_with("| CSAM | 90.00 | 90.00 |"),
            "{}",
            lines[5]
        );
        assert!(lines[5].ends_with("| 0.50 | 0.25 |"), "{}", lines[5]);
        assert_eq!(columns(lines[5]), columns(lines[3]));
    }
}
