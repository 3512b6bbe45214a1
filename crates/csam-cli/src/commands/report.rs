//! `csam report DIR`: rewrite the figures and `report.html` of a comparison
//! or sweep directory from its saved results and runs, without training;
//! with `--tensorboard`, write the TensorBoard event files of its runs (or
//! of one run directory) from their logs instead.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::report;
use csam_train::tensorboard;

use super::file_url::open_line;

/// Flags of `csam report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A directory written by `csam compare` or `csam sweep` (with --tensorboard also
    /// `csam grid` or `csam train`).
    #[arg(value_name = "DIR")]
    dir: PathBuf,
    /// Instead of the report, write a TensorBoard event file into every run directory
    /// in DIR (or into DIR, a run directory) from its metrics.jsonl and theory.jsonl:
    /// for runs trained with --no-tensorboard or before csam wrote event files.
    #[arg(long)]
    tensorboard: bool,
    /// With --tensorboard: replace the event files the runs already hold.
    #[arg(long, requires = "tensorboard")]
    force: bool,
}

/// Runs `csam report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    if args.tensorboard {
        let files = tensorboard::backfill_all(&args.dir, args.force)
            .with_context(|| format!("writing the event files of {}", args.dir.display()))?;
        for file in &files {
            println!("wrote {}", file.display());
        }
        println!(
            "view them with: tensorboard --logdir {}",
            args.dir.display()
        );
        return Ok(());
    }
    let path = report::rebuild(&args.dir)
        .with_context(|| format!("writing the report of {}", args.dir.display()))?;
    println!("wrote {}", path.display());
    println!("{}", open_line(&path)?);
    Ok(())
}
