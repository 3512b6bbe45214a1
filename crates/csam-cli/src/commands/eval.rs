//! `csam eval`: evaluate a trained run's best model, a deep ensemble or
//! MC-Dropout on a data set, a corruption directory and an OOD set.

use std::path::PathBuf;

use clap::Args;
use csam_lab::eval::{evaluate_run, EvalReport, EvalRequest};
use csam_lab::shift::report::{SeverityMetrics, ShiftMetrics};

use super::choices::{self, Choices};
use super::print_stdout;
use crate::table::Table;

/// Flags of `csam eval`.
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct EvalArgs {
    /// Run directory written by `csam train`; repeat for a deep ensemble
    /// (probabilities averaged over the runs, which must share data and model).
    #[arg(long, value_name = "DIR", required = true)]
    run: Vec<PathBuf>,
    /// Data set spec whose test split is evaluated (same forms as `csam train
    /// --data`; default: the first run's training data).
    #[arg(
        long,
        value_name = "SPEC",
        value_parser = Choices::of(choices::data_names()),
        hide_possible_values = true
    )]
    data: Option<String>,
    /// Also evaluate every CORRUPTION.npy of this CIFAR-10-C layout directory
    /// (written by `csam corrupt`, or the real CIFAR-10-C): accuracy, ECE and
    /// NLL per corruption and severity, and their means.
    #[arg(long, value_name = "DIR")]
    corruptions: Option<PathBuf>,
    /// Also compute the OOD AUROC (max probability and entropy scores) of the
    /// test split of --data against the test split of this data set spec.
    #[arg(long, value_name = "SPEC")]
    ood: Option<String>,
    /// MC-Dropout: average this many passes with dropout active (BatchNorm in
    /// eval mode); the run must have been trained with --dropout > 0.
    #[arg(long, value_name = "PASSES")]
    mc_dropout: Option<usize>,
    /// Seed of the MC-Dropout masks.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Report name: writes DIR/eval-NAME.json in the first run's directory
    /// (default: derived from the data set and the options).
    #[arg(long)]
    name: Option<String>,
    /// Replace an existing report of the same name.
    #[arg(long)]
    force: bool,
    /// Print the whole report as JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// CPU threads of libtorch (default: libtorch's, one per core).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Evaluation batch size.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
    /// Threads that decode a streamed data set's images (an imagenet: run,
    /// ImageNet-C); the numbers do not depend on it (default: one per core).
    #[arg(long, value_name = "N")]
    workers: Option<usize>,
}

/// Runs `csam eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.batch_size > 0, "--batch-size must be at least 1");
    anyhow::ensure!(args.workers != Some(0), "--workers must be at least 1");
    super::set_cpu_threads(args.threads)?;
    let request = EvalRequest {
        runs: args.run,
        data: args.data,
        corruptions: args.corruptions,
        ood: args.ood,
        mc_dropout: args.mc_dropout,
        seed: args.seed,
        name: args.name,
        force: args.force,
        device: args.device,
        batch_size: args.batch_size,
        workers: args.workers,
    };
    let (report, path) = evaluate_run(&request)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report)? + "\n"
    } else {
        tables(&report)
    };
    print_stdout(&text)?;
    eprintln!("report written to {}", path.display());
    Ok(())
}

/// What the severity columns are: "s1, s3, s5 = severities" (the set's own
/// levels, which need not run from 1 without gaps).
fn severity_key(levels: &[u8]) -> String {
    let names: Vec<String> = levels.iter().map(|level| format!("s{level}")).collect();
    format!("{} = severities", names.join(", "))
}

fn percent(v: f64) -> String {
    format!("{:.2}", 100.0 * v)
}

fn metric_cells(m: &ShiftMetrics) -> Vec<String> {
    vec![percent(m.accuracy), percent(m.ece), format!("{:.4}", m.nll)]
}

fn header(first: &str) -> Vec<String> {
    [first, "acc (%)", "ECE (%)", "NLL"]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The report as plain-text tables: the test metrics, then per corruption
/// and per severity, then OOD.
fn tables(report: &EvalReport) -> String {
    let m = &report.metrics;
    let method = match report.method.as_str() {
        "ensemble" => format!("ensemble of {}", report.weights.len()),
        "mc-dropout" => format!(
            "MC-Dropout, {} passes x {} run(s)",
            report.passes,
            report.weights.len()
        ),
        _ => "single run".to_string(),
    };
    let mut out = format!(
        "{} ({method}, {}) on {}: {} examples\n",
        report.model, report.device, report.data, report.n
    );
    let mut test = header("test");
    test.extend(["AdaECE (%)", "Brier"].map(String::from));
    let mut table = Table::new(test);
    let mut row = vec![report.data.clone()];
    row.extend(metric_cells(&ShiftMetrics {
        accuracy: m.accuracy,
        ece: m.ece,
        nll: m.nll,
    }));
    row.extend([percent(m.adaece), format!("{:.4}", m.brier)]);
    table.push(row);
    out += &table.to_string();
    if let Some(c) = &report.corruptions {
        let levels: Vec<u8> = c.per_severity.iter().map(|s| s.severity).collect();
        let mut h = vec!["corruption".to_string()];
        for level in &levels {
            h.extend([format!("acc s{level}"), format!("ECE s{level}")]);
        }
        h.extend(header("").into_iter().skip(1).map(|s| format!("mean {s}")));
        let mut table = Table::new(h);
        let row = |name: &str, sev: &[SeverityMetrics], mean: &ShiftMetrics| {
            let mut cells = vec![name.to_string()];
            for s in sev {
                cells.extend([percent(s.metrics.accuracy), percent(s.metrics.ece)]);
            }
            cells.extend(metric_cells(mean));
            cells
        };
        for r in &c.corruptions {
            table.push(row(&r.name, &r.severities, &r.mean));
        }
        table.push(row("mean", &c.per_severity, &c.mean));
        out += &format!(
            "\ncorruptions in {} (percent; {})\n",
            c.dir.display(),
            severity_key(&levels)
        );
        out += &table.to_string();
    }
    if let Some(o) = &report.ood {
        out += &format!(
            "\nOOD AUROC, {} in-distribution vs {} of {}: max probability {}%, entropy {}%\n",
            o.n_in,
            o.n_ood,
            o.data,
            percent(o.auroc_max_probability),
            percent(o.auroc_entropy)
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_severity_key_names_the_sets_own_levels() {
        assert_eq!(severity_key(&[1, 3, 5]), "s1, s3, s5 = severities");
        assert_eq!(severity_key(&[2]), "s2 = severities");
    }
}
