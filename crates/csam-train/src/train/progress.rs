//! What a run shows while it trains: an indicatif bar per epoch (running
//! loss and accuracy) on stderr, and one summary line per epoch on stdout.

use indicatif::{ProgressBar, ProgressStyle};

use super::metrics_log::EpochRecord;

/// The progress bar of one epoch (hidden when disabled or stderr is not a terminal).
pub struct EpochProgress {
    bar: ProgressBar,
}

impl EpochProgress {
    /// Starts the bar of `epoch` (1-based) of `epochs`, `steps` steps long.
    pub fn start(epoch: usize, epochs: usize, steps: usize, visible: bool) -> Self {
        let bar = if visible {
            ProgressBar::new(steps as u64)
        } else {
            ProgressBar::hidden()
        };
        // Invariant: the template is a literal checked by the test below.
        bar.set_style(ProgressStyle::with_template(TEMPLATE).expect("valid template"));
        bar.set_prefix(format!("epoch {epoch}/{epochs}"));
        EpochProgress { bar }
    }

    /// Advances one step, showing the epoch's running means.
    pub fn step(&self, mean_loss: f64, accuracy: f64) {
        self.bar
            .set_message(format!("loss {mean_loss:.4} acc {accuracy:.4}"));
        self.bar.inc(1);
    }

    /// Removes the bar (the epoch line replaces it).
    pub fn finish(self) {
        self.bar.finish_and_clear();
    }
}

const TEMPLATE: &str = "{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed}<{eta})";

/// The epoch's line: training loss / accuracy and the validation metrics.
pub fn epoch_line(record: &EpochRecord, epochs: usize) -> String {
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
    }
}
