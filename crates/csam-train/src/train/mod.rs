//! Training runs: configuration, the run directory, the epoch loop,
//! evaluation, checkpoints and resume, progress output.
//!
//! A run is described by a [`crate::spec::RunSpec`] (defaults < config file < flags)
//! and lives in a run directory (see [`rundir`] for its files). Every file is
//! replaced atomically (temporary file + rename), so a run killed at any
//! moment leaves a consistent directory that `--resume` continues; the
//! resumed run ends with the same weights, bit for bit, as an uninterrupted
//! one on the same device, because data order and libtorch's random stream
//! are pure functions of (seed, epoch) (see [`checkpoint`]); before it
//! continues, `--resume` checks the directory against the checkpoint and
//! refuses one that disagrees (see [`integrity`]). One process trains into
//! a run directory at a time (see [`lock`]).

pub mod allocator;
pub mod atomic;
pub mod checkpoint;
pub mod claim;
pub mod divergence;
pub mod epoch_log;
pub mod error;
pub mod evaluate;
pub mod integrity;
pub mod lock;
pub mod metrics_log;
pub mod notice;
pub mod observer;
pub mod preflight;
pub mod replica;
pub mod run_data;
pub mod rundir;
mod runner;
pub mod saved_weights;
pub mod session;
pub mod summary;
pub mod trained;

pub use crate::spec::ConfigError;
pub use divergence::Divergence;
pub use error::{Remedy, TrainError};
pub use notice::RunNotice;
pub use observer::{ExperimentObserver, RunAction, RunObserver, Silent};
pub use replica::Replica;
pub use runner::{prepare, prepare_replica, run, PreparedRun, RunOutcome, TrainRequest};
pub use summary::RunSummary;
pub use trained::{Checkpoint, TrainedRun};
