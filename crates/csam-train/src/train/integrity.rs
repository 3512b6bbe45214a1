//! What `--resume` checks before it trusts a run directory, so that a
//! damaged or edited directory is refused instead of continued:
//!
//! - the checkpoint's files are the bytes the run wrote: their SHA-256, which
//!   `checkpoint/state.json` records when they are written ([`Record`]), is
//!   computed again;
//! - `config.toml` holds the settings the checkpoint was trained with (the
//!   record keeps `config.toml` as the run wrote it; a copy that only
//!   reformats it passes), and at least as many epochs as it has done;
//! - `metrics.jsonl` logs the checkpoint's epochs, one line each, in order
//!   (lines of later epochs, which a run killed before its checkpoint
//!   leaves, are allowed: the resume drops them);
//! - without `state.json`, a run that logged more than its first epoch lost
//!   its checkpoint: it is refused rather than started over.
//!
//! A directory that fails gets [`TrainError::Inconsistent`] before anything
//! is written into it. A checkpoint written before csam kept the record
//! has none: its files and settings go unchecked (the run says so with
//! [`RunNotice::Unchecked`]), its log and epochs are checked all the same,
//! and its next checkpoint records them.

use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::checkpoint::{self, Record};
use super::error::{Result, TrainError};
use super::metrics_log::MetricsLog;
use super::notice::{NoCheckpoint, RunNotice};
use super::rundir::RunDir;
use crate::spec::RunSpec;

/// How a run file disagrees with the checkpoint (the file is named beside
/// it, in [`TrainError::Inconsistent`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inconsistency {
    /// A checkpoint file whose SHA-256 is not the one recorded when it was
    /// written.
    Checksum,
    /// A file the checkpoint of epoch `done` needs is missing.
    Missing { done: usize },
    /// `config.toml` holds other settings than the checkpoint was trained
    /// with: each change as `key old -> new` (or the key alone).
    SpecChanged { done: usize, changes: Vec<String> },
    /// `config.toml` sets fewer epochs than the checkpoint has done.
    FewerEpochs { epochs: usize, done: usize },
    /// `metrics.jsonl` logs fewer epochs than the checkpoint has done.
    LogShort { logged: usize, done: usize },
    /// Line `line` of `metrics.jsonl` logs `epoch` where epoch `expected`
    /// belongs (a repeated line, an edited epoch number).
    LogOrder {
        line: usize,
        epoch: usize,
        expected: usize,
    },
    /// `state.json` is missing though the run got past its first epoch:
    /// `logged` epochs in `metrics.jsonl`, files of epoch `checkpointed` in
    /// `checkpoint/`.
    StateMissing { logged: usize, checkpointed: usize },
}

/// "1 epoch", "2 epochs".
fn epochs(n: usize) -> String {
    match n {
        1 => "1 epoch".to_string(),
        n => format!("{n} epochs"),
    }
}

impl std::fmt::Display for Inconsistency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const RESTORE: &str =
            "a resumed run continues with the settings it started with: restore them";
        match self {
            Inconsistency::Checksum => write!(
                f,
                "is not the file the run wrote (its SHA-256 differs from the one \
                 checkpoint/state.json recorded): it was changed or damaged"
            ),
            Inconsistency::Missing { done } => write!(
                f,
                "is missing, though the checkpoint has {} done",
                epochs(*done)
            ),
            Inconsistency::SpecChanged { done, changes } => write!(
                f,
                "was changed after the checkpoint of epoch {done} was written ({}); {RESTORE}",
                changes.join(", ")
            ),
            Inconsistency::FewerEpochs { epochs: set, done } => write!(
                f,
                "sets epochs = {set}, fewer than the {} the checkpoint has done; {RESTORE}",
                epochs(*done)
            ),
            Inconsistency::LogShort { logged: 0, done } => write!(
                f,
                "logs no epoch, though the checkpoint has {} done",
                epochs(*done)
            ),
            Inconsistency::LogShort { logged, done } => write!(
                f,
                "logs {}, though the checkpoint has {} done",
                epochs(*logged),
                epochs(*done)
            ),
            Inconsistency::LogOrder {
                line,
                epoch,
                expected,
            } => write!(
                f,
                "has epoch {epoch} on line {line}, where epoch {expected} belongs (one line \
                 per epoch, in order)"
            ),
            Inconsistency::StateMissing {
                logged,
                checkpointed,
            } => {
                let evidence = match logged >= checkpointed {
                    true => format!("metrics.jsonl logs {}", epochs(*logged)),
                    false => format!("checkpoint/ holds the files of epoch {checkpointed}"),
                };
                write!(
                    f,
                    "is missing, though {evidence}: the checkpoint was removed, so the run \
                     cannot continue, and starting it over would discard those epochs; choose \
                     another directory, or delete this one"
                )
            }
        }
    }
}

/// The SHA-256 of the file at `path`, as lowercase hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file = std::fs::File::open(path).map_err(TrainError::io("read", path))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let read = file
            .read(&mut buffer)
            .map_err(TrainError::io("read", path))?;
        if read == 0 {
            break;
        }
        hasher.update(&buffer[..read]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}

fn inconsistent(path: PathBuf, problem: Inconsistency) -> TrainError {
    TrainError::Inconsistent { path, problem }
}

/// Checks the run directory of an interrupted run against its checkpoint
/// (see the module doc) without writing anything. Returns a notice when the
/// checkpoint predates the record, so that its files and settings were not
/// checked.
pub fn check_resume(run: &RunDir) -> Result<Option<RunNotice>> {
    let Some((state, record)) = checkpoint::read_state(run)? else {
        // RunDir::check, under the run's lock, plans a resume only where
        // state.json exists: there is no checkpoint to check.
        return Ok(None);
    };
    let done = state.epochs_done;
    check_spec(run, &record, done)?;
    check_log(&MetricsLog::new(run.metrics_log()), done)?;
    check_files(run, &record, done)?;
    Ok((record == Record::default()).then(|| RunNotice::Unchecked {
        dir: run.root().to_path_buf(),
    }))
}

/// `config.toml` against the epochs done and the recorded settings.
fn check_spec(run: &RunDir, record: &Record, done: usize) -> Result<()> {
    let path = run.config();
    let saved = run.saved_spec()?;
    if saved.epochs < done {
        let problem = Inconsistency::FewerEpochs {
            epochs: saved.epochs,
            done,
        };
        return Err(inconsistent(path, problem));
    }
    let Some(recorded) = &record.spec else {
        return Ok(());
    };
    let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
    if text == *recorded {
        return Ok(());
    }
    let state = checkpoint::state_path(run);
    let trained = RunSpec::from_saved_toml(recorded, &state.display().to_string())?;
    let changes = changes(&saved, &trained);
    match changes.is_empty() {
        true => Ok(()),
        false => Err(inconsistent(
            path,
            Inconsistency::SpecChanged { done, changes },
        )),
    }
}

/// The settings in which `now` differs from `trained`, each as `key old ->
/// new` where both sides have the key as a flat key, as the key alone
/// otherwise.
fn changes(now: &RunSpec, trained: &RunSpec) -> Vec<String> {
    let (new, old) = (now.to_flat(), trained.to_flat());
    now.differences(trained)
        .into_iter()
        .map(|key| match (old.get(&key), new.get(&key)) {
            (Some(old), Some(new)) => format!("{key} {old} -> {new}"),
            _ => key,
        })
        .collect()
}

/// The log holds epochs 1, 2, ... in order, at least up to `done`.
fn check_log(log: &MetricsLog, done: usize) -> Result<()> {
    let path = log.path().to_path_buf();
    if !path.exists() {
        return Err(inconsistent(path, Inconsistency::Missing { done }));
    }
    let logged = log.epochs()?;
    for (index, &(line, epoch)) in logged.iter().enumerate() {
        if epoch != index + 1 {
            let problem = Inconsistency::LogOrder {
                line,
                epoch,
                expected: index + 1,
            };
            return Err(inconsistent(path, problem));
        }
    }
    match logged.len() < done {
        true => Err(inconsistent(
            path,
            Inconsistency::LogShort {
                logged: logged.len(),
                done,
            },
        )),
        false => Ok(()),
    }
}

/// The checkpoint's files exist and, where recorded, hash to their record.
fn check_files(run: &RunDir, record: &Record, done: usize) -> Result<()> {
    for path in checkpoint::files(run, done) {
        if !path.is_file() {
            return Err(inconsistent(path, Inconsistency::Missing { done }));
        }
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if let Some(recorded) = record.sha256.get(name.as_ref()) {
            if sha256_file(&path)? != *recorded {
                return Err(inconsistent(path, Inconsistency::Checksum));
            }
        }
    }
    Ok(())
}

/// Why an unfinished run without `checkpoint/state.json` has nothing to
/// resume: no epoch was trained, or only the first (whose checkpoint a
/// kill can interrupt). A run that got further lost its checkpoint and is
/// refused ([`Inconsistency::StateMissing`]): starting it over would
/// discard its epochs.
pub fn without_checkpoint(run: &RunDir) -> Result<NoCheckpoint> {
    let logged = MetricsLog::new(run.metrics_log())
        .epochs()?
        .iter()
        .map(|&(_, epoch)| epoch)
        .max()
        .unwrap_or(0);
    let checkpointed = std::fs::read_dir(run.checkpoint_dir())
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| checkpoint::file_epoch(&entry.file_name().to_string_lossy()))
        .max()
        .unwrap_or(0);
    match logged.max(checkpointed) {
        0 => Ok(NoCheckpoint::NoEpochFinished),
        1 => Ok(NoCheckpoint::NotCheckpointed),
        _ => Err(inconsistent(
            checkpoint::state_path(run),
            Inconsistency::StateMissing {
                logged,
                checkpointed,
            },
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::train::metrics_log::MetricsLog;

    fn log_of(lines: &str) -> (tempfile::TempDir, MetricsLog) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        std::fs::write(&path, lines).unwrap();
        (dir, MetricsLog::new(path))
    }

    fn problem(result: Result<()>) -> Inconsistency {
        match result {
            Err(TrainError::Inconsistent { problem, .. }) => problem,
            other => panic!("expected an inconsistency, got {other:?}"),
        }
    }

    #[test]
    fn a_log_of_the_checkpoints_epochs_and_one_uncommitted_passes() {
        let (_dir, log) = log_of("{\"epoch\": 1}\n\n{\"epoch\": 2}\n{\"epoch\": 3}\n");
        check_log(&log, 2).unwrap();
        check_log(&log, 3).unwrap();
    }

    #[test]
    fn repeated_renumbered_and_missing_lines_are_named() {
        let (_dir, log) = log_of("{\"epoch\": 1}\n{\"epoch\": 2}\n{\"epoch\": 2}\n");
        let repeated = problem(check_log(&log, 2));
        assert_eq!(
            repeated,
            Inconsistency::LogOrder {
                line: 3,
                epoch: 2,
                expected: 3
            }
        );
        assert!(repeated
            .to_string()
            .starts_with("has epoch 2 on line 3, where epoch 3 belongs"));
        let (_dir, log) = log_of("{\"epoch\": 1}\n{\"epoch\": 5}\n");
        assert!(matches!(
            problem(check_log(&log, 2)),
            Inconsistency::LogOrder { epoch: 5, .. }
        ));
        let (_dir, log) = log_of("");
        assert_eq!(
            problem(check_log(&log, 2)).to_string(),
            "logs no epoch, though the checkpoint has 2 epochs done"
        );
        let (_dir, log) = log_of("{\"epoch\": 1}\n");
        assert_eq!(
            problem(check_log(&log, 2)).to_string(),
            "logs 1 epoch, though the checkpoint has 2 epochs done"
        );
        let gone = MetricsLog::new(_dir.path().join("gone.jsonl"));
        assert_eq!(
            problem(check_log(&gone, 1)),
            Inconsistency::Missing { done: 1 }
        );
    }

    #[test]
    fn sha256_of_a_file_is_the_known_digest() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, "abc").unwrap();
        assert_eq!(
            sha256_file(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn changes_name_the_key_with_both_values() {
        let trained = RunSpec::new(crate::spec::DataSpec::new(csam_data::DatasetSpec::Digits));
        let mut now = trained.clone();
        now.optim.lr = 0.5;
        now.epochs = 3;
        let changes = changes(&now, &trained);
        assert!(
            changes.contains(&"lr 0.1 -> 0.5".to_string()),
            "{changes:?}"
        );
        assert!(
            changes.contains(&"epochs 200 -> 3".to_string()),
            "{changes:?}"
        );
    }

    #[test]
    fn without_state_json_only_the_first_epoch_may_be_trained_again() {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        assert_eq!(
            without_checkpoint(&run).unwrap(),
            NoCheckpoint::NoEpochFinished
        );
        std::fs::create_dir(run.checkpoint_dir()).unwrap();
        std::fs::write(run.checkpoint_dir().join("weights-1.safetensors"), "x").unwrap();
        assert_eq!(
            without_checkpoint(&run).unwrap(),
            NoCheckpoint::NotCheckpointed
        );
        std::fs::write(run.metrics_log(), "{\"epoch\": 1}\n{\"epoch\": 2}\n").unwrap();
        let err = without_checkpoint(&run).unwrap_err().to_string();
        assert!(
            err.contains("state.json is missing, though metrics.jsonl logs 2 epochs"),
            "{err}"
        );
        std::fs::write(run.metrics_log(), "").unwrap();
        std::fs::write(run.checkpoint_dir().join("weights-3.safetensors"), "x").unwrap();
        let err = without_checkpoint(&run).unwrap_err().to_string();
        assert!(
            err.contains("though checkpoint/ holds the files of epoch 3"),
            "{err}"
        );
    }
}
