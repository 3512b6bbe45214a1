//! `csam`: train calibrated classifiers and measure calibration.

mod commands;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "csam",
    version,
    about = "Train neural classifiers that know how sure they are (SGD, SAM, CSAM) and measure their calibration."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Train a classifier with SGD, SAM, ASAM or CSAM into a run directory.
    Train(Box<commands::train::TrainArgs>),
    /// Evaluate a trained run's best model on a data set.
    Eval(commands::eval::EvalArgs),
    /// Time SGD, SAM and CSAM steps on synthetic batches.
    Bench(commands::bench::BenchArgs),
    /// Compare SGD, SAM and CSAM over seeds: the paper's calibration table.
    Compare(Box<commands::compare::CompareArgs>),
}

fn main() -> anyhow::Result<()> {
    // Before libtorch allocates anything (see the function's doc).
    csam_train::train::allocator::tune_allocator();
    match Cli::parse().command {
        Command::Train(args) => commands::train::run(*args),
        Command::Eval(args) => commands::eval::run(args),
        Command::Bench(args) => commands::bench::run(args),
        Command::Compare(args) => commands::compare::run(*args),
    }
}
