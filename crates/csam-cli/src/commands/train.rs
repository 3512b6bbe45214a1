//! `csam train`: train a classifier with SGD, SAM, ASAM or CSAM into a run
//! directory (see `csam_train::train` for what the directory holds).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use csam_train::train::{self, RunOutcome, TrainConfig, TrainRequest};

/// Flags of `csam train`. Every setting flag is also a key of the config
/// file (same name, `-` written `_`); a flag given here overrides the file.
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct TrainArgs {
    /// TOML file of settings, keys as in a run's config.toml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run directory: config.toml, metrics.jsonl, model.safetensors, logits, summary.json
    /// (and theory.jsonl with --track-theory).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Continue the unfinished run in --out from its last checkpoint.
    #[arg(long)]
    resume: bool,
    /// Data set: fashion-mnist, digits, idx:DIR, cifar10:DIR, cifar100:DIR, npy:IMAGES,LABELS, folder:DIR.
    #[arg(long, value_name = "SPEC")]
    data: Option<String>,
    /// Training examples held out for validation (default 5000).
    #[arg(long)]
    val_size: Option<usize>,
    /// Seed of initialisation, split, data order and dropout (default 0).
    #[arg(long)]
    seed: Option<u64>,
    /// Model: mlp, cnn, resnet20, resnet32, resnet44, resnet56, resnet110 (default resnet20).
    #[arg(long)]
    model: Option<String>,
    /// MLP hidden widths, comma-separated (default 256,256).
    #[arg(long, value_delimiter = ',')]
    mlp_hidden: Option<Vec<usize>>,
    /// Dropout rate in [0, 1) (default 0).
    #[arg(long)]
    dropout: Option<f64>,
    /// Number of epochs (default 200).
    #[arg(long)]
    epochs: Option<usize>,
    /// Mini-batch size (default 128).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Peak learning rate (default 0.1).
    #[arg(long)]
    lr: Option<f64>,
    /// Momentum of SGD / beta1 of AdamW (default 0.9).
    #[arg(long)]
    momentum: Option<f64>,
    /// Nesterov momentum (SGD base optimizer).
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    nesterov: Option<bool>,
    /// Weight decay of the base optimizer (default 5e-4).
    #[arg(long)]
    weight_decay: Option<f64>,
    /// Base optimizer: sgd or adamw (default sgd).
    #[arg(long)]
    base_optimizer: Option<String>,
    /// Learning-rate schedule: cosine (with --warmup-epochs, --min-lr) or step (with --step-size, --decay-factor) (default cosine).
    #[arg(long)]
    schedule: Option<String>,
    /// Linear warm-up epochs of the cosine schedule (default 0).
    #[arg(long)]
    warmup_epochs: Option<usize>,
    /// Final learning rate of the cosine schedule (default 0).
    #[arg(long)]
    min_lr: Option<f64>,
    /// Epochs between two decays of the step schedule (default 60).
    #[arg(long)]
    step_size: Option<usize>,
    /// Factor in (0, 1] of each step-schedule decay (default 0.1).
    #[arg(long)]
    decay_factor: Option<f64>,
    /// Update rule: sgd, sam, asam or csam (default sgd).
    #[arg(long)]
    optimizer: Option<String>,
    /// Perturbation radius of SAM / ASAM / CSAM (default 0.05).
    #[arg(long)]
    rho: Option<f64>,
    /// ASAM's eta in T_w = |w| + eta (default 0.01).
    #[arg(long)]
    eta: Option<f64>,
    /// CSAM's gamma, 0 <= gamma <= 2; 0 is SAM (default 1).
    #[arg(long)]
    gamma: Option<f64>,
    /// Treat CSAM's factor (1 + p)^-gamma as a constant weight instead of differentiating it.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    csam_detach: Option<bool>,
    /// m-sharpness: sub-batch size with its own perturbation (default: the whole batch).
    #[arg(long)]
    m: Option<usize>,
    /// Take the sharpness-aware step on every k-th step only (default 1).
    #[arg(long)]
    sam_every: Option<usize>,
    /// Clip the global L2 norm of the descent gradient.
    #[arg(long)]
    clip: Option<f64>,
    /// Turn training augmentation (random crop with padding, flip) on or off (default on).
    #[arg(long, value_name = "BOOL")]
    augment: Option<bool>,
    /// Keep the training set in file order every epoch.
    #[arg(long)]
    no_shuffle: bool,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// Validation metric of the best checkpoint: nll, ece, adaece, brier, accuracy (default nll).
    #[arg(long)]
    best_metric: Option<String>,
    /// CPU threads of libtorch.
    #[arg(long)]
    threads: Option<usize>,
    /// Start from these safetensors weights (PyTorch key names of the model's twin,
    /// e.g. saved with safetensors.torch.save_file(model.state_dict(), FILE)).
    #[arg(long, value_name = "FILE")]
    init: Option<String>,
    /// Log the paper's per-step diagnostics to theory.jsonl (SAM and CSAM only): geometric
    /// means p_y and p~_y, Lemma 2's bound, lambda, lambda_0, H(p_y), ||g||; plots at the end.
    #[arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL")]
    track_theory: Option<bool>,
    /// Hide the progress bar (epoch lines are still printed).
    #[arg(long)]
    quiet: bool,
    /// Test hook: stop (as if killed) after this epoch's checkpoint.
    #[arg(long, hide = true)]
    stop_after_epoch: Option<usize>,
}

impl TrainArgs {
    /// The setting flags that were given, as config keys.
    fn overrides(&self) -> toml::Table {
        let mut table = toml::Table::new();
        let mut put = |key: &str, value: Option<toml::Value>| {
            if let Some(value) = value {
                table.insert(key.to_string(), value);
            }
        };
        let int = |v: Option<usize>| v.map(|v| toml::Value::Integer(v as i64));
        let float = |v: Option<f64>| v.map(toml::Value::Float);
        let text = |v: &Option<String>| v.clone().map(toml::Value::String);
        put("data", text(&self.data));
        put("val_size", int(self.val_size));
        put("seed", self.seed.map(|s| toml::Value::Integer(s as i64)));
        put("model", text(&self.model));
        put(
            "mlp_hidden",
            self.mlp_hidden.as_ref().map(|widths| {
                toml::Value::Array(
                    widths
                        .iter()
                        .map(|&w| toml::Value::Integer(w as i64))
                        .collect(),
                )
            }),
        );
        put("dropout", float(self.dropout));
        put("epochs", int(self.epochs));
        put("batch_size", int(self.batch_size));
        put("lr", float(self.lr));
        put("momentum", float(self.momentum));
        put("nesterov", self.nesterov.map(toml::Value::Boolean));
        put("weight_decay", float(self.weight_decay));
        put("base_optimizer", text(&self.base_optimizer));
        put("schedule", text(&self.schedule));
        put("warmup_epochs", int(self.warmup_epochs));
        put("min_lr", float(self.min_lr));
        put("step_size", int(self.step_size));
        put("decay_factor", float(self.decay_factor));
        put("optimizer", text(&self.optimizer));
        put("rho", float(self.rho));
        put("eta", float(self.eta));
        put("gamma", float(self.gamma));
        put("csam_detach", self.csam_detach.map(toml::Value::Boolean));
        put("m", int(self.m));
        put("sam_every", int(self.sam_every));
        put("clip", float(self.clip));
        put("augment", self.augment.map(toml::Value::Boolean));
        put(
            "shuffle",
            self.no_shuffle.then_some(toml::Value::Boolean(false)),
        );
        put("device", text(&self.device));
        put("best_metric", text(&self.best_metric));
        put("threads", int(self.threads));
        put("init", text(&self.init));
        put("track_theory", self.track_theory.map(toml::Value::Boolean));
        table
    }
}

/// Runs `csam train`.
pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let saved = args.out.join("config.toml");
    let base = if args.resume && saved.exists() {
        anyhow::ensure!(
            args.config.is_none(),
            "--resume continues with the run's own {}; drop --config",
            saved.display()
        );
        Some(saved)
    } else {
        args.config.clone()
    };
    let config = TrainConfig::layered(base.as_deref(), args.overrides())?;
    for warning in config.validate()? {
        eprintln!("warning: {warning}");
    }
    let request = TrainRequest {
        config,
        out: args.out.clone(),
        resume: args.resume,
        show_progress: !args.quiet,
        stop_after_epoch: args.stop_after_epoch,
    };
    let context = || format!("training into {}", args.out.display());
    let prepared = train::prepare(&request).with_context(context)?;
    for notice in prepared.notices() {
        eprintln!("warning: {notice}");
    }
    match prepared.run().with_context(context)? {
        RunOutcome::Finished(summary) => println!("{}", summary.report()),
        RunOutcome::AlreadyFinished { summary } => println!(
            "{} holds a finished run; nothing to train (results: {})",
            args.out.display(),
            summary.display()
        ),
        RunOutcome::Stopped { epoch } => println!(
            "stopped after epoch {epoch} (--stop-after-epoch); continue with --resume --out {}",
            args.out.display()
        ),
    }
    Ok(())
}
