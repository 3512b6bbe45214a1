//! Data-parallel training over c10d's Gloo on loopback, two processes (rank
//! 0's store on a port the test owns): SGD equals one process on the global
//! batch; SAM equals one process with
//! m-sharpness of the per-process batch, and with `--global-ascent` plain
//! SAM on the global batch; with `--sync-batch-norm` the small CNN's SGD
//! equals one process's on the global batch (without SyncBN it does not);
//! a killed process stops the other with an error,
//! and the run resumes to the uninterrupted run's weights.
//!
//! "Equals" is up to float32 round-off: every compared run starts from the
//! same weights (`--init`) and trains a few steps, and their gap, relative
//! to how far training moved the weights, is held to the bar derived from
//! float32's epsilon and the longest reduction of a step
//! (`csam_testkit::roundoff::training_bar`); over epochs the gap would grow
//! at a rate set by the CPU's kernels, which no constant bounds.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use csam_testkit::deadline::within;
use csam_testkit::port::PortLease;
use csam_testkit::roundoff::{sum_bound, training_bar, F32_EPSILON};
use support::{csam, text};
use tch::Tensor;

/// The bundled digits with 1,024 training examples (8 batches of 128, so
/// SAM's m-sharpness sub-batches of 64 are the two processes' halves), an
/// MLP, one thread per process.
const DIGITS_1024: &[&str] = &[
    "--data",
    "digits",
    "--model",
    "mlp",
    "--augment",
    "--val-size",
    "418",
    "--batch-size",
    "128",
    "--lr",
    "0.1",
    "--epochs",
    "3",
    "--threads",
    "1",
    "--quiet",
];

fn launch(processes: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    // Rank 0's store binds a port this test owns until the job has ended.
    let lease = PortLease::take();
    let port = lease.port().to_string();
    let out = out.to_str().unwrap();
    let mut args = vec!["launch", "--nproc", processes, "--master-port", &port];
    args.extend(["--", "train", "--out", out]);
    args.extend(DIGITS_1024);
    args.extend(extra);
    csam(&args)
}

fn train(out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["train", "--out", out.to_str().unwrap()];
    args.extend(DIGITS_1024);
    args.extend(extra);
    csam(&args)
}

/// The tensors of a weights file (BatchNorm buffers included), sorted by name.
fn sorted_weights(file: &Path) -> Vec<(String, Tensor)> {
    let mut named = Tensor::read_safetensors(file).unwrap();
    named.sort_by(|x, y| x.0.cmp(&y.0));
    named
}

/// A run's last weights, sorted by name.
fn last_weights(run: &Path) -> Vec<(String, Tensor)> {
    sorted_weights(&run.join("model-last.safetensors"))
}

/// The largest absolute difference between two runs' final weights.
fn weight_gap(a: &Path, b: &Path) -> f64 {
    largest_difference(&last_weights(a), &last_weights(b))
}

fn largest_difference(a: &[(String, Tensor)], b: &[(String, Tensor)]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            (ta - tb).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

/// Weights every compared run starts from (`--init`), so that how far
/// training moved them is known: the last weights of a one-epoch run of
/// `model` (the digits MLP or the small CNN).
fn start_weights(dir: &Path, model: &str) -> PathBuf {
    let run = dir.join(format!("start-{model}"));
    assert_trained(&train(&run, &["--model", model, "--epochs", "1"]));
    run.join("model-last.safetensors")
}

/// The gap between runs `a` and `b`, both started at `start`, relative to
/// how far `b` moved from it (largest absolute entries over all tensors).
fn relative_gap(a: &Path, b: &Path, start: &Path) -> f64 {
    let moved = largest_difference(&last_weights(b), &sorted_weights(start));
    assert!(moved > 0.0, "{} did not train", b.display());
    let gap = weight_gap(a, b) / moved;
    eprintln!("{} vs {}: {gap:e} of the move", a.display(), b.display());
    gap
}

fn assert_trained(output: &std::process::Output) {
    assert!(output.status.success(), "{}", text(output));
}

/// The MLP on 8x8 digits, batch 128: its longest float32 reduction is the
/// 256-wide hidden layer's (the weight gradients reduce the 128 rows).
const MLP_REDUCTION: usize = 256;

#[test]
fn sgd_on_two_processes_equals_one_process_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (two, one) = (dir.path().join("two"), dir.path().join("one"));
    let start = start_weights(dir.path(), "mlp");
    let start_flag = start.to_str().unwrap();
    // 1,155 examples: one epoch of 9 batches of 128 and a last one of 3,
    // split 1 + 2, so the processes' gradients must be weighted by their rows.
    let uneven = ["--val-size", "287", "--epochs", "1", "--init", start_flag];
    assert_trained(&launch("2", &two, &uneven));
    assert_trained(&train(&one, &uneven));
    // Equal in exact arithmetic: float32 round-off of 10 SGD steps. Weighting
    // the last batch's halves equally would move the weights by ~1/3 of its
    // step, far above this.
    let bar = training_bar(10, 1, MLP_REDUCTION);
    let gap = relative_gap(&two, &one, &start);
    assert!(
        gap <= bar,
        "weights differ by {gap} of their move (bar {bar})"
    );
    // The logged training loss is the global batch's.
    let log = |dir: &Path| std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let loss = |line: &str| {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        record["train"]["loss"].as_f64().unwrap()
    };
    let (two_log, one_log) = (log(&two), log(&one));
    assert_eq!(two_log.lines().count(), 1);
    for (a, b) in two_log.lines().zip(one_log.lines()) {
        // The loss of weights that agree to `bar` of their move, summed in
        // float32 over at most 1,155 rows.
        let loss_bar = bar + sum_bound(1155, F32_EPSILON);
        assert!((loss(a) - loss(b)).abs() <= loss_bar * loss(b), "{a}\n{b}");
    }
}

#[test]
fn sam_on_two_processes_is_m_sharpness_of_their_batches_or_with_global_ascent_sam() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| dir.path().join(name);
    let start = start_weights(dir.path(), "mlp");
    let sam = [
        "--optimizer",
        "sam",
        "--rho",
        "0.05",
        "--epochs",
        "1",
        "--init",
        start.to_str().unwrap(),
    ];
    assert_trained(&launch("2", &run("two"), &sam));
    assert_trained(&train(
        &run("m64"),
        &[&sam[..], &["--m-sharpness", "64"]].concat(),
    ));
    assert_trained(&train(&run("one"), &sam));
    // 8 steps of two passes, equal in exact arithmetic.
    let bar = training_bar(8, 2, MLP_REDUCTION);
    let own = relative_gap(&run("two"), &run("m64"), &start);
    assert!(
        own <= bar,
        "2 processes vs m-sharpness 64: {own} (bar {bar})"
    );
    // Not the same as SAM on the global batch: the ascent directions of the
    // halves are not the whole batch's.
    let whole = relative_gap(&run("two"), &run("one"), &start);
    assert!(
        whole > 10.0 * bar,
        "2 processes vs SAM on 128: only {whole} (bar {bar})"
    );

    let global = [&sam[..], &["--global-ascent"]].concat();
    assert_trained(&launch("2", &run("global"), &global));
    let exact = relative_gap(&run("global"), &run("one"), &start);
    assert!(
        exact <= bar,
        "--global-ascent vs SAM on 128: {exact} (bar {bar})"
    );
}

/// BatchNorm's statistics are the global batch's with `--sync-batch-norm`:
/// two processes of 64 rows train the small CNN as one process on 128 (the
/// weights and running statistics after two steps); without SyncBN each
/// process normalises with its own 64 rows, and the weights part.
#[test]
fn sgd_with_sync_batch_norm_on_two_processes_equals_one_process_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| dir.path().join(name);
    let start = start_weights(dir.path(), "cnn");
    // 256 training examples: 2 steps of 128.
    let cnn = [
        "--model",
        "cnn",
        "--val-size",
        "1186",
        "--epochs",
        "1",
        "--init",
        start.to_str().unwrap(),
    ];
    let synced = [&cnn[..], &["--sync-batch-norm"]].concat();
    assert_trained(&launch("2", &run("synced"), &synced));
    assert_trained(&launch("2", &run("local"), &cnn));
    assert_trained(&train(&run("one"), &cnn));
    // The first convolution's weight gradient reduces 128 rows x 8 x 8
    // pixels, the longest float32 reduction of a step.
    let bar = training_bar(2, 1, 128 * 8 * 8);
    let exact = relative_gap(&run("synced"), &run("one"), &start);
    assert!(
        exact <= bar,
        "SyncBN on 2 processes vs 1 on 128: {exact} (bar {bar})"
    );
    let apart = relative_gap(&run("local"), &run("one"), &start);
    assert!(
        apart > 10.0 * bar,
        "per-process BN vs 1 on 128: only {apart} (bar {bar})"
    );
}

/// The two processes of a job, started as torchrun would.
fn start_ranks(out: &Path, port: u16, extra: &[&str]) -> Vec<Child> {
    (0..2)
        .map(|rank| {
            Command::new(env!("CARGO_BIN_EXE_csam"))
                .args(["train", "--out", out.to_str().unwrap()])
                .args(DIGITS_1024)
                .args(extra)
                .env("RANK", rank.to_string())
                .env("WORLD_SIZE", "2")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", port.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect()
}

fn epochs_logged(out: &Path) -> usize {
    std::fs::read_to_string(out.join("metrics.jsonl")).map_or(0, |log| log.lines().count())
}

#[test]
fn a_killed_process_stops_the_other_with_an_error_and_the_run_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let (out, reference): (PathBuf, PathBuf) = (dir.path().join("run"), dir.path().join("ref"));
    // Fashion-MNIST's bundled subset: seconds per epoch, time to kill mid-run.
    let longer = [
        "--data",
        "fashion-mnist",
        "--val-size",
        "2000",
        "--epochs",
        "4",
        "--dist-timeout",
        "60",
    ];
    let lease = PortLease::take();
    let mut ranks = start_ranks(&out, lease.port(), &longer);
    let started = Instant::now();
    while epochs_logged(&out) < 1 {
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "no epoch finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    ranks[1].kill().unwrap();
    ranks[1].wait().unwrap();
    // Rank 0 must notice within its 60 s --dist-timeout; waiting for it is
    // bounded so that a hang fails the test instead of the suite.
    let survivor = ranks.remove(0);
    let survivor = within(
        Duration::from_secs(90),
        "rank 0 after rank 1 was killed",
        || survivor.wait_with_output().unwrap(),
    );
    assert_eq!(survivor.status.code(), Some(1), "{}", text(&survivor));
    let stderr = String::from_utf8_lossy(&survivor.stderr);
    assert!(stderr.contains("data-parallel training"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let done = epochs_logged(&out);
    assert!(done < 4, "the run finished before the kill ({done} epochs)");

    let alone = train(&out, &[&longer[..], &["--resume"]].concat());
    assert_eq!(alone.status.code(), Some(1), "{}", text(&alone));
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert!(stderr.contains("trained by 2 data-parallel"), "{stderr}");
    let resumed = launch("2", &out, &[&longer[..], &["--resume"]].concat());
    assert_trained(&resumed);
    assert_eq!(epochs_logged(&out), 4);
    assert_trained(&launch("2", &reference, &longer));
    assert_eq!(
        weight_gap(&out, &reference),
        0.0,
        "the resumed run ended elsewhere"
    );
}

#[test]
fn settings_one_process_would_learn_alone_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (extra, needle) in [
        (&["--optimizer", "bsam"][..], "bSAM"),
        (&["--loss", "crl"][..], "loss"),
        (&["--batch-size", "1"][..], "at least 2 rows"),
    ] {
        let out = launch("2", &dir.path().join(needle), extra);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(needle), "{needle}: {stderr}");
        assert!(
            stderr.contains("rank 0 of 2 failed") || stderr.contains("rank 1 of 2 failed"),
            "{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
