//! What the PyTorch twin tests share: finding the project venv's python and
//! running a reference script over a case file.

#![allow(dead_code)] // each test binary uses its own part

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tch::Tensor;

/// The project venv's python (`<workspace>/.venv/bin/python`), or
/// `CSAM_PYTHON`; None when neither exists (the twin tests then skip with a
/// notice).
pub fn python() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CSAM_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    venv.exists().then_some(venv)
}

/// Runs `tests/fixtures/<script>` with `python` on `cases` (written as JSON
/// into `dir`, with `"inputs"` the safetensors file of `inputs` and `"out"`
/// the file the script writes) and returns the tensors it wrote, by name.
pub fn run_twin(
    python: &Path,
    script: &str,
    dir: &Path,
    inputs: &[(&str, &Tensor)],
    cases: serde_json::Value,
) -> HashMap<String, Tensor> {
    let (input_file, out_file) = (dir.join("inputs.safetensors"), dir.join("out.safetensors"));
    Tensor::write_safetensors(inputs, &input_file).unwrap();
    let spec = serde_json::json!({ "inputs": input_file, "out": out_file, "cases": cases });
    let spec_file = dir.join("cases.json");
    std::fs::write(&spec_file, spec.to_string()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(&spec_file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Tensor::read_safetensors(&out_file)
        .unwrap()
        .into_iter()
        .collect()
}

/// Asserts that `a` and `b` agree to 1e-12, relative to `max(|b|, 1)`.
pub fn close(a: &Tensor, b: &Tensor, what: &str) {
    let scale = b.abs().clamp_min(1.0);
    let error = ((a - b).abs() / scale).max().double_value(&[]);
    assert!(error < 1e-12, "{what}: relative error {error}\n{a}\n{b}");
}
