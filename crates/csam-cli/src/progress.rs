//! What the terminal shows while csam trains: an indicatif bar per epoch
//! (running loss and accuracy) on stderr, one line per epoch and per
//! experiment run on stdout. The library reports events to this observer;
//! only here are they drawn.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use csam_data::corrupt::Corruption;
use csam_lab::sharpness::SharpnessObserver;
use csam_lab::shift::cifar_c::CorruptionObserver;
use csam_train::spec::Warning;
use csam_train::theory::TheorySummary;
use csam_train::train::metrics_log::EpochRecord;
use csam_train::train::{ExperimentObserver, RunAction, RunObserver};
use indicatif::{ProgressBar, ProgressStyle};

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
}

impl Terminal {
    /// A terminal observer, with progress bars when `bars`.
    pub fn new(bars: bool) -> Terminal {
        Terminal {
            bars,
            bar: None,
            clock: None,
            trained_ahead: Vec::new(),
        }
    }

    /// The same observer, told which run directories this invocation has
    /// just trained in child processes.
    pub fn with_trained_ahead(self, dirs: Vec<PathBuf>) -> Terminal {
        Terminal {
            trained_ahead: dirs,
            ..self
        }
    }
}

impl RunObserver for Terminal {
    fn epoch_started(&mut self, epoch: usize, epochs: usize, steps: usize) {
        let bar = match self.bars {
            true => ProgressBar::new(steps as u64),
            false => ProgressBar::hidden(),
        };
        // Invariant: the template is a literal checked by the test below.
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid template"));
        bar.set_prefix(format!("epoch {epoch}/{epochs}"));
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
    }

    fn epoch_finished(&mut self, record: &EpochRecord, epochs: usize) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        println!("{}", epoch_line(record, epochs));
    }

    fn theory_summary(&mut self, summary: &TheorySummary) {
        println!("{}", summary.line());
    }
}

impl ExperimentObserver for Terminal {
    fn run_started(&mut self, label: &str, action: RunAction, dir: &Path) {
        let read_back = matches!(action, RunAction::Reused | RunAction::Diverged);
        if read_back && self.trained_ahead.iter().any(|d| d == dir) {
            return;
        }
        println!("{label}: {action} {}", dir.display());
    }

    fn run_finished(&mut self, label: &str, line: &str) {
        println!("{label}: {line}");
    }

    fn warning(&mut self, warning: &Warning) {
        eprintln!("warning: {warning}");
    }
}

const TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}<{eta})";

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
    fn template_parses() {
        assert!(indicatif::ProgressStyle::with_template(super::TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::SHARPNESS_TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::CORRUPTION_TEMPLATE).is_ok());
    }
}
