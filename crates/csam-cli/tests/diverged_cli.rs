//! `csam compare` where one method diverges, end to end through the binary
//! on the bundled digits (one epoch, one seed: seconds). SAM with a radius
//! of 1e30 (set for `sam` alone in the methods file) overflows float32 on
//! its first perturbed pass, so its run diverges at epoch 1, step 1, every
//! time, while SGD finishes. The comparison must go on, record the
//! divergence in the run directory, mark the method in the table and in
//! results.json, exit 0 and name the run; a rerun must keep the record and
//! retrain nothing. In-process (`--jobs 1`) and in child processes
//! (`--jobs 2`) alike.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::SystemTime;

use support::{csam, text};

/// `csam compare` of SGD and a diverging SAM into `out`, `jobs` at a time.
fn compare(out: &Path, methods_file: &Path, jobs: &str) -> Output {
    csam(&[
        "compare",
        "--data",
        "digits",
        "--model",
        "mlp",
        "--epochs",
        "1",
        "--seeds",
        "0",
        "--methods",
        "sgd,sam",
        "--methods-file",
        methods_file.to_str().unwrap(),
        "--jobs",
        jobs,
        "--threads",
        "1",
        "--device",
        "cpu",
        "--no-tensorboard",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ])
}

/// Every file below `dir` with its modification time.
fn stamps(dir: &Path) -> BTreeMap<PathBuf, SystemTime> {
    let mut stamps = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => todo.push(path),
                false => {
                    let modified = entry.metadata().unwrap().modified().unwrap();
                    stamps.insert(path, modified);
                }
            }
        }
    }
    stamps
}

fn one_method_diverges_and_the_comparison_goes_on(jobs: &str) {
    let root = tempfile::tempdir().unwrap();
    let methods_file = root.path().join("methods.toml");
    std::fs::write(&methods_file, "[sam]\nrho = 1e30\n").unwrap();
    let out = root.path().join("cmp");
    let first = compare(&out, &methods_file, jobs);
    assert!(first.status.success(), "{}", text(&first));

    let sam = out.join("runs/sam-seed0");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sam.join("diverged.json")).unwrap()).unwrap();
    assert_eq!(
        (record["epoch"].as_u64(), record["step"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(record["last_good_epoch"], 0);
    let reason = record["reason"].as_str().unwrap();
    assert!(reason.contains("NaN") || reason.contains("inf"), "{reason}");
    assert!(!sam.join("summary.json").exists());
    assert!(out.join("runs/sgd-seed0/summary.json").is_file());

    // One line names the diverged run: its directory and its reason.
    let stdout = String::from_utf8_lossy(&first.stdout);
    let named = format!("{}: diverged at epoch 1, step 1 ({reason})", sam.display());
    assert_eq!(
        stdout.matches(&named).count(),
        1,
        "{named}\n{}",
        text(&first)
    );

    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    let row = |method: &str| {
        table
            .lines()
            .find(|l| l.starts_with(&format!("| {method} ")))
    };
    let sam_row = row("SAM").unwrap_or_else(|| panic!("{table}"));
    assert_eq!(sam_row.matches(" diverged |").count(), 11, "{sam_row}");
    let sgd_row = row("SGD").unwrap_or_else(|| panic!("{table}"));
    assert!(
        !sgd_row.contains("diverged") && !sgd_row.contains("n/a"),
        "{sgd_row}"
    );

    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["method"], "sgd");
    let diverged = results["diverged"].as_array().unwrap();
    assert_eq!(diverged.len(), 1);
    assert_eq!(diverged[0]["method"], "sam");
    assert_eq!(diverged[0]["run_dir"], "runs/sam-seed0");
    assert_eq!(diverged[0]["reason"], reason);
    let sam_aggregate = &results["aggregates"][1];
    assert_eq!(sam_aggregate["diverged_seeds"], serde_json::json!([0]));
    assert_eq!(sam_aggregate["seeds"], serde_json::json!([]));

    // A rerun keeps both outcomes: nothing retrains, no run file changes.
    let before = stamps(&out.join("runs"));
    let again = compare(&out, &methods_file, jobs);
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(stdout.contains("kept diverged run"), "{stdout}");
    assert!(!stdout.contains("training into"), "{stdout}");
    assert_eq!(stdout.matches(&named).count(), 1, "{stdout}");
    assert_eq!(stamps(&out.join("runs")), before);
}

#[test]
fn in_process_a_diverged_run_is_recorded_and_the_others_finish() {
    one_method_diverges_and_the_comparison_goes_on("1");
}

#[test]
fn in_child_processes_a_diverged_run_is_recorded_and_the_others_finish() {
    one_method_diverges_and_the_comparison_goes_on("2");
}

#[test]
fn every_run_diverged_is_an_error_naming_the_first() {
    let root = tempfile::tempdir().unwrap();
    let methods_file = root.path().join("methods.toml");
    std::fs::write(&methods_file, "[sam]\nrho = 1e30\n").unwrap();
    let out = root.path().join("cmp");
    let output = csam(&[
        "compare",
        "--data",
        "digits",
        "--epochs",
        "1",
        "--seeds",
        "0",
        "--methods",
        "sam",
        "--methods-file",
        methods_file.to_str().unwrap(),
        "--jobs",
        "1",
        "--threads",
        "1",
        "--no-tensorboard",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let needle = "every run diverged (1 of them";
    support::assert_one_line_error(&output, &[needle, "runs/sam-seed0: diverged at epoch 1"]);
    assert!(out.join("runs/sam-seed0/diverged.json").is_file());
}
