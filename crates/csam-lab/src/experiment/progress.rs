//! Where the training of an experiment's runs stands, for a progress bar:
//! the runs and epochs done and the time left. The caller reports what it
//! sees (a run starts, its `metrics.jsonl` holds k epochs, it ends), at
//! the instant it saw it; [`Tally`] only counts and estimates, and never
//! reads the clock, so its arithmetic is tested with made-up instants.
//!
//! The time left is the work left at the pace of the epochs trained by
//! this invocation (an interrupted run's earlier epochs count toward the
//! position, not the pace), scheduled as the runs train: the ones running
//! finish what they have left, and each waiting run starts, in order, in the
//! first of the `jobs` slots to free up. An epoch's work is its passes per
//! step (a SAM step is two forward-backward passes, SGD's one).

use std::path::Path;
use std::time::{Duration, Instant};

use csam_train::train::rundir::RunDir;

use super::runs::PlannedRun;

/// The epochs a run directory's `metrics.jsonl` has logged: its lines, one
/// per epoch (the log is replaced whole, never seen half written), counted
/// without parsing them, since a caller polls it several times a second;
/// none without a log.
pub fn epochs_logged(dir: &Path) -> usize {
    std::fs::read(RunDir::new(dir).metrics_log()).map_or(0, |bytes| {
        bytes
            .split(|&b| b == b'\n')
            .filter(|line| !line.trim_ascii().is_empty())
            .count()
    })
}

/// A run's share of the work: epochs times forward-backward passes per step.
pub fn run_cost(run: &PlannedRun) -> f64 {
    run.spec.epochs as f64 * run.spec.optim.passes_per_step()
}

/// One run of a [`Tally`].
#[derive(Debug, Clone)]
struct Tracked {
    epochs: usize,
    /// Forward-backward passes per step: the work of one epoch.
    passes: f64,
    /// The epochs logged, as last seen.
    done: usize,
    /// The fewest epochs logged since before the run started here: those
    /// after it are what this invocation trained (a resumed run first cuts
    /// its log back to its checkpoint).
    baseline: usize,
    started: Option<Instant>,
    /// When `done` last grew.
    last_epoch: Option<Instant>,
    ended: Option<Instant>,
    /// Not trained here after all (another process trains it, or a failure
    /// stopped the experiment before it started): out of every count.
    left_out: bool,
}

impl Tracked {
    fn trained(&self) -> usize {
        self.done.saturating_sub(self.baseline)
    }
}

/// The runs an experiment trains in this invocation, in the order they
/// start, and what has been seen of them.
#[derive(Debug, Clone)]
pub struct Tally {
    runs: Vec<Tracked>,
    jobs: usize,
}

impl Tally {
    /// A tally of runs given as (epochs, passes per step, epochs already
    /// logged), trained `jobs` at a time in this order.
    pub fn new(runs: impl IntoIterator<Item = (usize, f64, usize)>, jobs: usize) -> Tally {
        let runs = runs
            .into_iter()
            .map(|(epochs, passes, done)| Tracked {
                epochs,
                passes,
                done,
                baseline: done,
                started: None,
                last_epoch: None,
                ended: None,
                left_out: false,
            })
            .collect();
        Tally {
            runs,
            jobs: jobs.max(1),
        }
    }

    /// The tally of `runs`, with the epochs each has logged already.
    pub fn of_runs<'a>(runs: impl IntoIterator<Item = &'a PlannedRun>, jobs: usize) -> Tally {
        Tally::new(
            runs.into_iter().map(|run| {
                (
                    run.spec.epochs,
                    run.spec.optim.passes_per_step(),
                    epochs_logged(&run.dir),
                )
            }),
            jobs,
        )
    }

    /// Run `run` started at `at`.
    pub fn start(&mut self, run: usize, at: Instant) {
        self.runs[run].started = Some(at);
    }

    /// Run `run` had logged `done` epochs at `at`.
    pub fn logged(&mut self, run: usize, done: usize, at: Instant) {
        let tracked = &mut self.runs[run];
        if done > tracked.done {
            tracked.last_epoch = Some(at);
        }
        tracked.done = done;
        tracked.baseline = tracked.baseline.min(done);
    }

    /// Run `run` ended at `at` (finished, or diverged: nothing is left of it).
    pub fn end(&mut self, run: usize, at: Instant) {
        self.runs[run].ended = Some(at);
    }

    /// Run `run` is not trained here after all: it leaves every count.
    pub fn leave_out(&mut self, run: usize) {
        self.runs[run].left_out = true;
    }

    /// Whether run `run` started and has not ended.
    pub fn running(&self, run: usize) -> bool {
        let tracked = &self.runs[run];
        tracked.started.is_some() && tracked.ended.is_none() && !tracked.left_out
    }

    fn counted(&self) -> impl Iterator<Item = &Tracked> {
        self.runs.iter().filter(|run| !run.left_out)
    }

    /// The runs counted.
    pub fn runs(&self) -> usize {
        self.counted().count()
    }

    /// The runs that ended.
    pub fn runs_done(&self) -> usize {
        self.counted().filter(|run| run.ended.is_some()).count()
    }

    /// The epochs of the runs counted.
    pub fn epochs(&self) -> usize {
        self.counted().map(|run| run.epochs).sum()
    }

    /// The epochs done: those logged, and all of an ended run's (one that
    /// diverged has none left to train).
    pub fn epochs_done(&self) -> usize {
        self.counted()
            .map(|run| match run.ended {
                Some(_) => run.epochs,
                None => run.done.min(run.epochs),
            })
            .sum()
    }

    /// Seconds of one process per pass-weighted epoch, over the runs that
    /// trained an epoch here: each from its start to its last epoch (to its
    /// end once it ended, which counts its evaluation too). None before the
    /// first epoch.
    fn pace(&self) -> Option<f64> {
        let (mut seconds, mut work) = (0.0, 0.0);
        for run in self.counted().filter(|run| run.trained() > 0) {
            let (Some(started), Some(until)) = (run.started, run.ended.or(run.last_epoch)) else {
                continue;
            };
            seconds += until.saturating_duration_since(started).as_secs_f64();
            work += run.trained() as f64 * run.passes;
        }
        (work > 0.0 && seconds > 0.0).then(|| seconds / work)
    }

    /// The time the runs not ended are expected to take from `now`; None
    /// until an epoch trained here sets the pace.
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        let pace = self.pace()?;
        let left = |run: &Tracked| run.epochs.saturating_sub(run.done) as f64 * run.passes * pace;
        // A slot per job: when it frees up.
        let mut slots = vec![0.0_f64; self.jobs];
        let mut waiting = Vec::new();
        for run in self.counted().filter(|run| run.ended.is_none()) {
            match run.started {
                Some(started) => {
                    // Its epoch under way is part done.
                    let since = now
                        .saturating_duration_since(run.last_epoch.unwrap_or(started))
                        .as_secs_f64();
                    let seconds = (left(run) - since).max(0.0);
                    let slot = slots
                        .iter_mut()
                        .min_by(|a, b| a.total_cmp(b))
                        .expect("at least one job");
                    // More running than jobs (a caller's miscount) queue up.
                    *slot += seconds;
                }
                None => waiting.push(left(run)),
            }
        }
        for seconds in waiting {
            let slot = slots
                .iter_mut()
                .min_by(|a, b| a.total_cmp(b))
                .expect("at least one job");
            *slot += seconds;
        }
        let end = slots.into_iter().fold(0.0, f64::max);
        Some(Duration::from_secs_f64(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn the_epochs_logged_are_the_lines_of_metrics_jsonl() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(epochs_logged(dir.path()), 0);
        std::fs::write(
            dir.path().join("metrics.jsonl"),
            "{\"epoch\":1}\n{\"epoch\":2}\n",
        )
        .unwrap();
        assert_eq!(epochs_logged(dir.path()), 2);
    }

    #[test]
    fn the_position_counts_logged_epochs_and_all_of_an_ended_run() {
        // Three runs of 10, 10 and 4 epochs, the second resumed at epoch 3.
        let t0 = Instant::now();
        let mut tally = Tally::new([(10, 1.0, 0), (10, 2.0, 3), (4, 1.0, 0)], 2);
        assert_eq!((tally.runs(), tally.epochs()), (3, 24));
        assert_eq!((tally.runs_done(), tally.epochs_done()), (0, 3));
        tally.start(0, t0);
        tally.start(1, t0);
        tally.logged(0, 4, t0 + secs(40));
        assert_eq!(tally.epochs_done(), 7);
        // The second diverges at epoch 5: its other epochs are not trained.
        tally.logged(1, 5, t0 + secs(50));
        tally.end(1, t0 + secs(55));
        assert_eq!((tally.runs_done(), tally.epochs_done()), (1, 14));
        assert!(tally.running(0) && !tally.running(1) && !tally.running(2));
        // One left out (another process trains it) leaves every count.
        tally.leave_out(2);
        assert_eq!((tally.runs(), tally.epochs()), (2, 20));
    }

    #[test]
    fn nothing_is_estimated_before_an_epoch_trained_here() {
        let t0 = Instant::now();
        let mut tally = Tally::new([(10, 1.0, 4), (10, 1.0, 0)], 1);
        assert_eq!(tally.remaining(t0), None);
        tally.start(0, t0);
        // Its 4 earlier epochs are seen again: still no pace.
        tally.logged(0, 4, t0 + secs(1));
        assert_eq!(tally.remaining(t0 + secs(30)), None);
        tally.logged(0, 5, t0 + secs(10));
        assert!(tally.remaining(t0 + secs(10)).is_some());
    }

    #[test]
    fn one_job_sums_the_work_left_at_the_pace_of_the_epochs_trained_here() {
        // SGD (1 pass) 10 epochs, resumed at epoch 2; then SAM (2 passes) 10.
        let t0 = Instant::now();
        let mut tally = Tally::new([(10, 1.0, 2), (10, 2.0, 0)], 1);
        tally.start(0, t0);
        // The log cut back to epoch 1 on resume: epoch 2 is trained again.
        tally.logged(0, 1, t0 + secs(1));
        tally.logged(0, 3, t0 + secs(20));
        // 20 s for 2 epochs: 10 s a pass-epoch. Left: 7 + 20 = 27 units.
        assert_eq!(tally.remaining(t0 + secs(20)), Some(secs(270)));
        // 4 s into the next epoch, 4 s of it are done.
        assert_eq!(tally.remaining(t0 + secs(24)), Some(secs(266)));
        // Never below zero for the running run, however slow its epoch.
        assert_eq!(tally.remaining(t0 + secs(200)), Some(secs(200)));
    }

    #[test]
    fn jobs_share_the_waiting_runs_and_the_last_one_finishes_alone() {
        // Three runs of 4 epochs, 1 pass, two jobs.
        let t0 = Instant::now();
        let mut tally = Tally::new([(4, 1.0, 0), (4, 1.0, 0), (4, 1.0, 0)], 2);
        tally.start(0, t0);
        tally.start(1, t0);
        tally.logged(0, 1, t0 + secs(10));
        tally.logged(1, 1, t0 + secs(10));
        // 10 s a unit per process: both running have 30 s left, then the
        // third trains alone for 40 s (not (30 + 30 + 40) / 2 = 50 s).
        assert_eq!(tally.remaining(t0 + secs(10)), Some(secs(70)));
        // The first ends at 40 s, its evaluation taking 10 s more: its 50 s
        // for 4 units and the second's 10 s for 1 make 12 s a unit.
        tally.logged(0, 4, t0 + secs(40));
        tally.end(0, t0 + secs(50));
        tally.start(2, t0 + secs(50));
        tally.logged(2, 0, t0 + secs(50));
        // Second: 3 units, 40 s into its epoch: 0 s; third: 48 s.
        assert_eq!(tally.remaining(t0 + secs(50)), Some(secs(48)));
    }
}
