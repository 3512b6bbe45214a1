//! `csam compare`: SGD vs SAM vs CSAM (and ASAM) over several seeds with
//! shared hyperparameters, the paper's calibration table, post-hoc
//! calibration columns and the HTML report (see `csam_lab::experiment`).

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::compare::{self, CompareRequest};
use csam_lab::experiment::compare_dir::CompareDir;
use csam_lab::experiment::compare_settings::{CompareSettings, ShiftRequest};
use csam_lab::experiment::method::Method;
use csam_lab::experiment::method_settings::MethodSettings;

use crate::progress::Terminal;

use super::choices::MethodParser;
use super::diverged::print_diverged;
use super::experiment_args::SharedArgs;
use super::file_url::open_line;

/// Flags of `csam compare`. Without flags it runs the default comparison:
/// SGD, SAM and CSAM on the bundled Fashion-MNIST subset, 3 seeds (see
/// docs/compare-defaults.md for how the defaults were chosen).
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct CompareArgs {
    /// Methods, comma-separated (default sgd,sam,csam). Each is an update rule (with cross
    /// entropy); an objective alone (a training loss, mixing, head, ensemble or posterior at
    /// its authors' defaults: docs/losses.md, docs/models.md; vi and rank1 train without weight decay),
    /// trained with SGD; or NAME+RULE (focal+sam, acls+csam, mixup+csam, vi+csam, rank1+csam), with an
    /// efficient SAM policy before a SAM-family rule (looksam+csam, focal+rst+sam). Any of
    /// these may end in -ensembleN (a deep ensemble of N networks) or -mc-dropoutN (N
    /// MC-Dropout passes of a network trained with dropout 0.1), e.g. csam-ensemble5;
    /// ensemble5 and mc-dropout5 alone are SGD's. The possible values are these parts.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        value_parser = MethodParser,
        action = clap::ArgAction::Set
    )]
    methods: Option<Vec<Method>>,
    /// Perturbation radius of SAM, CSAM and VASSO (default 0.05, the paper's); ASAM has its
    /// own, 0.5 (Kwon et al. 2021), and bSAM its rho 0.01 (Möllenhoff and Khan 2023), unless
    /// --methods-file sets them.
    #[arg(long)]
    rho: Option<f64>,
    /// CSAM's gamma (default 1, the paper's).
    #[arg(long)]
    gamma: Option<f64>,
    /// TOML file of each method's own settings: a table per method name holding loss and
    /// update-rule keys of `csam train` (e.g. `[asam]` `rho = 1.0`, `["focal+csam"]`
    /// `focal_gamma = 1.0`), over the built-in ones and --rho / --gamma.
    #[arg(long, value_name = "FILE")]
    methods_file: Option<std::path::PathBuf>,
    /// Also evaluate every method on this directory of corrupted test data (CIFAR-10-C
    /// layout, as `csam corrupt` writes it): mean accuracy, ECE and NLL over its corruptions
    /// and severities, in shift.md and results.json. Needs no retraining.
    #[arg(long, value_name = "DIR")]
    corruptions: Option<std::path::PathBuf>,
    /// Also score every method's test predictions against this out-of-distribution data
    /// set's test split (e.g. mnist for Fashion-MNIST): OOD AUROC by maximum probability and
    /// by entropy, in shift.md and results.json. Needs no retraining.
    #[arg(long, value_name = "DATA")]
    ood: Option<String>,
    #[command(flatten)]
    shared: SharedArgs,
}

impl CompareArgs {
    /// The defaults overlaid by the given flags; `experiment` is the context
    /// of a refused data set or model name (see [`SharedArgs::base`]).
    fn settings(&self, experiment: &dyn Fn() -> String) -> anyhow::Result<CompareSettings> {
        let defaults = CompareSettings::default();
        let methods = self.methods.clone().unwrap_or(defaults.methods);
        let mut method_settings = MethodSettings::builtin();
        if let Some(path) = &self.methods_file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the methods file {}", path.display()))?;
            let file = MethodSettings::parse(&text, &path.display().to_string())?;
            method_settings = method_settings.overridden_by(file);
        }
        let settings = CompareSettings {
            base: self.shared.base(defaults.base, experiment)?,
            seeds: self.shared.seeds(defaults.seeds)?,
            method_settings: method_settings.of(&methods),
            methods,
            rho: self.rho.unwrap_or(defaults.rho),
            gamma: self.gamma.unwrap_or(defaults.gamma),
        };
        // A flag that reaches no run is refused, as `csam train` refuses a
        // radius for SGD: it reaches one if another value changes a run.
        let another = |x: f64| if x == 1.0 { 2.0 } else { 1.0 };
        let names = || {
            let names: Vec<String> = settings.methods.iter().map(Method::to_string).collect();
            names.join(",")
        };
        if self.rho.is_some() && !settings.runs_read(|s| s.rho = another(s.rho))? {
            anyhow::bail!(
                "--rho applies to SAM, CSAM and VASSO methods without a radius of their own; \
                 none of --methods {} reads it",
                names()
            );
        }
        if self.gamma.is_some() && !settings.runs_read(|s| s.gamma = another(s.gamma))? {
            anyhow::bail!(
                "--gamma applies to CSAM methods without a gamma of their own; none of \
                 --methods {} reads it",
                names()
            );
        }
        Ok(settings)
    }
}

/// Runs `csam compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let jobs = args.shared.jobs()?;
    let out = args.shared.out("compare", &CompareSettings::default().base);
    let context = || format!("comparing into {}", out.display());
    let settings = args.settings(&context)?;
    let request = CompareRequest {
        settings,
        out: out.clone(),
        runtime: args.shared.runtime(),
        started,
        shift: ShiftRequest {
            corruptions: args.corruptions.clone(),
            ood: args.ood.clone(),
        },
    };
    let unfinished = compare::plan(&request).with_context(context)?;
    let Some(trained_ahead) = args
        .shared
        .train_ahead(jobs, &out, &unfinished)
        .with_context(context)?
    else {
        return Ok(());
    };
    let mut terminal = Terminal::experiment(!args.shared.quiet, &unfinished, trained_ahead);
    let outcome = compare::run(&request, &mut terminal).with_context(context)?;
    println!("\n{}", outcome.table);
    println!("\n{}", outcome.cost_table);
    if let Some(shift_table) = &outcome.shift_table {
        println!("\n{shift_table}");
    }
    let shift_file = match outcome.shift_table {
        Some(_) => "shift.md, ",
        None => "",
    };
    println!(
        "wrote {} (results.json, results.csv, table.md, cost.md, {shift_file}report.html, plots/, runs/) \
         in {:.1}s",
        out.display(),
        outcome.results.wall_time_s
    );
    println!("{}", open_line(&CompareDir::new(&out).report())?);
    print_diverged(&out, &outcome.results.diverged);
    Ok(())
}
