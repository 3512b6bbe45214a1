//! `--plan`, `--worker` and `--collect` of `csam compare`, `csam sweep` and
//! `csam grid`: an experiment's runs trained as independent jobs (see
//! `csam_lab::experiment::cluster`), with what the user is told.

use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use csam_lab::error::LabError;
use csam_lab::experiment::cluster::{self, PlanEntry, WorkerObserver};
use csam_lab::experiment::runs::PlannedRun;
use csam_train::spec::Runtime;

/// How long a worker waits before it tries the runs other workers hold again.
const POLL: Duration = Duration::from_secs(5);

/// Writes the plan of `unfinished` into `out` and says how to run it.
pub fn write(out: &Path, unfinished: &[PlannedRun], runtime: &Runtime) -> anyhow::Result<()> {
    let csam = std::env::current_exe().context("locating csam")?;
    let plan = cluster::write_plan(out, unfinished, &csam, runtime)
        .with_context(|| format!("planning into {}", out.display()))?;
    println!(
        "planned {} unfinished run(s) in {}:\n  {} (one csam train command per line)\n  {} \
         (sbatch it: one array task per run)\n\
         drain the plan with any number of workers: the same command with --worker \
         (and the same --out), on machines that share this file system;\n\
         then the same command with --collect builds the table and report",
        plan.runs,
        plan.dir.display(),
        plan.commands.display(),
        plan.slurm.display()
    );
    Ok(())
}

/// Prints one line per claimed, finished and failed run.
struct Lines;

impl WorkerObserver for Lines {
    fn claimed(&mut self, entry: &PlanEntry, resuming: bool) {
        let action = if resuming { "resuming" } else { "training" };
        println!("{}: {action} {}", entry.label, entry.dir.display());
    }

    fn finished(&mut self, entry: &PlanEntry) {
        println!("{}: finished", entry.label);
    }

    fn failed(&mut self, entry: &PlanEntry, error: &LabError) {
        println!("{}: failed: {error}", entry.label);
    }

    fn waiting(&mut self, busy: usize) {
        println!(
            "{busy} run(s) held by other workers; trying them again in {}s",
            POLL.as_secs()
        );
    }
}

/// Drains the plan of `out` with `runtime`; an error when a run failed here.
pub fn work(out: &Path, runtime: &Runtime) -> anyhow::Result<()> {
    let report = cluster::drain(out, runtime, POLL, &mut Lines)
        .with_context(|| format!("draining the plan of {}", out.display()))?;
    println!(
        "worker done: trained {} runs; every run of {} has finished or failed",
        report.trained.len(),
        out.display()
    );
    if !report.failed.is_empty() {
        let failed: Vec<String> = report
            .failed
            .iter()
            .map(|(label, error)| format!("{label}: {error}"))
            .collect();
        anyhow::bail!(
            "{} runs failed in this worker:\n  {}",
            failed.len(),
            failed.join("\n  ")
        );
    }
    Ok(())
}

/// Refuses `--collect` while runs of the experiment have not finished.
pub fn check_collectable(unfinished: &[PlannedRun]) -> anyhow::Result<()> {
    if unfinished.is_empty() {
        return Ok(());
    }
    let shown: Vec<&str> = unfinished
        .iter()
        .take(5)
        .map(|run| run.label.as_str())
        .collect();
    let n = unfinished.len();
    anyhow::bail!(
        "--collect: {n} unfinished run{} ({}{}); drain the plan with --worker first, \
         or leave out --collect to train them here",
        if n == 1 { "" } else { "s" },
        shown.join(", "),
        if n > shown.len() { ", ..." } else { "" }
    )
}
