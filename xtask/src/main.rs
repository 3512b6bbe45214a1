//! `cargo xtask`: the one entry point that makes a fresh clone work.
//!
//! csam links libtorch through tch. libtorch ships inside the PyTorch wheel, so
//! set-up is: a project-local virtual environment `.venv` holding exactly
//! `torch==2.11.0` (the version torch-sys 0.24.0 is built against), and a link
//! `.venv/libtorch` to the wheel's `torch` directory, which `.cargo/config.toml`
//! names as `LIBTORCH`. The build script of `csam-train` then bakes an rpath to
//! that directory into every binary, so nothing needs `LD_LIBRARY_PATH`.
//!
//! ```text
//! cargo xtask setup            # create .venv and install PyTorch (+ test packages) if missing
//! cargo xtask test [ARGS]      # setup, then cargo test --workspace --no-fail-fast
//!                              # [ARGS] with CSAM_REQUIRE_TWINS=1 (a twin that finds
//!                              # no python fails); without ARGS the Python package
//!                              # is built first and its tests run after (`python`)
//! cargo xtask python           # build csam_calib (crates/csam-calib-py) into .venv
//!                              # with maturin, then run its pytest suite
//! cargo xtask wheel            # build csam_calib's wheel for distribution into
//!                              # target/wheels: stripped, manylinux2014 (glibc 2.17)
//! cargo xtask bench [ARGS]     # setup, then cargo bench --workspace [ARGS]
//! cargo xtask fuzz [--seconds N] [--sanitizer address|none] [TARGET...]
//!                              # setup, then run the cargo-fuzz targets N s each
//! cargo xtask deny             # cargo deny check licenses bans sources (deny.toml),
//!                              # installing cargo-deny if missing
//! cargo xtask <csam args>      # setup, then cargo run --release -p csam-cli -- <csam args>
//! ```

mod fuzz;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The PyTorch release whose libtorch tch 0.24.0 expects.
const TORCH_VERSION: &str = "2.11.0";

/// Python packages the tests use beside torch: the PyTorch-twin and benchmark
/// scripts read and write safetensors (whose torch flavour needs numpy), and
/// the twins of torchvision's and timm's models are their own (torchvision's
/// release paired with torch 2.11.0), TensorBoard's own reader reads back
/// the event files of the runs (crates/csam-cli/tests/tensorboard_cli.rs),
/// scipy and Pillow write the SVHN MAT-files and Tiny-ImageNet JPEGs that
/// csam-data's loaders are checked against (crates/csam-data/tests/data_svhn.rs,
/// data_tiny_imagenet.rs), and the image corruptions are checked against the
/// scipy.ndimage, Pillow and OpenCV calls of the CIFAR-10-C reference code
/// (crates/csam-data/tests/shift_corrupt_twins.rs).
const TEST_PACKAGES: [(&str, &str); 8] = [
    ("numpy", "2.4.6"),
    ("safetensors", "0.8.0"),
    ("torchvision", "0.26.0"),
    ("timm", "1.0.31"),
    ("tensorboard", "2.21.0"),
    ("scipy", "1.17.1"),
    ("pillow", "13.0.0"),
    ("opencv-python-headless", "5.0.0.93"),
];

/// What the Python package `csam_calib` (crates/csam-calib-py) needs to build
/// and test: maturin builds it, pytest runs its suite, which cross-checks it
/// against scikit-learn, torchmetrics and netcal.
const PYTHON_PACKAGES: [(&str, &str); 5] = [
    MATURIN,
    ("pytest", "9.2.0"),
    ("scikit-learn", "1.9.1"),
    ("torchmetrics", "1.9.0"),
    ("netcal", "1.4.0"),
];

/// The maturin that builds the Python package, for tests and for a wheel.
const MATURIN: (&str, &str) = ("maturin", "1.16.0");

/// What a distributable wheel of `csam_calib` needs beside maturin: zig, as
/// the linker that targets an old glibc from any build machine.
const WHEEL_PACKAGES: [(&str, &str); 1] = [("ziglang", "0.17.1")];

/// The oldest glibc Rust's std supports (2.17, manylinux2014): the wheel's
/// floor, so that it installs on every Linux that can run Rust programs.
const WHEEL_COMPATIBILITY: &str = "manylinux2014";

/// The Python package's crate and tests, relative to the workspace root.
const PYTHON_CRATE: &str = "crates/csam-calib-py";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &[String]) -> Result<ExitCode, String> {
    let root = workspace_root();
    let (task, rest) = match args.split_first() {
        Some((task, rest)) => (task.as_str(), rest),
        None => ("help", &[][..]),
    };
    match task {
        "help" | "--help" | "-h" => {
            println!("{}", usage());
            Ok(ExitCode::SUCCESS)
        }
        "setup" => {
            ensure_libtorch(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        "test" => {
            ensure_libtorch(&root)?;
            // The whole suite: the package first, since the CLI's tests compare
            // with it; every test binary runs and every failure is reported.
            let whole = rest.is_empty();
            if whole {
                build_python_package(&root)?;
            }
            let rust = cargo_with(
                &root,
                &["test", "--workspace", "--no-fail-fast"],
                rest,
                &[(REQUIRE_TWINS, "1")],
            )?;
            let python = match whole {
                true => python_tests(&root)?,
                false => ExitCode::SUCCESS,
            };
            Ok(
                match (rust == ExitCode::SUCCESS, python == ExitCode::SUCCESS) {
                    (true, true) => ExitCode::SUCCESS,
                    (false, _) => rust,
                    (true, false) => python,
                },
            )
        }
        "python" => {
            ensure_libtorch(&root)?;
            build_python_package(&root)?;
            python_tests(&root)
        }
        "wheel" => {
            ensure_libtorch(&root)?;
            build_wheel(&root)?;
            Ok(ExitCode::SUCCESS)
        }
        "fuzz" => {
            let options = fuzz::FuzzOptions::parse(rest)?;
            ensure_libtorch(&root)?;
            fuzz::run(&root, &options)?;
            Ok(ExitCode::SUCCESS)
        }
        "deny" => {
            // Licences, duplicate versions and sources (deny.toml); the
            // advisories check needs the RustSec database from GitHub.
            ensure_cargo_tool("deny", "cargo-deny", Some(CARGO_DENY_VERSION))?;
            cargo(
                &root,
                &["deny", "check", "licenses", "bans", "sources"],
                rest,
            )
        }
        "bench" => {
            ensure_libtorch(&root)?;
            cargo(&root, &["bench", "--workspace"], rest)
        }
        _ => {
            ensure_libtorch(&root)?;
            cargo(
                &root,
                &["run", "--release", "--quiet", "-p", "csam-cli", "--"],
                args,
            )
        }
    }
}

/// The cargo-deny that `cargo xtask deny` installs (its deny.toml schema).
const CARGO_DENY_VERSION: &str = "0.20.2";

fn usage() -> &'static str {
    "usage: cargo xtask setup | test [ARGS] | python | wheel | bench [ARGS] | fuzz [ARGS] | deny | <csam subcommand> [ARGS]\n\
     \n\
     setup   create .venv with torch==2.11.0 (libtorch) if it is missing\n\
     test    set up, then run the whole test suite (Rust, then the Python package's),\n\
     \x20       every test binary, failing where a PyTorch twin finds no python\n\
     python  set up, build the Python package csam_calib into .venv, run its tests\n\
     wheel   build csam_calib's wheel into target/wheels, stripped, for glibc 2.17 on\n\
     \x20       (manylinux2014; zig links it)\n\
     bench   set up, then run the benchmarks\n\
     deny    install cargo-deny if missing, check licences, duplicate versions and sources\n\
     fuzz    set up, then run every cargo-fuzz target for a bounded time:\n\
     \x20       [--seconds N (20)] [--sanitizer address|none (address)] [TARGET...]\n\
     other   set up, build csam in release mode and run it with these arguments,\n\
     \x20       e.g. `cargo xtask compare` or `cargo xtask metrics --help`"
}

fn workspace_root() -> PathBuf {
    // xtask/Cargo.toml lives one level below the workspace root.
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// Makes `.venv/libtorch` point at a PyTorch `TORCH_VERSION` installation,
/// installing it with pip when the venv or the right version is missing.
fn ensure_libtorch(root: &Path) -> Result<(), String> {
    let venv = root.join(".venv");
    let python = venv.join("bin").join("python");
    if !python.exists() {
        eprintln!("xtask: creating the project venv {}", venv.display());
        let python3 = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
        check(
            Command::new(&python3).args(["-m", "venv"]).arg(&venv),
            &format!("{python3} -m venv (is python3 with the venv module installed?)"),
        )?;
    }
    let wanted: Vec<(&str, &str)> = std::iter::once(("torch", TORCH_VERSION))
        .chain(TEST_PACKAGES)
        .collect();
    install_missing(&python, &wanted, "torch is about 5 GB, a few minutes")?;
    let now = installed_version(&python, "torch");
    if now.as_deref() != Some(TORCH_VERSION) {
        return Err(format!(
            "after pip install, torch reports version {now:?}, expected {TORCH_VERSION}"
        ));
    }
    let torch_dir = python_output(
        &python,
        "import os, torch; print(os.path.dirname(torch.__file__))",
    )
    .ok_or("could not locate the torch package inside .venv")?;
    link_libtorch(&venv.join("libtorch"), Path::new(torch_dir.trim()))
}

/// Installs into the venv of `python` every package of `wanted` whose
/// installed version differs; `note` tells how long it may take.
fn install_missing(python: &Path, wanted: &[(&str, &str)], note: &str) -> Result<(), String> {
    let missing: Vec<String> = wanted
        .iter()
        .filter(|(name, version)| installed_version(python, name).as_deref() != Some(*version))
        .map(|(name, version)| format!("{name}=={version}"))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    eprintln!(
        "xtask: installing {} into .venv ({note})",
        missing.join(" ")
    );
    check(
        Command::new(python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(&missing),
        "pip install",
    )
}

/// Set for the Rust tests by `cargo xtask test`, which has just created the
/// venv: a PyTorch twin that finds no python then fails instead of skipping
/// (crates/csam-testkit, `twin::REQUIRE_TWINS`).
const REQUIRE_TWINS: &str = "CSAM_REQUIRE_TWINS";

/// Builds the Python package into the project venv (an editable install:
/// the compiled module lands beside its Python code), with the packages its
/// build and tests need.
fn build_python_package(root: &Path) -> Result<(), String> {
    let venv = root.join(".venv");
    install_missing(
        &venv.join("bin").join("python"),
        &PYTHON_PACKAGES,
        "a minute",
    )?;
    check(
        Command::new(venv.join("bin").join("maturin"))
            .current_dir(root)
            .env("VIRTUAL_ENV", &venv)
            .args(["develop", "--release", "--quiet", "-m"])
            .arg(Path::new(PYTHON_CRATE).join("Cargo.toml")),
        "maturin develop (building the Python package csam_calib)",
    )
}

/// Builds the distributable wheel of `csam_calib` into `target/wheels`:
/// release, stripped of debug info, linked by zig against glibc 2.17 so that
/// its tag is [`WHEEL_COMPATIBILITY`] whatever this machine's glibc is
/// (maturin refuses a tag the binary's symbols do not meet).
fn build_wheel(root: &Path) -> Result<(), String> {
    let venv = root.join(".venv");
    let wanted: Vec<(&str, &str)> = std::iter::once(MATURIN).chain(WHEEL_PACKAGES).collect();
    install_missing(&venv.join("bin").join("python"), &wanted, "a minute")?;
    // maturin finds zig through `python -m ziglang`, the venv's python.
    let path = std::env::join_paths(
        std::iter::once(venv.join("bin")).chain(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        ),
    )
    .map_err(|e| format!("PATH: {e}"))?;
    check(
        Command::new(venv.join("bin").join("maturin"))
            .current_dir(root)
            .env("VIRTUAL_ENV", &venv)
            .env("PATH", path)
            .args(["build", "--release", "--strip", "--zig", "--compatibility"])
            .arg(WHEEL_COMPATIBILITY)
            .args(["--out", "target/wheels", "-m"])
            .arg(Path::new(PYTHON_CRATE).join("Cargo.toml")),
        "maturin build (the csam_calib wheel)",
    )
}

/// Runs the Python package's tests (built by [`build_python_package`]).
fn python_tests(root: &Path) -> Result<ExitCode, String> {
    let python = root.join(".venv").join("bin").join("python");
    let status = Command::new(&python)
        .current_dir(root)
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(Path::new(PYTHON_CRATE).join("tests"))
        .status()
        .map_err(|e| format!("could not start pytest: {e}"))?;
    Ok(match status.success() {
        true => ExitCode::SUCCESS,
        false => ExitCode::FAILURE,
    })
}

/// The installed version of distribution `name` in this interpreter, without a
/// local suffix such as torch's `+cu130`; `None` when it is not installed.
fn installed_version(python: &Path, name: &str) -> Option<String> {
    let code = format!("import importlib.metadata as m; print(m.version({name:?}))");
    let version = python_output(python, &code)?;
    Some(
        version
            .trim()
            .split('+')
            .next()
            .unwrap_or_default()
            .to_string(),
    )
}

fn python_output(python: &Path, code: &str) -> Option<String> {
    let output = Command::new(python).args(["-c", code]).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

fn link_libtorch(link: &Path, target: &Path) -> Result<(), String> {
    if std::fs::read_link(link).ok().as_deref() == Some(target) {
        return Ok(());
    }
    if link.symlink_metadata().is_ok() {
        std::fs::remove_file(link)
            .map_err(|e| format!("removing stale {}: {e}", link.display()))?;
    }
    std::os::unix::fs::symlink(target, link)
        .map_err(|e| format!("linking {} -> {}: {e}", link.display(), target.display()))
}

/// Makes `cargo <subcommand>` available: installs `package` (at `version`,
/// else the newest) with `cargo install --locked` when the subcommand does
/// not answer `--version`.
fn ensure_cargo_tool(subcommand: &str, package: &str, version: Option<&str>) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let installed = Command::new(&cargo)
        .args([subcommand, "--version"])
        .output()
        .is_ok_and(|output| output.status.success());
    if installed {
        return Ok(());
    }
    eprintln!("xtask: installing {package}");
    let mut install = Command::new(&cargo);
    install.args(["install", "--locked", package]);
    if let Some(version) = version {
        install.args(["--version", version]);
    }
    check(&mut install, &format!("cargo install --locked {package}"))
}

fn check(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("{what}: could not start: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed with {status}"))
    }
}

fn cargo(root: &Path, fixed: &[&str], extra: &[String]) -> Result<ExitCode, String> {
    cargo_with(root, fixed, extra, &[])
}

/// `cargo FIXED EXTRA` in `root` with the variables `env` set.
fn cargo_with(
    root: &Path,
    fixed: &[&str],
    extra: &[String],
    env: &[(&str, &str)],
) -> Result<ExitCode, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(fixed)
        .args(extra)
        .envs(env.iter().copied())
        .status()
        .map_err(|e| format!("could not start cargo: {e}"))?;
    Ok(match status.code() {
        Some(0) => ExitCode::SUCCESS,
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        None => ExitCode::FAILURE,
    })
}
