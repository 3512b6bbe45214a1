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
//!
//! While they train, one bar on stderr follows them all (runs and epochs
//! done, time left: [`OverallBar`]), from the epochs each process logs in
//! its run directory's `metrics.jsonl`: no other channel is needed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use csam_lab::experiment::progress::{epochs_logged, run_cost, Tally};
use csam_lab::experiment::runs::PlannedRun;
use csam_train::spec::Runtime;
use csam_train::train::lock::{LockError, RunLock};
use csam_train::train::rundir::{RunDir, RunState};
use csam_train::train::Divergence;

use super::child::die_with_parent;
use crate::progress::{time_left, OverallBar};

/// How often the running processes are polled.
const POLL: Duration = Duration::from_millis(200);

/// One `csam train` process and the files it was given.
struct Job {
    label: String,
    /// The run directory.
    dir: PathBuf,
    /// Its index in the [`Tally`].
    index: usize,
    child: Child,
    started: Instant,
    spec_file: PathBuf,
    log_file: PathBuf,
}

impl Job {
    /// Starts `csam train` on `run` (the tally's `index`) with `runtime`,
    /// quiet, its spec in a temporary file in `scratch` and its stderr in
    /// another (read if it fails), and says so under `bar`. The process
    /// dies with this one (see [`die_with_parent`]).
    fn start(
        run: &PlannedRun,
        index: usize,
        runtime: &Runtime,
        scratch: &Path,
        bar: &OverallBar,
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
        bar.println(&format!(
            "{}: {action} {} (process {})",
            run.label,
            run.dir.display(),
            child.id()
        ));
        Ok(Job {
            label: run.label.clone(),
            dir: run.dir.clone(),
            index,
            child,
            started: Instant::now(),
            spec_file,
            log_file,
        })
    }

    /// The outcome once the process has exited, said under `bar`: Ok(None)
    /// while it runs.
    fn poll(&mut self, bar: &OverallBar) -> anyhow::Result<Option<Ended>> {
        let Some(status) = self.child.try_wait()? else {
            return Ok(None);
        };
        let took = self.started.elapsed().as_secs_f64();
        let outcome = match status.success() {
            true => {
                bar.println(&format!("{}: trained in {took:.1}s", self.label));
                Ended::Trained
            }
            // A run that diverged wrote its record before it exited.
            false => match Divergence::read(&RunDir::new(&self.dir))? {
                Some(divergence) => {
                    bar.println(&format!("{}: {divergence} after {took:.1}s", self.label));
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
                        bar.println(&format!(
                            "{}: {holder} trains it; waiting for it after the other runs",
                            self.label
                        ));
                        Ended::HeldElsewhere
                    }
                    Ok(()) if RunDir::new(&self.dir).state()? == RunState::Finished => {
                        bar.println(&format!("{}: another csam process trained it", self.label));
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
/// `out/.jobs/`, removed once they are done. With `bars`, a bar on stderr
/// follows the runs' epochs meanwhile.
pub fn train_in_processes(
    runs: &[PlannedRun],
    runtime: &Runtime,
    jobs: usize,
    out: &Path,
    bars: bool,
) -> anyhow::Result<()> {
    let scratch = out.join(SCRATCH);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    let mut order: Vec<&PlannedRun> = runs.iter().collect();
    order.sort_by(|a, b| run_cost(b).total_cmp(&run_cost(a)));
    // The tally's runs are in the order they start.
    let mut tally = Tally::of_runs(order.iter().copied(), jobs);
    // Cleared when it goes, also on an early error.
    let mut bar = OverallBar::on_stderr(&tally, bars);
    let mut waiting = order.into_iter().enumerate();
    let mut running: Vec<Job> = Vec::new();
    let mut failure: Option<String> = None;
    loop {
        while failure.is_none() && running.len() < jobs.max(1) {
            let Some((index, run)) = waiting.next() else {
                break;
            };
            running.push(Job::start(run, index, runtime, &scratch, &bar)?);
            tally.start(index, Instant::now());
        }
        if failure.is_some() {
            // Those that will not start leave the counts.
            for (index, _) in waiting.by_ref() {
                tally.leave_out(index);
            }
        }
        if running.is_empty() {
            break;
        }
        std::thread::sleep(POLL);
        let mut still_running = Vec::with_capacity(running.len());
        for mut job in running {
            let ended = job.poll(&bar)?;
            // Read after the poll: a process that has exited logged all it will.
            let now = Instant::now();
            tally.logged(job.index, epochs_logged(&job.dir), now);
            match ended {
                None => still_running.push(job),
                Some(Ended::Trained | Ended::Diverged) => {
                    tally.end(job.index, now);
                    bar.show(&tally, now);
                    bar.println(&finished_line(&tally, now));
                }
                Some(Ended::Failed(message)) => {
                    tally.leave_out(job.index);
                    failure.get_or_insert(message);
                }
                Some(Ended::HeldElsewhere) => tally.leave_out(job.index),
            }
        }
        running = still_running;
        bar.show(&tally, Instant::now());
    }
    bar.finish();
    // Another experiment's processes may still use it: only an empty one goes.
    let _ = std::fs::remove_dir(&scratch);
    match failure {
        Some(message) => bail!("{message}"),
        None => Ok(()),
    }
}

/// Where the experiment stands after a run ended, for logs that see no bar:
/// `3/9 runs trained, about 1m36s left` (the estimate left out once every run
/// has ended).
fn finished_line(tally: &Tally, now: Instant) -> String {
    let line = format!("{}/{} runs trained", tally.runs_done(), tally.runs());
    match tally.remaining(now) {
        Some(left) if tally.runs_done() < tally.runs() => format!("{line}, {}", time_left(left)),
        _ => line,
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
    fn the_line_after_a_run_counts_the_runs_and_says_the_time_left_until_the_last() {
        // Three runs of 4 epochs, 1 pass, two at a time.
        let t0 = Instant::now();
        let mut tally = Tally::new([(4, 1.0, 0), (4, 1.0, 0), (4, 1.0, 0)], 2);
        tally.start(0, t0);
        tally.start(1, t0);
        let at = |s: u64| t0 + Duration::from_secs(s);
        tally.logged(0, 4, at(40));
        tally.logged(1, 2, at(20));
        tally.end(0, at(40));
        tally.start(2, at(40));
        // 10 s an epoch: the second has 20 s left, 20 s of them spent; the
        // third 40 s.
        assert_eq!(
            finished_line(&tally, at(40)),
            "1/3 runs trained, about 40s left"
        );
        tally.logged(1, 4, at(60));
        tally.end(1, at(60));
        tally.end(2, at(80));
        assert_eq!(finished_line(&tally, at(80)), "3/3 runs trained");
    }
}
