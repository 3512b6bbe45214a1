//! The python that runs the PyTorch twins, and the rule for when it is absent.

use std::path::{Path, PathBuf};

/// Set (to anything but empty) by `cargo xtask test`, which creates the venv
/// before it runs the tests: then a twin that finds no python fails instead of
/// skipping, since a skip could only hide a broken set-up.
pub const REQUIRE_TWINS: &str = "CSAM_REQUIRE_TWINS";

/// Whether this run forbids skipping a twin ([`REQUIRE_TWINS`] is set).
pub fn required() -> bool {
    std::env::var_os(REQUIRE_TWINS).is_some_and(|v| !v.is_empty())
}

/// The workspace's root (this crate lives in `crates/csam-testkit`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `CSAM_PYTHON`, else the project venv's `<workspace>/.venv/bin/python`;
/// None, after [`skip`], when neither exists.
pub fn python() -> Option<PathBuf> {
    let python = match std::env::var_os("CSAM_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => workspace_root().join(".venv/bin/python"),
    };
    if python.exists() {
        Some(python)
    } else {
        skip("no python at <workspace>/.venv/bin/python (set CSAM_PYTHON, or run `cargo xtask setup`)");
        None
    }
}

/// [`python`] when it can import every module of `modules`; None, after
/// [`skip`], when it cannot.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let python = python()?;
    let imports = format!("import {}", modules.join(", "));
    let importable = std::process::Command::new(&python)
        .args(["-c", &imports])
        .output()
        .is_ok_and(|o| o.status.success());
    if importable {
        Some(python)
    } else {
        skip(&format!(
            "{} cannot `{imports}` (`cargo xtask setup` installs them)",
            python.display()
        ));
        None
    }
}

/// Skips the calling test with a notice, or fails it under [`REQUIRE_TWINS`].
///
/// # Panics
/// When [`required`]: the venv was set up by the same command, so what is
/// missing is a broken set-up, not an optional part.
pub fn skip(why: &str) {
    assert!(
        !required(),
        "{why}: {REQUIRE_TWINS} is set (cargo xtask test), so a twin may not skip"
    );
    eprintln!("SKIPPED: {why}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_fails_when_twins_are_required_and_passes_otherwise() {
        // One test owns the variable, so no other test of this binary races it.
        std::env::remove_var(REQUIRE_TWINS);
        skip("a bare cargo test");
        std::env::set_var(REQUIRE_TWINS, "1");
        let failed = std::panic::catch_unwind(|| skip("under cargo xtask test"));
        std::env::remove_var(REQUIRE_TWINS);
        let message = failed.expect_err("a required twin skipped");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("may not skip"), "{text}");
    }
}
