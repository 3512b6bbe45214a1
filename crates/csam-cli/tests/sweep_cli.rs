//! `csam sweep` end to end through the binary on a 2 x 2 grid (rho 0.05,
//! 0.1; gamma 0, 1), the bundled digits, an MLP, 1 epoch and one seed:
//! every artefact and a valid report, a rerun that retrains nothing, a
//! killed run resumed, and a different sweep refused.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::report::assert_opens_the_report;
use support::text;

fn sweep(out: &Path, extra: &[&str]) -> Output {
    sweep_grid(out, "0.05,0.1", "0,1", extra)
}

fn sweep_grid(out: &Path, rho: &str, gamma: &str, extra: &[&str]) -> Output {
    // `--gamma=-1`, not `--gamma -1`: a value may start with a minus sign.
    let (rho, gamma) = (format!("--rho={rho}"), format!("--gamma={gamma}"));
    let mut args = vec![
        "sweep", "--data", "digits", "--model", "mlp", "--epochs", "1", "--seeds", "0", &rho,
        &gamma, "--quiet", "--out",
    ];
    args.push(out.to_str().unwrap());
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(&args)
        .output()
        .expect("the csam binary runs")
}

fn results(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap()
}

const GRID: [(&str, &str, &str); 4] = [
    ("0.05", "0", "sam"),
    ("0.05", "1", "csam"),
    ("0.1", "0", "sam"),
    ("0.1", "1", "csam"),
];

#[test]
fn sweep_trains_the_grid_reuses_runs_and_refuses_another_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let first = sweep(&out, &[]);
    assert!(first.status.success(), "{}", text(&first));
    assert_opens_the_report(&first, &out);
    let stdout = String::from_utf8_lossy(&first.stdout);
    assert!(
        stdout.contains("[1/4] rho 0.05 gamma 0 seed 0: training into"),
        "{stdout}"
    );
    assert!(
        stdout.contains("| Metric | rho | gamma=0 (SAM) | gamma=1 |"),
        "{stdout}"
    );

    let json = results(&out);
    assert_eq!(json["schema"], "csam-sweep/1");
    let runs = json["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    for (run, (rho, gamma, optimizer)) in runs.iter().zip(GRID) {
        assert_eq!(run["rho"].to_string(), rho);
        assert_eq!(run["gamma"].as_f64().unwrap().to_string(), gamma);
        assert_eq!(run["optimizer"], optimizer, "gamma 0 trains SAM");
        let run_dir = out.join(run["run_dir"].as_str().unwrap());
        let config = std::fs::read_to_string(run_dir.join("config.toml")).unwrap();
        assert!(config.contains(&format!("rho = {rho}")), "{config}");
        // H(p_y) is a binary entropy: between 0 and ln 2.
        let h = run["h_py"].as_f64().unwrap();
        assert!(h > 0.0 && h <= std::f64::consts::LN_2, "{h}");
    }
    let cells = json["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for file in ["results.csv", "cells.csv", "table.md", "sweep.json"] {
        assert!(out.join(file).is_file(), "{file}");
    }
    assert_eq!(
        std::fs::read_to_string(out.join("cells.csv"))
            .unwrap()
            .lines()
            .count(),
        5
    );
    for metric in ["accuracy", "ece", "h_py"] {
        for axis in ["rho", "gamma"] {
            for extension in ["svg", "png"] {
                let path = out.join(format!("plots/{metric}-vs-{axis}.{extension}"));
                assert!(path.is_file(), "{}", path.display());
            }
        }
    }
    // The report's cells are the cells of results.json.
    let support::report::Cells(shown) = support::report::check_report(&out);
    assert_eq!(shown.len(), 3 * 4, "3 metrics x 4 cells");
    for (data, text) in shown {
        let cell = cells
            .iter()
            .find(|c| {
                let number = |key: &str| data[key].parse::<f64>().ok();
                c["rho"].as_f64() == number("rho") && c["gamma"].as_f64() == number("gamma")
            })
            .unwrap();
        let value = &cell["metrics"][data["metric"].as_str()];
        let mean = value["mean"].as_f64().unwrap();
        assert_eq!(data["mean"].parse::<f64>().unwrap(), mean);
        let in_percent = data["metric"] != "h_py";
        assert_eq!(
            text,
            support::report::mean_std(mean, value["std"].as_f64(), in_percent)
        );
    }

    // A rerun trains nothing: every run is reused and its files are untouched.
    let model = out.join("runs/rho0.1-gamma1-seed0/model.safetensors");
    support::assert_rerun_reuses(&model, 4, || sweep(&out, &[]));
    assert_eq!(results(&out)["cells"], json["cells"]);

    // A run killed before its summary resumes; the others are reused.
    std::fs::remove_file(out.join("runs/rho0.05-gamma1-seed0/summary.json")).unwrap();
    let resumed = sweep(&out, &[]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(
        stdout.contains("[2/4] rho 0.05 gamma 1 seed 0: resuming into"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("reused finished run").count(), 3, "{stdout}");

    let different = sweep(&out, &["--lr", "0.1"]);
    assert!(!different.status.success());
    let message = text(&different);
    assert!(
        message.contains("different sweep") && message.contains("lr"),
        "{message}"
    );
}

#[test]
fn invalid_grids_are_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    for (rho, gamma, extra, problem) in [
        ("0.05,0.05", "0", &[][..], "listed twice"),
        ("0.05", "-1", &[], "gamma"),
        ("0", "1", &[], "rho"),
        ("0.05", "1", &["--model", "mpl"], "mpl"),
    ] {
        let output = sweep_grid(&out, rho, gamma, extra);
        assert!(!output.status.success(), "rho {rho} gamma {gamma}");
        let message = text(&output);
        assert!(
            message.contains("error:") && message.contains(problem),
            "{message}"
        );
        assert!(!out.exists(), "nothing written for rho {rho} gamma {gamma}");
    }
}

/// The report check itself fails on what it is meant to catch.
#[test]
fn report_check_catches_missing_files_foreign_resources_and_broken_html() {
    let good = "<!DOCTYPE html><html><head><title>t</title></head><body>\
                <svg viewBox=\"0 0 1 1\"><rect x=\"0\"/></svg><a href=\"plots/a.svg\">SVG</a>\
                </body></html>";
    let bad = [
        good.replace("plots/a.svg", "plots/missing.svg"),
        good.replace("plots/a.svg", "https://example.org/a.svg"),
        good.replace("</body>", "<script></script></body>"),
        good.replace("</svg>", ""),
        good.replace("<title>t</title>", "<title>t</title><p a=\"1\"b=\"2\">"),
    ];
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("plots")).unwrap();
    std::fs::write(dir.path().join("plots/a.svg"), "<svg></svg>").unwrap();
    std::fs::write(dir.path().join("report.html"), good).unwrap();
    support::report::check_report(dir.path());
    for page in bad {
        std::fs::write(dir.path().join("report.html"), &page).unwrap();
        let caught = std::panic::catch_unwind(|| support::report::check_report(dir.path()));
        assert!(caught.is_err(), "accepted: {page}");
    }
}

#[test]
fn a_sweep_with_an_efficient_policy_runs_every_cell_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("looksam");
    let output = sweep_grid(&out, "0.05", "0,1", &["--sam-policy", "looksam"]);
    assert!(output.status.success(), "{}", text(&output));
    for gamma in ["0", "1"] {
        let run = out.join(format!("runs/rho0.05-gamma{gamma}-seed0"));
        let config: toml::Table = std::fs::read_to_string(run.join("config.toml"))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(config["optim"]["policy"]["kind"].as_str(), Some("looksam"));
        let metrics = std::fs::read_to_string(run.join("metrics.jsonl")).unwrap();
        let record: serde_json::Value =
            serde_json::from_str(metrics.lines().next().unwrap()).unwrap();
        let share = record["train"]["second_pass"].as_f64().unwrap();
        assert!(0.0 < share && share < 0.5, "gamma {gamma}: {share}");
    }
    let settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(settings["policy"]["kind"], "looksam");
}

#[test]
fn a_gamma_outside_the_papers_range_is_warned_once_as_train_warns_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let swept = sweep_grid(&out, "0.05,0.1", "3", &[]);
    assert!(swept.status.success(), "{}", text(&swept));
    let stderr = String::from_utf8_lossy(&swept.stderr);
    let warning = "warning: gamma = 3 lies outside [0, 2]";
    assert_eq!(stderr.matches(warning).count(), 1, "{stderr}");
}
