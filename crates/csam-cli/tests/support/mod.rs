//! Helpers shared by the integration tests that run the `csam` binary.

use std::process::Output;

#[allow(dead_code)] // only the shift and ensemble tests average probabilities
pub mod probabilities;
#[allow(dead_code)] // only the compare and sweep tests read reports
pub mod report;

/// A small valid training run: the bundled digits, an MLP, one CPU thread
/// (seconds per epoch); tests add `--out` and `--epochs`. With augmentation
/// (off in the default recipe), so that the runs cover its random crops and
/// their replay on resume.
#[allow(dead_code)] // not every test binary trains
pub const DIGITS_MLP: &[&str] = &[
    "--data",
    "digits",
    "--model",
    "mlp",
    "--augment",
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

/// Copies the run directory `from` (its files and `checkpoint/`) to `to`.
#[allow(dead_code)] // only the tests that damage a run copy one
pub fn copy_run(from: &std::path::Path, to: &std::path::Path) {
    for sub in ["", "checkpoint"] {
        std::fs::create_dir_all(to.join(sub)).unwrap();
        for entry in std::fs::read_dir(from.join(sub)).unwrap().flatten() {
            if entry.path().is_file() {
                std::fs::copy(entry.path(), to.join(sub).join(entry.file_name())).unwrap();
            }
        }
    }
}

/// Flips the lowest bit of the last byte of the file at `path` (inside a
/// safetensors file's data, an event file's last record).
#[allow(dead_code)] // only the tests that damage a run flip bytes
pub fn flip_last_byte(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(path, bytes).unwrap();
}

/// Runs the `csam` binary with `args` to the end.
#[allow(dead_code)] // not every test binary runs it this way
pub fn csam(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_csam"))
        .args(args)
        .output()
        .expect("the csam binary runs")
}

/// Asserts that `rerun`, an experiment run again over its directory,
/// retrains nothing: it succeeds, reports each of its `runs` runs reused,
/// starts none, and leaves `model` (one run's weights) untouched.
#[allow(dead_code)] // only the experiment tests rerun
pub fn assert_rerun_reuses(model: &std::path::Path, runs: usize, rerun: impl FnOnce() -> Output) {
    let modified = || std::fs::metadata(model).unwrap().modified().unwrap();
    let stamp = modified();
    let again = rerun();
    assert!(again.status.success(), "{}", text(&again));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(
        stdout.matches("reused finished run").count(),
        runs,
        "{stdout}"
    );
    assert!(!stdout.contains("training into"), "{stdout}");
    assert_eq!(modified(), stamp);
}

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
