//! `cargo xtask fuzz`: runs every cargo-fuzz target (fuzz/) for a bounded
//! time; CI's smoke run, and the way to run the campaigns of docs/fuzzing.md.
//!
//! cargo-fuzz needs `-Z` flags; on the stable toolchain they are unlocked with
//! `RUSTC_BOOTSTRAP=1` (only for these builds, into fuzz/target). Each run
//! starts from a fresh scratch corpus plus the committed seeds, so the
//! repository's corpus is never grown; a crash leaves its input in
//! fuzz/artifacts/<target>/ and fails the task.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::check;

/// Every target, in the order they run: the csam-calib readers, then the
/// csam-train ones (which link libtorch, `--features train`).
pub const TARGETS: [&str; 9] = [
    "npy",
    "npz",
    "csv",
    "idx",
    "cifar",
    "npy_images",
    "svhn_mat",
    "safetensors",
    "config",
];

/// libFuzzer limits of every run: an input that makes the process hold more
/// than 2 GiB, or ask for more than 256 MiB in one allocation (a header
/// claiming 10^12 elements), is a crash.
const LIMITS: [&str; 3] = ["-rss_limit_mb=2048", "-malloc_limit_mb=256", "-timeout=10"];

/// What `cargo xtask fuzz` was asked for.
#[derive(Debug, PartialEq)]
pub struct FuzzOptions {
    /// Seconds each target runs.
    pub seconds: u64,
    /// cargo-fuzz sanitizer: `address` (ASan) or `none`.
    pub sanitizer: String,
    pub targets: Vec<String>,
}

impl FuzzOptions {
    /// `[--seconds N] [--sanitizer address|none] [TARGET...]`; no target
    /// means all of them.
    pub fn parse(args: &[String]) -> Result<FuzzOptions, String> {
        let mut options = FuzzOptions {
            seconds: 20,
            sanitizer: "address".into(),
            targets: Vec::new(),
        };
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--seconds" => {
                    let value = args.next().ok_or("--seconds needs a number")?;
                    options.seconds = value
                        .parse()
                        .ok()
                        .filter(|&s| s > 0)
                        .ok_or(format!("--seconds {value}: expected a positive integer"))?;
                }
                "--sanitizer" => {
                    let value = args.next().ok_or("--sanitizer needs address or none")?;
                    if value != "address" && value != "none" {
                        return Err(format!("--sanitizer {value}: expected address or none"));
                    }
                    options.sanitizer = value.clone();
                }
                target if TARGETS.contains(&target) => options.targets.push(target.into()),
                other => {
                    return Err(format!(
                        "fuzz: unknown argument '{other}'; targets: {}",
                        TARGETS.join(", ")
                    ))
                }
            }
        }
        if options.targets.is_empty() {
            options.targets = TARGETS.iter().map(|t| t.to_string()).collect();
        }
        Ok(options)
    }
}

/// Installs cargo-fuzz if missing, builds the targets once, then runs each
/// for `options.seconds`; prints the time of each step.
pub fn run(root: &Path, options: &FuzzOptions) -> Result<(), String> {
    crate::ensure_cargo_tool("fuzz", "cargo-fuzz", None)?;
    let total = Instant::now();
    let started = Instant::now();
    check(
        &mut cargo_fuzz(root, "build", &options.sanitizer),
        "cargo fuzz build",
    )?;
    eprintln!(
        "xtask: built the fuzz targets ({} sanitizer) in {:.0} s",
        options.sanitizer,
        started.elapsed().as_secs_f64()
    );
    for target in &options.targets {
        let scratch = root.join("fuzz/target/scratch-corpus").join(target);
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch)
            .map_err(|e| format!("creating {}: {e}", scratch.display()))?;
        let started = Instant::now();
        check(
            cargo_fuzz(root, "run", &options.sanitizer)
                .arg(target)
                .arg(&scratch)
                .arg(root.join("fuzz/corpus").join(target))
                .arg("--")
                .arg(format!("-max_total_time={}", options.seconds))
                .args(LIMITS),
            &format!("fuzz target {target} (its input is in fuzz/artifacts/{target}/)"),
        )?;
        eprintln!(
            "xtask: fuzz target {target}: no crash in {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    eprintln!(
        "xtask: fuzzing took {:.0} s in total",
        total.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo fuzz <subcommand>` with the features and sanitizer of every build.
fn cargo_fuzz(root: &Path, subcommand: &str, sanitizer: &str) -> Command {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.current_dir(root).env("RUSTC_BOOTSTRAP", "1").args([
        "fuzz",
        subcommand,
        "--features",
        "train",
        "--sanitizer",
        sanitizer,
    ]);
    command
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<FuzzOptions, String> {
        FuzzOptions::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn no_arguments_run_every_target_with_asan() {
        let options = parse(&[]).unwrap();
        assert_eq!(options.targets, TARGETS);
        assert_eq!(
            (options.seconds, options.sanitizer.as_str()),
            (20, "address")
        );
    }

    #[test]
    fn flags_and_targets_parse() {
        let options = parse(&["--seconds", "5", "idx", "--sanitizer", "none", "csv"]).unwrap();
        assert_eq!(
            options,
            FuzzOptions {
                seconds: 5,
                sanitizer: "none".into(),
                targets: vec!["idx".into(), "csv".into()],
            }
        );
    }

    #[test]
    fn bad_arguments_are_refused_with_their_value() {
        for (args, needle) in [
            (&["--seconds", "0"][..], "--seconds 0"),
            (&["--seconds"][..], "--seconds"),
            (&["--sanitizer", "memory"][..], "--sanitizer memory"),
            (&["tiff"][..], "'tiff'"),
        ] {
            let error = parse(args).unwrap_err();
            assert!(error.contains(needle), "{args:?}: {error}");
        }
    }
}
