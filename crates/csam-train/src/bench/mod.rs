//! `csam bench`: time training steps of SGD, SAM and CSAM on synthetic
//! batches, with the same models and steps as real training
//! ([`crate::train::session::Trainer`]). `bench/torch_reference.py` times the
//! PyTorch twins the same way and prints the same table.
//!
//! Per case: build the model (seeded), draw one fixed batch (standard normal
//! pixels, uniform labels), take `warmup` untimed steps, then time `steps`
//! steps one by one (synchronising the GPU after each) and report the median.

pub mod memory;

use std::time::Instant;

use serde::Serialize;
use tch::{Device, Kind, Tensor};

use crate::spec::{LossSpec, MixingSpec, ModelSpec, OptimSpec, OptimizerFamily, UpdateRule};
use crate::train::error::{Result, TrainError};
use csam_nn::device::device_name;
use csam_nn::model::memory_format::MemoryFormat;
use csam_nn::model::precision::Precision;
use csam_nn::model::{InputShape, ModelKind};

fn invalid_value(key: &'static str, value: &str, reason: impl ToString) -> TrainError {
    TrainError::Config(ConfigError::invalid(key, value, reason))
}
use crate::spec::ConfigError;
use crate::train::session::{Objective, Trainer};

/// What to benchmark.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Model names (`mlp`, `resnet20`, ...).
    pub models: Vec<String>,
    /// Update rules to time (SGD is the ratio's reference).
    pub optimizers: Vec<OptimizerFamily>,
    /// Shape of one synthetic input example.
    pub input: InputShape,
    /// Number of classes.
    pub n_classes: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Untimed steps before timing.
    pub warmup: usize,
    /// Timed steps (the median is reported).
    pub steps: usize,
    /// Device.
    pub device: Device,
    /// Precision of the forward passes (autocast, [`csam_nn::model::precision`]).
    pub precision: Precision,
    /// Layout of the convolution weights and batches
    /// ([`csam_nn::model::memory_format`]).
    pub memory_format: MemoryFormat,
}

/// One row of the table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchRow {
    /// Model name.
    pub model: String,
    /// Update rule.
    pub optimizer: OptimizerFamily,
    /// Median wall time of one step, milliseconds.
    pub ms_per_step: f64,
    /// `batch / median step time`.
    pub images_per_s: f64,
    /// Peak memory during the case in bytes (host RSS high-water mark).
    pub peak_memory_bytes: Option<u64>,
    /// FLOPs of one step: 3 F for SGD, 6 F for the SAM family (a forward
    /// pass, and a backward pass through activations and weights of about
    /// twice its cost, once or twice), F = 2 x the multiply-adds of the
    /// batch's forward pass as the model counts them (`Model::forward_macs`;
    /// None for a TorchScript module).
    pub step_flops: Option<f64>,
    /// `step_flops / median step time`, in GFLOP/s.
    pub gflops_per_s: Option<f64>,
    /// Step time relative to SGD on the same model (None without an SGD row).
    pub ratio_to_sgd: Option<f64>,
}

/// The median of `values` (NaN-free; the mean of the middle pair for even n).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Runs every (model, optimizer) case; rows in that order.
pub fn run_bench(options: &BenchOptions) -> Result<Vec<BenchRow>> {
    for (key, value) in [("steps", options.steps), ("batch_size", options.batch_size)] {
        if value == 0 {
            return Err(invalid_value(key, "0", "must be at least 1"));
        }
    }
    let mut rows = Vec::new();
    for model in &options.models {
        let kind: ModelKind = model
            .parse()
            .map_err(|e| invalid_value("model", model, e))?;
        let first = rows.len();
        for &optimizer in &options.optimizers {
            rows.push(bench_case(options, kind, optimizer)?);
        }
        let sgd = rows[first..]
            .iter()
            .find(|r| r.optimizer == OptimizerFamily::Sgd)
            .map(|r| r.ms_per_step);
        for row in &mut rows[first..] {
            row.ratio_to_sgd = sgd.map(|base| row.ms_per_step / base);
        }
    }
    Ok(rows)
}

fn bench_case(
    options: &BenchOptions,
    kind: ModelKind,
    optimizer: OptimizerFamily,
) -> Result<BenchRow> {
    let model = ModelSpec {
        arch: kind,
        precision: options.precision,
        memory_format: options.memory_format,
        ..ModelSpec::default()
    }
    .normalized();
    let defaults = OptimSpec::default();
    let optim = OptimSpec {
        rule: UpdateRule::of_family(optimizer, 0.05, 1.0),
        ..defaults
    };
    tch::manual_seed(0);
    let steps_total = options.warmup + options.steps;
    let mut trainer = Trainer::new(
        &model,
        Objective {
            loss: LossSpec::default(),
            mixing: MixingSpec::default(),
            seed: 0,
        },
        &optim,
        1,
        (options.input, options.n_classes),
        options.device,
        // bSAM's N: one batch (the noise's scale does not change the timing).
        (steps_total, options.batch_size),
        None,
    )?;
    let b = options.batch_size as i64;
    let InputShape {
        channels,
        height,
        width,
    } = options.input;
    let xs = Tensor::randn([b, channels, height, width], (Kind::Float, options.device));
    let ys = Tensor::randint(options.n_classes as i64, [b], (Kind::Int64, options.device));
    memory::reset_peak_rss();
    let mut times = Vec::with_capacity(options.steps);
    for step in 0..steps_total {
        let started = Instant::now();
        trainer.set_learning_rate(step);
        trainer
            .step((&xs, &ys), step, &[])?
            .map_err(TrainError::BenchDiverged)?;
        if let Device::Cuda(index) = options.device {
            tch::Cuda::synchronize(index as i64);
        }
        if step >= options.warmup {
            times.push(started.elapsed().as_secs_f64());
        }
    }
    let seconds = median(&mut times);
    let forward_flops = trainer
        .model()
        .forward_macs((Kind::Float, options.device))
        .map(|macs| 2.0 * macs as f64 * options.batch_size as f64);
    // Forward and backward (twice the forward's cost) per pass.
    let passes = 3.0 * optim.passes_per_step();
    let step_flops = forward_flops.map(|f| passes * f);
    Ok(BenchRow {
        model: kind.name().to_string(),
        optimizer,
        ms_per_step: seconds * 1e3,
        images_per_s: options.batch_size as f64 / seconds,
        peak_memory_bytes: memory::peak_rss_bytes(),
        step_flops,
        gflops_per_s: step_flops.map(|f| f / seconds / 1e9),
        ratio_to_sgd: None,
    })
}

/// The table `csam bench` prints (and `torch_reference.py` mirrors).
pub fn format_table(rows: &[BenchRow], options: &BenchOptions) -> String {
    let InputShape {
        channels,
        height,
        width,
    } = options.input;
    let mut out = format!(
        "csam {}, device {}, threads {}, precision {}, memory format {}, huge pages {}, \
         batch {}, input {channels}x{height}x{width}, {} warm-up + {} timed steps (median)\n",
        env!("CARGO_PKG_VERSION"),
        device_name(options.device),
        tch::get_num_threads(),
        options.precision.name(),
        options.memory_format.name(),
        match crate::train::allocator::huge_pages_requested() {
            true => "on",
            false => "off",
        },
        options.batch_size,
        options.warmup,
        options.steps,
    );
    out.push_str(&format!(
        "{:<18} {:<6} {:>10} {:>10} {:>12} {:>12} {:>9} {:>7}\n",
        "model", "opt", "ms/step", "img/s", "peak MiB", "GFLOP/step", "GFLOP/s", "x SGD"
    ));
    let or_dash = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    for row in rows {
        out.push_str(&format!(
            "{:<18} {:<6} {:>10.2} {:>10.1} {:>12} {:>12} {:>9} {:>7}\n",
            row.model,
            row.optimizer.to_string(),
            row.ms_per_step,
            row.images_per_s,
            or_dash(
                row.peak_memory_bytes
                    .map(|b| format!("{:.0}", b as f64 / 1048576.0))
            ),
            or_dash(row.step_flops.map(|f| format!("{:.3}", f / 1e9))),
            or_dash(row.gflops_per_s.map(|g| format!("{g:.2}"))),
            or_dash(row.ratio_to_sgd.map(|r| format!("{r:.2}"))),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_cpu_bench_reports_every_case() {
        let options = BenchOptions {
            models: vec!["mlp".into()],
            optimizers: vec![
                OptimizerFamily::Sgd,
                OptimizerFamily::Sam,
                OptimizerFamily::Csam,
            ],
            input: InputShape {
                channels: 1,
                height: 28,
                width: 28,
            },
            n_classes: 10,
            batch_size: 8,
            warmup: 1,
            steps: 2,
            device: Device::Cpu,
            precision: Precision::Fp32,
            memory_format: MemoryFormat::Contiguous,
        };
        let rows = run_bench(&options).unwrap();
        let names: Vec<String> = rows.iter().map(|r| r.optimizer.to_string()).collect();
        assert_eq!(names, ["sgd", "sam", "csam"]);
        // 2 FLOPs per multiply-add, 8 examples, 3 (SGD) or 6 (SAM) passes.
        let forward = 2.0 * 268_800.0 * 8.0;
        assert_eq!(rows[0].step_flops, Some(3.0 * forward));
        assert_eq!(rows[2].step_flops, Some(6.0 * forward));
        assert_eq!(rows[0].ratio_to_sgd, Some(1.0));
        assert!(rows
            .iter()
            .all(|r| r.ms_per_step > 0.0 && r.images_per_s > 0.0));
        let table = format_table(&rows, &options);
        assert_eq!(table.lines().count(), 2 + rows.len());
        assert!(table.contains("input 1x28x28"));
    }

    /// channels_last reaches the benchmark's model (its FLOPs are the
    /// contiguous model's) and its table's header, and is refused for the
    /// MLP as in training.
    #[test]
    fn channels_last_bench_times_the_same_model() {
        let options = |model: &str, memory_format| BenchOptions {
            models: vec![model.into()],
            optimizers: vec![OptimizerFamily::Sgd],
            input: InputShape {
                channels: 1,
                height: 8,
                width: 8,
            },
            n_classes: 10,
            batch_size: 4,
            warmup: 0,
            steps: 1,
            device: Device::Cpu,
            precision: Precision::Fp32,
            memory_format,
        };
        let nhwc = options("cnn", MemoryFormat::ChannelsLast);
        let rows = run_bench(&nhwc).unwrap();
        let plain = run_bench(&options("cnn", MemoryFormat::Contiguous)).unwrap();
        assert_eq!(rows[0].step_flops, plain[0].step_flops);
        assert!(format_table(&rows, &nhwc).contains("memory format channels_last"));
        let refused = run_bench(&options("mlp", MemoryFormat::ChannelsLast)).unwrap_err();
        assert!(refused.to_string().contains("not mlp"), "{refused}");
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
    }
}
