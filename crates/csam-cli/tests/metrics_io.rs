//! `csam metrics` inputs beyond float64 `.npy`: `.safetensors` files holding
//! predictions and labels, float16 and bfloat16 predictions, float32 kept as
//! float32, and `--bootstrap` intervals. The files and the reference numbers
//! come from independent writers, run by tests/fixtures/metrics_io_reference.py:
//! numpy (float16, and the float32 probabilities' metrics from their
//! definitions), safetensors.torch and torch (bfloat16 -> float32), and the
//! csam_calib Python package (its bootstrap, the same resampling as the CLI's).
//!
//! Needs the project venv's python with numpy, scipy, torch and safetensors
//! (`<workspace>/.venv/bin/python`, or `CSAM_PYTHON`) and, for the bootstrap
//! comparison, the csam_calib package, which `cargo xtask test` builds before
//! the Rust tests: a bare `cargo test` skips what is missing with a notice,
//! `cargo xtask test` fails.

mod support;

use std::path::Path;
use std::sync::OnceLock;

use csam_calib::io::{load_scores, Scores};
use csam_calib::metrics::summary::MetricSummary;
use serde_json::Value;
use support::{assert_one_line_error, csam, text};

/// The metrics compared between paths: every number of a column but `tce`,
/// named as in the JSON.
fn metrics() -> Vec<&'static str> {
    MetricSummary::default()
        .values()
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| *name != "tce")
        .collect()
}

/// The reference files, written once per test binary; `None` (with a notice)
/// without python.
fn files() -> Option<&'static Path> {
    static DIR: OnceLock<Option<tempfile::TempDir>> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let python = csam_testkit::twin::python()?;
        let dir = tempfile::tempdir().unwrap();
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/metrics_io_reference.py");
        let out = std::process::Command::new(python)
            .arg(script)
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(dir)
    });
    dir.as_ref().map(tempfile::TempDir::path)
}

fn reference(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("reference.json")).unwrap()).unwrap()
}

fn file(dir: &Path, name: &str) -> String {
    dir.join(name).to_str().unwrap().to_string()
}

/// `csam metrics ARGS --json`, parsed.
fn metrics_json(args: &[&str]) -> Value {
    let mut all = vec!["metrics"];
    all.extend_from_slice(args);
    all.push("--json");
    let out = csam(&all);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn float32(path: &Path) -> ndarray::Array2<f32> {
    match load_scores(path, None).unwrap() {
        Scores::F32(m) => m,
        Scores::F64(_) => panic!("{}: read as float64", path.display()),
    }
}

/// Asserts `a` and `b` hold the same bits, but for NaNs, which need only
/// agree in being NaN and in sign: the half crate quiets a signalling NaN's
/// payload where numpy and torch keep it, and a NaN prediction is refused
/// before any metric reads it.
fn same_bits(a: &ndarray::Array2<f32>, b: &ndarray::Array2<f32>, what: &str) {
    assert_eq!(a.dim(), b.dim(), "{what}");
    let same = |x: f32, y: f32| {
        x.to_bits() == y.to_bits()
            || (x.is_nan() && y.is_nan() && x.is_sign_negative() == y.is_sign_negative())
    };
    let differ = a
        .iter()
        .zip(b.iter())
        .enumerate()
        .find(|(_, (x, y))| !same(**x, **y));
    assert!(differ.is_none(), "{what}: first difference {differ:?}");
    let finite = a.iter().filter(|x| x.is_finite()).count();
    assert!(finite > 60_000, "{what}: only {finite} finite values");
}

#[test]
fn every_float16_widens_as_numpy_does() {
    let Some(dir) = files() else { return };
    let ours = float32(&dir.join("all_f16.npy"));
    let numpy = float32(&dir.join("all_f16_as_f32.npy"));
    same_bits(
        &ours,
        &numpy,
        "float16 -> float32 over all 65,536 bit patterns",
    );
}

#[test]
fn every_bfloat16_widens_as_torch_does() {
    let Some(dir) = files() else { return };
    let Scores::F32(ours) = load_scores(dir.join("all_bf16.safetensors"), Some("probs")).unwrap()
    else {
        panic!("bfloat16 must become float32")
    };
    let torch = float32(&dir.join("all_bf16_as_f32.npy"));
    same_bits(
        &ours,
        &torch,
        "bfloat16 -> float32 over all 65,536 bit patterns",
    );
}

#[test]
fn safetensors_float32_matches_float64_npy_within_float32_rounding() {
    let Some(dir) = files() else { return };
    let ours = metrics_json(&[&file(dir, "preds_f32.safetensors"), "--logits"]);
    assert_eq!(ours["meta"]["dtype"], "float32");
    assert_eq!(
        ours["meta"]["files"]["labels"],
        file(dir, "preds_f32.safetensors")
    );
    let wide = metrics_json(&[
        &file(dir, "logits_f64.npy"),
        "--labels",
        &file(dir, "labels.npy"),
        "--logits",
    ]);
    assert_eq!(wide["meta"]["dtype"], "float64");
    for metric in metrics() {
        let (a, b) = (ours["raw"][metric].as_f64(), wide["raw"][metric].as_f64());
        let (a, b) = (a.unwrap(), b.unwrap());
        // float32 probabilities are within 6e-8 relative of float64 ones; a
        // confidence moving across a bin edge would move the ECE by 1/600.
        assert!(
            (a - b).abs() <= 1e-6 * b.abs().max(1.0),
            "{metric}: {a} vs {b}"
        );
    }
    // The ranking metrics see the same order, the accuracy the same argmax.
    assert_eq!(ours["raw"]["accuracy"], wide["raw"]["accuracy"]);
}

#[test]
fn float32_probabilities_give_the_numbers_of_their_definitions() {
    let Some(dir) = files() else { return };
    let reference = reference(dir);
    let ours = metrics_json(&[
        &file(dir, "probs_f32.npy"),
        "--labels",
        &file(dir, "labels.npy"),
        "--probs",
    ]);
    assert_eq!(ours["meta"]["dtype"], "float32");
    // Both sides sum the same float64 values of the float32 entries, in other
    // orders: relative round-off of at most (600 rows x 10 classes) x
    // f64::EPSILON ~ 1.3e-12, doubled for the divisions and square roots. A
    // float32 accumulation would be off by ~1e-7, a moved bin by >= 1/600.
    let bar = 2.0 * 6000.0 * f64::EPSILON;
    let numpy = reference["numpy_f32"].as_object().unwrap();
    assert_eq!(numpy.len(), 10);
    for (metric, value) in numpy {
        let (a, b) = (
            ours["raw"][metric].as_f64().unwrap(),
            value.as_f64().unwrap(),
        );
        assert!(
            (a - b).abs() <= bar * b.abs().max(1.0),
            "{metric}: {a} vs numpy {b}"
        );
    }
}

#[test]
fn half_precision_inputs_equal_their_float32_values() {
    let Some(dir) = files() else { return };
    // float16 .npy probabilities (their rows sum to 1 within float16 rounding).
    let labels = file(dir, "labels.npy");
    let half = ["--labels", &labels, "--probs", "--tolerance", "0.01"];
    let f16 = metrics_json(&[&[file(dir, "probs_f16.npy").as_str()][..], &half].concat());
    let f32 = metrics_json(&[&[file(dir, "probs_f16_as_f32.npy").as_str()][..], &half].concat());
    assert_eq!(f16["raw"], f32["raw"]);
    assert_eq!(f16["meta"]["dtype"], "float32");
    // bfloat16 safetensors logits and torch's float32 of them.
    let bf16 = metrics_json(&[&file(dir, "preds_bf16.safetensors"), "--logits"]);
    let torch = metrics_json(&[
        &file(dir, "logits_bf16_as_f32.npy"),
        "--labels",
        &labels,
        "--logits",
    ]);
    assert_eq!(bf16["raw"], torch["raw"]);
}

#[test]
fn bootstrap_intervals_bracket_reproduce_and_match_the_package() {
    let Some(dir) = files() else { return };
    let preds = file(dir, "probs_f32.npy");
    let labels = file(dir, "labels.npy");
    let run = |seed: &str| {
        metrics_json(&[
            &preds,
            "--labels",
            &labels,
            "--probs",
            "--bootstrap",
            "300",
            "--confidence",
            "0.9",
            "--seed",
            seed,
        ])
    };
    let a = run("5");
    assert_eq!(
        a["meta"]["bootstrap"],
        serde_json::json!({"resamples": 300, "level": 0.9, "seed": 5})
    );
    let ci = &a["raw"]["ci"];
    for metric in metrics() {
        let value = a["raw"][metric].as_f64().unwrap();
        let interval = &ci[metric];
        assert_eq!(interval["estimate"].as_f64(), Some(value), "{metric}");
        let (lower, upper) = (
            interval["lower"].as_f64().unwrap(),
            interval["upper"].as_f64().unwrap(),
        );
        assert!(lower < upper, "{metric}: {interval}");
        // Means of per-row values bracket their estimate; binned errors are
        // biased upwards on resamples and need not.
        if [
            "accuracy",
            "nll",
            "brier",
            "mean_confidence",
            "mean_entropy",
        ]
        .contains(&metric)
        {
            assert!(lower <= value && value <= upper, "{metric}: {interval}");
        }
    }
    assert_eq!(ci["tce"], Value::Null);
    assert_eq!(run("5"), a, "the same seed gives the same intervals");
    assert_ne!(run("6")["raw"]["ci"], a["raw"]["ci"]);

    let reference = reference(dir);
    let Some(package) = reference.get("package_bootstrap") else {
        return csam_testkit::twin::skip("the csam_calib Python package is not in the venv");
    };
    for (metric, triple) in package.as_object().unwrap() {
        let want = serde_json::json!([
            ci[metric]["estimate"],
            ci[metric]["lower"],
            ci[metric]["upper"]
        ]);
        assert_eq!(&want, triple, "{metric}");
    }
}

#[test]
fn bootstrap_shows_intervals_in_the_table() {
    let Some(dir) = files() else { return };
    let out = csam(&[
        "metrics",
        &file(dir, "preds_f32.safetensors"),
        "--logits",
        "--bootstrap",
        "20",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("95% bootstrap BCa interval, 20 resamples, seed 0"),
        "{stdout}"
    );
    let accuracy = stdout.lines().find(|l| l.starts_with("accuracy")).unwrap();
    assert!(accuracy.contains("74.67% ["), "{stdout}");
}

#[test]
fn bad_inputs_give_one_line_errors() {
    let Some(dir) = files() else { return };
    let preds = file(dir, "preds_f32.safetensors");
    let cases: &[(&[&str], &[&str])] = &[
        (
            &[&file(dir, "no_labels.safetensors"), "--logits"],
            &[
                "no_labels.safetensors",
                "no array named 'labels'",
                "--labels names another file",
            ],
        ),
        (
            &[&file(dir, "float_labels.safetensors"), "--logits"],
            &["float_labels.safetensors", "labels must be integers"],
        ),
        (
            &[&file(dir, "one_d.safetensors"), "--logits"],
            &["one_d.safetensors", "tensor", "2-D", "(600,)"],
        ),
        (
            &[&file(dir, "garbage.safetensors"), "--logits"],
            &["garbage.safetensors", "not a valid .safetensors file"],
        ),
        (
            &[&preds, "--logits", "--array", "probs"],
            &["preds_f32.safetensors", "no array named 'probs'"],
        ),
        (
            &[&file(dir, "logits_f64.npy"), "--logits"],
            &["--labels FILE is required"],
        ),
        (
            &[&preds, "--logits", "--bootstrap", "10", "--confidence", "1"],
            &["--confidence must be in (0, 1)"],
        ),
        (
            &[
                &preds,
                "--logits",
                "--val-preds",
                &file(dir, "logits_f64.npy"),
            ],
            &["--val-preds needs --val-labels"],
        ),
    ];
    for (args, needles) in cases {
        let mut all = vec!["metrics"];
        all.extend_from_slice(args);
        assert_one_line_error(&csam(&all), needles);
    }
    // Usage errors (status 2): too few resamples, --confidence alone.
    for args in [
        &[&preds, "--logits", "--bootstrap", "1"][..],
        &[&preds, "--logits", "--confidence", "0.9"][..],
    ] {
        let mut all = vec!["metrics"];
        all.extend_from_slice(args);
        let out = csam(&all);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    }
}
