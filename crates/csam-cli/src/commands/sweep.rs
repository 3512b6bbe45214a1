//! `csam sweep`: CSAM over a rho x gamma grid, the paper's rho x gamma table
//! and its rho and gamma figures (see `csam_lab::experiment::sweep`).

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::sweep::{self, SweepRequest, SweepSettings};
use csam_nn::optim::SamPolicy;

use crate::progress::Terminal;

use super::choices::{self, Choices};
use super::diverged::print_diverged;
use super::experiment_args::SharedArgs;
use super::file_url::open_line;

/// Flags of `csam sweep`: the grid, and the settings every run shares (as
/// in `csam compare`). A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct SweepArgs {
    /// Perturbation radii, comma-separated (default 0.02,0.05,0.1,0.2).
    #[arg(long, value_delimiter = ',', value_name = "LIST", action = clap::ArgAction::Set)]
    rho: Option<Vec<f64>>,
    /// CSAM gammas, comma-separated; 0 trains SAM (default 0,0.5,1,1.5,2).
    #[arg(long, value_delimiter = ',', value_name = "LIST", action = clap::ArgAction::Set)]
    gamma: Option<Vec<f64>>,
    /// Efficient SAM policy of every cell, at its defaults (default every: the
    /// second pass on every step).
    #[arg(long, value_name = "POLICY", value_parser = Choices::of(choices::policy_names()))]
    sam_policy: Option<String>,
    #[command(flatten)]
    shared: SharedArgs,
}

/// Runs `csam sweep`.
pub fn run(args: SweepArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let jobs = args.shared.jobs()?;
    let defaults = SweepSettings::default();
    let out = args.shared.out("sweep", &defaults.base);
    let context = || format!("sweeping into {}", out.display());
    let settings = SweepSettings {
        base: args.shared.base(defaults.base, &context)?,
        seeds: args.shared.seeds(defaults.seeds)?,
        rhos: args.rho.clone().unwrap_or(defaults.rhos),
        gammas: args.gamma.clone().unwrap_or(defaults.gammas),
        policy: match &args.sam_policy {
            None => defaults.policy,
            Some(name) => SamPolicy::named(&name.to_ascii_lowercase()).with_context(|| {
                let names: Vec<&str> = SamPolicy::all().iter().map(SamPolicy::name).collect();
                format!("unknown --sam-policy {name:?}: one of {}", names.join(", "))
            })?,
        },
    };
    let request = SweepRequest {
        settings,
        out: out.clone(),
        runtime: args.shared.runtime(),
        started,
    };
    let unfinished = sweep::plan(&request).with_context(context)?;
    let Some(trained_ahead) = args
        .shared
        .train_ahead(jobs, &out, &unfinished)
        .with_context(context)?
    else {
        return Ok(());
    };
    let mut terminal = Terminal::experiment(!args.shared.quiet, &unfinished, trained_ahead);
    let (results, table) = sweep::run(&request, &mut terminal).with_context(context)?;
    println!("\n{table}");
    println!(
        "wrote {} (results.json, results.csv, cells.csv, table.md, report.html, plots/, runs/) in {:.1}s",
        out.display(),
        results.wall_time_s
    );
    println!("{}", open_line(&out.join("report.html"))?);
    print_diverged(&out, &results.diverged);
    Ok(())
}
