//! The TensorBoard event files of `csam train` and `csam report
//! --tensorboard`, read back by the `tensorboard` package's own reader
//! (tests/fixtures/read_tensorboard.py, in the project venv): every number
//! TensorBoard plots equals the one in `metrics.jsonl` / `theory.jsonl`, at
//! the right step, once, also after a resume.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use support::{assert_one_line_error, csam, text, DIGITS_MLP};

/// Tag -> (step, value) as TensorBoard reads them.
type Scalars = BTreeMap<String, Vec<(i64, f64)>>;

/// The project venv's python with the `tensorboard` package.
fn python() -> Option<PathBuf> {
    csam_testkit::twin::python_with(&["tensorboard"])
}

/// Every scalar of the event files in `dir`, as TensorBoard reads them.
fn read_tensorboard(python: &Path, dir: &Path) -> Scalars {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/read_tensorboard.py");
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", text(&output));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The (step, value) series of the number at `pointer` in each line, as
/// TensorBoard stores it (a 32-bit float; true / false as 1 / 0).
fn series(lines: &[serde_json::Value], step: &str, pointer: &str) -> Vec<(i64, f64)> {
    lines
        .iter()
        .map(|line| {
            let value = match line.pointer(pointer).unwrap() {
                serde_json::Value::Bool(b) => f64::from(u8::from(*b)),
                number => number.as_f64().unwrap(),
            };
            (line[step].as_i64().unwrap(), f64::from(value as f32))
        })
        .collect()
}

/// Asserts that the event files of the run in `run` hold what its logs
/// hold: the named metrics per epoch, the theory quantities per step.
fn assert_matches_logs(python: &Path, run: &Path, epochs: i64) {
    let scalars = read_tensorboard(python, run);
    let metrics = lines(&run.join("metrics.jsonl"));
    assert_eq!(metrics.len() as i64, epochs);
    for (tag, pointer) in [
        ("lr", "/lr"),
        ("train/loss", "/train/loss"),
        ("train/accuracy", "/train/accuracy"),
        ("train/second_pass", "/train/second_pass"),
        ("val/ece", "/val/ece"),
        ("val/nll", "/val/nll"),
        ("val/accuracy", "/val/accuracy"),
        ("test/accuracy", "/test/accuracy"),
        ("test/ece", "/test/ece"),
        ("test/tce", "/test/tce"),
        ("seconds", "/seconds"),
        ("best", "/best"),
    ] {
        let got = scalars.get(tag).unwrap_or_else(|| panic!("no tag {tag}"));
        assert_eq!(got, &series(&metrics, "epoch", pointer), "{tag}");
    }
    let theory = lines(&run.join("theory.jsonl"));
    assert!(theory.len() as i64 > epochs, "{} steps", theory.len());
    for quantity in [
        "p_y",
        "p_y_tilde",
        "grad_norm",
        "bound",
        "entropy",
        "lemma2_holds",
    ] {
        let tag = format!("theory/{quantity}");
        let got = scalars.get(&tag).unwrap_or_else(|| panic!("no tag {tag}"));
        let expected = series(&theory, "global_step", &format!("/{quantity}"));
        assert_eq!(got, &expected, "{tag}");
    }
    assert!(!scalars.contains_key("epoch"), "the step is no scalar");
}

fn event_files(run: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(run)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .contains("tfevents")
        })
        .collect();
    files.sort();
    files
}

fn train(out: &Path, extra: &[&str]) {
    let out = out.to_str().unwrap();
    let mut args = vec![
        "train",
        "--out",
        out,
        "--optimizer",
        "sam",
        "--track-theory",
    ];
    args.extend_from_slice(DIGITS_MLP);
    args.extend_from_slice(extra);
    let output = csam(&args);
    assert!(output.status.success(), "{}", text(&output));
}

#[test]
fn a_trained_and_resumed_run_holds_every_epoch_and_step_once() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(&run, &["--epochs", "2", "--stop-after-epoch", "1"]);
    assert_matches_logs(&python, &run, 1);
    train(&run, &["--epochs", "2", "--resume"]);
    assert_eq!(event_files(&run).len(), 1);
    let name = event_files(&run)[0]
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let fields: Vec<&str> = name.split('.').collect();
    assert_eq!(fields[..3], ["events", "out", "tfevents"], "{name}");
    assert!(fields[3].len() == 10 && fields[3].bytes().all(|b| b.is_ascii_digit()));
    assert_matches_logs(&python, &run, 2);
}

/// The (step, value) points of `tag` in the event file of `run`, in file
/// order, as csam's own reader reads them: every record, also a step
/// written twice (which TensorBoard's reader would fold into one).
fn points(run: &Path, tag: &str) -> Vec<(i64, f32)> {
    let files = event_files(run);
    assert_eq!(files.len(), 1, "{files:?}");
    let bytes = std::fs::read(&files[0]).unwrap();
    let events = csam_train::tensorboard::read_events(&bytes).unwrap().events;
    events
        .iter()
        .flat_map(|event| {
            event
                .scalars()
                .iter()
                .filter(|scalar| scalar.tag == tag)
                .map(|scalar| (event.step, scalar.value))
        })
        .collect()
}

#[test]
fn the_training_loss_every_n_steps_continues_through_a_resume_once() {
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let every = ["--log-every-n-steps", "5"];
    train(
        &run,
        &[&["--epochs", "2", "--stop-after-epoch", "1"][..], &every].concat(),
    );
    let first = points(&run, "train/loss_step");
    train(&run, &[&["--epochs", "2", "--resume"][..], &every].concat());
    // SAM perturbs every step: theory.jsonl has one line per step, with
    // p_y = exp(-loss) of the step's batch at theta.
    let theory = lines(&run.join("theory.jsonl"));
    let p_y: BTreeMap<i64, f64> = theory
        .iter()
        .map(|line| {
            let step = line["global_step"].as_i64().unwrap();
            (step, line["p_y"].as_f64().unwrap())
        })
        .collect();
    let steps: Vec<i64> = (0..theory.len() as i64).step_by(5).collect();
    assert!(steps.len() > 4, "{steps:?}");
    let loss = points(&run, "train/loss_step");
    let at: Vec<i64> = loss.iter().map(|&(step, _)| step).collect();
    assert_eq!(at, steps, "every 5th global step from 0, each once");
    assert!(!first.is_empty() && loss[..first.len()] == first[..]);
    for &(step, value) in &loss {
        let expected = -p_y[&step].ln();
        assert!(
            (f64::from(value) - expected).abs() < 1e-5,
            "step {step}: {value} vs {expected}"
        );
    }
    let lr = points(&run, "lr_step");
    let lr_at: Vec<i64> = lr.iter().map(|&(step, _)| step).collect();
    assert_eq!(lr_at, steps);
    assert_eq!(lr[0].1, 0.05, "the peak lr at step 0");
    assert!(
        lr.windows(2).all(|w| w[1].1 < w[0].1),
        "cosine decay: {lr:?}"
    );
    if let Some(python) = python() {
        let scalars = read_tensorboard(&python, &run);
        let read: Vec<(i64, f64)> = loss.iter().map(|&(s, v)| (s, f64::from(v))).collect();
        assert_eq!(
            scalars["train/loss_step"], read,
            "TensorBoard reads the same points"
        );
    }
}

#[test]
fn report_writes_the_event_file_of_a_run_trained_without_one() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    train(&run, &["--epochs", "2", "--no-tensorboard"]);
    assert!(event_files(&run).is_empty());
    let dir_arg = dir.path().to_str().unwrap();
    let report = csam(&["report", "--tensorboard", dir_arg]);
    assert!(report.status.success(), "{}", text(&report));
    assert_eq!(event_files(&run).len(), 1);
    assert_matches_logs(&python, &run, 2);
    let again = csam(&["report", "--tensorboard", dir_arg]);
    assert_one_line_error(&again, &["already holds an event file", "--force"]);
    let forced = csam(&["report", "--tensorboard", "--force", run.to_str().unwrap()]);
    assert!(forced.status.success(), "{}", text(&forced));
    assert_eq!(event_files(&run).len(), 1);
    assert_matches_logs(&python, &run, 2);
}
