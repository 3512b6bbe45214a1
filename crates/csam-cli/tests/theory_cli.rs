//! `csam train --track-theory` and `csam sharpness` end to end through the
//! binary, on the bundled digits with a small MLP (seconds on a CPU), and
//! the clear errors for bad arguments.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use support::text;

fn csam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(args)
        .output()
        .expect("the csam binary runs")
}

fn train(out: &Path, optimizer: &str) -> Output {
    csam(&[
        "train",
        "--out",
        out.to_str().unwrap(),
        "--data",
        "digits",
        "--model",
        "mlp",
        "--mlp-hidden",
        "16",
        "--val-size",
        "300",
        "--epochs",
        "1",
        "--batch-size",
        "128",
        "--lr",
        "0.05",
        "--optimizer",
        optimizer,
        "--track-theory",
        "--device",
        "cpu",
        "--threads",
        "1",
        "--quiet",
    ])
}

/// `csam sharpness` on `run` with a small, fast setting plus `extra`.
fn sharpness(run: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "sharpness",
        "--run",
        run.to_str().unwrap(),
        "--examples",
        "64",
        "--max-iterations",
        "20",
        "--segment-points",
        "1",
        "--device",
        "cpu",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    csam(&args)
}

#[test]
fn tracked_sam_run_then_sharpness_then_refusals() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("sam");
    let trained = train(&run, "sam");
    assert!(trained.status.success(), "{}", text(&trained));
    assert!(
        String::from_utf8_lossy(&trained.stdout).contains("Lemma 2 held on"),
        "{}",
        text(&trained)
    );
    let log = std::fs::read_to_string(run.join("theory.jsonl")).unwrap();
    assert_eq!(log.lines().count(), 1142usize.div_ceil(128));
    assert!(run.join("theory-lambda.png").is_file());

    let measured = sharpness(&run, &[]);
    assert!(measured.status.success(), "{}", text(&measured));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("sharpness.json")).unwrap())
            .unwrap();
    let path = report["path"].as_array().unwrap();
    let ts: Vec<f64> = path.iter().map(|p| p["t"].as_f64().unwrap()).collect();
    assert_eq!(ts, vec![0.0, 0.5, 1.0]);
    let kappa_max = report["kappa_max"].as_f64().unwrap();
    let kappa_min = report["kappa_min_theta"].as_f64().unwrap();
    assert!(kappa_max > 0.0 && kappa_min <= kappa_max, "{report}");
    assert_eq!(report["n_examples"], 64);

    // The same seed gives the same numbers; an existing report needs --force.
    let again = sharpness(&run, &[]);
    assert!(!again.status.success());
    assert!(text(&again).contains("--force"), "{}", text(&again));
    let forced = sharpness(&run, &["--force"]);
    assert!(forced.status.success(), "{}", text(&forced));
    let repeated: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("sharpness.json")).unwrap())
            .unwrap();
    // The same seed, ops and thread count on one machine: equal bits.
    assert_eq!(repeated["kappa_max"], report["kappa_max"]);
    assert_eq!(repeated["path"], report["path"]);

    for (extra, expected) in [
        (
            &["--max-iterations", "0", "--force"][..],
            "--max-iterations",
        ),
        (&["--tolerance", "0", "--force"][..], "--tolerance"),
        (&["--examples", "0", "--force"][..], "--examples"),
        (&["--examples", "100000", "--force"][..], "training split"),
        (&["--force", "--rho=-1"][..], "rho"),
    ] {
        let refused = sharpness(&run, extra);
        assert!(!refused.status.success(), "{extra:?}: {}", text(&refused));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(
            stderr.starts_with("error:")
                && stderr.contains(expected)
                && stderr.lines().count() == 1,
            "{extra:?}: {}",
            text(&refused)
        );
    }
}

#[test]
fn missing_run_and_untracked_optimizers_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowhere");
    let refused = sharpness(&missing, &[]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("no such directory"),
        "{}",
        text(&refused)
    );

    let not_a_run = tempfile::tempdir().unwrap();
    let refused = sharpness(not_a_run.path(), &[]);
    assert!(
        text(&refused).contains("not a csam run"),
        "{}",
        text(&refused)
    );

    for optimizer in ["sgd", "asam"] {
        let refused = train(&dir.path().join(optimizer), optimizer);
        assert!(!refused.status.success());
        assert!(
            text(&refused).contains("--track-theory") && text(&refused).contains("sam|csam"),
            "{}",
            text(&refused)
        );
        assert!(
            !dir.path().join(optimizer).exists(),
            "refused before any work"
        );
    }
}

#[test]
fn compare_with_track_theory_reports_the_lemma_2_fraction_of_each_tracked_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let output = csam(&[
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
        "sgd,csam",
        "--track-theory",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(output.status.success(), "{}", text(&output));
    assert!(
        !out.join("runs/sgd-seed0/theory.jsonl").exists(),
        "SGD has no perturbed point to track"
    );
    // The fraction, recomputed from the run's own log.
    let log = std::fs::read_to_string(out.join("runs/csam-seed0/theory.jsonl")).unwrap();
    let steps: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let held = steps.iter().filter(|s| s["lemma2_holds"] == true).count();
    let fraction = format!("{:.1}", 100.0 * held as f64 / steps.len() as f64);
    support::report::check_report(&out);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let theory = &html[html.find("id=\"theory\"").expect("a theory section")..];
    let row = format!(
        "<th scope=\"row\">CSAM</th><td>0</td><td>{}</td><td>{fraction}</td>",
        steps.len()
    );
    assert!(theory.contains(&row), "no row {row} in\n{theory}");
    for stem in ["theory-probabilities-csam", "theory-lambda-csam"] {
        assert!(out.join(format!("plots/{stem}.png")).is_file(), "{stem}");
    }
}
