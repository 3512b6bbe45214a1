//! Speed of the metrics on a large prediction set: 1,000,000 x 100 `f32`
//! probabilities (400 MB, deterministic random softmax rows, labels drawn from
//! each row so the model is calibrated). Temperature fitting runs on 100,000 x
//! 100 `f64` logits (its cost is a few passes of exp per Newton step).
//!
//! Each metric runs on one thread, then (on a machine with several) on all
//! of them ([`Threads::available`]).
//!
//! Run: `cargo bench -p csam-calib --bench metrics` (add `-- --warm-up-time 1
//! --measurement-time 3` for a shorter run).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use csam_calib::binning::{AdaptiveVariant, Binning, Norm};
use csam_calib::calibrators::temperature::{par_fit_temperature, TemperatureObjective};
use csam_calib::metrics;
use csam_calib::parallel::Threads;
use csam_calib::scores::softmax;
use ndarray::Array2;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const ROWS: usize = 1_000_000;
const CLASSES: usize = 100;
const LOGIT_ROWS: usize = 100_000;

/// Logits with a few dominant classes per row (uniform noise times 4, one class
/// boosted), so the confidences spread over the whole unit interval.
fn logits(rows: usize, seed: u64) -> Array2<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut z = Array2::from_shape_fn((rows, CLASSES), |_| 4.0 * rng.random::<f64>());
    for mut row in z.rows_mut() {
        row[rng.random_range(0..CLASSES)] += 6.0 * rng.random::<f64>();
    }
    z
}

/// Labels drawn from softmax(z): a calibrated model.
fn sampled_labels(probs: &Array2<f64>, seed: u64) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    probs
        .rows()
        .into_iter()
        .map(|row| {
            let u: f64 = rng.random();
            let mut cumulative = 0.0;
            row.iter()
                .position(|&p| {
                    cumulative += p;
                    u < cumulative
                })
                .unwrap_or(CLASSES - 1)
        })
        .collect()
}

/// Lane-wise maximum of a slice: memory-bound, the speed limit of any metric
/// that reads the whole matrix once.
fn read_all(values: &[f32]) -> f32 {
    let mut lanes = [0.0_f32; 16];
    for chunk in values.chunks_exact(16) {
        for (lane, &v) in lanes.iter_mut().zip(chunk) {
            *lane = if v > *lane { v } else { *lane };
        }
    }
    lanes.iter().fold(0.0, |a, &b| if b > a { b } else { a })
}

fn bench_metrics(c: &mut Criterion) {
    let probs = softmax(logits(ROWS, 42).view());
    let labels = sampled_labels(&probs, 43);
    let probs = probs.mapv(|p| p as f32);
    let p = probs.view();
    let bytes = (ROWS * CLASSES * std::mem::size_of::<f32>()) as u64;

    let mut group = c.benchmark_group("1M x 100 f32");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(bytes));
    // The floor: one vectorised read of every entry (lane-wise max), no metric.
    group.bench_function("read-only pass (max of all entries)", |b| {
        b.iter(|| read_all(probs.as_slice().expect("a new array is contiguous")))
    });
    group.bench_function("validate probabilities (entries and row sums)", |b| {
        b.iter(|| csam_calib::scores::validate_probabilities(p, 1e-3).unwrap())
    });
    let all = Threads::available();
    // Each metric on one thread, then on every thread the machine offers.
    for threads in [Threads::ONE, all]
        .into_iter()
        .take(1 + usize::from(all.get() > 1))
    {
        let on = |name: &str| match threads.get() {
            1 => name.to_string(),
            n => format!("{name}, {n} threads"),
        };
        group.bench_function(on("ece equal-width"), |b| {
            b.iter(|| metrics::par_ece(p, &labels, &Binning::default(), Norm::L1, threads).unwrap())
        });
        group.bench_function(on("adaece interpolated"), |b| {
            b.iter(|| {
                metrics::par_adaptive_ece(p, &labels, 15, AdaptiveVariant::Interpolated, threads)
                    .unwrap()
            })
        });
        group.bench_function(on("classwise ece"), |b| {
            b.iter(|| metrics::par_classwise_ece(p, &labels, &Binning::default(), threads).unwrap())
        });
        group.bench_function(on("auroc misclassification"), |b| {
            b.iter(|| metrics::par_auroc_misclassification(p, &labels, threads).unwrap())
        });
    }
    group.finish();

    drop(probs);
    let z = logits(LOGIT_ROWS, 7);
    let z_labels = sampled_labels(&softmax(z.view()), 8);
    let mut group = c.benchmark_group("100k x 100 f64 logits");
    group.sample_size(10);
    for threads in [Threads::ONE, all]
        .into_iter()
        .take(1 + usize::from(all.get() > 1))
    {
        let name = match threads.get() {
            1 => "temperature fit (NLL)".to_string(),
            n => format!("temperature fit (NLL), {n} threads"),
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                par_fit_temperature(
                    z.view(),
                    &z_labels,
                    TemperatureObjective::Nll,
                    &Binning::default(),
                    threads,
                )
                .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_metrics);
criterion_main!(benches);
