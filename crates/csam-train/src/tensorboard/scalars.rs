//! What a run's records look like in TensorBoard: every number of a
//! `metrics.jsonl` line at step = epoch (`lr`, `train/loss`, `val/ece`,
//! `test/accuracy`, `seconds`, `best`, ...), every number of a `theory.jsonl`
//! line at step = the global step (`theory/p_y`, `theory/lemma2_holds`, ...).
//! Tags are the records' own JSON field names, nested ones joined with `/`,
//! so a field added to a record appears without code here; `true` / `false`
//! are 1 / 0 (averaged by TensorBoard's smoothing, `theory/lemma2_holds` is
//! the running fraction of steps where Lemma 2 held); absent and null
//! values (a metric a run does not compute, an undefined ratio) are left out.
//! Every few steps, the training loss and learning rate of the step
//! ([`StepPoint`], tags [`STEP_LOSS_TAG`] and [`STEP_LR_TAG`]) at step = the
//! global step, as Lightning's `log_every_n_steps` logs them.

use serde::Serialize;
use serde_json::Value;

use super::proto::{Event, Scalar, What};
use crate::theory::TheoryRecord;
use crate::train::metrics_log::EpochRecord;

/// The tag prefix of the theory diagnostics.
pub const THEORY_PREFIX: &str = "theory/";

/// The tag of a step's training loss: the mean over its batch at theta
/// (the first pass), as the epoch's `train/loss` averages it.
pub const STEP_LOSS_TAG: &str = "train/loss_step";

/// The tag of a step's learning rate, beside the epoch's `lr`.
pub const STEP_LR_TAG: &str = "lr_step";

/// The training loss and learning rate of one step, numbered as
/// `theory.jsonl` numbers its steps (the global step, from 0). A
/// data-parallel run records rank 0's part of the batch, as Lightning
/// logs a step's loss without `sync_dist`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepPoint {
    /// The step's global number.
    pub global_step: usize,
    /// The batch's mean training loss at theta.
    pub loss: f64,
    /// The learning rate the step took.
    pub lr: f64,
}

impl StepPoint {
    /// Whether the step numbered `global_step` is recorded when a point is
    /// taken every `every` steps (0: none): steps 0, `every`, `2 every`, ...
    pub fn is_due(global_step: usize, every: usize) -> bool {
        every > 0 && global_step.is_multiple_of(every)
    }
}

/// The event of a step's point, at `wall_time`.
pub fn step_event(point: &StepPoint, wall_time: f64) -> Event {
    let scalar = |tag: &str, value: f64| Scalar {
        tag: tag.to_string(),
        value: value as f32,
    };
    Event {
        wall_time,
        step: point.global_step as i64,
        what: What::Summary(vec![
            scalar(STEP_LOSS_TAG, point.loss),
            scalar(STEP_LR_TAG, point.lr),
        ]),
    }
}

/// The event of one epoch's `metrics.jsonl` line, at `wall_time`.
pub fn epoch_event(record: &EpochRecord, wall_time: f64) -> Event {
    Event {
        wall_time,
        step: record.epoch as i64,
        what: What::Summary(scalars(record, "", &["epoch"])),
    }
}

/// The event of one `theory.jsonl` line, at `wall_time`.
pub fn theory_event(record: &TheoryRecord, wall_time: f64) -> Event {
    Event {
        wall_time,
        step: record.global_step as i64,
        what: What::Summary(scalars(record, THEORY_PREFIX, &["epoch", "global_step"])),
    }
}

/// Whether `event` holds theory diagnostics.
pub fn is_theory(event: &Event) -> bool {
    event
        .scalars()
        .first()
        .is_some_and(|s| s.tag.starts_with(THEORY_PREFIX))
}

/// Whether `event` is stepped by the global step (theory diagnostics, a
/// step's point) rather than by the epoch (an epoch's metrics).
pub fn is_stepped(event: &Event) -> bool {
    is_theory(event)
        || event
            .scalars()
            .first()
            .is_some_and(|s| s.tag == STEP_LOSS_TAG)
}

/// The numbers of `record` as scalars tagged `prefix` + their JSON path,
/// leaving out the top-level fields `skip` (the step's own fields).
fn scalars(record: &impl Serialize, prefix: &str, skip: &[&str]) -> Vec<Scalar> {
    // Invariant: the records are structs of numbers, booleans and nested
    // structs, which always serialise.
    let value = serde_json::to_value(record).expect("a run record serialises to JSON");
    let mut out = Vec::new();
    if let Value::Object(fields) = value {
        for (name, field) in fields {
            if !skip.contains(&name.as_str()) {
                flatten(&format!("{prefix}{name}"), &field, &mut out);
            }
        }
    }
    out
}

fn flatten(tag: &str, value: &Value, out: &mut Vec<Scalar>) {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Object(fields) => {
            for (name, field) in fields {
                flatten(&format!("{tag}/{name}"), field, out);
            }
            None
        }
        Value::Null | Value::String(_) | Value::Array(_) => None,
    };
    if let Some(number) = number {
        out.push(Scalar {
            tag: tag.to_string(),
            value: number as f32,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> EpochRecord {
        let json = serde_json::json!({
            "epoch": 3, "lr": 0.05, "train": {"loss": 0.5, "accuracy": 0.75, "second_pass": 1.0},
            "val": {"accuracy": 0.5, "ece": 0.125, "ece_l2": 0.1, "mce": 0.2, "adaece": 0.1,
                    "classwise_ece": 0.05, "nll": 0.7, "brier": 0.3,
                    "auroc_misclassification": 0.7, "auroc_ovr": 0.8, "mean_confidence": 0.6,
                    "mean_entropy": 1.0, "tce": null},
            "best": true, "seconds": 2.5
        });
        serde_json::from_value(json).unwrap()
    }

    fn value(event: &Event, tag: &str) -> Option<f32> {
        event
            .scalars()
            .iter()
            .find(|s| s.tag == tag)
            .map(|s| s.value)
    }

    #[test]
    fn an_epoch_is_its_numbers_at_step_epoch() {
        let event = epoch_event(&record(), 10.0);
        assert_eq!((event.step, event.wall_time), (3, 10.0));
        assert_eq!(value(&event, "lr"), Some(0.05));
        assert_eq!(value(&event, "train/loss"), Some(0.5));
        assert_eq!(value(&event, "train/second_pass"), Some(1.0));
        assert_eq!(value(&event, "val/ece"), Some(0.125));
        assert_eq!(value(&event, "best"), Some(1.0));
        assert_eq!(value(&event, "seconds"), Some(2.5));
        for absent in ["epoch", "val/tce", "test/accuracy", "balcal_lambda"] {
            assert_eq!(value(&event, absent), None, "{absent}");
        }
        assert_eq!(event.scalars().len(), 4 + 12 + 2);
        assert!(!is_theory(&event));
    }

    #[test]
    fn a_theory_step_is_its_numbers_at_the_global_step() {
        let record = TheoryRecord {
            epoch: 2,
            global_step: 41,
            p_y: 0.5,
            p_y_tilde: 0.25,
            grad_norm: 3.0,
            bound: 0.4,
            lemma2_holds: false,
            lambda: None,
            lambda_0: Some(2.0),
            entropy: 0.6,
        };
        let event = theory_event(&record, 1.0);
        assert_eq!(event.step, 41);
        let mut tags: Vec<&str> = event.scalars().iter().map(|s| s.tag.as_str()).collect();
        tags.sort_unstable();
        assert_eq!(
            tags,
            [
                "theory/bound",
                "theory/entropy",
                "theory/grad_norm",
                "theory/lambda_0",
                "theory/lemma2_holds",
                "theory/p_y",
                "theory/p_y_tilde",
            ]
        );
        assert_eq!(value(&event, "theory/lemma2_holds"), Some(0.0));
        assert!(is_theory(&event) && is_stepped(&event));
    }

    #[test]
    fn a_step_point_is_its_loss_and_lr_at_the_global_step() {
        let point = StepPoint {
            global_step: 150,
            loss: 0.75,
            lr: 0.025,
        };
        let event = step_event(&point, 1.0);
        assert_eq!(event.step, 150);
        assert_eq!(value(&event, "train/loss_step"), Some(0.75));
        assert_eq!(value(&event, "lr_step"), Some(0.025));
        assert_eq!(event.scalars().len(), 2);
        assert!(is_stepped(&event) && !is_theory(&event));
        assert!(!is_stepped(&epoch_event(&record(), 1.0)));
        let due: Vec<usize> = (0..120).filter(|&s| StepPoint::is_due(s, 50)).collect();
        assert_eq!(due, [0, 50, 100]);
        assert!(!(0..120).any(|s| StepPoint::is_due(s, 0)));
    }
}
