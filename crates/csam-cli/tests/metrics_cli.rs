//! `csam metrics` end to end: the real binary on real predictions (scikit-learn
//! logistic regression on the digits data, tests/fixtures/gen_real_predictions.py),
//! compared with reference values computed by NumPy / scikit-learn in that script.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use csam_calib::calibrators::registry::{CalibratorKind, FittedCalibrator};
use csam_calib::io::npy;
use serde_json::Value;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
        .display()
        .to_string()
}

fn io_fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../csam-calib/fixtures/io")
        .join(name)
        .display()
        .to_string()
}

fn expected() -> Value {
    serde_json::from_str(&std::fs::read_to_string(fixture("expected_metrics.json")).unwrap())
        .unwrap()
}

fn csam(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "csam failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// Test logits and labels, plus validation data: the common command line.
fn with_validation(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "metrics",
        &fixture("test_logits.npy"),
        "--labels",
        &fixture("test_labels.npy"),
        "--logits",
        "--val-preds",
        &fixture("val_logits.npy"),
        "--val-labels",
        &fixture("val_labels.npy"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

fn run(args: &[String]) -> Output {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    csam(&refs)
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

const METRICS: [&str; 12] = [
    "accuracy",
    "ece",
    "ece_l2",
    "mce",
    "adaece",
    "classwise_ece",
    "nll",
    "brier",
    "auroc_misclassification",
    "auroc_ovr",
    "mean_confidence",
    "mean_entropy",
];

#[test]
fn table_shows_raw_and_default_calibrators_in_percent() {
    let out = stdout(&run(&with_validation(&[])));
    let e = expected();
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].contains("450 test samples, 10 classes, 15 bins") && lines[0].contains("percent")
    );
    let header: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        header,
        ["metric", "raw", "temperature", "isotonic", "histogram"]
    );
    let row = |label: &str| -> Vec<String> {
        let line = lines
            .iter()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no row {label}"));
        line[label.len()..]
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    let percent = |v: &Value| format!("{:.2}%", 100.0 * v.as_f64().unwrap());
    assert_eq!(row("accuracy")[0], percent(&e["raw"]["accuracy"]));
    assert_eq!(row("ECE ")[0], percent(&e["raw"]["ece"]));
    assert_eq!(row("ECE ")[1], percent(&e["temperature"]["ece"]));
    assert_eq!(row("TCE")[0], percent(&e["temperature"]["ece"]));
    assert_eq!(
        row("NLL")[0],
        format!("{:.4}", e["raw"]["nll"].as_f64().unwrap())
    );
    assert_eq!(row("AUROC one-vs-rest")[0], percent(&e["raw"]["auroc_ovr"]));
    // The columns line up: every row ends where the header ends.
    let width = lines[1].len();
    assert!(lines[3..].iter().all(|l| l.len() == width), "{out}");
}

/// Every metric of `column` in the `--json` report agrees with the fixture's
/// reference value within `tol`.
fn assert_column_matches(report: &Value, e: &Value, column: &str, tol: f64) {
    for metric in METRICS {
        let (got, want) = (
            report[column][metric]
                .as_f64()
                .unwrap_or_else(|| panic!("report {column}.{metric}")),
            e[column][metric]
                .as_f64()
                .unwrap_or_else(|| panic!("fixture {column}.{metric}")),
        );
        assert!(close(got, want, tol), "{column}.{metric}: {got} vs {want}");
    }
}

#[test]
fn json_schema_and_values_match_scikit_learn() {
    let out = stdout(&run(&with_validation(&[
        "--json",
        "--calibrate",
        "temperature,isotonic",
    ])));
    let report: Value = serde_json::from_str(&out).unwrap();
    let e = expected();

    let meta = &report["meta"];
    assert_eq!(meta["n"], 450);
    assert_eq!(meta["k"], 10);
    assert_eq!(meta["n_val"], e["n_val"]);
    assert_eq!(meta["bins"], 15);
    assert_eq!(meta["edges"], "right-closed");
    assert_eq!(meta["adaptive"], "interpolated");
    assert_eq!(meta["input"], "logits");
    assert_eq!(meta["tce_objective"], "nll");
    assert_eq!(
        meta["calibrators"],
        serde_json::json!(["temperature", "isotonic"])
    );
    assert_eq!(meta["files"]["labels"], fixture("test_labels.npy"));
    let mut keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "csam_version",
            "isotonic",
            "meta",
            "raw",
            "schema",
            "temperature"
        ]
    );
    assert_eq!(report["schema"], "csam-metrics/1");

    for column in ["raw", "temperature", "isotonic"] {
        for metric in METRICS {
            let v = report[column][metric]
                .as_f64()
                .unwrap_or_else(|| panic!("{column}.{metric}"));
            let upper = match metric {
                "nll" | "mean_entropy" => f64::INFINITY,
                "brier" => 2.0,
                _ => 1.0,
            };
            assert!((0.0..=upper).contains(&v), "{column}.{metric} = {v}");
        }
    }
    assert!(report["temperature"]["tce"].is_null());

    // Raw metrics: the same float32 logits through scikit-learn / NumPy.
    // The float32 logits are softmaxed in float32 (each probability within
    // 6e-8 relative of the float64 reference's).
    assert_column_matches(&report, &e, "raw", 1e-6);
    // Temperature scaling: T fitted by SciPy's bounded minimiser on the validation NLL.
    assert_column_matches(&report, &e, "temperature", 1e-5);
    // Isotonic: scikit-learn's IsotonicRegression per class on the validation softmax.
    assert_column_matches(&report, &e, "isotonic", 1e-9);
    let tce = report["raw"]["tce"].as_f64().unwrap();
    assert!(
        close(tce, e["temperature"]["ece"].as_f64().unwrap(), 1e-5),
        "tce {tce}"
    );
}

#[test]
fn threads_give_the_metrics_of_one_thread() {
    let report = |extra: &[&str]| -> Value {
        serde_json::from_str(&stdout(&run(&with_validation(extra)))).unwrap()
    };
    let one = report(&["--json", "--calibrate", "temperature"]);
    for threads in ["2", "7"] {
        let many = report(&["--json", "--calibrate", "temperature", "--threads", threads]);
        assert_eq!(many["meta"], one["meta"]);
        for column in ["raw", "temperature"] {
            for metric in METRICS {
                let (a, b) = (&many[column][metric], &one[column][metric]);
                match metric {
                    // Sorted keys and integer counts: the same bits.
                    "adaece" | "auroc_misclassification" => assert_eq!(a, b, "{column}.{metric}"),
                    // Sums of row chunks: the last bits may move.
                    _ => assert!(
                        close(a.as_f64().unwrap(), b.as_f64().unwrap(), 1e-12),
                        "{column}.{metric}: {a} vs {b}"
                    ),
                }
            }
        }
    }
}

#[test]
fn probabilities_give_the_same_metrics_as_their_logits() {
    let out = stdout(&csam(&[
        "metrics",
        "--preds",
        &fixture("test_probs.npy"),
        "--labels",
        &fixture("test_labels.npy"),
        "--probs",
        "--json",
    ]));
    let report: Value = serde_json::from_str(&out).unwrap();
    let e = expected();
    assert_eq!(report["meta"]["input"], "probs");
    assert!(report["raw"]["tce"].is_null() && report["meta"]["n_val"].is_null());
    // The probabilities were saved as float32: agreement to float32 precision.
    for metric in ["accuracy", "ece", "nll", "brier", "auroc_ovr"] {
        let (got, want) = (
            report["raw"][metric].as_f64().unwrap(),
            e["raw"][metric].as_f64().unwrap(),
        );
        assert!(close(got, want, 1e-5), "{metric}: {got} vs {want}");
    }
}

#[test]
fn undefined_aurocs_are_null_not_a_failure() {
    // Every prediction right: misclassification AUROC has no negative to rank.
    let dir = tempfile::tempdir().unwrap();
    let logits =
        ndarray::Array2::from_shape_fn((30, 3), |(i, k)| if k == i % 3 { 4.0f32 } else { 0.0 });
    let labels: Vec<i64> = (0..30).map(|i| i % 3).collect();
    let (preds, truth) = (dir.path().join("p.npy"), dir.path().join("y.npy"));
    npy::write_f32(&preds, &logits.view()).unwrap();
    npy::write_i64(&truth, &labels).unwrap();
    let args = [
        "metrics",
        path_str(&preds),
        "--labels",
        path_str(&truth),
        "--logits",
    ];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let report: Value = serde_json::from_str(&stdout(&csam(&json_args))).unwrap();
    assert!(report["raw"]["auroc_misclassification"].is_null());
    assert_eq!(report["raw"]["accuracy"], 1.0);
    assert_eq!(report["raw"]["auroc_ovr"], 1.0);
    let table = stdout(&csam(&args));
    let row = table
        .lines()
        .find(|l| l.starts_with("AUROC misclassification"))
        .unwrap();
    assert_eq!(row.split_whitespace().last(), Some("-"));
}

#[test]
fn one_example_prints_no_negative_zero() {
    // A one-example set: its only sample falls in no interpolated AdaECE bin,
    // so AdaECE is 0; it was printed "-0.00%" and stored as -0.0.
    let dir = tempfile::tempdir().unwrap();
    let (preds, truth) = (dir.path().join("p.npy"), dir.path().join("y.npy"));
    npy::write_f32(&preds, &ndarray::array![[2.0f32, 0.0]].view()).unwrap();
    npy::write_i64(&truth, &[0]).unwrap();
    let args = [
        "metrics",
        path_str(&preds),
        "--labels",
        path_str(&truth),
        "--logits",
    ];
    let table = stdout(&csam(&args));
    assert!(!table.contains("-0.0"), "{table}");
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let json = stdout(&csam(&json_args));
    assert!(!json.contains("-0.0"), "{json}");
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["raw"]["adaece"], 0.0);
}

#[test]
fn plots_and_calibrators_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let plots = dir.path().join("plots");
    let cals = dir.path().join("nested/calibrators");
    let out = run(&with_validation(&[
        "--plot",
        plots.to_str().unwrap(),
        "--save-calibrators",
        cals.to_str().unwrap(),
    ]));
    stdout(&out);
    for column in ["raw", "temperature", "isotonic", "histogram"] {
        for figure in ["reliability", "confidence"] {
            let png_path = plots.join(format!("{column}-{figure}.png"));
            let decoder = png::Decoder::new(std::io::BufReader::new(
                std::fs::File::open(&png_path).unwrap(),
            ));
            let reader = decoder.read_info().unwrap();
            assert_eq!(
                (reader.info().width, reader.info().height),
                (800, 600),
                "{png_path:?}"
            );
            let svg =
                std::fs::read_to_string(plots.join(format!("{column}-{figure}.svg"))).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains(column) && svg.contains("Confidence"));
        }
    }
    assert_eq!(std::fs::read_dir(&plots).unwrap().count(), 16);

    let e = expected();
    for kind in ["temperature", "isotonic", "histogram"] {
        let json = std::fs::read_to_string(cals.join(format!("{kind}.json"))).unwrap();
        let fitted = FittedCalibrator::from_json(&json).unwrap();
        assert_eq!(fitted.kind(), kind.parse::<CalibratorKind>().unwrap());
    }
    let t: Value =
        serde_json::from_str(&std::fs::read_to_string(cals.join("temperature.json")).unwrap())
            .unwrap();
    let (got, want) = (
        t["temperature"].as_f64().unwrap(),
        e["temperature"]["temperature"].as_f64().unwrap(),
    );
    assert!(close(got / want, 1.0, 1e-4), "T = {got}, SciPy {want}");
}

/// Runs csam and checks it failed with a one-line message containing every
/// `needle`; returns the message.
fn fails_with(args: &[&str], needles: &[&str]) -> String {
    let out = csam(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "not one line: {stderr}"
    );
    assert!(stderr.starts_with("error: "), "{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{args:?}: {stderr:?} lacks {needle:?}"
        );
    }
    stderr.into_owned()
}

/// `csam metrics PREDS --labels LABELS KIND` fails naming every needle.
fn metrics_fails(preds: &str, labels: &str, kind: &str, needles: &[&str]) {
    fails_with(&["metrics", preds, "--labels", labels, kind], needles);
}

fn path_str(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn bad_inputs_fail_with_one_line_naming_the_file() {
    let labels = fixture("test_labels.npy");
    let logits = fixture("test_logits.npy");
    let val_labels = fixture("val_labels.npy");
    let dir = tempfile::tempdir().unwrap();
    let scratch = |name: &str| -> PathBuf { dir.path().join(name) };

    metrics_fails(
        "/no/such/preds.npy",
        &labels,
        "--logits",
        &["test predictions: /no/such/preds.npy: No such file"],
    );
    let missing = csam(&[
        "metrics",
        "/no/such/preds.npy",
        "--labels",
        &labels,
        "--logits",
    ]);
    let stderr = String::from_utf8(missing.stderr).unwrap();
    assert_eq!(stderr.matches("No such file").count(), 1, "{stderr}");
    // N mismatch: 449 validation labels against 450 test predictions.
    metrics_fails(
        &logits,
        &val_labels,
        "--logits",
        &["val_labels.npy", "449", "450"],
    );
    // Probabilities that are logits.
    metrics_fails(&logits, &labels, "--probs", &["test_logits.npy", "row 0"]);
    // Fortran order, labels of the wrong shape, unknown extension; float16
    // is read (the refusal is the row count of the 450 labels).
    let fortran = io_fixture("matrix_fortran.npy");
    metrics_fails(
        &fortran,
        &labels,
        "--logits",
        &["matrix_fortran.npy", "Fortran"],
    );
    let half = io_fixture("matrix_f2.npy");
    metrics_fails(
        &half,
        &labels,
        "--logits",
        &["matrix_f2.npy", "have 3 rows"],
    );
    metrics_fails(
        &logits,
        &logits,
        "--logits",
        &["test_logits.npy", "labels of shape"],
    );
    metrics_fails(
        "preds.pt",
        &labels,
        "--logits",
        &["preds.pt", "unknown file type"],
    );

    // Truncated copy of the test logits.
    let bytes = std::fs::read(&logits).unwrap();
    let cut = scratch("cut.npy");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let full_length = bytes.len().to_string();
    metrics_fails(
        path_str(&cut),
        &labels,
        "--logits",
        &["cut.npy", "truncated", &full_length],
    );
    // A row count that cannot agree with the labels is refused from the
    // headers, before any data is read (an .npz member may inflate a
    // thousandfold): the truncated copy against 449 labels names the count.
    let count = fails_with(
        &[
            "metrics",
            path_str(&cut),
            "--labels",
            &val_labels,
            "--logits",
        ],
        &["hold 449 labels", "have 450 rows"],
    );
    assert!(!count.contains("truncated"), "{count}");

    // NaN logit, label outside 0..K, K mismatch between validation and test.
    let mut m = ndarray::Array2::<f32>::zeros((450, 10));
    m[[7, 3]] = f32::NAN;
    let nan = scratch("nan.npy");
    npy::write_f32(&nan, &m.view()).unwrap();
    metrics_fails(
        path_str(&nan),
        &labels,
        "--logits",
        &["nan.npy", "row 7, column 3"],
    );
    let mut bad_labels = vec![0i64; 450];
    bad_labels[12] = 10;
    let bad = scratch("bad_labels.npy");
    npy::write_i64(&bad, &bad_labels).unwrap();
    metrics_fails(
        &logits,
        path_str(&bad),
        "--logits",
        &["bad_labels.npy", "label 10 at row 12"],
    );
    let nine = scratch("nine.npy");
    npy::write_f32(&nine, &ndarray::Array2::<f32>::zeros((449, 9)).view()).unwrap();
    fails_with(
        &[
            "metrics",
            &logits,
            "--labels",
            &labels,
            "--logits",
            "--val-preds",
            path_str(&nine),
            "--val-labels",
            &val_labels,
        ],
        &["nine.npy", "K = 9", "K = 10"],
    );

    // Empty CSV (header only) and negative probabilities in a CSV.
    let empty = scratch("empty.csv");
    std::fs::write(&empty, "p0,p1\n").unwrap();
    metrics_fails(
        path_str(&empty),
        &labels,
        "--probs",
        &["empty.csv", "empty"],
    );
    let negative = scratch("neg.csv");
    std::fs::write(&negative, "0.5,0.5\n1.2,-0.2\n").unwrap();
    let two = scratch("two.csv");
    std::fs::write(&two, "0\n1\n").unwrap();
    metrics_fails(
        path_str(&negative),
        path_str(&two),
        "--probs",
        &["neg.csv", "row 1"],
    );
}

#[test]
fn argument_errors_are_usage_errors() {
    let labels = fixture("test_labels.npy");
    let logits = fixture("test_logits.npy");
    for args in [
        vec!["metrics", &logits, "--labels", &labels],
        vec![
            "metrics", &logits, "--labels", &labels, "--logits", "--probs",
        ],
        vec![
            "metrics",
            &logits,
            "--labels",
            &labels,
            "--logits",
            "--calibrate",
            "temperature",
        ],
        vec![
            "metrics", &logits, "--labels", &labels, "--logits", "--bins", "0",
        ],
    ] {
        let out = csam(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
    let out = run(&with_validation(&["--calibrate", "temperature,bogus"]));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown calibrator 'bogus'"));
}
