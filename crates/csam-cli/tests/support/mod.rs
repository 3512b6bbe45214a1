//! Helpers shared by the integration tests that run the `csam` binary.

use std::process::Output;

#[allow(dead_code)] // only the compare and sweep tests read reports
pub mod report;

/// A small valid training run: the bundled digits, an MLP, one CPU thread
/// (seconds per epoch); tests add `--out` and `--epochs`.
#[allow(dead_code)] // not every test binary trains
pub const DIGITS_MLP: &[&str] = &[
    "--data",
    "digits",
    "--model",
    "mlp",
    "--val-size",
    "300",
    "--batch-size",
    "64",
    "--lr",
    "0.05",
    "--device",
    "cpu",
    "--threads",
    "1",
    "--quiet",
];

/// Exit status, stdout and stderr of a finished `csam`, for assertion messages.
pub fn text(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Asserts that `output` is a refusal the way `csam` reports one: exit
/// status 1, one line on stderr, no panic, every needle in it. Returns it.
#[allow(dead_code)] // not every test binary checks refusals
pub fn assert_one_line_error(output: &Output, needles: &[&str]) -> String {
    assert_eq!(output.status.code(), Some(1), "{}", text(output));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(stderr.contains(needle), "{needle}: {stderr}");
    }
    stderr
}
