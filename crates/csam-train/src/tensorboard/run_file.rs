//! The event file of a run directory: `events.out.tfevents.<seconds>.<host>.<pid>.0`,
//! named as PyTorch's `SummaryWriter` names its files (creation time in
//! 10 digits, so names sort by age).
//!
//! Training appends each epoch's events (its theory steps, its step points,
//! then its metrics) as whole records and syncs them before the epoch's checkpoint,
//! so TensorBoard can read the file while the run trains. A run killed
//! before its checkpoint may leave events of an epoch that resuming trains
//! again, or a record cut short: [`EventWriter::for_run`] keeps only the
//! checkpointed epochs' events (rewriting the file atomically when it drops
//! any), so a resumed run's file holds each step once. A run without an
//! event file (trained before this existed, or with event files off) gets
//! one built from its `metrics.jsonl` and `theory.jsonl`, as [`backfill`]
//! builds it for a finished run. No log keeps the step points (a step's
//! loss and learning rate), so the epochs a file gets from the logs lack
//! them.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use super::proto::{Event, What};
use super::read_events;
use super::record::frame;
use super::scalars::{epoch_event, is_stepped, step_event, theory_event, StepPoint};
use crate::theory::{theory_log, TheoryRecord};
use crate::train::atomic::write_atomic;
use crate::train::lock::{hostname, RunLock};
use crate::train::metrics_log::{EpochRecord, MetricsLog};
use crate::train::rundir::RunDir;
use crate::train::{Remedy, TrainError};

type Result<T> = std::result::Result<T, TrainError>;

/// The start of every event file's name (TensorBoard reads the files of a
/// directory whose names contain `tfevents`).
pub const FILE_PREFIX: &str = "events.out.tfevents.";

/// What a run has committed: the epochs and steps of its checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Finished epochs.
    pub epochs: usize,
    /// Steps taken (the global step of the next one).
    pub global_step: usize,
}

/// The event file a training run appends to.
#[derive(Debug)]
pub struct EventWriter {
    path: PathBuf,
}

/// The event files directly in `dir`, oldest first.
pub fn event_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).map_err(TrainError::io("read directory", dir))?;
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(FILE_PREFIX))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    files.sort();
    Ok(files)
}

impl EventWriter {
    /// The event file of the run in `run_dir` holding exactly the events of
    /// the `done` epochs and steps: the newest event file there with the
    /// events of later ones (and a cut record) dropped and those of epochs
    /// it lacks (trained with the file turned off) added from the run's
    /// logs, or a new one built from the logs, which hold just those epochs.
    pub fn for_run(run_dir: &RunDir, done: Progress) -> Result<EventWriter> {
        let path = match event_files(run_dir.root())?.pop() {
            Some(path) => {
                let last = keep_committed(&path, done)?;
                let writer = EventWriter { path };
                if last < done.epochs {
                    writer.append(&log_events(run_dir, last)?)?;
                }
                return Ok(writer);
            }
            None => new_file(run_dir.root()),
        };
        write_atomic(&path, &encode(&with_version(log_events(run_dir, 0)?)))?;
        Ok(EventWriter { path })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an epoch's events, its theory steps', its step points' and
    /// its metrics', all at this moment's wall time, and syncs them to disk.
    pub fn append_epoch(
        &self,
        record: &EpochRecord,
        theory: &[TheoryRecord],
        points: &[StepPoint],
    ) -> Result<()> {
        let now = now();
        let mut events: Vec<Event> = theory.iter().map(|t| theory_event(t, now)).collect();
        events.extend(points.iter().map(|p| step_event(p, now)));
        events.push(epoch_event(record, now));
        self.append(&events)
    }

    /// Appends `events` as whole records and syncs them to disk.
    fn append(&self, events: &[Event]) -> Result<()> {
        let path = &self.path;
        let mut file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(TrainError::io("open", path))?;
        file.write_all(&encode(events))
            .and_then(|()| file.sync_data())
            .map_err(TrainError::io("append to", path))
    }
}

/// Writes the event file of the run in `dir` from its `metrics.jsonl` and
/// `theory.jsonl` (for a run trained without event files). Refuses while a
/// process trains into `dir`, and when `dir` already holds event files
/// unless `replace`, which then removes them once the new file is in place.
/// Returns the new file.
pub fn backfill(dir: &Path, replace: bool) -> Result<PathBuf> {
    let run_dir = RunDir::new(dir);
    run_dir.require_run()?;
    if !run_dir.metrics_log().is_file() {
        return Err(TrainError::NoMetrics {
            dir: dir.to_path_buf(),
        });
    }
    let _lock = RunLock::acquire(dir)?;
    let existing = event_files(dir)?;
    if let (Some(first), false) = (existing.first(), replace) {
        return Err(TrainError::refused(
            format!("{} already holds an event file", first.display()),
            Remedy::Replace,
        ));
    }
    let path = new_file(dir);
    write_atomic(&path, &encode(&with_version(log_events(&run_dir, 0)?)))?;
    for old in existing.iter().filter(|old| **old != path) {
        std::fs::remove_file(old).map_err(TrainError::io("remove", old))?;
    }
    Ok(path)
}

/// Writes the event file of every run in `dir`: `dir` itself when it is a
/// run directory, otherwise each run directory below it with a finished
/// epoch (the runs of a comparison, sweep or grid), in path order. Without
/// `replace` every run is checked before any is written, so a refusal
/// leaves all of them as they were. Returns the new files.
pub fn backfill_all(dir: &Path, replace: bool) -> Result<Vec<PathBuf>> {
    if RunDir::new(dir).config().is_file() {
        return Ok(vec![backfill(dir, replace)?]);
    }
    let mut runs = Vec::new();
    runs_below(dir, &mut runs)?;
    if runs.is_empty() {
        return Err(TrainError::NoRunsBelow {
            dir: dir.to_path_buf(),
        });
    }
    runs.sort();
    if !replace {
        for run in &runs {
            if let Some(first) = event_files(run)?.first() {
                return Err(TrainError::refused(
                    format!("{} already holds an event file", first.display()),
                    Remedy::Replace,
                ));
            }
        }
    }
    runs.iter().map(|run| backfill(run, replace)).collect()
}

/// Pushes the run directories with a finished epoch below `dir` (not
/// following symbolic links; runs hold no runs).
fn runs_below(dir: &Path, runs: &mut Vec<PathBuf>) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(TrainError::io("read directory", dir))?;
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let run = RunDir::new(&path);
        match run.config().is_file() {
            true if run.metrics_log().is_file() => runs.push(path),
            true => {}
            false => runs_below(&path, runs)?,
        }
    }
    Ok(())
}

/// `events` after the version event a file begins with (dated as the first
/// of them).
fn with_version(events: Vec<Event>) -> Vec<Event> {
    let wall_time = events.first().map_or_else(now, |e| e.wall_time);
    std::iter::once(Event::file_version(wall_time))
        .chain(events)
        .collect()
}

/// The events of the run's logs of the epochs after `after`: each epoch's
/// theory steps, then its metrics. The logs keep no clock time, so each
/// epoch's events get the time its `metrics.jsonl` line was written,
/// counted back from the file's last change by the `seconds` of the epochs
/// after it (exact for a run trained in one go, up to the final evaluation).
fn log_events(run_dir: &RunDir, after: usize) -> Result<Vec<Event>> {
    let metrics = MetricsLog::new(run_dir.metrics_log());
    let records = metrics.read()?;
    let theory = theory_log(run_dir.root());
    let steps = match theory.path().is_file() {
        true => theory.read()?,
        false => Vec::new(),
    };
    let last_change = std::fs::metadata(metrics.path())
        .and_then(|m| m.modified())
        .map_or_else(|_| now(), seconds_since_epoch);
    let mut still_to_come: f64 = records.iter().map(|r| r.seconds).sum();
    let mut events = Vec::new();
    let mut steps = steps.iter().peekable();
    for record in &records {
        still_to_come -= record.seconds;
        let wall_time = last_change - still_to_come;
        let wanted = record.epoch > after;
        while let Some(step) = steps.next_if(|s| s.epoch <= record.epoch) {
            if wanted {
                events.push(theory_event(step, wall_time));
            }
        }
        if wanted {
            events.push(epoch_event(record, wall_time));
        }
    }
    Ok(events)
}

/// Drops from the event file at `path` the events of epochs and steps after
/// `done` and a last record cut short, rewriting it atomically when there
/// are any (it is left untouched, and open in TensorBoard, otherwise).
/// Returns the last epoch it keeps (0: none).
fn keep_committed(path: &Path, done: Progress) -> Result<usize> {
    let corrupt = |message: String| TrainError::Corrupt {
        path: path.to_path_buf(),
        message: format!(
            "{message}; move it out of the run directory and resume: the run writes a new one \
             from metrics.jsonl"
        ),
    };
    let bytes = std::fs::read(path).map_err(TrainError::io("read", path))?;
    let read = read_events(&bytes).map_err(|e| corrupt(e.to_string()))?;
    let mut kept = Vec::with_capacity(read.events.len());
    let mut dropped = read.torn_at.is_some();
    let mut last = 0;
    for event in read.events {
        let committed = match event.what {
            What::FileVersion(_) => true,
            What::Summary(_) if is_stepped(&event) => event.step < done.global_step as i64,
            What::Summary(_) => event.step <= done.epochs as i64,
        };
        if committed && matches!(event.what, What::Summary(_)) && !is_stepped(&event) {
            last = last.max(usize::try_from(event.step).unwrap_or(0));
        }
        match committed {
            true => kept.push(event),
            false => dropped = true,
        }
    }
    if dropped {
        write_atomic(path, &encode(&kept))?;
    }
    Ok(last)
}

/// The events framed as records, in order.
fn encode(events: &[Event]) -> Vec<u8> {
    events.iter().flat_map(|e| frame(&e.encode())).collect()
}

/// A new event file's path in `dir`, named for this moment, host and process.
fn new_file(dir: &Path) -> PathBuf {
    // A host name is letters, digits, `-` and `.`; anything else would
    // change the path's meaning.
    let host: String = hostname()
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                true => c,
                false => '_',
            },
        )
        .collect();
    let seconds = now() as u64;
    dir.join(format!(
        "{FILE_PREFIX}{seconds:010}.{host}.{}.0",
        std::process::id()
    ))
}

fn now() -> f64 {
    seconds_since_epoch(SystemTime::now())
}

fn seconds_since_epoch(time: SystemTime) -> f64 {
    time.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensorboard::read_events;

    fn record(epoch: usize) -> EpochRecord {
        let metrics = serde_json::json!({
            "accuracy": 0.5, "ece": 0.1, "ece_l2": 0.1, "mce": 0.2, "adaece": 0.1,
            "classwise_ece": 0.05, "nll": 0.5, "brier": 0.3, "auroc_misclassification": 0.7,
            "auroc_ovr": 0.8, "mean_confidence": 0.6, "mean_entropy": 1.0, "tce": null
        });
        serde_json::from_value(serde_json::json!({
            "epoch": epoch, "lr": 0.1 / epoch as f64, "train": {"loss": 1.0, "accuracy": 0.4},
            "val": metrics, "best": true, "seconds": 2.0
        }))
        .unwrap()
    }

    fn step(epoch: usize, global_step: usize) -> TheoryRecord {
        TheoryRecord {
            epoch,
            global_step,
            p_y: 0.5,
            p_y_tilde: 0.4,
            grad_norm: 1.0,
            bound: 0.45,
            lemma2_holds: true,
            lambda: Some(1.2),
            lambda_0: None,
            entropy: 0.69,
        }
    }

    /// A run directory with a config, `epochs` logged epochs of two
    /// theory steps each.
    fn run(epochs: usize) -> (tempfile::TempDir, RunDir) {
        let dir = tempfile::tempdir().unwrap();
        let run = RunDir::new(dir.path());
        std::fs::write(run.config(), "").unwrap();
        for epoch in 1..=epochs {
            MetricsLog::new(run.metrics_log())
                .append(&record(epoch))
                .unwrap();
            let steps = [step(epoch, 2 * epoch - 2), step(epoch, 2 * epoch - 1)];
            theory_log(run.root()).append_all(&steps).unwrap();
        }
        (dir, run)
    }

    /// (step, is stepped by the global step) of every summary event of the file.
    fn steps(path: &Path) -> Vec<(i64, bool)> {
        let read = read_events(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(
            read.events[0].what,
            What::FileVersion("brain.Event:2".into())
        );
        read.events[1..]
            .iter()
            .map(|e| (e.step, is_stepped(e)))
            .collect()
    }

    #[test]
    fn a_resumed_run_keeps_the_checkpointed_epochs_once() {
        let (_dir, run) = run(0);
        let start = Progress {
            epochs: 0,
            global_step: 0,
        };
        let writer = EventWriter::for_run(&run, start).unwrap();
        for epoch in 1..=3 {
            let steps = [step(epoch, 2 * epoch - 2), step(epoch, 2 * epoch - 1)];
            // A point every other step: the epoch's first.
            let points = [StepPoint {
                global_step: 2 * epoch - 2,
                loss: 1.0 / epoch as f64,
                lr: 0.1,
            }];
            writer
                .append_epoch(&record(epoch), &steps, &points)
                .unwrap();
        }
        // Killed after epoch 3's events, before its checkpoint, mid-record.
        let mut bytes = std::fs::read(writer.path()).unwrap();
        bytes.extend(&frame(&epoch_event(&record(4), 1.0).encode())[..7]);
        std::fs::write(writer.path(), &bytes).unwrap();
        let done = Progress {
            epochs: 2,
            global_step: 4,
        };
        let again = EventWriter::for_run(&run, done).unwrap();
        assert_eq!(again.path(), writer.path());
        let expected = [
            (0, true),
            (1, true),
            (0, true),
            (1, false),
            (2, true),
            (3, true),
            (2, true),
            (2, false),
        ];
        assert_eq!(steps(again.path()), expected);
        // Nothing to drop: the file is left as it is.
        let before = std::fs::metadata(again.path()).unwrap().modified().unwrap();
        EventWriter::for_run(&run, done).unwrap();
        let after = std::fs::metadata(again.path()).unwrap().modified().unwrap();
        assert_eq!(before, after);
    }

    #[test]
    fn epochs_trained_with_the_file_off_are_added_from_the_logs() {
        let (_dir, run) = run(3);
        let start = Progress {
            epochs: 0,
            global_step: 0,
        };
        // Epoch 1 trained with the file on; epochs 2 and 3 with it off.
        let writer = EventWriter::for_run(&RunDir::new(run.root()), start).unwrap();
        std::fs::write(writer.path(), encode(&[Event::file_version(0.0)])).unwrap();
        writer
            .append_epoch(&record(1), &[step(1, 0), step(1, 1)], &[])
            .unwrap();
        let done = Progress {
            epochs: 3,
            global_step: 6,
        };
        let again = EventWriter::for_run(&run, done).unwrap();
        let mut expected = vec![(0, true), (1, true), (1, false)];
        expected.extend([
            (2, true),
            (3, true),
            (2, false),
            (4, true),
            (5, true),
            (3, false),
        ]);
        assert_eq!(steps(again.path()), expected);
    }

    #[test]
    fn a_corrupt_event_file_stops_the_resume_with_what_to_do() {
        let (_dir, run) = run(0);
        let start = Progress {
            epochs: 0,
            global_step: 0,
        };
        let writer = EventWriter::for_run(&run, start).unwrap();
        writer.append_epoch(&record(1), &[], &[]).unwrap();
        let mut bytes = std::fs::read(writer.path()).unwrap();
        let last = bytes.len() - 6;
        bytes[last] ^= 1;
        std::fs::write(writer.path(), &bytes).unwrap();
        let err = EventWriter::for_run(&run, start).unwrap_err().to_string();
        assert!(err.contains("fails its checksum"), "{err}");
        assert!(err.contains("move it out of the run directory"), "{err}");
    }

    #[test]
    fn backfill_writes_the_logs_and_replaces_only_when_asked() {
        let (dir, run) = run(2);
        let path = backfill(dir.path(), false).unwrap();
        let expected = [
            (0, true),
            (1, true),
            (1, false),
            (2, true),
            (3, true),
            (2, false),
        ];
        assert_eq!(steps(&path), expected);
        let events = read_events(&std::fs::read(&path).unwrap()).unwrap().events;
        // Epoch 2 ends 2 s after epoch 1, when metrics.jsonl was last written.
        assert_eq!(events[6].wall_time - events[3].wall_time, 2.0);
        assert_eq!(events[2].wall_time, events[3].wall_time);
        let err = backfill(dir.path(), false).unwrap_err().to_string();
        assert!(err.contains("already holds an event file"), "{err}");
        let replaced = backfill(dir.path(), true).unwrap();
        assert_eq!(
            event_files(run.root()).unwrap(),
            std::slice::from_ref(&replaced)
        );
        assert_eq!(steps(&replaced), expected);
    }

    #[test]
    fn every_run_below_a_directory_is_checked_before_any_is_written() {
        let top = tempfile::tempdir().unwrap();
        let (a, b) = (top.path().join("sgd/seed-0"), top.path().join("sam/seed-0"));
        for (dir, epochs) in [(&a, 1), (&b, 2)] {
            std::fs::create_dir_all(dir).unwrap();
            let (source, _) = run(epochs);
            for name in ["config.toml", "metrics.jsonl", "theory.jsonl"] {
                std::fs::copy(source.path().join(name), dir.join(name)).unwrap();
            }
        }
        backfill(&b, false).unwrap();
        let err = backfill_all(top.path(), false).unwrap_err().to_string();
        assert!(err.contains("already holds an event file"), "{err}");
        assert!(event_files(&a).unwrap().is_empty(), "nothing written");
        let written = backfill_all(top.path(), true).unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(steps(&written[1]).len(), 3, "sgd: one epoch");
        let empty = tempfile::tempdir().unwrap();
        let err = backfill_all(empty.path(), false).unwrap_err().to_string();
        assert!(err.contains("holds no run directory"), "{err}");
    }
}
