//! The subcommands of `csam`, one module each.

pub mod bench;
mod child;
mod choices;
mod cluster;
pub mod compare;
pub mod completions;
pub mod corrupt;
mod diverged;
pub mod eval;
mod experiment_args;
mod file_url;
pub mod grid;
pub mod launch;
pub mod man;
pub mod metrics;
mod parallel;
pub mod report;
pub mod sharpness;
mod spec_flags;
pub mod sweep;
pub mod train;

use std::io::{ErrorKind, Write};

use anyhow::Context;
use clap::Subcommand;

/// What `csam` can do.
#[derive(Subcommand)]
pub enum Command {
    /// Calibration metrics of saved predictions (logits or probabilities), with
    /// optional post-hoc calibration fitted on validation predictions.
    Metrics(metrics::MetricsArgs),
    /// Train a classifier with SGD, SAM, ASAM or CSAM into a run directory.
    ///
    /// A setting that no flag and no --config file gives takes the default recipe, the one
    /// `csam compare` trains on any data: the MLP, 20 epochs of batch 128, lr 0.05, weight
    /// decay 5e-4, SGD momentum 0.9 with cosine decay, no augmentation, 20% of the training
    /// part held out for validation (imagenet: holds out its own). The first line printed is
    /// the run's resolved recipe. The paper's CIFAR recipe, csam train's earlier defaults, is
    /// --model resnet20 --epochs 200 --lr 0.1 --augment --val-size 0.1.
    Train(Box<train::TrainArgs>),
    /// Start a data-parallel job on this machine: the csam command after `--` in N processes
    /// (ranks), as torchrun --nproc-per-node N.
    Launch(launch::LaunchArgs),
    /// Evaluate a trained run's best model on a data set.
    Eval(eval::EvalArgs),
    /// Write a dataset's corrupted copies (CIFAR-10-C's noise, blur, weather
    /// and digital corruptions; 5 severities) in the CIFAR-10-C layout.
    Corrupt(corrupt::CorruptArgs),
    /// Time SGD, SAM and CSAM steps on synthetic batches.
    Bench(bench::BenchArgs),
    /// Compare SGD, SAM and CSAM over seeds: the paper's calibration table.
    Compare(Box<compare::CompareArgs>),
    /// Hessian spectrum of a trained run: kappa_max, and kappa_min from theta to SAM's theta~.
    Sharpness(sharpness::SharpnessArgs),
    /// Train CSAM over a rho x gamma grid: the paper's rho x gamma table and figures.
    Sweep(Box<sweep::SweepArgs>),
    /// Train SGD over an lr x weight decay grid and choose the pair by validation accuracy.
    Grid(Box<grid::GridArgs>),
    /// Rewrite report.html and the figures of a compare or sweep directory, without training
    /// (--tensorboard: the TensorBoard event files of its runs).
    Report(report::ReportArgs),
    /// Print the shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsArgs),
    /// Print the manual page, or write one per subcommand with --out DIR.
    Man(man::ManArgs),
}

/// Runs one subcommand; `cli` builds the whole command line, which the
/// completion script and the manual pages describe.
pub fn run(command: Command, cli: fn() -> clap::Command) -> anyhow::Result<()> {
    match command {
        Command::Metrics(args) => metrics::run(&args),
        Command::Train(args) => train::run(*args),
        Command::Launch(args) => launch::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Corrupt(args) => corrupt::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Compare(args) => compare::run(*args),
        Command::Sharpness(args) => sharpness::run(args),
        Command::Sweep(args) => sweep::run(*args),
        Command::Grid(args) => grid::run(*args),
        Command::Report(args) => report::run(args),
        Command::Completions(args) => completions::run(&args, cli()),
        Command::Man(args) => man::run(&args, cli()),
    }
}

/// Sets libtorch's CPU threads to `--threads` when given (else libtorch's
/// default, one per core); 0 is refused.
pub fn set_cpu_threads(threads: Option<usize>) -> anyhow::Result<()> {
    if let Some(threads) = threads {
        anyhow::ensure!(threads > 0, "--threads must be at least 1");
        tch::set_num_threads(i32::try_from(threads).unwrap_or(i32::MAX));
    }
    Ok(())
}

/// Writes a command's result to standard output. A reader that went away
/// (`csam ... | head`) is not an error: there is nobody left to tell.
pub fn print_stdout(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != ErrorKind::BrokenPipe => {
            Err(e).context("writing the results to standard output")
        }
        _ => Ok(()),
    }
}
