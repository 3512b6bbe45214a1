//! `csam compare`: SGD vs SAM vs CSAM (and ASAM) over several seeds with
//! shared hyperparameters, the paper's calibration table, post-hoc
//! calibration columns (see `csam_train::experiment`).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use csam_train::experiment::compare::{self, CompareRequest, CompareSettings};
use csam_train::train::OptimizerFamily;

/// Flags of `csam compare`. Without flags it runs the default comparison:
/// SGD, SAM and CSAM on the bundled Fashion-MNIST subset, 3 seeds (see
/// docs/compare-defaults.md for how the defaults were chosen).
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct CompareArgs {
    /// Methods, comma-separated: sgd, sam, asam, csam (default sgd,sam,csam).
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    methods: Option<Vec<OptimizerFamily>>,
    /// Seeds, comma-separated (default 0,1,2).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        conflicts_with = "n_seeds"
    )]
    seeds: Option<Vec<u64>>,
    /// Use seeds 0..N.
    #[arg(long, value_name = "N")]
    n_seeds: Option<u64>,
    /// Data set: fashion-mnist, fashion-mnist-full, digits, idx:DIR, cifar10:DIR, ... (default fashion-mnist).
    #[arg(long, value_name = "SPEC", conflicts_with = "full")]
    data: Option<String>,
    /// Use the full Fashion-MNIST (60,000 / 10,000) of Debian's dataset-fashion-mnist.
    #[arg(long)]
    full: bool,
    /// Model: mlp, cnn, resnet20, ... (default mlp).
    #[arg(long)]
    model: Option<String>,
    /// Epochs of every run (default 20).
    #[arg(long)]
    epochs: Option<usize>,
    /// Peak learning rate of every method (default 0.05).
    #[arg(long)]
    lr: Option<f64>,
    /// Weight decay of every method (default 5e-4).
    #[arg(long)]
    weight_decay: Option<f64>,
    /// SAM / ASAM / CSAM perturbation radius (default 0.05, the paper's).
    #[arg(long)]
    rho: Option<f64>,
    /// CSAM's gamma (default 1, the paper's).
    #[arg(long)]
    gamma: Option<f64>,
    /// Mini-batch size (default 128).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Training examples held out for validation (default: 20% of the training part).
    #[arg(long)]
    val_size: Option<usize>,
    /// Training augmentation (random crop with padding, flip) on or off (default off).
    #[arg(long, value_name = "BOOL")]
    augment: Option<bool>,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// CPU threads of libtorch. One by default: the default runs are small, and on a
    /// shared machine libtorch's threads wait on each other (measured 9x slower with 2).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Comparison directory (default runs/compare-DATA-MODEL); rerunning with the same
    /// settings reuses finished runs and resumes interrupted ones.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Log the paper's per-step theory diagnostics (theory.jsonl) of the SAM and
    /// CSAM runs (see `csam train --track-theory`).
    #[arg(long)]
    track_theory: bool,
    /// Hide the per-epoch progress bar.
    #[arg(long)]
    quiet: bool,
}

impl CompareArgs {
    /// The defaults overlaid by the given flags.
    fn settings(&self) -> anyhow::Result<CompareSettings> {
        let defaults = CompareSettings::default();
        let data = match (&self.data, self.full) {
            (Some(data), _) => data.clone(),
            (None, true) => "fashion-mnist-full".to_string(),
            (None, false) => defaults.data.clone(),
        };
        let val_size = match self.val_size {
            Some(size) => size,
            None => compare::default_val_size(&data)?,
        };
        let seeds = match (&self.seeds, self.n_seeds) {
            (Some(seeds), _) => seeds.clone(),
            (None, Some(0)) => anyhow::bail!("--n-seeds must be at least 1"),
            (None, Some(n)) => (0..n).collect(),
            (None, None) => defaults.seeds.clone(),
        };
        Ok(CompareSettings {
            data,
            model: self.model.clone().unwrap_or(defaults.model),
            epochs: self.epochs.unwrap_or(defaults.epochs),
            methods: self.methods.clone().unwrap_or(defaults.methods),
            seeds,
            val_size,
            batch_size: self.batch_size.unwrap_or(defaults.batch_size),
            lr: self.lr.unwrap_or(defaults.lr),
            weight_decay: self.weight_decay.unwrap_or(defaults.weight_decay),
            rho: self.rho.unwrap_or(defaults.rho),
            gamma: self.gamma.unwrap_or(defaults.gamma),
            augment: self.augment.unwrap_or(defaults.augment),
            track_theory: self.track_theory,
        })
    }
}

/// Runs `csam compare`.
pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    let settings = args.settings()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| compare::default_out(&settings));
    let request = CompareRequest {
        settings,
        out: out.clone(),
        device: args.device.clone(),
        threads: Some(args.threads),
        show_progress: !args.quiet,
    };
    let outcome =
        compare::run(&request).with_context(|| format!("comparing into {}", out.display()))?;
    println!("\n{}", outcome.table);
    println!(
        "wrote {} (results.json, results.csv, table.md, plots/, runs/) in {:.1}s",
        out.display(),
        outcome.results.wall_time_s
    );
    Ok(())
}
