//! `csam bench`: ms/step, images/s, peak memory and GFLOP/s of SGD, SAM and
//! CSAM steps on synthetic batches (compare with bench/torch_reference.py);
//! with `--data DIR`, images/s of the streamed image pipeline (compare with
//! bench/data_reference.py).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use csam_data::streaming::{ImageFiles, ImageTransform, StreamOptions, StreamingLoader};
use csam_data::Normalization;
use csam_nn::device::parse_device;
use csam_nn::model::InputShape;
use csam_train::bench::{format_table, run_bench, BenchOptions};
use csam_train::spec::OptimizerFamily;
use serde::Serialize;

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
    /// Precision of the forward passes: fp32, or bf16 / fp16 under autocast, fp16 with
    /// dynamic loss scaling as training runs it (as `bench/torch_reference.py --precision`).
    #[arg(long, default_value = "fp32", value_parser = Choices::of(choices::precision_names()))]
    precision: String,
    /// Layout of the convolution weights and batches: contiguous (NCHW) or channels_last
    /// (NHWC, for the convolutional models; as `bench/torch_reference.py --channels-last`).
    #[arg(long, default_value = "contiguous", value_parser = Choices::of(choices::memory_format_names()))]
    memory_format: String,
    /// Print the rows as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Time the streamed image pipeline instead of training steps: decode
    /// the JPEG/PNG files of DIR/<class>/ and apply the ImageNet training
    /// transforms (random resized crop, flip, normalisation) into batches of
    /// --batch-size, as `bench/data_reference.py` times torchvision.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["models", "optimizers", "input", "warmup", "steps"])]
    data: Option<PathBuf>,
    /// Decoding threads of --data.
    #[arg(long, default_value_t = 2, requires = "data")]
    workers: usize,
    /// Images timed with --data: the first N of the folder (default: all).
    #[arg(long, requires = "data")]
    images: Option<usize>,
    /// Side of the square crops of --data.
    #[arg(long, default_value_t = 224, requires = "data")]
    size: usize,
}

/// Runs `csam bench`.
pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    super::set_cpu_threads(args.threads)?;
    if let Some(dir) = &args.data {
        return run_data_pipeline(dir, &args);
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
        precision: args
            .precision
            .parse()
            .map_err(|e| anyhow::anyhow!("--precision {:?}: {e}", args.precision))?,
        memory_format: args
            .memory_format
            .parse()
            .map_err(|e| anyhow::anyhow!("--memory-format {:?}: {e}", args.memory_format))?,
    };
    let rows = run_bench(&options)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", format_table(&rows, &options));
    }
    Ok(())
}

/// One timing of the streamed image pipeline (`csam bench --data`).
#[derive(Debug, Serialize)]
struct PipelineTiming {
    images: usize,
    seconds: f64,
    images_per_s: f64,
    workers: usize,
    batch_size: usize,
    size: usize,
}

/// Times one shuffled epoch of the streamed training pipeline over `dir`,
/// from the start of its workers to the last batch.
fn run_data_pipeline(dir: &Path, args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.workers > 0, "--workers must be at least 1");
    anyhow::ensure!(args.size > 0, "--size must be at least 1");
    anyhow::ensure!(args.images != Some(0), "--images must be at least 1");
    anyhow::ensure!(args.batch_size > 0, "--batch-size must be at least 1");
    let files = ImageFiles::list(dir, &dir.display().to_string(), None)
        .with_context(|| format!("--data {}", dir.display()))?;
    let files = Arc::new(match args.images {
        Some(n) => files.first(n),
        None => files,
    });
    let options = StreamOptions::training(
        args.batch_size,
        ImageTransform::training(args.size),
        0,
        args.workers,
        tch::Device::Cpu,
    );
    let loader = StreamingLoader::new(Arc::clone(&files), &Normalization::imagenet(), options)?;
    let started = Instant::now();
    let mut images = 0;
    for batch in loader.epoch(0) {
        let (_, ys) = batch?;
        images += ys.size()[0] as usize;
    }
    let seconds = started.elapsed().as_secs_f64();
    let timing = PipelineTiming {
        images,
        seconds,
        images_per_s: images as f64 / seconds,
        workers: args.workers,
        batch_size: args.batch_size,
        size: args.size,
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&timing)?);
    } else {
        println!(
            "| pipeline ({} workers, batch {}, {}x{}) | images | s | images/s |",
            timing.workers, timing.batch_size, timing.size, timing.size
        );
        println!("|---|--:|--:|--:|");
        println!(
            "| csam (streamed) | {} | {:.2} | {:.0} |",
            timing.images, timing.seconds, timing.images_per_s
        );
    }
    Ok(())
}
