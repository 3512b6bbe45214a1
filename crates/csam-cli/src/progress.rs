//! What the terminal shows while csam trains: an indicatif bar per epoch
//! (running loss and accuracy) on stderr, one line per epoch and per
//! experiment run on stdout. The library reports events to this observer;
//! only here are they drawn.

use std::path::{Path, PathBuf};

use csam_data::corrupt::Corruption;
use csam_lab::sharpness::SharpnessObserver;
use csam_lab::shift::cifar_c::CorruptionObserver;
use csam_train::theory::TheorySummary;
use csam_train::train::metrics_log::EpochRecord;
use csam_train::train::{ExperimentObserver, RunAction, RunObserver};
use indicatif::{ProgressBar, ProgressStyle};

/// Draws progress on the terminal; `bars: false` (`--quiet`) keeps the lines
/// and hides the bars.
pub struct Terminal {
    bars: bool,
    bar: Option<ProgressBar>,
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
    }

    fn step(&mut self, mean_loss: f64, accuracy: f64) {
        if let Some(bar) = &self.bar {
            bar.set_message(format!("loss {mean_loss:.4} acc {accuracy:.4}"));
            bar.inc(1);
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
        if action == RunAction::Reused && self.trained_ahead.iter().any(|d| d == dir) {
            return;
        }
        println!("{label}: {action} {}", dir.display());
    }

    fn run_finished(&mut self, label: &str, line: &str) {
        println!("{label}: {line}");
    }
}

const TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}<{eta})";

/// The epoch's line: training loss / accuracy and the validation metrics.
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
    #[test]
    fn template_parses() {
        assert!(indicatif::ProgressStyle::with_template(super::TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::SHARPNESS_TEMPLATE).is_ok());
        assert!(indicatif::ProgressStyle::with_template(super::CORRUPTION_TEMPLATE).is_ok());
    }
}
