//! # csam-calib: measure and repair the calibration of any classifier
//!
//! This crate knows nothing about deep learning: it works on predictions,
//! an `N x K` matrix of class probabilities (or logits) and `N` integer labels,
//! however they were produced. It provides
//!
//! * metrics: ECE (equal-width bins, two bin-edge conventions, l1 / l2 / max),
//!   adaptive ECE, classwise ECE, TCE, three AUROCs, NLL, Brier, accuracy,
//!   confidence, entropy, reliability-diagram data and bootstrap intervals;
//! * post-hoc calibrators behind one fit / transform trait;
//! * readers for predictions saved by other tools (`.npy`, `.npz`, CSV).
//!
//! Every binned metric is computed from one shared binning pass, so the
//! reliability diagram, ECE, MCE and classwise ECE always agree with each other.

pub mod binning;
pub mod calibrators;
pub mod error;
pub mod io;
pub mod metrics;
pub mod plot;
pub mod scores;

pub use error::{CalibError, Result};
