//! `csam train`: train a classifier with SGD, SAM, ASAM or CSAM into a run
//! directory (see `csam_train::train` for what the directory holds).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use csam_dist::{ProcessGroup, Rendezvous};
use csam_train::spec::{RunSpec, Runtime, SpecLayers};
use csam_train::train::{self, ConfigError, Replica, RunOutcome, TrainError, TrainRequest};

use crate::progress::Terminal;

use super::spec_flags::{explain, SpecFlags};

/// Flags of `csam train`. Every setting flag is also a key of a flat config
/// file (same name, `-` written `_`); a flag given here overrides the file.
/// A flag given twice takes its last value. A flag that the chosen branch
/// does not read (`--rho` with `--optimizer sgd`) is refused.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct TrainArgs {
    /// TOML file of settings: a run's config.toml, or flat keys as the flags.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Run directory: config.toml, metrics.jsonl, model.safetensors, logits, summary.json,
    /// a TensorBoard event file (and theory.jsonl with --track-theory). timm's --output
    /// names the directory its runs go under; csam writes into this directory itself.
    #[arg(long, visible_alias = "output", value_name = "DIR")]
    out: PathBuf,
    /// Continue the unfinished run in --out from its last checkpoint, with its own
    /// config.toml (with --config: settings that must equal it). A directory whose files
    /// disagree with the checkpoint (checksums, settings, metrics.jsonl) is refused.
    #[arg(long)]
    resume: bool,
    #[command(flatten)]
    settings: SpecFlags,
    /// Hide the progress bar (epoch lines are still printed).
    #[arg(long)]
    quiet: bool,
    /// Data-parallel runs (started by `csam launch`, torchrun or srun with RANK and
    /// WORLD_SIZE set): seconds the processes wait for each other, at the rendezvous and at
    /// every step, before failing. Rank 0 validates and writes between epochs while the
    /// others wait, so it must exceed that time
    #[arg(long, value_name = "SECONDS", default_value_t = 1800.0)]
    dist_timeout: f64,
    /// Test hook: stop (as if killed) after this epoch's checkpoint.
    #[arg(long, hide = true)]
    stop_after_epoch: Option<usize>,
}

/// The spec error in the command line's words (flags for keys).
fn spec_error(error: ConfigError) -> anyhow::Error {
    match error {
        ConfigError::Inapplicable { .. } => anyhow::anyhow!(explain(&error)),
        other => other.into(),
    }
}

/// Runs `csam train`.
pub fn run(args: TrainArgs) -> anyhow::Result<()> {
    let saved = args.out.join("config.toml");
    let flags = args.settings.0.clone();
    let layers = if args.resume && saved.exists() {
        let layers = match &args.config {
            // The settings restated (as `csam compare` does for every run): the
            // run refuses any that differ from its config.toml.
            Some(path) => SpecLayers::over_recipe().file(path).map_err(spec_error)?,
            None => {
                let text = std::fs::read_to_string(&saved)
                    .with_context(|| format!("reading {}", saved.display()))?;
                // The run's own spec, every key of the recipe included: a
                // resumed run keeps the defaults it started with.
                let spec = RunSpec::from_saved_toml(&text, &saved.display().to_string())?;
                SpecLayers::new().spec(&spec)
            }
        };
        // The run's last device and threads, a layer below the flags (so that
        // a bad value is blamed on the file).
        let runtime = args.out.join(Runtime::FILE);
        match std::fs::read_to_string(&runtime) {
            Ok(text) => {
                let last: toml::Table = text
                    .parse()
                    .with_context(|| format!("reading {}", runtime.display()))?;
                layers
                    .keys(last, runtime.display().to_string())
                    .map_err(spec_error)?
            }
            Err(_) => layers,
        }
    } else {
        match &args.config {
            Some(path) => SpecLayers::over_recipe().file(path).map_err(spec_error)?,
            None => SpecLayers::over_recipe(),
        }
    };
    let (spec, runtime) = layers
        .flags(flags)
        .and_then(SpecLayers::build)
        .map_err(spec_error)?;
    let warnings = spec.validate().map_err(spec_error)?;
    let replica = join_replicas(args.dist_timeout)?;
    let writes = replica.as_ref().is_none_or(Replica::writes);
    if writes {
        println!("{}", spec.recipe_line());
    }
    for warning in warnings {
        eprintln!("warning: {warning}");
    }
    let request = TrainRequest {
        spec,
        runtime,
        out: args.out.clone(),
        resume: args.resume,
        stop_after_epoch: args.stop_after_epoch,
    };
    let context = || format!("training into {}", args.out.display());
    let out = args.out.display();
    let spec_errors = |e| {
        match e {
        TrainError::Config(config) => spec_error(config),
        // A resumed run keeps its spec, so the remedy is a new run.
        TrainError::Diverged { .. } => anyhow::anyhow!(
            "{e} Train a new run with a lower --lr or with --clip (--resume keeps the run's settings)."
        ),
        TrainError::SaveFailed { .. } => {
            anyhow::anyhow!("{e} Continue with --resume --out {out}.")
        }
        other => anyhow::Error::from(other),
    }
    };
    let prepared = train::prepare_replica(&request, replica)
        .map_err(spec_errors)
        .with_context(context)?;
    for notice in prepared.notices() {
        eprintln!("warning: {notice}");
    }
    match prepared
        .run(&mut Terminal::new(!args.quiet && writes))
        .map_err(spec_errors)
        .with_context(context)?
    {
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
        RunOutcome::Replicated { rank } => {
            println!("rank {rank}: trained its part of every batch; rank 0 wrote the results")
        }
    }
    Ok(())
}

/// This process's replica when a launcher started it as one of several
/// (`WORLD_SIZE` > 1): the rendezvous with the others. None for a single
/// process.
fn join_replicas(timeout_s: f64) -> anyhow::Result<Option<Replica>> {
    if !(timeout_s.is_finite() && timeout_s > 0.0) {
        anyhow::bail!("--dist-timeout {timeout_s}: must be a number of seconds > 0");
    }
    let Some(rendezvous) = Rendezvous::from_env(Duration::from_secs_f64(timeout_s))? else {
        return Ok(None);
    };
    if rendezvous.world_size == 1 {
        return Ok(None);
    }
    let group = ProcessGroup::connect(&rendezvous)?;
    Ok(Some(Replica::new(group)))
}
