//! `csam compare` end to end through the binary, on the bundled digits with
//! an MLP and 2 epochs (seconds on a CPU): every artefact including a valid,
//! self-contained report.html whose table holds the numbers of results.json,
//! `csam report` rewriting it without training, reuse of finished runs,
//! resume of an interrupted one, refusal of a different comparison.

mod support;

use std::path::Path;
use std::process::{Command, Output};
use std::time::SystemTime;
use support::report::assert_opens_the_report;
use support::text;

fn compare(out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "compare", "--data", "digits", "--model", "mlp", "--epochs", "2", "--seeds", "0,1", "--out",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(&args)
        .output()
        .expect("the csam binary runs")
}

fn modified(path: &Path) -> SystemTime {
    std::fs::metadata(path).unwrap().modified().unwrap()
}

const METHODS: [&str; 3] = ["sgd", "sam", "csam"];
const METRIC_KEYS: [&str; 11] = [
    "accuracy",
    "ece",
    "adaece",
    "classwise_ece",
    "tce",
    "nll",
    "brier",
    "auroc_misclassification",
    "auroc_ovr",
    "ece_isotonic",
    "ece_histogram",
];

fn check_artefacts(out: &Path) {
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(results["schema"], "csam-compare/1");
    assert_eq!(results["settings"]["base"]["data"]["source"], "digits");
    assert_eq!(results["settings"]["base"]["epochs"], 2);
    let runs = results["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6, "2 seeds x 3 methods");
    for (i, run) in runs.iter().enumerate() {
        let (seed, method) = (i / 3, METHODS[i % 3]);
        assert_eq!(run["method"], method);
        assert_eq!(run["seed"], seed);
        let dir = out.join(run["run_dir"].as_str().unwrap());
        assert!(dir.join("summary.json").is_file(), "{}", dir.display());
        assert!(dir.join("test_logits.npy").is_file());
        let test = &run["test"];
        // The reported accuracy is that of the saved test logits, recounted
        // here from the files.
        let logits = csam_calib::io::load_matrix(dir.join("test_logits.npy"), None).unwrap();
        let labels = csam_calib::io::load_labels(dir.join("test_labels.npy"), None).unwrap();
        let hits = logits
            .rows()
            .into_iter()
            .zip(&labels)
            .filter(|(row, &label)| {
                let best = row
                    .iter()
                    .enumerate()
                    .fold(0, |best, (k, &v)| if v > row[best] { k } else { best });
                i64::try_from(best) == Ok(label)
            })
            .count();
        let accuracy = test["accuracy"].as_f64().unwrap();
        // The same count over 355, divided alike: exact.
        assert_eq!(accuracy, hits as f64 / labels.len() as f64, "{run}");
        // Two epochs of the digits MLP learn: measured 0.52-0.58, chance is 0.10.
        // On 355 test digits one standard error is 0.026 near 0.55 and 0.016 at
        // chance: 0.4 is 4.6 below the lowest run measured, 19 above chance.
        assert!(accuracy > 0.4, "{run}");
        assert_eq!(test["tce"], run["posthoc"]["temperature"]["ece"]);
        for calibrator in ["temperature", "isotonic", "histogram"] {
            let ece = run["posthoc"][calibrator]["ece"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&ece), "{calibrator}: {ece}");
        }
        assert!(run["temperature"].as_f64().unwrap() > 0.0);
    }
    let aggregates = results["aggregates"].as_array().unwrap();
    assert_eq!(aggregates.len(), 3);
    for (aggregate, method) in aggregates.iter().zip(METHODS) {
        assert_eq!(aggregate["method"], method);
        assert_eq!(aggregate["seeds"], serde_json::json!([0, 1]));
        for key in METRIC_KEYS {
            let value = &aggregate["metrics"][key];
            assert_eq!(value["n"], 2, "{method} {key}");
            assert!(value["std"].as_f64().unwrap() >= 0.0, "{method} {key}");
        }
        // The aggregate is the mean of the two runs' values.
        let accuracies: Vec<f64> = runs
            .iter()
            .filter(|r| r["method"] == method)
            .map(|r| r["test"]["accuracy"].as_f64().unwrap())
            .collect();
        let mean = aggregate["metrics"]["accuracy"]["mean"].as_f64().unwrap();
        // Pure-Rust f64 mean of two values <= 1: at most 1 ulp apart (~1e-16).
        assert!((mean - (accuracies[0] + accuracies[1]) / 2.0).abs() < 1e-12);
    }

    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 7, "{csv}");
    assert!(lines[0].starts_with("method,seed,run_dir,"), "{}", lines[0]);
    assert!(
        lines[1].starts_with("sgd,0,runs/sgd-seed0,"),
        "{}",
        lines[1]
    );
    assert!(
        lines[6].starts_with("csam,1,runs/csam-seed1,"),
        "{}",
        lines[6]
    );

    let table = std::fs::read_to_string(out.join("table.md")).unwrap();
    assert!(table.contains("over 2 seeds (0, 1)"), "{table}");
    for row in ["| SGD | ", "| SAM | ", "| CSAM | "] {
        assert_eq!(table.matches(row).count(), 1, "{row} in {table}");
    }
    assert!(table.contains(" ± "), "{table}");

    // The cost table: SGD is the reference and never perturbs; SAM and CSAM
    // run the second pass on every step.
    let cost = std::fs::read_to_string(out.join("cost.md")).unwrap();
    let row = |method: &str| -> Vec<String> {
        let line = cost
            .lines()
            .find(|l| l.starts_with(&format!("| {method} | ")));
        let line = line.unwrap_or_else(|| panic!("no {method} row in {cost}"));
        line.split('|')
            .map(|cell| cell.trim().to_string())
            .collect()
    };
    assert_eq!(row("SGD")[3..5], ["1.00", "0"], "{cost}");
    for method in ["SAM", "CSAM"] {
        assert_eq!(row(method)[4], "100", "{cost}");
    }

    for method in METHODS {
        for figure in ["reliability", "confidence"] {
            let svg = out.join(format!("plots/{figure}-{method}-seed0.svg"));
            assert!(
                std::fs::read_to_string(&svg).unwrap().contains("<svg"),
                "{}",
                svg.display()
            );
            let png =
                std::fs::read(out.join(format!("plots/{figure}-{method}-seed0.png"))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        }
    }
    for figure in [
        "ece-epochs",
        "tce-epochs",
        "entropy",
        "posthoc-ece",
        "ece-cost",
    ] {
        for extension in ["svg", "png"] {
            let path = out.join(format!("plots/{figure}.{extension}"));
            assert!(path.is_file(), "{}", path.display());
        }
    }
    assert_eq!(
        std::fs::read_dir(out.join("plots")).unwrap().count(),
        22,
        "seed 0 only for the per-method figures"
    );
    check_report_table(out, &results);
}

/// report.html is valid and self-contained, and every table cell shows the
/// mean ± std of results.json (and carries the exact mean).
fn check_report_table(out: &Path, results: &serde_json::Value) {
    let support::report::Cells(cells) = support::report::check_report(out);
    assert_eq!(
        cells.len(),
        3 * METRIC_KEYS.len(),
        "a cell per method and metric"
    );
    for (data, text) in cells {
        let aggregate = results["aggregates"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["method"] == data["method"].as_str())
            .unwrap();
        let value = &aggregate["metrics"][data["metric"].as_str()];
        let mean = value["mean"].as_f64().unwrap();
        assert_eq!(data["mean"].parse::<f64>().unwrap(), mean, "{data:?}");
        let in_percent = !["nll", "brier"].contains(&data["metric"].as_str());
        assert_eq!(
            text,
            support::report::mean_std(mean, value["std"].as_f64(), in_percent),
            "{data:?}"
        );
    }
}

#[test]
fn compare_writes_everything_reuses_finished_runs_and_refuses_another_comparison() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let first = compare(&out, &[]);
    assert!(first.status.success(), "{}", text(&first));
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("[1/6] sgd seed 0: training into"),
        "{stdout}"
    );
    // Trained two at a time by `csam train` processes, then read back here.
    assert!(
        stdout.contains("[6/6] csam seed 1: read back (trained in"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| CSAM | "),
        "the table is printed: {stdout}"
    );
    check_artefacts(&out);
    assert_opens_the_report(&first, &out);

    // Per-epoch test metrics with TCE (paper Figure 3c-d) in every epoch log.
    let log = std::fs::read_to_string(out.join("runs/sgd-seed0/metrics.jsonl")).unwrap();
    for line in log.lines() {
        let record: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(record["test"]["tce"].as_f64().is_some(), "{line}");
    }

    // `csam report` rewrites the same page and figures from the directory alone.
    let page = std::fs::read(out.join("report.html")).unwrap();
    std::fs::remove_file(out.join("report.html")).unwrap();
    std::fs::remove_file(out.join("plots/entropy.svg")).unwrap();
    let report = Command::new(env!("CARGO_BIN_EXE_csam"))
        .current_dir(dir.path())
        .args(["report", "cmp"])
        .output()
        .unwrap();
    assert!(report.status.success(), "{}", text(&report));
    assert_opens_the_report(&report, &out);
    assert!(!text(&report).contains("training"), "{}", text(&report));
    assert_eq!(std::fs::read(out.join("report.html")).unwrap(), page);
    assert!(out.join("plots/entropy.svg").is_file());

    let run = out.join("runs/sam-seed1");
    let stamps = |run: &Path| {
        (
            modified(&run.join("metrics.jsonl")),
            modified(&run.join("model.safetensors")),
        )
    };
    let before = stamps(&run);
    let results_before = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let again = compare(&out, &[]);
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(stdout.matches("reused finished run").count(), 6, "{stdout}");
    assert!(!stdout.contains("training into"), "{stdout}");
    // Read back, a run reports its own training time, not the reading's.
    let line = stdout
        .lines()
        .find(|l| l.contains("[6/6] csam seed 1: read back (trained in "))
        .unwrap_or_else(|| panic!("{stdout}"));
    let (_, after) = line.split_once("trained in ").unwrap();
    let seconds: f64 = after.split_once('s').unwrap().0.parse().unwrap();
    assert!(seconds > 0.0, "{line}");
    assert_eq!(stamps(&run), before, "a finished run is not retrained");
    assert_eq!(
        std::fs::read_to_string(out.join("results.csv")).unwrap(),
        results_before,
        "the same runs give the same numbers"
    );

    // Runs killed after their last checkpoint but before their summary resume
    // from the checkpoint, two at a time by `csam train` processes: no epoch is
    // trained again (the loop rewrites metrics.jsonl on resume, so its content
    // is compared, not its time).
    let log_before = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
    let other = out.join("runs").join("csam-seed1");
    let other_log = std::fs::read_to_string(other.join("metrics.jsonl")).unwrap();
    std::fs::remove_file(run.join("summary.json")).unwrap();
    std::fs::remove_file(other.join("summary.json")).unwrap();
    let resumed = compare(&out, &["--jobs", "2"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        stdout.contains("[5/6] sam seed 1: resuming into")
            && stdout.contains("[6/6] csam seed 1: resuming into"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("reused finished run").count(), 4, "{stdout}");
    assert_eq!(
        std::fs::read_to_string(other.join("metrics.jsonl")).unwrap(),
        other_log
    );
    // Epoch records carry their wall time, so a retrained epoch would differ.
    assert_eq!(
        std::fs::read_to_string(run.join("metrics.jsonl")).unwrap(),
        log_before
    );
    check_artefacts(&out);

    let different = compare(&out, &["--gamma", "2"]);
    assert!(!different.status.success());
    let message = text(&different);
    assert!(
        message.contains("different comparison") && message.contains("gamma"),
        "{message}"
    );
}

/// The files of every run that hold numbers: logits, labels, weights.
fn run_numbers(out: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for method in METHODS {
        for seed in [0, 1] {
            let run = format!("runs/{method}-seed{seed}");
            for name in [
                "val_logits.npy",
                "test_logits.npy",
                "test_labels.npy",
                "model.safetensors",
            ] {
                let path = format!("{run}/{name}");
                files.push((path.clone(), std::fs::read(out.join(&path)).unwrap()));
            }
        }
    }
    files
}

#[test]
fn runs_trained_by_parallel_processes_give_the_numbers_of_sequential_ones() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    let sequential = compare(&one, &["--jobs", "1"]);
    assert!(sequential.status.success(), "{}", text(&sequential));
    assert!(
        !text(&sequential).contains("(process "),
        "{}",
        text(&sequential)
    );
    let parallel = compare(&two, &["--jobs", "2"]);
    assert!(parallel.status.success(), "{}", text(&parallel));
    let stdout = String::from_utf8_lossy(&parallel.stdout);
    assert_eq!(stdout.matches("(process ").count(), 6, "{stdout}");
    assert_eq!(stdout.matches(": trained in ").count(), 6, "{stdout}");
    // Reading back the runs it has just trained is no news: no "reused" line.
    assert_eq!(stdout.matches("reused finished run").count(), 0, "{stdout}");
    // Where the comparison stands after each run, on stdout for logs; the
    // bar that follows it on stderr hides itself where that is no terminal.
    assert_eq!(stdout.matches(" runs trained").count(), 6, "{stdout}");
    assert!(stdout.contains("\n6/6 runs trained\n"), "{stdout}");
    for output in [&sequential, &parallel] {
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("epochs ") && !stderr.contains('\r'),
            "{stderr}"
        );
    }
    // The runs read back count the time they trained ahead since the start.
    assert!(!stdout.contains(" 0.0s since start"), "{stdout}");
    assert_eq!(run_numbers(&one), run_numbers(&two));
    // The table (results.csv differs in the runs' wall times only).
    assert_eq!(
        std::fs::read_to_string(one.join("table.md")).unwrap(),
        std::fs::read_to_string(two.join("table.md")).unwrap()
    );

    // A run that cannot train (its directory holds other files) is named
    // with the reason; the run training beside it finishes and is kept.
    for method in ["sam", "csam"] {
        std::fs::remove_dir_all(two.join(format!("runs/{method}-seed1"))).unwrap();
    }
    std::fs::create_dir_all(two.join("runs/sam-seed1")).unwrap();
    std::fs::write(two.join("runs/sam-seed1/notes.txt"), "mine").unwrap();
    let failed = compare(&two, &["--jobs", "2"]);
    support::assert_one_line_error(&failed, &["[5/6] sam seed 1 failed", "holds no csam run"]);
    assert!(two.join("runs/csam-seed1/summary.json").is_file());
    assert_eq!(
        std::fs::read_to_string(two.join("runs/sam-seed1/notes.txt")).unwrap(),
        "mine"
    );
    let zero = compare(&dir.path().join("zero"), &["--jobs", "0"]);
    support::assert_one_line_error(&zero, &["--jobs must be at least 1"]);
}

#[test]
fn two_comparisons_on_one_directory_share_its_runs_and_both_finish() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("shared");
    let start = |jobs: &str| {
        let mut args = vec![
            "compare",
            "--data",
            "digits",
            "--model",
            "mlp",
            "--epochs",
            "2",
            "--seeds",
            "0",
            "--methods",
            "sgd,sam",
            "--jobs",
            jobs,
            "--quiet",
            "--out",
        ];
        args.push(out.to_str().unwrap());
        Command::new(env!("CARGO_BIN_EXE_csam"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Both orders of in-process and parallel training meet the other's lock.
    let (first, second) = (start("2"), start("1"));
    for output in [first.wait_with_output(), second.wait_with_output()] {
        let output = output.unwrap();
        assert!(output.status.success(), "{}", text(&output));
    }
    for method in ["sgd", "sam"] {
        let log = std::fs::read_to_string(out.join(format!("runs/{method}-seed0/metrics.jsonl")));
        assert_eq!(
            log.unwrap().lines().count(),
            2,
            "{method} trained once, 2 epochs"
        );
    }
    assert!(out.join("table.md").is_file());
}

/// `csam compare` on digits, one epoch, quietly, with `extra` flags.
fn one_epoch_compare(out: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args([
            "compare",
            "--data",
            "digits",
            "--epochs",
            "1",
            "--val-size",
            "100",
            "--quiet",
        ])
        .args(["--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn methods_pair_training_losses_with_update_rules() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("losses");
    let output = one_epoch_compare(
        &out,
        &["--seeds", "0", "--methods", "sgd,focal,flsd+sam,ls+csam"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    for row in ["| SGD |", "| FOCAL |", "| FLSD+SAM |", "| LS+CSAM |"] {
        assert!(stdout.contains(row), "{row}: {stdout}");
    }
    for (method, loss, rule) in [
        ("sgd", "cross-entropy", "sgd"),
        ("focal", "focal", "sgd"),
        ("flsd+sam", "flsd", "sam"),
        ("ls+csam", "label-smoothing", "csam"),
    ] {
        let config: toml::Table =
            std::fs::read_to_string(out.join(format!("runs/{method}-seed0/config.toml")))
                .unwrap()
                .parse()
                .unwrap();
        assert_eq!(config["loss"]["kind"].as_str(), Some(loss), "{method}");
        assert_eq!(
            config["optim"]["rule"]["kind"].as_str(),
            Some(rule),
            "{method}"
        );
    }
    let refused = compare(&dir.path().join("bad"), &["--methods", "sgd,hinge+csam"]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("unknown method"),
        "{}",
        text(&refused)
    );
}

#[test]
fn methods_put_an_efficient_sam_policy_before_their_rule() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("policies");
    let methods_file = dir.path().join("methods.toml");
    std::fs::write(&methods_file, "[\"looksam+csam\"]\nlooksam_k = 3\n").unwrap();
    let output = one_epoch_compare(
        &out,
        &[
            "--seeds",
            "0",
            "--methods",
            "csam,looksam+csam,rst+sam",
            "--methods-file",
            methods_file.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    // LookSAM with k = 3 takes its second pass on steps 0, 3, 6, ... of the
    // run: ceil(steps / 3) of an epoch's steps (k counted in the run's
    // steps; the default k = 5 gives another share).
    let looksam_share = {
        let run = out.join("runs/looksam+csam-seed0");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap())
                .unwrap();
        let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let n_train = summary["n_train"].as_u64().unwrap();
        let batch = config["batch_size"].as_integer().unwrap() as u64;
        let steps = n_train.div_ceil(batch);
        assert!(steps >= 2, "{steps} steps: every k would give one share");
        steps.div_ceil(3) as f64 / steps as f64
    };
    for (method, policy, share) in [
        ("csam", None, Some(1.0)),
        ("looksam+csam", Some("looksam"), Some(looksam_share)),
        ("rst+sam", Some("rst"), None),
    ] {
        let run = out.join(format!("runs/{method}-seed0"));
        let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let kind = config["optim"]
            .get("policy")
            .map(|policy| policy["kind"].as_str().unwrap());
        assert_eq!(kind, policy, "{method}");
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        let record: serde_json::Value =
            serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
        let got = record["train"]["second_pass"].as_f64().unwrap();
        match share {
            Some(share) => assert_eq!(got, share, "{method}"),
            None => assert!(0.0 < got && got < 1.0, "{method}: {got}"),
        }
    }
    let config: toml::Table =
        std::fs::read_to_string(out.join("runs/looksam+csam-seed0/config.toml"))
            .unwrap()
            .parse()
            .unwrap();
    assert_eq!(config["optim"]["policy"]["k"].as_integer(), Some(3));
}

#[test]
fn a_list_flag_given_twice_takes_its_last_value() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("last");
    let output = one_epoch_compare(
        &out,
        &[
            "--seeds",
            "0,1",
            "--seeds",
            "2",
            "--methods",
            "sgd,sam",
            "--methods",
            "sgd",
        ],
    );
    assert!(output.status.success(), "{}", text(&output));
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert_eq!(settings["seeds"], serde_json::json!([2]), "{settings}");
    assert_eq!(
        settings["methods"],
        serde_json::json!(["sgd"]),
        "{settings}"
    );
}

#[test]
fn a_failed_comparison_leaves_no_settings_that_block_the_corrected_rerun() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    // One SGD run of one epoch (flags of its own: a list flag given twice
    // adds to the list).
    let sgd_run = |out: &Path| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_csam"));
        command
            .args([
                "compare",
                "--data",
                "digits",
                "--model",
                "mlp",
                "--methods",
                "sgd",
            ])
            .args(["--seeds", "0", "--epochs", "1", "--quiet", "--out"])
            .arg(out);
        command
    };
    let one_run = |out: &Path, extra: &[&str]| {
        sgd_run(out)
            .args(extra)
            .output()
            .expect("the csam binary runs")
    };

    let typo = one_run(&out, &["--model", "mpl"]);
    support::assert_one_line_error(&typo, &["mpl"]);
    assert!(!out.exists(), "a comparison with a bad name was recorded");
    // Data that parses but does not load fails in the first run, after the
    // settings were written; nothing ran under them, so they are replaced.
    let missing = format!("idx:{}", dir.path().join("no-such-data").display());
    let unloadable = one_run(&out, &["--data", &missing, "--val-size", "50"]);
    assert!(!unloadable.status.success(), "{}", text(&unloadable));
    // What is left: the settings, and the lock file of the comparisons
    // that hold the directory (none now).
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name())
        .filter(|name| name != ".lock")
        .collect();
    assert_eq!(left, ["compare.json"], "{left:?}");

    let fixed = one_run(&out, &[]);
    assert!(fixed.status.success(), "{}", text(&fixed));
    assert_opens_the_report(&fixed, &out);

    // Its runs train under the run directory's lock: a run that another
    // process (here this test) holds is waited for, then resumed.
    let run = out.join("runs/sgd-seed0");
    std::fs::remove_file(run.join("summary.json")).unwrap();
    let lock = csam_train::train::lock::RunLock::acquire(&run).unwrap();
    let mut waiting = sgd_run(&out)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(waiting.stdout.take().unwrap());
    let (sender, said) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufRead::lines(stdout).map_while(Result::ok) {
            let _ = sender.send(line);
        }
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let line = said.recv_timeout(left).expect("compare says it waits");
        if line.contains("waiting for the other csam process that trains") {
            break;
        }
    }
    assert!(
        waiting.try_wait().unwrap().is_none(),
        "it ended while the run was held"
    );
    drop(lock);
    let status = waiting.wait().unwrap();
    reader.join().unwrap();
    assert!(
        status.success(),
        "the comparison resumed the run once it was free"
    );
    assert!(run.join("summary.json").is_file());
}

#[test]
fn report_of_a_directory_without_an_experiment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(["report", dir.path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(
        text(&output).contains("neither a comparison"),
        "{}",
        text(&output)
    );
}

#[test]
fn compare_refuses_a_directory_of_other_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let refused = compare(dir.path(), &[]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("holds no comparison"),
        "{}",
        text(&refused)
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "nothing written"
    );
}

#[test]
fn compare_defaults_to_the_whole_bundled_fashion_mnist() {
    // The command a user types, shortened to one SGD run of one epoch.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let args = [
        "compare",
        "--methods",
        "sgd",
        "--seeds",
        "0",
        "--epochs",
        "1",
        "--device",
        "cpu",
        "--quiet",
        "--out",
    ];
    let run = |extra: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_csam"))
            .args(args)
            .arg(&out)
            .args(extra)
            .output()
            .expect("the csam binary runs");
        assert!(output.status.success(), "{}", text(&output));
    };
    run(&[]);
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let data = &settings["base"]["data"];
    assert_eq!(data["source"], "fashion-mnist-full");
    assert_eq!(data["val_size"], 12_000, "20% of 60,000");
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("runs/sgd-seed0/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (&summary["n_train"], &summary["n_val"], &summary["n_test"]),
        (&48_000.into(), &12_000.into(), &10_000.into())
    );
    // `--full` names the same comparison: the directory is reused, not refused.
    let weights = out.join("runs/sgd-seed0/model.safetensors");
    let before = modified(&weights);
    run(&["--full"]);
    assert_eq!(modified(&weights), before, "the finished run was reused");
}
