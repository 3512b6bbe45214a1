//! `csam bench`: ms/step, images/s, peak memory and GFLOP/s of SGD, SAM and
//! CSAM steps on synthetic batches (compare with bench/torch_reference.py).

use clap::{Args, ValueEnum};
use csam_nn::device::parse_device;
use csam_nn::model::InputShape;
use csam_train::bench::{format_table, run_bench, BenchOptions};
use csam_train::spec::OptimizerFamily;

use super::choices::{self, Choices};

/// Synthetic input shapes.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum InputKind {
    /// 1x28x28 (Fashion-MNIST).
    Fmnist,
    /// 3x32x32 (CIFAR).
    Cifar,
    /// 3x224x224 with 1000 classes (ImageNet).
    Imagenet,
}

/// Flags of `csam bench`.
/// A flag given twice takes its last value.
#[derive(Debug, Args)]
#[command(args_override_self = true)]
pub struct BenchArgs {
    /// Models to time, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "mlp,resnet20",
        value_parser = Choices::of(choices::model_names()),
        action = clap::ArgAction::Set
    )]
    models: Vec<String>,
    /// Update rules to time, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "sgd,sam,csam",
        value_parser = Choices::of(choices::rule_names()),
        action = clap::ArgAction::Set
    )]
    optimizers: Vec<String>,
    /// Input shape of the synthetic batch.
    #[arg(long, value_enum, default_value = "cifar")]
    input: InputKind,
    /// Batch size.
    #[arg(long, default_value_t = 128)]
    batch_size: usize,
    /// Untimed warm-up steps per case.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Timed steps per case (the median is reported).
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// cpu, cuda or cuda:N (default: cuda when available).
    #[arg(long)]
    device: Option<String>,
    /// CPU threads of libtorch.
    #[arg(long)]
    threads: Option<usize>,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs `csam bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    if let Some(threads) = args.threads {
        anyhow::ensure!(threads > 0, "--threads must be at least 1");
        tch::set_num_threads(threads as i32);
    }
    let optimizers = args
        .optimizers
        .iter()
        .map(|name| {
            name.parse::<OptimizerFamily>()
                .map_err(|e| anyhow::anyhow!("--optimizers {name:?}: {e}"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (channels, side, n_classes) = match args.input {
        InputKind::Fmnist => (1, 28, 10),
        InputKind::Cifar => (3, 32, 10),
        InputKind::Imagenet => (3, 224, 1000),
    };
    let options = BenchOptions {
        models: args.models,
        optimizers,
        input: InputShape {
            channels,
            height: side,
            width: side,
        },
        n_classes,
        batch_size: args.batch_size,
        warmup: args.warmup,
        steps: args.steps,
        device: parse_device(args.device.as_deref())?,
    };
    let rows = run_bench(&options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", format_table(&rows, &options));
    }
    Ok(())
}
