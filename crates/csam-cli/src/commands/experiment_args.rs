//! The flags the experiments share: data, model, length, seeds, device and
//! output directory ([`RunArgs`], every experiment), and the shared
//! hyperparameters ([`SharedArgs`], those that do not tune them).

use std::path::{Path, PathBuf};

use clap::Args;
use csam_data::DatasetSpec;
use csam_lab::experiment::compare_settings::{default_out, default_val_size};
use csam_lab::experiment::runs::PlannedRun;
use csam_lab::experiment::settings::SharedSettings;
use csam_nn::device::parse_device;
use csam_train::spec::Runtime;

use super::choices::{self, Choices};
use super::cluster;
use super::parallel::train_in_processes;

/// Flags every experiment over many runs takes: `csam compare` and `csam
/// sweep` through [`SharedArgs`], `csam grid` (which tunes the lr and weight
/// decay itself) directly.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Seeds, comma-separated (default 0,1,2; csam grid: 0).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "LIST",
        conflicts_with = "n_seeds",
        action = clap::ArgAction::Set
    )]
    seeds: Option<Vec<u64>>,
    /// Use seeds 0..N.
    #[arg(long, value_name = "N")]
    n_seeds: Option<u64>,
    /// Data set: fashion-mnist-full (the whole of Fashion-MNIST, bundled), fashion-mnist
    /// (its bundled 10,000-image subset), digits, idx:DIR, cifar10:DIR, svhn:DIR, folder:DIR, ...
    /// (default fashion-mnist-full).
    #[arg(long, value_name = "SPEC")]
    data: Option<String>,
    /// Model: an architecture of the model registry (default mlp).
    #[arg(long, value_name = "NAME", value_parser = Choices::of(choices::model_names()))]
    model: Option<String>,
    /// Epochs of every run (default 20).
    #[arg(long)]
    epochs: Option<usize>,
    /// Mini-batch size (default 128).
    #[arg(long, short = 'b')]
    batch_size: Option<usize>,
    /// Training examples held out for validation (default: 20% of the training part).
    #[arg(long)]
    val_size: Option<usize>,
    /// Training augmentation: random crop with padding, flip (default off).
    #[arg(long, overrides_with = "no_augment")]
    augment: bool,
    /// The opposite of --augment.
    #[arg(long, overrides_with = "augment")]
    no_augment: bool,
    /// Precision of every run's forward passes: fp32, bf16 or fp16 (default fp32; see
    /// `csam train --precision`).
    #[arg(long, value_name = "NAME")]
    precision: Option<csam_nn::model::precision::Precision>,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// CPU threads of libtorch. One by default: the default runs are small, and on a
    /// shared machine libtorch's threads wait on each other (measured 9x slower with 2).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Write no TensorBoard event files into the run directories (on by default:
    /// `tensorboard --logdir DIR` then plots every run of the experiment side by side).
    #[arg(long)]
    no_tensorboard: bool,
    /// Runs trained at once, each by its own `csam train` process with --threads threads
    /// (default: on the CPU, the machine's cores divided by --threads; on a GPU, 1). Every
    /// run gives the same numbers as when the runs train one after the other.
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// Output directory (default runs/KIND-DATA-MODEL); rerunning with the same
    /// settings reuses finished runs and resumes interrupted ones.
    #[arg(long, visible_alias = "output", value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write the unfinished runs into OUT/plan/ as independent `csam train` commands
    /// (commands.txt) and a Slurm job array (slurm.sh), then stop: train them anywhere,
    /// drain them with --worker, build the results with --collect.
    #[arg(long, conflicts_with_all = ["worker", "collect"])]
    plan: bool,
    /// Drain OUT/plan/: claim and train its runs one at a time until every run has
    /// finished. Any number of workers, on machines sharing the file system; a dead
    /// worker's run is taken over and resumed from its last checkpoint.
    #[arg(long, conflicts_with = "collect")]
    worker: bool,
    /// Build the table and report from finished runs only: refuse when a run of the
    /// experiment has not finished instead of training it.
    #[arg(long)]
    collect: bool,
}

/// Flags of `csam compare` and `csam sweep`: [`RunArgs`] and the
/// hyperparameters every run shares.
#[derive(Debug, Args)]
pub struct SharedArgs {
    #[command(flatten)]
    run: RunArgs,
    /// The same as `--data fashion-mnist-full` (the whole of Fashion-MNIST), which is
    /// now the default; kept so that commands written for the subset default still run.
    #[arg(long, conflicts_with = "data")]
    full: bool,
    /// Peak learning rate of every run (default 0.05).
    #[arg(long)]
    lr: Option<f64>,
    /// Weight decay of every run (default 5e-4).
    #[arg(long)]
    weight_decay: Option<f64>,
    /// Log the paper's per-step theory diagnostics (theory.jsonl) of the SAM and
    /// CSAM runs (see `csam train --track-theory`).
    #[arg(long)]
    track_theory: bool,
    /// Hide the per-epoch progress bar.
    #[arg(long)]
    pub quiet: bool,
}

impl SharedArgs {
    /// The defaults overlaid by the given flags.
    pub fn settings(&self) -> anyhow::Result<SharedSettings> {
        let defaults = SharedSettings::default();
        let data = match self.full {
            true => DatasetSpec::FashionMnistFull.to_string(),
            false => defaults.data.clone(),
        };
        let settings = self.run.settings(SharedSettings { data, ..defaults })?;
        Ok(SharedSettings {
            lr: self.lr.unwrap_or(settings.lr),
            weight_decay: self.weight_decay.unwrap_or(settings.weight_decay),
            track_theory: self.track_theory,
            ..settings
        })
    }

    /// See [`RunArgs::runtime`].
    pub fn runtime(&self) -> Runtime {
        self.run.runtime()
    }

    /// See [`RunArgs::jobs`].
    pub fn jobs(&self) -> anyhow::Result<usize> {
        self.run.jobs()
    }

    /// See [`RunArgs::train_ahead`].
    pub fn train_ahead(
        &self,
        jobs: usize,
        out: &Path,
        unfinished: &[PlannedRun],
    ) -> anyhow::Result<Option<Vec<PathBuf>>> {
        self.run.train_ahead(jobs, out, unfinished)
    }

    /// See [`RunArgs::out`].
    pub fn out(&self, kind: &str, settings: &SharedSettings) -> PathBuf {
        self.run.out(kind, settings)
    }
}

impl RunArgs {
    /// `defaults` overlaid by the given flags.
    pub fn settings(&self, defaults: SharedSettings) -> anyhow::Result<SharedSettings> {
        let data = self.data.clone().unwrap_or(defaults.data);
        let val_size = match self.val_size {
            Some(size) => size,
            None => default_val_size(&data)?,
        };
        let seeds = match (&self.seeds, self.n_seeds) {
            (Some(seeds), _) => seeds.clone(),
            (None, Some(0)) => anyhow::bail!("--n-seeds must be at least 1"),
            (None, Some(n)) => (0..n).collect(),
            (None, None) => defaults.seeds,
        };
        Ok(SharedSettings {
            data,
            model: self.model.clone().unwrap_or(defaults.model),
            epochs: self.epochs.unwrap_or(defaults.epochs),
            seeds,
            val_size,
            batch_size: self.batch_size.unwrap_or(defaults.batch_size),
            augment: match (self.augment, self.no_augment) {
                (true, _) => true,
                (_, true) => false,
                _ => defaults.augment,
            },
            precision: self.precision.unwrap_or(defaults.precision),
            ..defaults
        })
    }

    /// Whether `--val-size` was given (a default one depends on the data).
    pub fn val_size_given(&self) -> bool {
        self.val_size.is_some()
    }

    /// How one process runs each run: `--device`, `--threads` and
    /// `--no-tensorboard`.
    pub fn runtime(&self) -> Runtime {
        Runtime {
            device: self.device.clone(),
            threads: Some(self.threads),
            tensorboard: !self.no_tensorboard,
            // Experiments train in-memory data sets, which have no decoding
            // threads.
            workers: None,
            resident_data: false,
        }
    }

    /// `--jobs`, or its default: on the CPU as many runs as the cores hold at
    /// `--threads` each, on a GPU one.
    pub fn jobs(&self) -> anyhow::Result<usize> {
        match self.jobs {
            Some(0) => anyhow::bail!("--jobs must be at least 1"),
            Some(jobs) => Ok(jobs),
            None => {
                let device = parse_device(self.device.as_deref())
                    .map_err(|e| anyhow::anyhow!("--device {:?}: {}", e.text, e.reason))?;
                let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
                Ok(match device {
                    tch::Device::Cpu => (cores / self.threads.max(1)).max(1),
                    _ => 1,
                })
            }
        }
    }

    /// Before the experiment builds its results: with `--plan`, writes the
    /// plan of the `unfinished` runs into `out`; with `--worker`, drains
    /// that plan; both return None (the command is done). Otherwise the
    /// directories of the runs trained here ahead of the experiment: with
    /// `--collect` none (and an error when a run has not finished), else
    /// the unfinished runs trained `jobs` at a time in separate processes,
    /// when more than one run and more than one job make that worthwhile
    /// (the experiment then reuses them).
    pub fn train_ahead(
        &self,
        jobs: usize,
        out: &Path,
        unfinished: &[PlannedRun],
    ) -> anyhow::Result<Option<Vec<PathBuf>>> {
        if self.plan {
            cluster::write(out, unfinished, &self.runtime())?;
            return Ok(None);
        }
        if self.worker {
            cluster::work(out, &self.runtime())?;
            return Ok(None);
        }
        if self.collect {
            cluster::check_collectable(unfinished)?;
            return Ok(Some(Vec::new()));
        }
        if jobs > 1 && unfinished.len() > 1 {
            train_in_processes(unfinished, &self.runtime(), jobs)?;
            return Ok(Some(unfinished.iter().map(|run| run.dir.clone()).collect()));
        }
        Ok(Some(Vec::new()))
    }

    /// `--out`, or `runs/<kind>-<data>-<model>`.
    pub fn out(&self, kind: &str, settings: &SharedSettings) -> PathBuf {
        self.out
            .clone()
            .unwrap_or_else(|| default_out(kind, settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Experiment {
        #[command(flatten)]
        run: RunArgs,
    }

    fn augment(args: &[&str]) -> bool {
        let given = ["csam", "--val-size", "100"].iter().chain(args);
        let run = Experiment::try_parse_from(given).unwrap().run;
        run.settings(SharedSettings::default()).unwrap().augment
    }

    #[test]
    fn augment_and_no_augment_set_the_runs_augmentation_and_the_last_one_wins() {
        let default = SharedSettings::default().augment;
        assert_eq!(augment(&[]), default);
        assert!(augment(&["--augment"]));
        assert!(!augment(&["--no-augment"]));
        assert!(!augment(&["--augment", "--no-augment"]));
        assert!(augment(&["--no-augment", "--augment"]));
        assert!(Experiment::try_parse_from(["csam", "--augment", "false"]).is_err());
    }
}
