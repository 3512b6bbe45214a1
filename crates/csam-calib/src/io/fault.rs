//! Fault injection for the crash-safety tests (crates/csam-cli/tests/crash_safety.rs),
//! read once from the environment by the atomic writer:
//!
//! * `CSAM_FAULT=kill:NAME` SIGKILLs the process after the temporary file of
//!   target NAME (a file name, e.g. `state.json`) is written and flushed,
//!   before the rename: the one moment a time-based kill cannot hit on
//!   purpose;
//! * `CSAM_FAULT=enospc:NAME` fails that write as a full disk would
//!   (`ENOSPC`), after which the temporary file is removed.
//!
//! Unset (always, outside tests) it costs one lookup per process.

use std::path::Path;
use std::sync::OnceLock;

#[derive(Debug, PartialEq)]
enum Fault {
    Kill(String),
    NoSpace(String),
}

fn parse(spec: &str) -> Option<Fault> {
    match spec.split_once(':')? {
        ("kill", name) => Some(Fault::Kill(name.to_string())),
        ("enospc", name) => Some(Fault::NoSpace(name.to_string())),
        _ => None,
    }
}

fn fault() -> Option<&'static Fault> {
    static FAULT: OnceLock<Option<Fault>> = OnceLock::new();
    FAULT
        .get_or_init(|| parse(&std::env::var("CSAM_FAULT").ok()?))
        .as_ref()
}

/// Applies the injected fault, if any, to the write of `path`.
pub(super) fn inject_fault(path: &Path) -> std::io::Result<()> {
    let name = path.file_name().map(|n| n.to_string_lossy());
    match (fault(), name) {
        (Some(Fault::Kill(target)), Some(name)) if *target == name => {
            // SAFETY: kill(2) on our own pid; no memory is involved.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
            Ok(())
        }
        (Some(Fault::NoSpace(target)), Some(name)) if *target == name => {
            Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        assert_eq!(
            parse("kill:state.json"),
            Some(Fault::Kill("state.json".into()))
        );
        assert_eq!(
            parse("enospc:weights-2.safetensors"),
            Some(Fault::NoSpace("weights-2.safetensors".into()))
        );
        assert_eq!(parse("crash:state.json"), None);
        assert_eq!(parse("kill"), None);
    }
}
