//! The subcommands of `csam`, one module each.

pub mod metrics;

use clap::Subcommand;

/// What `csam` can do.
#[derive(Subcommand)]
pub enum Command {
    /// Calibration metrics of saved predictions (logits or probabilities), with
    /// optional post-hoc calibration fitted on validation predictions.
    Metrics(metrics::MetricsArgs),
}

/// Runs one subcommand.
pub fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Metrics(args) => metrics::run(&args),
    }
}
