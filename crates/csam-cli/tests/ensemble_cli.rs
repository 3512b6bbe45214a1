//! Deep ensembles and MC-Dropout as `csam compare` methods, end to end
//! through the binary on the bundled digits with an MLP (seconds on a CPU):
//! which runs train (an ensemble's first member is the single run, its other
//! members share its split), that an ensemble of one is its member, that an
//! ensemble averages probabilities and not logits, that MC-Dropout samples,
//! the shift and OOD columns, a rerun that trains nothing, and refusals.

mod support;

use std::path::Path;

use ndarray::{Array2, Axis};
use support::probabilities::{mean_softmax_of_test_logits, read_logits, softmax};
use support::{assert_one_line_error, assert_rerun_reuses, csam, text, DIGITS_MLP};

fn compare(out: &Path, corruptions: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "compare",
        "--epochs",
        "2",
        "--seeds",
        "0",
        "--methods",
        "sgd,ensemble1,ensemble2,mc-dropout2",
        "--corruptions",
        corruptions.to_str().unwrap(),
        "--ood",
        "digits",
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(DIGITS_MLP);
    args.extend_from_slice(extra);
    csam(&args)
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn max_difference(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
    (a - b).iter().fold(0.0, |m, d| m.max(d.abs()))
}

/// The test probabilities a record's directory holds.
fn record_probabilities(out: &Path, record: &serde_json::Value) -> Array2<f64> {
    let dir = out.join(record["run_dir"].as_str().unwrap());
    softmax(read_logits(&dir.join("test_logits.npy")))
}

#[test]
fn ensembles_and_mc_dropout_train_their_members_once_and_average_probabilities() {
    let dir = tempfile::tempdir().unwrap();
    let (out, corrupted) = (dir.path().join("cmp"), dir.path().join("digits-c"));
    let corrupt = csam(&[
        "corrupt",
        "--data",
        "digits",
        "--corruptions",
        "gaussian_noise,contrast",
        "--quiet",
        "--out",
        corrupted.to_str().unwrap(),
    ]);
    assert!(corrupt.status.success(), "{}", text(&corrupt));
    let first = compare(&out, &corrupted, &[]);
    assert!(first.status.success(), "{}", text(&first));

    // SGD's run is the first member of both ensembles; the second member
    // trains on its split; MC-Dropout's network trains with dropout.
    let runs = out.join("runs");
    let mut trained: Vec<String> = std::fs::read_dir(&runs)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    trained.sort();
    assert_eq!(
        trained,
        ["sgd-dropout-seed0", "sgd-seed0", "sgd-seed0-member1"]
    );
    let config = |run: &str| -> toml::Table {
        let text = std::fs::read_to_string(runs.join(run).join("config.toml")).unwrap();
        text.parse().unwrap()
    };
    let member = config("sgd-seed0-member1");
    assert_eq!(member["seed"].as_integer(), Some(1_000_000));
    assert_eq!(member["data"]["split_seed"].as_integer(), Some(0));
    assert!(config("sgd-seed0")["data"].get("split_seed").is_none());
    assert_eq!(
        config("sgd-dropout-seed0")["model"]["dropout"].as_float(),
        Some(0.1)
    );

    let results = json(&out.join("results.json"));
    let records = results["runs"].as_array().unwrap();
    let record = |method: &str| {
        records
            .iter()
            .find(|r| r["method"] == method)
            .unwrap_or_else(|| panic!("no record of {method}"))
    };
    let (single, one, two, mc) = (
        record("sgd"),
        record("ensemble1"),
        record("ensemble2"),
        record("mc-dropout2"),
    );
    assert_eq!(single["run_dir"], "runs/sgd-seed0");
    assert_eq!(two["run_dir"], "predictions/ensemble2-seed0");
    assert!(two["best_epoch"].is_null() && single["best_epoch"].is_u64());

    // An ensemble of one is its member (to float32 rounding of the files).
    // Both evaluate the same weights at the same batch size with the same
    // kernels (equal float32 logits); the ensemble's file holds f32(ln p), off
    // by 6e-8 * |ln p|: probabilities move by <= p |ln p| 6e-8 <= 2.2e-8 and the
    // metrics (means over 355 rows) by ~1e-7, 10x under 1e-6.
    assert_eq!(one["test"]["accuracy"], single["test"]["accuracy"]);
    for key in ["ece", "nll", "brier"] {
        let (a, b) = (one["test"][key].as_f64(), single["test"][key].as_f64());
        assert!((a.unwrap() - b.unwrap()).abs() < 1e-6, "{key}: {a:?} {b:?}");
    }
    let (one_probs, single_probs) = (
        record_probabilities(&out, one),
        record_probabilities(&out, single),
    );
    assert!(max_difference(&one_probs, &single_probs) < 1e-6);

    // The ensemble of two averages its members' probabilities, not their logits.
    let members = [runs.join("sgd-seed0"), runs.join("sgd-seed0-member1")];
    let members: Vec<&Path> = members.iter().map(|p| p.as_path()).collect();
    let ensemble = record_probabilities(&out, two);
    // The same f32(ln p) rounding as above: <~ 5e-8 after the softmax.
    assert!(max_difference(&ensemble, &mean_softmax_of_test_logits(&members)) < 1e-6);
    let logits: Vec<Array2<f64>> = members
        .iter()
        .map(|m| read_logits(&m.join("test_logits.npy")))
        .collect();
    let views: Vec<_> = logits.iter().map(Array2::view).collect();
    let mean_logits = ndarray::stack(Axis(0), &views)
        .unwrap()
        .mean_axis(Axis(0))
        .unwrap();
    // Two members' Jensen gap is far above 1e-4, which is 1000x the rounding
    // above: only asks for a visible difference.
    assert!(max_difference(&ensemble, &softmax(mean_logits)) > 1e-4);
    let val = read_logits(&out.join("predictions/ensemble2-seed0/val_logits.npy"));
    assert_eq!(val.nrows(), 300, "the members' shared validation split");

    // MC-Dropout samples: its mean differs from the network's evaluation pass.
    let eval = softmax(read_logits(&runs.join("sgd-dropout-seed0/test_logits.npy")));
    let sampled = record_probabilities(&out, mc);
    // Dropout 0.1 over 2 passes moves probabilities far above 1e-4 (1000x the
    // files' rounding); a float64 softmax sums to 1 within ~1e-15, so 1e-5
    // only checks that these are probabilities.
    assert!(max_difference(&sampled, &eval) > 1e-4);
    assert!(sampled
        .sum_axis(Axis(1))
        .iter()
        .all(|s| (s - 1.0).abs() < 1e-5));

    // Shift: every method on the corrupted data and against the OOD set (the
    // test split against itself: AUROC 0.5).
    for r in records {
        let shift = &r["shift"];
        let corrupted = shift["corruptions"]["corruptions"].as_array().unwrap();
        assert_eq!(corrupted.len(), 2, "{}", r["method"]);
        assert_eq!(shift["ood"]["auroc_max_probability"], 0.5);
        assert_eq!(shift["ood"]["auroc_entropy"], 0.5);
    }
    let shift_table = std::fs::read_to_string(out.join("shift.md")).unwrap();
    for row in [
        "| SGD |",
        "| ENSEMBLE1 |",
        "| ENSEMBLE2 |",
        "| MC-DROPOUT2 |",
    ] {
        assert!(shift_table.contains(row), "{row}: {shift_table}");
    }
    assert!(shift_table.contains("Corrupted ECE (%)"), "{shift_table}");
    assert!(
        shift_table.contains("| severity 5 acc / ECE (%) |"),
        "{shift_table}"
    );
    assert!(String::from_utf8_lossy(&first.stdout).contains("OOD AUROC entropy (%)"));

    // A rerun retrains nothing and gives the same numbers.
    assert_rerun_reuses(&runs.join("sgd-seed0-member1/model.safetensors"), 3, || {
        compare(&out, &corrupted, &[])
    });
    let again = json(&out.join("results.json"));
    assert_eq!(again["runs"], results["runs"]);
}

#[test]
fn unusable_methods_and_shift_data_are_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let args = |methods: &'static str| {
        let mut args = vec![
            "compare",
            "--epochs",
            "1",
            "--seeds",
            "0",
            "--methods",
            methods,
        ];
        args.extend_from_slice(DIGITS_MLP);
        args
    };
    let refused = csam(
        &[
            &args("csam-ensemble0")[..],
            &["--out", out.to_str().unwrap()],
        ]
        .concat(),
    );
    // A flag's value is refused by the argument parser, with its usage line.
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(stderr.contains("\"csam-ensemble0\": the ensemble size must lie in 1..=100"));
    let missing = dir.path().join("no-such-dir");
    let refused = csam(
        &[
            &args("ensemble2")[..],
            &["--corruptions", missing.to_str().unwrap()],
            &["--out", out.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_one_line_error(&refused, &["no-such-dir"]);
    let refused = csam(
        &[
            &args("ensemble2")[..],
            &["--ood", "nonsense"],
            &["--out", out.to_str().unwrap()],
        ]
        .concat(),
    );
    assert_one_line_error(&refused, &["nonsense"]);
    assert!(
        !out.join("runs").exists(),
        "nothing trained for a refused comparison"
    );
}

/// A comparison of ensembles alone finishes: its report leaves out the
/// per-epoch curves (no method has weights of its own per epoch) and keeps
/// every other section.
#[test]
fn a_comparison_of_ensembles_alone_reports_without_per_epoch_curves() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cmp");
    let args = [
        &[
            "compare",
            "--epochs",
            "1",
            "--seeds",
            "0",
            "--methods",
            "ensemble2",
        ][..],
        DIGITS_MLP,
        &["--out", out.to_str().unwrap(), "--quiet"],
    ]
    .concat();
    let output = csam(&args);
    assert!(output.status.success(), "{}", text(&output));
    let report = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(!report.contains("Calibration during training"));
    assert!(report.contains("Post-hoc calibration"));
    assert!(!out.join("plots/ece-epochs.svg").exists());
    assert!(out.join("plots/entropy.svg").is_file());
}
