//! `csam compare`: SGD vs SAM vs CSAM (and ASAM) over several seeds with
//! shared hyperparameters, the paper's calibration table, post-hoc
//! calibration columns and the HTML report (see `csam_lab::experiment`).

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::compare::{self, CompareDir, CompareRequest, CompareSettings};
use csam_lab::experiment::method::Method;

use crate::progress::Terminal;

use super::experiment_args::SharedArgs;
use super::file_url::open_line;

/// Flags of `csam compare`. Without flags it runs the default comparison:
/// SGD, SAM and CSAM on the bundled Fashion-MNIST subset, 3 seeds (see
/// docs/compare-defaults.md for how the defaults were chosen).
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct CompareArgs {
    /// Methods, comma-separated (default sgd,sam,csam): an update rule (sgd, sam, asam,
    /// csam, vasso) with cross entropy, a training loss (focal, flsd, ls, dual-focal, mbls: focal
    /// loss with gamma 3, FLSD-53, label smoothing 0.1, dual focal loss with gamma 5, MbLS
    /// with margin 10 and weight 0.1) with SGD, or LOSS+RULE, e.g. focal+sam, ls+csam.
    #[arg(long, value_delimiter = ',', value_name = "LIST", action = clap::ArgAction::Set)]
    methods: Option<Vec<Method>>,
    /// SAM / ASAM / CSAM perturbation radius (default 0.05, the paper's).
    #[arg(long)]
    rho: Option<f64>,
    /// CSAM's gamma (default 1, the paper's).
    #[arg(long)]
    gamma: Option<f64>,
    #[command(flatten)]
    shared: SharedArgs,
}

impl CompareArgs {
    /// The defaults overlaid by the given flags.
    fn settings(&self) -> anyhow::Result<CompareSettings> {
        let defaults = CompareSettings::default();
        Ok(CompareSettings {
            shared: self.shared.settings()?,
            methods: self.methods.clone().unwrap_or(defaults.methods),
            rho: self.rho.unwrap_or(defaults.rho),
            gamma: self.gamma.unwrap_or(defaults.gamma),
        })
    }
}

/// Runs `csam compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let jobs = args.shared.jobs()?;
    let settings = args.settings()?;
    let out = args.shared.out("compare", &settings.shared);
    let request = CompareRequest {
        settings,
        out: out.clone(),
        runtime: args.shared.runtime(),
        started,
    };
    let context = || format!("comparing into {}", out.display());
    args.shared
        .train_ahead(jobs, &compare::plan(&request).with_context(context)?)
        .with_context(context)?;
    let outcome =
        compare::run(&request, &mut Terminal::new(!args.shared.quiet)).with_context(context)?;
    println!("\n{}", outcome.table);
    println!(
        "wrote {} (results.json, results.csv, table.md, report.html, plots/, runs/) in {:.1}s",
        out.display(),
        outcome.results.wall_time_s
    );
    println!("{}", open_line(&CompareDir::new(&out).report())?);
    Ok(())
}
