//! `csam grid`: the lr and weight decay chosen on the validation split over
//! a grid (paper §5.1), printed with the `csam compare` line that uses them
//! (see `csam_lab::experiment::grid`).

use anyhow::Context;
use clap::Args;
use csam_lab::experiment::base::{data_name, model_name};
use csam_lab::experiment::compare_settings::CompareSettings;
use csam_lab::experiment::grid::settings::{short, GridPoint};
use csam_lab::experiment::grid::{self, GridRequest, GridSettings};
use csam_lab::experiment::method::Method;
use csam_train::spec::RunSpec;

use crate::progress::Terminal;

use super::choices::MethodParser;
use super::diverged::print_diverged;
use super::experiment_args::RunArgs;

/// Flags of `csam grid`: the lists, the method, and the settings every run
/// shares (as in `csam compare`, but one seed, 0, by default). A flag given
/// twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct GridArgs {
    /// Peak learning rates, comma-separated (default 0.01,0.05,0.1, the paper's).
    #[arg(long, value_name = "LIST", value_parser = list)]
    lrs: Option<List>,
    /// Weight decays, comma-separated (default 1e-4,5e-4,1e-3, the paper's).
    #[arg(long, value_name = "LIST", value_parser = list)]
    weight_decays: Option<List>,
    /// The method tuned, as in `csam compare --methods` (default sgd: SGD with cross entropy).
    #[arg(long, value_parser = MethodParser)]
    method: Option<Method>,
    #[command(flatten)]
    run: RunArgs,
    /// Hide the progress bars (of each epoch and of the whole grid); the lines on stdout
    /// stay.
    #[arg(long)]
    quiet: bool,
}

impl GridArgs {
    /// `defaults` overlaid by the given flags; `experiment` is the context
    /// of a refused data set or model name (see [`RunArgs::base`]).
    fn settings(
        &self,
        defaults: GridSettings,
        experiment: &dyn Fn() -> String,
    ) -> anyhow::Result<GridSettings> {
        Ok(GridSettings {
            base: self.run.base(defaults.base, experiment)?,
            seeds: self.run.seeds(defaults.seeds)?,
            method: self.method.unwrap_or(defaults.method),
            lrs: self.lrs.clone().map_or(defaults.lrs, |l| l.0),
            weight_decays: self
                .weight_decays
                .clone()
                .map_or(defaults.weight_decays, |l| l.0),
            ..defaults
        })
    }
}

/// A comma-separated list of numbers, read whole so that an empty one
/// (`--lrs ""`) reaches the grid's own check, which names it, rather than
/// failing as an empty number.
#[derive(Debug, Clone)]
struct List(Vec<f64>);

/// Parses a [`List`]: nothing at all is an empty list; every item must be a
/// number.
fn list(text: &str) -> Result<List, String> {
    if text.trim().is_empty() {
        return Ok(List(Vec::new()));
    }
    let numbers = text
        .split(',')
        .map(|item| {
            let item = item.trim();
            item.parse::<f64>()
                .map_err(|e| format!("{item:?} is not a number ({e})"))
        })
        .collect::<Result<_, _>>()?;
    Ok(List(numbers))
}

/// Runs `csam grid`.
pub fn run(args: GridArgs) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    let jobs = args.run.jobs()?;
    let defaults = GridSettings::default();
    let out = args.run.out("grid", &defaults.base);
    let context = || format!("searching the grid into {}", out.display());
    let settings = args.settings(defaults, &context)?;
    let request = GridRequest {
        settings,
        out: out.clone(),
        runtime: args.run.runtime(),
        started,
    };
    let unfinished = grid::plan(&request).with_context(context)?;
    let Some(trained_ahead) = args
        .run
        .train_ahead(jobs, &out, &unfinished, !args.quiet)
        .with_context(context)?
    else {
        return Ok(());
    };
    let mut terminal = Terminal::experiment(!args.quiet, &unfinished, trained_ahead);
    let (results, table) = grid::run(&request, &mut terminal).with_context(context)?;
    println!("\n{table}");
    let best = results.best;
    let accuracy = results
        .cells
        .iter()
        .find(|cell| cell.point == best)
        .map_or(String::new(), |cell| {
            format!(" (validation accuracy {:.2}%)", 100.0 * cell.accuracy.mean)
        });
    println!(
        "chosen: lr {}, weight decay {}{accuracy}",
        short(best.lr),
        short(best.weight_decay)
    );
    println!(
        "use it: {}",
        compare_line(&results.settings.base, &args.run, best)
    );
    println!(
        "wrote {} (results.json, table.md, runs/) in {:.1}s",
        out.display(),
        results.wall_time_s
    );
    print_diverged(&out, &results.diverged);
    Ok(())
}

/// The `csam compare` command that shares the chosen pair: `--lr` and
/// `--weight-decay`, and the settings of the grid's base that differ from
/// the comparison's defaults, so that it trains what the grid tuned for.
fn compare_line(base: &RunSpec, run: &RunArgs, best: GridPoint) -> String {
    let compare = CompareSettings::default().base;
    let mut line = format!(
        "csam compare --lr {} --weight-decay {}",
        short(best.lr),
        short(best.weight_decay)
    );
    let (data, model) = (data_name(base), model_name(base));
    let flags = [
        ("--data", data != data_name(&compare), data),
        ("--model", model != model_name(&compare), model),
        (
            "--epochs",
            base.epochs != compare.epochs,
            base.epochs.to_string(),
        ),
        (
            "--batch-size",
            base.batch_size != compare.batch_size,
            base.batch_size.to_string(),
        ),
        (
            "--val-size",
            run.val_size_given(),
            base.data.val_size.to_string(),
        ),
    ];
    for (flag, _, value) in flags.iter().filter(|(_, differs, _)| *differs) {
        line.push_str(&format!(" {flag} {value}"));
    }
    if base.data.augment != compare.data.augment {
        line.push_str(match base.data.augment {
            true => " --augment",
            false => " --no-augment",
        });
    }
    line
}
