//! Data-parallel training over c10d's Gloo on loopback, two processes:
//! SGD equals one process on the global batch; SAM equals one process with
//! m-sharpness of the per-process batch, and with `--global-ascent` plain
//! SAM on the global batch; with `--sync-batch-norm` the small CNN's SGD
//! equals one process's on the global batch (without SyncBN it does not);
//! a killed process stops the other with an error,
//! and the run resumes to the uninterrupted run's weights.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
    let out = out.to_str().unwrap();
    let mut args = vec!["launch", "--nproc", processes, "--", "train", "--out", out];
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

/// The largest absolute difference between two runs' final weights.
fn weight_gap(a: &Path, b: &Path) -> f64 {
    let read = |dir: &Path| {
        let mut named = Tensor::read_safetensors(dir.join("model-last.safetensors")).unwrap();
        named.sort_by(|x, y| x.0.cmp(&y.0));
        named
    };
    let (a, b) = (read(a), read(b));
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(&b)
        .map(|((na, ta), (nb, tb))| {
            assert_eq!(na, nb);
            (ta - tb).abs().max().double_value(&[])
        })
        .fold(0.0, f64::max)
}

fn assert_trained(output: &std::process::Output) {
    assert!(output.status.success(), "{}", text(output));
}

#[test]
fn sgd_on_two_processes_equals_one_process_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let (two, one) = (dir.path().join("two"), dir.path().join("one"));
    // 1,155 examples: a last batch of 3, split 1 + 2, so the processes'
    // gradients must be weighted by their rows.
    let uneven = ["--val-size", "287"];
    assert_trained(&launch("2", &two, &uneven));
    assert_trained(&train(&one, &uneven));
    let gap = weight_gap(&two, &one);
    assert!(gap < 1e-6, "weights differ by {gap}");
    // The logged training loss is the global batch's.
    let log = |dir: &Path| std::fs::read_to_string(dir.join("metrics.jsonl")).unwrap();
    let loss = |line: &str| {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        record["train"]["loss"].as_f64().unwrap()
    };
    for (a, b) in log(&two).lines().zip(log(&one).lines()) {
        assert!((loss(a) - loss(b)).abs() < 1e-6, "{a}\n{b}");
    }
}

#[test]
fn sam_on_two_processes_is_m_sharpness_of_their_batches_or_with_global_ascent_sam() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| dir.path().join(name);
    let sam = ["--optimizer", "sam", "--rho", "0.05"];
    assert_trained(&launch("2", &run("two"), &sam));
    assert_trained(&train(
        &run("m64"),
        &[&sam[..], &["--m-sharpness", "64"]].concat(),
    ));
    assert_trained(&train(&run("one"), &sam));
    let own = weight_gap(&run("two"), &run("m64"));
    assert!(own < 1e-6, "2 processes vs m-sharpness 64: {own}");
    // Not the same as SAM on the global batch.
    let whole = weight_gap(&run("two"), &run("one"));
    assert!(whole > 1e-4, "2 processes vs SAM on 128: only {whole}");

    let global = [&sam[..], &["--global-ascent"]].concat();
    assert_trained(&launch("2", &run("global"), &global));
    let exact = weight_gap(&run("global"), &run("one"));
    assert!(exact < 1e-6, "--global-ascent vs SAM on 128: {exact}");
}

/// BatchNorm's statistics are the global batch's with `--sync-batch-norm`:
/// two processes of 64 rows train the small CNN as one process on 128 (the
/// weights and running statistics after two epochs); without SyncBN each
/// process normalises with its own 64 rows, and the weights part.
#[test]
fn sgd_with_sync_batch_norm_on_two_processes_equals_one_process_on_the_global_batch() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str| dir.path().join(name);
    let cnn = ["--model", "cnn", "--epochs", "2"];
    let synced = [&cnn[..], &["--sync-batch-norm"]].concat();
    assert_trained(&launch("2", &run("synced"), &synced));
    assert_trained(&launch("2", &run("local"), &cnn));
    assert_trained(&train(&run("one"), &cnn));
    let exact = weight_gap(&run("synced"), &run("one"));
    assert!(exact < 1e-6, "SyncBN on 2 processes vs 1 on 128: {exact}");
    let apart = weight_gap(&run("local"), &run("one"));
    assert!(apart > 1e-3, "per-process BN vs 1 on 128: only {apart}");
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

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
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
    let mut ranks = start_ranks(&out, free_port(), &longer);
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
    let killed_at = Instant::now();
    let survivor = ranks.remove(0).wait_with_output().unwrap();
    assert!(killed_at.elapsed() < Duration::from_secs(60), "rank 0 hung");
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
