//! The flags the experiments share: data, model, length, seeds, device and
//! output directory ([`RunArgs`], every experiment), and the shared
//! hyperparameters ([`SharedArgs`], those that do not tune them). They set
//! the branches of the experiment's base run ([`csam_lab::experiment::base`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use csam_data::DatasetSpec;
use csam_lab::experiment::base::{data_name, model_name, model_named, source_named};
use csam_lab::experiment::compare_settings::{default_out, default_val_size};
use csam_lab::experiment::runs::PlannedRun;
use csam_nn::device::parse_device;
use csam_train::spec::{ModelSpec, RunSpec, Runtime, ValSize};

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
    #[arg(
        long,
        value_name = "SPEC",
        value_parser = Choices::of(choices::data_names()),
        hide_possible_values = true
    )]
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
    /// Hide the progress bars (of each epoch and of the whole experiment); the lines on
    /// stdout stay.
    #[arg(long)]
    pub quiet: bool,
}

impl SharedArgs {
    /// The base `defaults` with the given flags over it (see
    /// [`RunArgs::base`]).
    pub fn base(
        &self,
        defaults: RunSpec,
        experiment: &dyn Fn() -> String,
    ) -> anyhow::Result<RunSpec> {
        let mut base = self.run.base(self.full_data(defaults), experiment)?;
        base.optim.lr = self.lr.unwrap_or(base.optim.lr);
        base.optim.weight_decay = self.weight_decay.unwrap_or(base.optim.weight_decay);
        base.track_theory = self.track_theory;
        Ok(base)
    }

    /// `defaults` on the whole of Fashion-MNIST with `--full`.
    fn full_data(&self, mut defaults: RunSpec) -> RunSpec {
        if self.full {
            defaults.data.source = DatasetSpec::FashionMnistFull;
        }
        defaults
    }

    /// See [`RunArgs::seeds`].
    pub fn seeds(&self, defaults: Vec<u64>) -> anyhow::Result<Vec<u64>> {
        self.run.seeds(defaults)
    }

    /// See [`RunArgs::runtime`].
    pub fn runtime(&self) -> Runtime {
        self.run.runtime()
    }

    /// See [`RunArgs::jobs`].
    pub fn jobs(&self) -> anyhow::Result<usize> {
        self.run.jobs()
    }

    /// See [`RunArgs::train_ahead`]; bars unless `--quiet`.
    pub fn train_ahead(
        &self,
        jobs: usize,
        out: &Path,
        unfinished: &[PlannedRun],
    ) -> anyhow::Result<Option<Vec<PathBuf>>> {
        self.run.train_ahead(jobs, out, unfinished, !self.quiet)
    }

    /// See [`RunArgs::out`].
    pub fn out(&self, kind: &str, defaults: &RunSpec) -> PathBuf {
        self.run.out(kind, &self.full_data(defaults.clone()))
    }
}

impl RunArgs {
    /// The base `defaults` with the given flags over it: `--data` and its
    /// validation size (`--val-size`, or [`default_val_size`] of the data),
    /// `--model` (with its default options) and `--precision`, `--epochs`,
    /// `--batch-size`, `--augment` / `--no-augment`. A data set or model
    /// name that does not parse is refused in the context `experiment`
    /// ("comparing into DIR"), as the experiment's own checks refuse every
    /// other setting of its runs.
    pub fn base(
        &self,
        defaults: RunSpec,
        experiment: &dyn Fn() -> String,
    ) -> anyhow::Result<RunSpec> {
        let mut base = defaults;
        let data = self.data.clone().unwrap_or_else(|| data_name(&base));
        let val_size = match self.val_size {
            Some(size) => size,
            None => default_val_size(&data)?,
        };
        base.data.val_size = ValSize::Count(val_size);
        base.data.source = source_named(&data).with_context(experiment)?;
        if let Some(name) = &self.model {
            base.model = ModelSpec {
                precision: base.model.precision,
                ..model_named(name).with_context(experiment)?
            };
        }
        base.model.precision = self.precision.unwrap_or(base.model.precision);
        base.epochs = self.epochs.unwrap_or(base.epochs);
        base.batch_size = self.batch_size.unwrap_or(base.batch_size);
        base.data.augment = match (self.augment, self.no_augment) {
            (true, _) => true,
            (_, true) => false,
            _ => base.data.augment,
        };
        Ok(base.normalized())
    }

    /// The seeds: `--seeds`, `--n-seeds` N (0..N), or `defaults`.
    pub fn seeds(&self, defaults: Vec<u64>) -> anyhow::Result<Vec<u64>> {
        Ok(match (&self.seeds, self.n_seeds) {
            (Some(seeds), _) => seeds.clone(),
            (None, Some(0)) => anyhow::bail!("--n-seeds must be at least 1"),
            (None, Some(n)) => (0..n).collect(),
            (None, None) => defaults,
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
            ..Runtime::default()
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
    /// (the experiment then reuses them), a bar following them when `bars`.
    pub fn train_ahead(
        &self,
        jobs: usize,
        out: &Path,
        unfinished: &[PlannedRun],
        bars: bool,
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
            train_in_processes(unfinished, &self.runtime(), jobs, out, bars)?;
            return Ok(Some(unfinished.iter().map(|run| run.dir.clone()).collect()));
        }
        Ok(Some(Vec::new()))
    }

    /// `--out`, or `runs/<kind>-<data>-<model>` with the data set and model
    /// as `--data` and `--model` name them (else as `defaults` do).
    pub fn out(&self, kind: &str, defaults: &RunSpec) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            let data = self.data.clone().unwrap_or_else(|| data_name(defaults));
            let model = self.model.clone().unwrap_or_else(|| model_name(defaults));
            default_out(kind, &data, &model)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use csam_lab::experiment::base::default_base;

    #[derive(Parser)]
    struct Experiment {
        #[command(flatten)]
        run: RunArgs,
    }

    /// The flags `args` after `csam`.
    fn run_args(args: &[&str]) -> RunArgs {
        Experiment::try_parse_from(["csam"].iter().chain(args))
            .unwrap()
            .run
    }

    fn augment(args: &[&str]) -> bool {
        let run = run_args(&[&["--val-size", "100"], args].concat());
        run.base(default_base(), &String::new).unwrap().data.augment
    }

    #[test]
    fn flags_set_the_base_and_a_model_that_does_not_parse_is_refused_in_context() {
        let base = |args: &[&str]| {
            let run = run_args(&[&["--val-size", "100"], args].concat());
            run.base(default_base(), &|| "comparing into out".to_string())
        };
        let mut expected = default_base();
        expected.data.val_size = ValSize::Count(100);
        assert_eq!(base(&[]).unwrap(), expected);
        assert_eq!(base(&["--model", "mlp"]).unwrap(), expected);
        let cnn = base(&["--model", "cnn", "--precision", "bf16", "--epochs", "3"]).unwrap();
        assert_eq!((cnn.model.arch.name(), cnn.model.mlp_hidden), ("cnn", None));
        assert_eq!((cnn.model.precision.name(), cnn.epochs), ("bf16", 3));
        let error = format!("{:#}", base(&["--model", "resnet7"]).unwrap_err());
        assert!(
            error.starts_with("comparing into out: invalid model = \"resnet7\""),
            "{error}"
        );
    }

    #[test]
    fn the_default_directory_names_the_data_and_model_as_given() {
        let out = |args: &[&str]| run_args(args).out("compare", &default_base());
        assert_eq!(
            out(&[]),
            PathBuf::from("runs/compare-fashion-mnist-full-mlp")
        );
        assert_eq!(
            out(&["--data", "idx:/data/fm", "--model", "torchscript:net.pt"]),
            PathBuf::from("runs/compare-idx--data-fm-torchscript:net.pt")
        );
    }

    #[test]
    fn augment_and_no_augment_set_the_runs_augmentation_and_the_last_one_wins() {
        let default = default_base().data.augment;
        assert_eq!(augment(&[]), default);
        assert!(augment(&["--augment"]));
        assert!(!augment(&["--no-augment"]));
        assert!(!augment(&["--augment", "--no-augment"]));
        assert!(augment(&["--no-augment", "--augment"]));
        assert!(Experiment::try_parse_from(["csam", "--augment", "false"]).is_err());
    }
}
