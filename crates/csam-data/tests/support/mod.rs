//! What the twin tests of the corruptions share: finding the project venv's
//! python and running a reference script on raw arrays.

use std::path::{Path, PathBuf};

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

/// Runs `tests/shift_fixtures/<script> KIND IN OUT ARGS...` with `python`
/// on `input` (raw bytes, written to `IN` in `dir`) and returns the bytes it
/// wrote to `OUT`.
pub fn run_reference(
    python: &Path,
    script: &str,
    dir: &Path,
    kind: &str,
    input: &[u8],
    args: &[String],
) -> Vec<u8> {
    let (source, target) = (
        dir.join(format!("{kind}.in")),
        dir.join(format!("{kind}.out")),
    );
    std::fs::write(&source, input).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/shift_fixtures")
        .join(script);
    let output = std::process::Command::new(python)
        .arg(script)
        .arg(kind)
        .arg(&source)
        .arg(&target)
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{kind}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read(&target).unwrap()
}

/// `values` as raw little-endian float64.
pub fn f64_bytes(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Raw little-endian float64 back to values.
pub fn f64_values(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}
