//! `csam report DIR`: rewrite the figures and `report.html` of a comparison
//! or sweep directory from its saved results and runs, without training.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::report;

use super::file_url::open_line;

/// Flags of `csam report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A directory written by `csam compare` or `csam sweep`.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

/// Runs `csam report`.
pub fn run(args: ReportArgs) -> anyhow::Result<()> {
    let path = report::rebuild(&args.dir)
        .with_context(|| format!("writing the report of {}", args.dir.display()))?;
    println!("wrote {}", path.display());
    println!("{}", open_line(&path)?);
    Ok(())
}
