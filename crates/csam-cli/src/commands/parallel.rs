//! `--jobs N` of `csam compare` and `csam sweep`: the runs of an experiment
//! that have not finished, trained N at a time, each by its own `csam train`
//! process. The experiment then finds them finished and reuses them, so its
//! results are those of training the runs one after the other in-process: a
//! run's numbers depend on its spec, seed, device and thread count only, and
//! each process is its own libtorch with its own random stream. A run that
//! diverges leaves its record (`diverged.json`) and is no failure: the
//! others train on, and the experiment reads the record back. Neither is a
//! run that another csam process holds (a second experiment on the same
//! directory): the experiment waits for that process after the others.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use csam_lab::experiment::runs::PlannedRun;
use csam_train::spec::Runtime;
use csam_train::train::lock::{LockError, RunLock};
use csam_train::train::rundir::{RunDir, RunState};
use csam_train::train::Divergence;

use super::child::die_with_parent;
use crate::progress::{minutes, remaining_at};

/// How often the running processes are polled.
const POLL: Duration = Duration::from_millis(200);

/// One `csam train` process and the files it was given.
struct Job {
    label: String,
    /// The run directory.
    dir: PathBuf,
    /// Its [`run_cost`].
    cost: f64,
    child: Child,
    started: Instant,
    spec_file: PathBuf,
    log_file: PathBuf,
}

impl Job {
    /// Starts `csam train` on `run` with `runtime`, quiet, its spec in a
    /// temporary file in `scratch` and its stderr in another (read if it
    /// fails). The process dies with this one (see [`die_with_parent`]).
    fn start(
        run: &PlannedRun,
        index: usize,
        runtime: &Runtime,
        scratch: &Path,
    ) -> anyhow::Result<Job> {
        let stem = format!("{}-{index}", std::process::id());
        let spec_file = scratch.join(format!("{stem}.toml"));
        let log_file = scratch.join(format!("{stem}.log"));
        std::fs::write(&spec_file, run.spec.to_toml())
            .with_context(|| format!("writing {}", spec_file.display()))?;
        let log =
            File::create(&log_file).with_context(|| format!("creating {}", log_file.display()))?;
        // A run directory with its config.toml is an interrupted run.
        let action = match run.dir.join("config.toml").exists() {
            true => "resuming into",
            false => "training into",
        };
        let mut command = Command::new(std::env::current_exe().context("locating csam")?);
        command
            .arg("train")
            .arg("--config")
            .arg(&spec_file)
            .arg("--out")
            .arg(&run.dir)
            .args(["--resume", "--quiet"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(threads) = runtime.threads {
            command.args(["--threads", &threads.to_string()]);
        }
        if let Some(workers) = runtime.workers {
            command.args(["--workers", &workers.to_string()]);
        }
        if let Some(device) = &runtime.device {
            command.args(["--device", device]);
        }
        command.arg(match runtime.tensorboard {
            true => "--tensorboard",
            false => "--no-tensorboard",
        });
        let child = die_with_parent(&mut command)
            .spawn()
            .with_context(|| format!("starting csam train for {}", run.label))?;
        println!(
            "{}: {action} {} (process {})",
            run.label,
            run.dir.display(),
            child.id()
        );
        Ok(Job {
            label: run.label.clone(),
            dir: run.dir.clone(),
            cost: run_cost(run),
            child,
            started: Instant::now(),
            spec_file,
            log_file,
        })
    }

    /// The outcome once the process has exited: Ok(None) while it runs.
    fn poll(&mut self) -> anyhow::Result<Option<Ended>> {
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        let took = self.started.elapsed().as_secs_f64();
        let outcome = match status.success() {
            true => {
                println!("{}: trained in {took:.1}s", self.label);
                Ended::Trained
            }
            // A run that diverged wrote its record before it exited.
            false => match Divergence::read(&RunDir::new(&self.dir))? {
                Some(divergence) => {
                    println!("{}: {divergence} after {took:.1}s", self.label);
                    Ended::Diverged
                }
                // Its process has exited, so a holder of the run's lock is
                // another experiment's: this one waits for it at the end.
                // A run that is finished now was trained by that holder in
                // the meantime (the process was refused its lock), and is
                // read back at the end.
                None => match RunLock::check_free(&self.dir) {
                    Err(LockError::Busy { owner, .. }) => {
                        let holder = owner.map_or_else(
                            || "another csam process".to_string(),
                            |owner| format!("another csam process ({owner})"),
                        );
                        println!(
                            "{}: {holder} trains it; waiting for it after the other runs",
                            self.label
                        );
                        Ended::HeldElsewhere
                    }
                    Ok(()) if RunDir::new(&self.dir).state()? == RunState::Finished => {
                        println!("{}: another csam process trained it", self.label);
                        Ended::HeldElsewhere
                    }
                    _ => Ended::Failed(format!(
                        "{} failed ({status}): {}",
                        self.label,
                        last_line(&self.log_file)
                    )),
                },
            },
        };
        remove_quietly(&self.spec_file);
        remove_quietly(&self.log_file);
        Ok(Some(outcome))
    }
}

/// How a `csam train` process ended.
enum Ended {
    Trained,
    /// Its run diverged and left its record.
    Diverged,
    /// Another process (a second experiment on the same directory) holds
    /// the run: the experiment waits for it (see `runs::train_or_reuse`).
    HeldElsewhere,
    /// Anything else, in words.
    Failed(String),
}

/// Where the processes' spec and log files live while they run: a hidden
/// folder of the experiment directory, not the system's temporary
/// directory, so that what a killed experiment leaves stays with it.
const SCRATCH: &str = ".jobs";

/// Trains `runs`, at most `jobs` at a time, each in its own `csam train`
/// process with `runtime`, the longest first (epochs times passes per step)
/// so that no core idles while one long run finishes last. A run that
/// diverges counts as done (its record is its outcome). After a failure
/// no new run starts; the running ones finish (so that their work is kept),
/// then the first failure is the error. The processes' files live in
/// `out/.jobs/`, removed once they are done.
pub fn train_in_processes(
    runs: &[PlannedRun],
    runtime: &Runtime,
    jobs: usize,
    out: &Path,
) -> anyhow::Result<()> {
    let scratch = out.join(SCRATCH);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let mut order: Vec<(usize, &PlannedRun)> = runs.iter().enumerate().collect();
    order.sort_by(|(_, a), (_, b)| run_cost(b).total_cmp(&run_cost(a)));
    let mut progress = Progress::new(runs.iter().map(run_cost).sum(), runs.len(), jobs);
    let mut waiting = order.into_iter();
    let mut running: Vec<Job> = Vec::new();
    let mut failure: Option<String> = None;
    loop {
        while failure.is_none() && running.len() < jobs.max(1) {
            let Some((index, run)) = waiting.next() else {
                break;
            };
            running.push(Job::start(run, index, runtime, &scratch)?);
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(POLL);
        let mut still_running = Vec::with_capacity(running.len());
        for mut job in running {
            match job.poll()? {
                None => still_running.push(job),
                Some(Ended::Trained | Ended::Diverged) => {
                    println!("{}", progress.finished(job.cost, job.started.elapsed()));
                }
                Some(Ended::Failed(message)) => {
                    failure.get_or_insert(message);
                }
                Some(Ended::HeldElsewhere) => {}
            }
        }
        running = still_running;
    }
    // Another experiment's processes may still use it: only an empty one goes.
    let _ = std::fs::remove_dir(&scratch);
    match failure {
        Some(message) => bail!("{message}"),
        None => Ok(()),
    }
}

/// A run's share of the work: epochs times forward-backward passes per step.
fn run_cost(run: &PlannedRun) -> f64 {
    run.spec.epochs as f64 * run.spec.optim.passes_per_step()
}

/// The runs trained so far and the time the others are expected to take, at
/// the pace of the finished ones per unit of [`run_cost`], `jobs` at a time.
struct Progress {
    total_cost: f64,
    runs: usize,
    jobs: usize,
    done_cost: f64,
    done_runs: usize,
    /// Summed over the finished runs (each in its own process).
    spent: Duration,
}

impl Progress {
    fn new(total_cost: f64, runs: usize, jobs: usize) -> Progress {
        Progress {
            total_cost,
            runs,
            jobs: jobs.max(1),
            done_cost: 0.0,
            done_runs: 0,
            spent: Duration::ZERO,
        }
    }

    /// Counts a run of `cost` that took `took`, and says where the
    /// experiment stands: "3/9 runs trained, about 4m10s left".
    fn finished(&mut self, cost: f64, took: Duration) -> String {
        self.done_cost += cost;
        self.done_runs += 1;
        self.spent += took;
        let line = format!("{}/{} runs trained", self.done_runs, self.runs);
        // The runs' summed time scaled to the work left, shared by the jobs.
        match remaining_at(self.spent, self.done_cost, self.total_cost) {
            Some(left) if !left.is_zero() => {
                format!("{line}, about {} left", minutes(left / self.jobs as u32))
            }
            _ => line,
        }
    }
}

/// The last non-empty line of a process's stderr (its `error: ...` line).
fn last_line(log: &Path) -> String {
    std::fs::read_to_string(log)
        .ok()
        .and_then(|text| {
            text.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "it printed nothing".to_string())
}

fn remove_quietly(path: &Path) {
    // A temporary file left behind is harmless; failing the run over it is not.
    let _ = std::fs::remove_file(path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_runs_and_scales_the_pace_to_the_work_left() {
        // Four runs of costs 2, 2, 1 and 1, two at a time.
        let mut progress = Progress::new(6.0, 4, 2);
        // 20 s for 2 units: 10 s a unit; 4 units left over 2 jobs: 20 s.
        let line = progress.finished(2.0, Duration::from_secs(20));
        assert_eq!(line, "1/4 runs trained, about 20s left");
        let line = progress.finished(2.0, Duration::from_secs(40));
        assert_eq!(line, "2/4 runs trained, about 15s left");
        progress.finished(1.0, Duration::from_secs(10));
        assert_eq!(
            progress.finished(1.0, Duration::from_secs(10)),
            "4/4 runs trained"
        );
    }
}
