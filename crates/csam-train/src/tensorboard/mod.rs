//! TensorBoard event files: every run directory's `events.out.tfevents.*`
//! holds the numbers of its `metrics.jsonl` (step = epoch), of its
//! `theory.jsonl` (step = global step) and, every few steps, the step's
//! training loss and learning rate (step = global step; [`StepPoint`]) as
//! TensorBoard scalars, so that
//! `tensorboard --logdir DIR` plots a run, or every run of a comparison,
//! while it trains.
//!
//! The format is written here, strictly and with no code generator:
//! TFRecord framing with masked CRC-32C checksums ([`record`]) around
//! protocol buffer `Event`s ([`proto`]); [`scalars`] says which tag each
//! number gets and [`run_file`] how a run's file is written, kept through a
//! resume, and built afterwards from the logs ([`backfill`]).

pub mod proto;
pub mod record;
pub mod run_file;
pub mod scalars;

pub use proto::{Event, Scalar, What};
pub use run_file::{backfill, backfill_all, event_files, EventWriter, Progress, FILE_PREFIX};
pub use scalars::StepPoint;

/// Bytes that are not an event file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EventFileError {
    /// A record's framing is broken (see [`record::RecordError`]).
    #[error(transparent)]
    Record(#[from] record::RecordError),
    /// A whole record is not an event.
    #[error("record at byte {offset}: {source}")]
    Event {
        /// The record's first byte in the file.
        offset: usize,
        #[source]
        source: proto::ProtoError,
    },
}

/// The events of an event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Events {
    /// Each whole record's event, in file order.
    pub events: Vec<Event>,
    /// Where a last record cut short begins (TensorBoard leaves it out until
    /// it is whole; a resumed run drops it).
    pub torn_at: Option<usize>,
}

/// Reads the events of an event file's bytes, checking every checksum.
pub fn read_events(bytes: &[u8]) -> Result<Events, EventFileError> {
    let read = record::read_records(bytes)?;
    let events = read
        .records
        .into_iter()
        .map(|(offset, data)| {
            Event::decode(data).map_err(|source| EventFileError::Event { offset, source })
        })
        .collect::<Result<_, _>>()?;
    Ok(Events {
        events,
        torn_at: read.torn_at,
    })
}
