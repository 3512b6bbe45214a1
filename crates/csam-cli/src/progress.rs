//! What the terminal shows while csam trains: an indicatif bar per epoch
//! (running loss and accuracy, the run's time left) on stderr, under it
//! one for the experiment's whole training (runs and epochs done, time
//! left: [`OverallBar`]), and one line per epoch and per experiment run on
//! stdout. The library reports events to this observer and counts the
//! experiment's progress ([`Tally`]); only here are they drawn.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use csam_data::corrupt::Corruption;
use csam_lab::experiment::progress::Tally;
use csam_lab::experiment::runs::PlannedRun;
use csam_lab::sharpness::SharpnessObserver;
use csam_lab::shift::cifar_c::CorruptionObserver;
use csam_train::spec::Warning;
use csam_train::theory::TheorySummary;
use csam_train::train::metrics_log::EpochRecord;
use csam_train::train::{ExperimentObserver, RunAction, RunObserver};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Draws progress on the terminal; `bars: false` (`--quiet`) keeps the lines
/// and hides the bars.
pub struct Terminal {
    bars: bool,
    bar: Option<ProgressBar>,
    /// The run being trained, for its remaining time.
    clock: Option<RunClock>,
    /// Runs this invocation trained in child processes: that the experiment
    /// then reads them back is no news, so their "reused" line is left out.
    trained_ahead: Vec<PathBuf>,
    /// The experiment's runs trained in this process, when there are any.
    overall: Option<Overall>,
}

/// The whole training of an experiment's runs in this process: the bar
/// under the epoch bars and what it counts.
struct Overall {
    multi: MultiProgress,
    bar: OverallBar,
    tally: Tally,
    /// The runs' directories, in the tally's order.
    dirs: Vec<PathBuf>,
    /// The tally's index of the run being handled.
    current: Option<usize>,
}

impl Terminal {
    /// A terminal observer, with progress bars when `bars`.
    pub fn new(bars: bool) -> Terminal {
        Terminal {
            bars,
            bar: None,
            clock: None,
            trained_ahead: Vec::new(),
            overall: None,
        }
    }

    /// The observer of an experiment whose `unfinished` runs are to be
    /// trained, `trained_ahead` the directories of those this invocation
    /// has just trained in child processes (the experiment then reads them
    /// back): when others are left, which this process trains, a bar under
    /// the epoch bars follows them all.
    pub fn experiment(
        bars: bool,
        unfinished: &[PlannedRun],
        trained_ahead: Vec<PathBuf>,
    ) -> Terminal {
        let here: Vec<&PlannedRun> = unfinished
            .iter()
            .filter(|run| !trained_ahead.contains(&run.dir))
            .collect();
        let overall = (!here.is_empty()).then(|| {
            let multi = match bars {
                true => MultiProgress::new(),
                false => MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            };
            let tally = Tally::of_runs(here.iter().copied(), 1);
            let bar = OverallBar::in_multi(&tally, &multi);
            Overall {
                multi,
                bar,
                tally,
                dirs: here.iter().map(|run| run.dir.clone()).collect(),
                current: None,
            }
        });
        Terminal {
            bars,
            bar: None,
            clock: None,
            trained_ahead,
            overall,
        }
    }

    /// Prints `line` on stdout, the bars set aside meanwhile.
    fn say(&self, line: &str) {
        match &self.overall {
            Some(overall) => overall.multi.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }
}

impl RunObserver for Terminal {
    fn epoch_started(&mut self, epoch: usize, epochs: usize, steps: usize) {
        let bar = match (self.bars, &self.overall) {
            // Above the experiment's bar, drawn by it from the first draw on.
            (true, Some(overall)) => overall.multi.insert_before(
                &overall.bar.bar,
                ProgressBar::with_draw_target(Some(steps as u64), ProgressDrawTarget::hidden()),
            ),
            (true, None) => ProgressBar::new(steps as u64),
            (false, _) => ProgressBar::hidden(),
        };
        // Invariant: the template is a literal checked by the test below.
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid template"));
        bar.set_prefix(format!("epoch {epoch}/{epochs}"));
        if let Some(overall) = &mut self.overall {
            if let Some(run) = overall.current {
                // A resumed run starts past its checkpointed epochs.
                overall
                    .tally
                    .logged(run, epoch.saturating_sub(1), Instant::now());
            }
        }
        self.bar = Some(bar);
        self.clock = Some(match self.clock.take() {
            // The next epoch of the same run.
            Some(clock) if epoch > clock.epoch => RunClock { epoch, ..clock },
            // A run starts (or resumes at `epoch`) in this process.
            _ => RunClock::new(epoch, epochs, steps),
        });
    }

    fn step(&mut self, mean_loss: f64, accuracy: f64) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
            let run_left = self
                .clock
                .as_ref()
                .and_then(|clock| clock.remaining(bar.position() as usize))
                .map_or_else(String::new, |left| format!(", run {} left", minutes(left)));
            bar.set_message(format!("loss {mean_loss:.4} acc {accuracy:.4}{run_left}"));
        }
        if let Some(overall) = &mut self.overall {
            overall.bar.tick(&overall.tally, Instant::now());
        }
    }

    fn epoch_finished(&mut self, record: &EpochRecord, epochs: usize) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
            if let Some(overall) = &self.overall {
                overall.multi.remove(&bar);
            }
        }
        if let Some(overall) = &mut self.overall {
            if let Some(run) = overall.current {
                let now = Instant::now();
                overall.tally.logged(run, record.epoch, now);
                overall.bar.show(&overall.tally, now);
            }
        }
        self.say(&epoch_line(record, epochs));
    }

    fn theory_summary(&mut self, summary: &TheorySummary) {
        self.say(&summary.line());
    }
}

impl ExperimentObserver for Terminal {
    fn run_started(&mut self, label: &str, action: RunAction, dir: &Path) {
        if let Some(overall) = &mut self.overall {
            overall.current = overall.dirs.iter().position(|d| d == dir);
            if let (Some(run), RunAction::Training | RunAction::Resuming) =
                (overall.current, action)
            {
                // Also after waiting for another process: the wait is not
                // this run's training time.
                overall.tally.start(run, Instant::now());
            }
        }
        let read_back = matches!(action, RunAction::Reused | RunAction::Diverged);
        if read_back && self.trained_ahead.iter().any(|d| d == dir) {
            return;
        }
        self.say(&format!("{label}: {action} {}", dir.display()));
    }

    fn run_finished(&mut self, label: &str, line: &str) {
        if let Some(overall) = &mut self.overall {
            if let Some(run) = overall.current.take() {
                let now = Instant::now();
                overall.tally.end(run, now);
                overall.bar.show(&overall.tally, now);
            }
        }
        self.say(&format!("{label}: {line}"));
        if let Some(overall) = &self.overall {
            // What follows the training (calibration, report) has no bar.
            if overall.tally.runs_done() == overall.tally.runs() {
                overall.bar.finish();
            }
        }
    }

    fn warning(&mut self, warning: &Warning) {
        match &self.overall {
            Some(overall) => overall.multi.suspend(|| eprintln!("warning: {warning}")),
            None => eprintln!("warning: {warning}"),
        }
    }
}

/// The bar of an experiment's whole training, on stderr:
/// `runs 3/21, epochs 45/210 [=====>    ] 12m05s, about 2h10m left`.
/// What it shows is a [`Tally`]'s.
pub struct OverallBar {
    bar: ProgressBar,
    started: Instant,
    /// When it was last redrawn by [`OverallBar::tick`] or [`OverallBar::show`].
    shown: Option<Instant>,
}

impl OverallBar {
    /// A bar that shows `tally`, drawn nowhere yet: drawn at once where it
    /// goes, it would first show an empty bar.
    fn new(tally: &Tally) -> OverallBar {
        let bar = ProgressBar::hidden();
        // Invariant: the template is a literal checked by the test below.
        bar.set_style(ProgressStyle::with_template(OVERALL_TEMPLATE).expect("valid template"));
        let mut overall = OverallBar {
            bar,
            started: Instant::now(),
            shown: None,
        };
        overall.show(tally, overall.started);
        overall
    }

    /// The bar of `tally` on stderr when `visible` (indicatif hides it where
    /// stderr is no terminal).
    pub fn on_stderr(tally: &Tally, visible: bool) -> OverallBar {
        let overall = OverallBar::new(tally);
        if visible {
            overall.bar.set_draw_target(ProgressDrawTarget::stderr());
            overall.bar.tick();
        }
        overall
    }

    /// The bar of `tally`, last of `multi`'s.
    fn in_multi(tally: &Tally, multi: &MultiProgress) -> OverallBar {
        let overall = OverallBar::new(tally);
        multi.add(overall.bar.clone());
        overall.bar.tick();
        overall
    }

    /// Shows where `tally` stands at `now`.
    pub fn show(&mut self, tally: &Tally, now: Instant) {
        self.bar.set_length(tally.epochs() as u64);
        self.bar.set_position(tally.epochs_done() as u64);
        self.bar.set_prefix(overall_prefix(tally));
        self.bar.set_message(overall_message(
            tally,
            now.saturating_duration_since(self.started),
            now,
        ));
        self.shown = Some(now);
    }

    /// [`OverallBar::show`], at most four times a second (for a caller
    /// that calls it every step).
    pub fn tick(&mut self, tally: &Tally, now: Instant) {
        let due = self
            .shown
            .is_none_or(|shown| now.saturating_duration_since(shown) >= Duration::from_millis(250));
        if due {
            self.show(tally, now);
        }
    }

    /// Prints `line` on stdout, the bar set aside meanwhile.
    pub fn println(&self, line: &str) {
        self.bar.suspend(|| println!("{line}"));
    }

    /// Clears the bar for good.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for OverallBar {
    fn drop(&mut self) {
        // An experiment that failed leaves no bar over its error.
        self.bar.finish_and_clear();
    }
}

/// `runs 3/21, epochs 45/210`.
pub fn overall_prefix(tally: &Tally) -> String {
    format!(
        "runs {}/{}, epochs {}/{}",
        tally.runs_done(),
        tally.runs(),
        tally.epochs_done(),
        tally.epochs()
    )
}

/// `12m05s, about 2h10m left`, or the time spent alone while nothing is
/// known of the pace.
pub fn overall_message(tally: &Tally, elapsed: Duration, now: Instant) -> String {
    match tally.remaining(now) {
        Some(left) => format!("{}, {}", minutes(elapsed), time_left(left)),
        None => minutes(elapsed),
    }
}

/// `about 2h10m left`, or `almost done` under a second.
pub fn time_left(left: Duration) -> String {
    match left < Duration::from_secs(1) {
        true => "almost done".to_string(),
        false => format!("about {} left", minutes(left)),
    }
}

const TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}<{eta})";
const OVERALL_TEMPLATE: &str = "{prefix} [{bar:30}] {msg}";

/// Where a run stands since it started (or resumed) in this process: the
/// remaining time of the whole run, not only of its epoch, from the steps
/// taken so far.
#[derive(Debug, Clone, Copy)]
struct RunClock {
    started: Instant,
    first_epoch: usize,
    /// The epoch being trained.
    epoch: usize,
    epochs: usize,
    steps: usize,
}

impl RunClock {
    fn new(epoch: usize, epochs: usize, steps: usize) -> RunClock {
        RunClock {
            started: Instant::now(),
            first_epoch: epoch,
            epoch,
            epochs,
            steps,
        }
    }

    /// The time left at `position` steps into the current epoch, at the
    /// pace of the steps since the clock started; None before the first.
    fn remaining(&self, position: usize) -> Option<Duration> {
        let done = (self.epoch - self.first_epoch) * self.steps + position;
        let total = (self.epochs + 1 - self.first_epoch) * self.steps;
        remaining_at(self.started.elapsed(), done as f64, total as f64)
    }
}

/// `elapsed` for `done` units of work scaled to the `total - done` left;
/// None when none is done.
pub fn remaining_at(elapsed: Duration, done: f64, total: f64) -> Option<Duration> {
    (done > 0.0).then(|| elapsed.mul_f64((total - done).max(0.0) / done))
}

/// `1h02m`, `12m03s` or `45s`.
pub fn minutes(duration: Duration) -> String {
    let s = duration.as_secs();
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, _) => format!("{h}h{m:02}m"),
    }
}

/// A bar over a count of work items with a message, for the long library
/// calls that are not training runs (`csam sharpness`, `csam corrupt`).
pub struct CountBar {
    bar: ProgressBar,
}

impl CountBar {
    /// A bar drawn with `template` when `visible`.
    fn new(visible: bool, template: &'static str) -> CountBar {
        let bar = match visible {
            true => ProgressBar::new(0),
            false => ProgressBar::hidden(),
        };
        // Invariant: the templates are literals checked by the test below.
        bar.set_style(ProgressStyle::with_template(template).expect("valid template"));
        CountBar { bar }
    }

    /// The bar of `csam sharpness`: points of the segment measured, with the
    /// count of Hessian-vector products as its message.
    pub fn sharpness(visible: bool) -> CountBar {
        CountBar::new(visible, SHARPNESS_TEMPLATE)
    }

    /// The bar of `csam corrupt`: images corrupted, with the corruption
    /// being written as its message.
    pub fn corruptions(visible: bool) -> CountBar {
        CountBar::new(visible, CORRUPTION_TEMPLATE)
    }

    fn set(&self, done: usize, total: usize) {
        self.bar.set_length(total as u64);
        self.bar.set_position(done as u64);
    }
}

impl SharpnessObserver for CountBar {
    fn product(&mut self, products: u64) {
        self.bar
            .set_message(format!("{products} Hessian-vector products"));
    }

    fn point(&mut self, done: usize, total: usize) {
        self.set(done, total);
    }
}

impl CorruptionObserver for CountBar {
    fn image(&mut self, corruption: Corruption, done: usize, total: usize) {
        self.bar.set_message(corruption.name());
        self.set(done, total);
    }
}

impl Drop for CountBar {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

const SHARPNESS_TEMPLATE: &str = "sharpness [{bar:30}] point {pos}/{len} {msg} ({elapsed})";
const CORRUPTION_TEMPLATE: &str = "{msg:15} [{bar:30}] {pos}/{len} images ({elapsed}<{eta})";

/// The epoch's line: training loss / accuracy and the validation metrics.
fn epoch_line(record: &EpochRecord, epochs: usize) -> String {
    let val = &record.val;
    format!(
        "epoch {}/{epochs}  lr {:.4}  train loss {:.4} acc {:.4} | val acc {:.4} nll {:.4} ece {:.4} adaece {:.4}{}  ({:.1}s)",
        record.epoch,
        record.lr,
        record.train.loss,
        record.train.accuracy,
        val.accuracy,
        val.nll,
        val.ece,
        val.adaece,
        if record.best { "  *best" } else { "" },
        record.seconds,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_clock_scales_the_elapsed_time_to_the_steps_left() {
        let ten = Duration::from_secs(10);
        // 10 s for 5 of 20 steps: 30 s left; nothing done, nothing known.
        assert_eq!(remaining_at(ten, 5.0, 20.0), Some(Duration::from_secs(30)));
        assert_eq!(remaining_at(ten, 0.0, 20.0), None);
        assert_eq!(remaining_at(ten, 20.0, 20.0), Some(Duration::ZERO));
        // A run resumed at epoch 3 of 4 with 10 steps an epoch counts the
        // 20 steps of epochs 3 and 4 only.
        let clock = RunClock {
            epoch: 4,
            ..RunClock::new(3, 4, 10)
        };
        let left = clock.remaining(5).unwrap();
        assert!(
            left <= clock.started.elapsed().mul_f64(5.0 / 15.0),
            "{left:?}"
        );
        assert_eq!(minutes(Duration::from_secs(45)), "45s");
        assert_eq!(minutes(Duration::from_secs(723)), "12m03s");
        assert_eq!(minutes(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn the_overall_bar_says_the_runs_and_epochs_done_and_the_time_left() {
        let t0 = Instant::now();
        let mut tally = Tally::new([(5, 1.0, 0), (5, 2.0, 0)], 2);
        let elapsed = Duration::from_secs(3);
        assert_eq!(overall_prefix(&tally), "runs 0/2, epochs 0/10");
        // No epoch yet: the time spent only.
        assert_eq!(overall_message(&tally, elapsed, t0), "3s");
        tally.start(0, t0);
        tally.start(1, t0);
        tally.logged(0, 1, t0 + Duration::from_secs(10));
        // 10 s a pass-epoch: 40 s left of the first; the second's 100 s,
        // 10 s of which are spent.
        let now = t0 + Duration::from_secs(10);
        assert_eq!(overall_prefix(&tally), "runs 0/2, epochs 1/10");
        assert_eq!(
            overall_message(&tally, Duration::from_secs(130), now),
            "2m10s, about 1m30s left"
        );
        // Both past their expected end: nothing is left but their last steps.
        tally.logged(0, 5, t0 + Duration::from_secs(50));
        let late = t0 + Duration::from_secs(200);
        assert_eq!(overall_message(&tally, elapsed, late), "3s, almost done");
    }

    #[test]
    fn template_parses() {
        assert!(indicatif::ProgressStyle::with_template(super::TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::OVERALL_TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::SHARPNESS_TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::CORRUPTION_TEMPLATE).is_ok());
    }
}
