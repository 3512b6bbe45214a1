//! What the tests of csam-data that need Python share: the project venv's
//! python, running a fixture script, and comparing a loaded part with the
//! `.npy` pair a script computed independently.

use std::path::{Path, PathBuf};

use csam_data::{load, Dataset, DatasetSpec};

/// The project venv's python (`<workspace>/.venv/bin/python`), or
/// `CSAM_PYTHON`; None, with a notice, when neither exists (the test then
/// skips).
pub fn python() -> Option<PathBuf> {
    let python = match std::env::var_os("CSAM_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python"),
    };
    if python.exists() {
        Some(python)
    } else {
        eprintln!("SKIPPED: no python at <workspace>/.venv/bin/python (set CSAM_PYTHON)");
        None
    }
}

/// Runs `tests/data_fixtures/<script> <out>` with `python`; panics with its
/// stderr if it fails.
pub fn run_fixture_script(python: &Path, script: &str, out: &Path) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data_fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(&script)
        .arg(out)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: {}",
        script.display(),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The test part of `npy:<dir>/expected_<part>_images.npy,<dir>/expected_<part>_labels.npy,<classes>`:
/// what a fixture script computed (images NHWC, read as CHW like any `npy:` source).
pub fn expected(dir: &Path, part: &str, classes: usize) -> Dataset {
    let spec = DatasetSpec::Npy {
        images: dir.join(format!("expected_{part}_images.npy")),
        labels: dir.join(format!("expected_{part}_labels.npy")),
        n_classes: Some(classes),
    };
    load(&spec).unwrap().test
}
