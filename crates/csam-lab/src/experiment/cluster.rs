//! Experiments on a cluster: an experiment's unfinished runs written as a
//! plan of independent `csam train` commands ([`write_plan`]), drained by
//! any number of workers on machines that share the file system
//! ([`drain`]), after which the experiment builds its table and report from
//! the finished runs.
//!
//! The plan lives in `OUT/plan/`:
//!
//! | file | content |
//! |---|---|
//! | `plan.json` | every run: its label, config file and run directory |
//! | `NNN.toml` | run `NNN`'s configuration (`csam train --config`) |
//! | `commands.txt` | one `csam train ... --resume` command per run, shell-quoted |
//! | `slurm.sh` | a Slurm job array, task `i` running line `i + 1` of `commands.txt` |
//! | `claims/NNN/` | run `NNN`'s claim, a lock held by the worker training it |
//!
//! A worker claims a run by taking the run-directory lock
//! ([`csam_train::train::lock`], `flock(2)`) of its claim folder, so at most
//! one worker trains a run at a time. The kernel releases the lock when its
//! holder dies, however it dies (on a network file system, when the server's
//! lease on the dead client's locks expires), and the next worker to try
//! takes the run over and resumes it from its last checkpoint, bit-identical
//! to an uninterrupted run. A run whose `summary.json` exists is finished
//! and never trained again.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::runs::PlannedRun;
use super::settings::read_json;
use crate::error::{LabError, Result};
use csam_train::spec::{RunSpec, Runtime};
use csam_train::train::atomic::write_atomic;
use csam_train::train::error::{Remedy, TrainError};
use csam_train::train::lock::{LockError, RunLock};
use csam_train::train::rundir::RunDir;
use csam_train::train::{self, RunOutcome, Silent, TrainRequest};

/// The plan's folder inside the experiment's directory.
pub const PLAN_DIR: &str = "plan";

/// One run of a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanEntry {
    /// Its name in progress lines (`[3/9] sam seed 0`).
    pub label: String,
    /// Its configuration, a file name in the plan's folder.
    pub config: String,
    /// Its run directory.
    pub dir: PathBuf,
}

/// `plan.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Version of csam that wrote the plan.
    pub csam_version: String,
    /// The runs, in the experiment's order.
    pub runs: Vec<PlanEntry>,
}

/// What [`write_plan`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WrittenPlan {
    /// The plan's folder.
    pub dir: PathBuf,
    /// Runs in the plan.
    pub runs: usize,
    /// The command list.
    pub commands: PathBuf,
    /// The Slurm job-array script.
    pub slurm: PathBuf,
}

/// Writes the plan of `runs` (an experiment's unfinished runs) into
/// `out/plan/`, with commands that call the csam binary `csam` with the
/// device and thread count of `runtime`. Refuses to replace an existing plan,
/// which workers may be draining. One process writes a plan at a time: it
/// holds the lock of `out/plan/` ([`RunLock`], released by the kernel if
/// the writer dies) from the check that no plan exists until `plan.json`,
/// written last, is renamed into place; a second writer meanwhile is
/// refused, and one after it finds the plan.
pub fn write_plan(
    out: &Path,
    runs: &[PlannedRun],
    csam: &Path,
    runtime: &Runtime,
) -> Result<WrittenPlan> {
    let dir = out.join(PLAN_DIR);
    let plan_file = dir.join("plan.json");
    std::fs::create_dir_all(&dir).map_err(TrainError::io("create", &dir))?;
    let _writing = RunLock::acquire(&dir).map_err(|error| match error {
        LockError::Busy { owner, .. } => TrainError::refused(
            format!(
                "{} is being written by another process ({}); refusing to write a second \
                 plan beside it",
                plan_file.display(),
                owner.map_or_else(
                    || "which has not recorded its pid yet".into(),
                    |o| o.to_string()
                )
            ),
            Remedy::MoveOrDelete,
        ),
        other => TrainError::from(other),
    })?;
    if plan_file.exists() {
        return Err(TrainError::refused(
            format!(
                "{} exists: workers may be draining it (remove {} to plan again)",
                plan_file.display(),
                dir.display()
            ),
            Remedy::MoveOrDelete,
        )
        .into());
    }
    let mut entries = Vec::with_capacity(runs.len());
    let mut commands = String::new();
    for (index, run) in runs.iter().enumerate() {
        let config = format!("{index:03}.toml");
        let config_path = absolute(&dir.join(&config))?;
        write_atomic(&config_path, run.spec.to_toml().as_bytes())?;
        let mut command = vec![
            csam.display().to_string(),
            "train".into(),
            "--config".into(),
            config_path.display().to_string(),
            "--out".into(),
            absolute(&run.dir)?.display().to_string(),
            "--resume".into(),
            "--quiet".into(),
        ];
        if let Some(device) = &runtime.device {
            command.extend(["--device".into(), device.clone()]);
        }
        if let Some(threads) = runtime.threads {
            command.extend(["--threads".into(), threads.to_string()]);
        }
        let quoted: Vec<String> = command.iter().map(|word| shell_quote(word)).collect();
        commands.push_str(&quoted.join(" "));
        commands.push('\n');
        entries.push(PlanEntry {
            label: run.label.clone(),
            config,
            dir: run.dir.clone(),
        });
    }
    let commands_path = dir.join("commands.txt");
    write_atomic(&commands_path, commands.as_bytes())?;
    let slurm_path = dir.join("slurm.sh");
    write_atomic(
        &slurm_path,
        slurm_script(&absolute(&commands_path)?, runs.len()).as_bytes(),
    )?;
    let plan = Plan {
        csam_version: env!("CARGO_PKG_VERSION").to_string(),
        runs: entries,
    };
    let json = serde_json::to_vec_pretty(&plan).map_err(|e| TrainError::Corrupt {
        path: plan_file.clone(),
        message: e.to_string(),
    })?;
    write_atomic(&plan_file, &json)?;
    Ok(WrittenPlan {
        dir,
        runs: runs.len(),
        commands: commands_path,
        slurm: slurm_path,
    })
}

/// A Slurm job array of `n` tasks, task `i` running line `i + 1` of
/// `commands` (one run per task; `sbatch` options such as the partition,
/// GPUs and time limit are the user's to add).
fn slurm_script(commands: &Path, n: usize) -> String {
    format!(
        "#!/usr/bin/env bash\n\
         # One csam train run per array task: sbatch slurm.sh (add your partition,\n\
         # GPUs and time limit). Every command resumes, so a task that is requeued\n\
         # or rerun continues from the run's last checkpoint.\n\
         #SBATCH --job-name=csam-plan\n\
         #SBATCH --array=0-{last}\n\
         set -euo pipefail\n\
         line=$(sed -n \"$((SLURM_ARRAY_TASK_ID + 1))p\" {commands})\n\
         eval \"$line\"\n",
        last = n.saturating_sub(1),
        commands = shell_quote(&commands.display().to_string()),
    )
}

/// `word` quoted for a POSIX shell: bare when it holds only safe
/// characters, else in single quotes (a quote inside as `'\''`).
fn shell_quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// `path` made absolute against the working directory, so that the plan's
/// commands run from anywhere.
fn absolute(path: &Path) -> Result<PathBuf> {
    Ok(std::path::absolute(path).map_err(TrainError::io("resolve", path))?)
}

/// Reads `out/plan/plan.json`.
fn read_plan(out: &Path) -> Result<Plan> {
    let path = out.join(PLAN_DIR).join("plan.json");
    if !path.exists() {
        return Err(LabError::NoPlan { path });
    }
    read_json(&path)
}

/// What a worker hears while it drains a plan.
pub trait WorkerObserver {
    /// It claimed `entry` and trains it (`resuming`: from a checkpoint).
    fn claimed(&mut self, entry: &PlanEntry, resuming: bool) {
        let _ = (entry, resuming);
    }
    /// `entry` finished in this worker.
    fn finished(&mut self, entry: &PlanEntry) {
        let _ = entry;
    }
    /// `entry` failed in this worker with `error` (it is not tried again).
    fn failed(&mut self, entry: &PlanEntry, error: &LabError) {
        let _ = (entry, error);
    }
    /// Every unclaimed run is done; `busy` runs are still claimed by other
    /// workers, whose claims are tried again after a pause.
    fn waiting(&mut self, busy: usize) {
        let _ = busy;
    }
}

/// What one worker did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DrainReport {
    /// The runs this worker finished, by label.
    pub trained: Vec<String>,
    /// The runs that failed in this worker: label and error.
    pub failed: Vec<(String, String)>,
}

/// Drains the plan of `out`: claims each unfinished run in turn, trains it
/// with `runtime` (resuming where a dead worker left it), and when only
/// runs claimed by other workers remain, tries them again every `poll`,
/// until every run has finished or failed here.
pub fn drain(
    out: &Path,
    runtime: &Runtime,
    poll: Duration,
    observer: &mut dyn WorkerObserver,
) -> Result<DrainReport> {
    let plan = read_plan(out)?;
    let dir = out.join(PLAN_DIR);
    let mut report = DrainReport::default();
    loop {
        let mut busy = 0;
        for (index, entry) in plan.runs.iter().enumerate() {
            let failed_here = report.failed.iter().any(|(label, _)| *label == entry.label);
            if failed_here || is_finished(&entry.dir) {
                continue;
            }
            let claim_dir = dir.join("claims").join(format!("{index:03}"));
            std::fs::create_dir_all(&claim_dir).map_err(TrainError::io("create", &claim_dir))?;
            let _claim = match RunLock::acquire(&claim_dir) {
                Ok(claim) => claim,
                Err(LockError::Busy { .. }) => {
                    busy += 1;
                    continue;
                }
                Err(e) => return Err(TrainError::from(e).into()),
            };
            // Another worker may have finished it between the check and the claim.
            if is_finished(&entry.dir) {
                continue;
            }
            observer.claimed(entry, entry.dir.join("config.toml").exists());
            match train_entry(&dir, entry, runtime) {
                Ok(()) => {
                    observer.finished(entry);
                    report.trained.push(entry.label.clone());
                }
                Err(error) => {
                    observer.failed(entry, &error);
                    report.failed.push((entry.label.clone(), error.to_string()));
                }
            }
        }
        if busy == 0 {
            return Ok(report);
        }
        observer.waiting(busy);
        std::thread::sleep(poll);
    }
}

/// Finished, or diverged: an outcome either way, which no worker retrains.
fn is_finished(run: &Path) -> bool {
    let run = RunDir::new(run);
    run.summary().exists() || run.diverged().exists()
}

/// Trains (or resumes) one claimed run of the plan in `dir`.
fn train_entry(dir: &Path, entry: &PlanEntry, runtime: &Runtime) -> Result<()> {
    let config = dir.join(&entry.config);
    let text = std::fs::read_to_string(&config).map_err(TrainError::io("read", &config))?;
    let spec = RunSpec::from_saved_toml(&text, &config.display().to_string())?;
    let request = TrainRequest {
        spec,
        runtime: runtime.clone(),
        out: entry.dir.clone(),
        resume: true,
        stop_after_epoch: None,
    };
    match train::run(&request, &mut Silent)? {
        RunOutcome::Finished(_) | RunOutcome::AlreadyFinished { .. } => Ok(()),
        RunOutcome::Stopped { epoch } => Err(LabError::Stopped {
            dir: entry.dir.clone(),
            epoch,
        }),
        // A single process (no replica) is every run's rank 0.
        RunOutcome::Replicated { rank } => Err(LabError::ReplicaRank {
            dir: entry.dir.clone(),
            rank,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_shell_only_when_needed() {
        assert_eq!(shell_quote("/a/b-c_1.toml"), "/a/b-c_1.toml");
        assert_eq!(shell_quote("my runs/x"), "'my runs/x'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn one_process_writes_a_plan_and_a_second_writer_is_refused() {
        let out = tempfile::tempdir().unwrap();
        let plan_dir = out.path().join(PLAN_DIR);
        std::fs::create_dir_all(&plan_dir).unwrap();
        let write = || write_plan(out.path(), &[], Path::new("csam"), &Runtime::default());
        // Another writer holds the plan's lock (as a concurrent process would).
        let other = RunLock::acquire(&plan_dir).unwrap();
        let error = write().unwrap_err().to_string();
        let plan_file = plan_dir.join("plan.json");
        let expected = format!(
            "{} is being written by another process (pid ",
            plan_file.display()
        );
        assert!(error.starts_with(&expected), "{error}");
        assert!(!plan_file.exists());
        drop(other);
        assert_eq!(write().unwrap().runs, 0);
        assert!(plan_file.is_file());
        // One that comes after finds the plan.
        let error = write().unwrap_err().to_string();
        assert!(
            error.contains("plan.json exists: workers may be draining it"),
            "{error}"
        );
    }

    #[test]
    fn the_slurm_array_has_one_task_per_run() {
        let script = slurm_script(Path::new("/p/commands.txt"), 12);
        assert!(script.contains("#SBATCH --array=0-11"), "{script}");
        assert!(script.contains("SLURM_ARRAY_TASK_ID + 1"), "{script}");
        assert!(script.contains("/p/commands.txt"), "{script}");
    }
}
