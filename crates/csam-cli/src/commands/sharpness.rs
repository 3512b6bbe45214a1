//! `csam sharpness`: the Hessian spectrum of a trained run's training loss,
//! kappa_max and kappa_min at theta, at SAM's theta~ and along the segment
//! between them (see `csam_lab::sharpness`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use csam_lab::error::LabError;
use csam_lab::sharpness::{measure_run, SharpnessReport, SharpnessSettings};
use csam_nn::curvature::{Eigen, PowerSettings};
use csam_train::train::{Checkpoint as Weights, TrainError};

use super::spec_flags::explain_value;
use crate::progress::CountBar;
use crate::table::Table;

/// Which weights to measure.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Checkpoint {
    /// model.safetensors (best by the validation metric).
    Best,
    /// model-last.safetensors (after the last epoch).
    Last,
}

/// Flags of `csam sharpness`. A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct SharpnessArgs {
    /// Run directory written by `csam train`.
    #[arg(long, value_name = "DIR")]
    run: PathBuf,
    /// Weights to measure.
    #[arg(long, value_enum, default_value_t = Checkpoint::Best)]
    checkpoint: Checkpoint,
    /// Training examples the loss is averaged over (a seeded sample of the run's training split).
    #[arg(long, default_value_t = 1000)]
    examples: usize,
    /// Examples per forward pass (memory only).
    #[arg(long, default_value_t = 250)]
    batch_size: usize,
    /// Power-iteration limit per eigenvalue.
    #[arg(long, default_value_t = 100)]
    max_iterations: usize,
    /// Relative change of the eigenvalue estimate that counts as converged.
    #[arg(long, default_value_t = 1e-3)]
    tolerance: f64,
    /// Interior points of the segment theta -> theta~ (t = 1/(N+1), ..., N/(N+1)).
    #[arg(long, default_value_t = 3)]
    segment_points: usize,
    /// Seed of the example sample and of the power iteration's start vector.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Perturbation radius of theta~ (default: the run's rho).
    #[arg(long)]
    rho: Option<f64>,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// Replace an existing sharpness.json.
    #[arg(long)]
    force: bool,
    /// Hide the progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Runs `csam sharpness`.
pub fn run(args: SharpnessArgs) -> anyhow::Result<()> {
    let settings = SharpnessSettings {
        checkpoint: match args.checkpoint {
            Checkpoint::Best => Weights::Best,
            Checkpoint::Last => Weights::Last,
        },
        examples: args.examples,
        batch_size: args.batch_size,
        power: PowerSettings {
            max_iterations: args.max_iterations,
            tolerance: args.tolerance,
        },
        segment_points: args.segment_points,
        seed: args.seed,
        rho: args.rho,
    };
    settings
        .validate()
        .map_err(|e| anyhow::anyhow!(explain_value(&e)))?;
    let report = measure_run(
        &args.run,
        &settings,
        args.device.as_deref(),
        args.force,
        &mut CountBar::sharpness(!args.quiet),
    )
    .map_err(|e| match e {
        LabError::Train(TrainError::Config(config)) => anyhow::anyhow!(explain_value(&config)),
        other => anyhow::Error::from(other),
    })
    .with_context(|| format!("measuring the sharpness of {}", args.run.display()))?;
    println!("{}", render(&report));
    println!(
        "wrote {}",
        args.run.join(csam_lab::sharpness::SHARPNESS_JSON).display()
    );
    Ok(())
}

/// The report as a terminal table: one row per point of the segment.
fn render(report: &SharpnessReport) -> String {
    let mut table = Table::new(
        [
            "t",
            "loss",
            "kappa_max",
            "iters",
            "rel. change",
            "kappa_min",
            "iters",
            "rel. change",
            "kappa_min >= -||g||/rho",
        ]
        .map(String::from)
        .to_vec(),
    );
    for point in &report.path {
        let mut row = vec![format!("{:.3}", point.t), format!("{:.5}", point.loss)];
        row.extend(eigen_cells(&point.kappa_max));
        row.extend(eigen_cells(&point.kappa_min));
        row.push(if point.assumption_holds { "yes" } else { "no" }.to_string());
        table.push(row);
    }
    format!(
        "{} run, {} examples, {} weights, rho {}, ||g|| {:.5}, -||g||/rho {:.4} ({})\n{table}\
         kappa_max {:.4}; kappa_min at theta {:.4}, at theta~ {:.4}; Lemma 1's assumption {} on the path",
        report.optimizer.to_uppercase(),
        report.n_examples,
        report.n_weights,
        report.rho,
        report.grad_norm,
        report.kappa_min_threshold,
        report.device,
        report.kappa_max,
        report.kappa_min_theta,
        report.kappa_min_theta_tilde,
        if report.assumption_holds_on_path { "holds" } else { "fails" },
    )
}

/// value, iterations and the relative change (with "*" where not converged).
fn eigen_cells(e: &Eigen) -> [String; 3] {
    [
        format!("{:.4}", e.value),
        format!("{}{}", e.iterations, if e.converged { "" } else { "*" }),
        format!("{:.1e}", e.relative_change),
    ]
}
