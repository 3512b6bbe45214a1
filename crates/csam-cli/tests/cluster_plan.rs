//! An experiment drained by workers: `csam compare --plan` writes 12 runs as
//! independent commands and a Slurm array, three `--worker` processes drain
//! them while one is killed in the middle of a run, and every run finishes
//! exactly once (each epoch logged once, each run finished by one worker);
//! `--collect` then builds the results without training.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use csam_testkit::deadline::within;

use support::{assert_one_line_error, csam, text};

/// 3 methods x 4 seeds of the digits MLP, 3 epochs each.
fn experiment(out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "compare",
        "--data",
        "digits",
        "--methods",
        "sgd,sam,csam",
        "--seeds",
        "0,1,2,3",
        "--epochs",
        "3",
        "--val-size",
        "300",
        "--batch-size",
        "32",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--quiet",
        "--no-tensorboard",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(out.display().to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// A worker process and the thread collecting its stdout lines.
struct Worker {
    child: Child,
    lines: JoinHandle<Vec<String>>,
}

fn start_worker(out: &Path) -> Worker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(experiment(out, &["--worker"]))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .collect()
    });
    Worker { child, lines }
}

/// The claims of the plan: run index and the pid its lock records.
fn claims(out: &Path) -> Vec<(usize, u32)> {
    let claims = out.join("plan/claims");
    let Ok(entries) = std::fs::read_dir(claims) else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let index: usize = e.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(e.path().join(".lock")).ok()?;
            let owner: serde_json::Value = serde_json::from_str(&text).ok()?;
            Some((index, owner["pid"].as_u64()? as u32))
        })
        .collect()
}

fn run_dirs(out: &Path) -> Vec<PathBuf> {
    let plan: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("plan/plan.json")).unwrap())
            .unwrap();
    plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| PathBuf::from(run["dir"].as_str().unwrap()))
        .collect()
}

#[test]
fn three_workers_drain_a_plan_with_one_killed_and_each_run_finishes_once() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("experiment");
    let args = experiment(&out, &["--plan"]);
    let plan = csam(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(plan.status.success(), "{}", text(&plan));
    let commands = std::fs::read_to_string(out.join("plan/commands.txt")).unwrap();
    assert_eq!(commands.lines().count(), 12);
    assert!(commands
        .lines()
        .all(|l| l.contains(" train --config ") && l.contains("--resume")));
    let slurm = std::fs::read_to_string(out.join("plan/slurm.sh")).unwrap();
    assert!(slurm.contains("#SBATCH --array=0-11"), "{slurm}");
    // Planning again would pull the plan from under its workers.
    let again = csam(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_one_line_error(&again, &["plan.json exists"]);
    // Nothing has trained: --collect refuses.
    let collect = experiment(&out, &["--collect"]);
    let early = csam(&collect.iter().map(String::as_str).collect::<Vec<_>>());
    assert_one_line_error(&early, &["--collect", "12 unfinished runs"]);

    let mut workers: Vec<Worker> = (0..3).map(|_| start_worker(&out)).collect();
    let victim = workers[0].child.id();
    let runs = run_dirs(&out);
    let started = Instant::now();
    // Kill the first worker once a run it holds has started writing its
    // directory, so that another worker must resume it.
    loop {
        let started_run = claims(&out).into_iter().any(|(index, pid)| {
            pid == victim
                && runs[index].join("metrics.jsonl").exists()
                && !runs[index].join("summary.json").exists()
        });
        if started_run {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the first worker never trained"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    workers[0].child.kill().unwrap();
    // The two others drain the 12 runs of 3 digits epochs (seconds each); a
    // worker that hangs fails the test instead of holding the suite.
    let mut finished = within(
        Duration::from_secs(600),
        "the workers draining the plan",
        || {
            let mut finished: Vec<String> = Vec::new();
            for (k, mut worker) in workers.into_iter().enumerate() {
                let status = worker.child.wait().unwrap();
                assert!(k == 0 || status.success(), "worker {k}: {status:?}");
                let lines = worker.lines.join().unwrap();
                finished.extend(
                    lines
                        .iter()
                        .filter_map(|l| l.strip_suffix(": finished").map(String::from)),
                );
            }
            finished
        },
    );
    finished.sort();
    let mut unique = finished.clone();
    unique.dedup();
    assert_eq!(finished, unique, "a run finished in two workers");
    assert_eq!(finished.len(), 12, "{finished:?}");
    for run in run_dirs(&out) {
        assert!(run.join("summary.json").exists(), "{}", run.display());
        let epochs = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        assert_eq!(epochs.lines().count(), 3, "{}: {epochs}", run.display());
    }

    let results = csam(&collect.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(results.status.success(), "{}", text(&results));
    let stdout = String::from_utf8_lossy(&results.stdout);
    assert_eq!(
        stdout.matches("reused finished run").count(),
        12,
        "{stdout}"
    );
    assert!(out.join("results.json").exists());
}
