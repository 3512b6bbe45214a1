//! `csam eval`: evaluate a trained run's best model on a data set.

use std::path::PathBuf;

use clap::Args;
use csam_train::train::eval::{evaluate_run, EvalRequest};

/// Flags of `csam eval`.
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct EvalArgs {
    /// Run directory written by `csam train`.
    #[arg(long, value_name = "DIR")]
    run: PathBuf,
    /// Data set spec whose test split is evaluated (same forms as `csam train --data`).
    #[arg(long, value_name = "SPEC")]
    data: String,
    /// Report name: writes DIR/eval-NAME.json (default: derived from --data).
    #[arg(long)]
    name: Option<String>,
    /// Replace an existing report of the same name.
    #[arg(long)]
    force: bool,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// Evaluation batch size.
    #[arg(long, default_value_t = 256)]
    batch_size: usize,
}

/// Runs `csam eval`.
pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.batch_size > 0, "--batch-size must be at least 1");
    let request = EvalRequest {
        run: args.run,
        data: args.data,
        name: args.name,
        force: args.force,
        device: args.device,
        batch_size: args.batch_size,
    };
    let (report, path) = evaluate_run(&request)?;
    println!("{}", serde_json::to_string_pretty(&report.metrics)?);
    println!(
        "{} examples of {}; report written to {}",
        report.n,
        report.data,
        path.display()
    );
    Ok(())
}
