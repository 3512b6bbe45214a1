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
//!
//! ## Modules
//!
//! * [`scores`]: softmax / log-softmax (log-sum-exp), `ln p` with a clamp, and the
//!   validators of probabilities, logits and labels (errors name the row);
//! * [`binning`]: the one binning implementation ([`binning::Binning`]: equal
//!   width with two edge conventions, equal mass with two variants) and the
//!   per-bin statistics [`binning::BinStats`] every binned metric is read from;
//! * [`metrics`]: ECE / MCE / RMS, AdaECE, classwise ECE, AUROC (three kinds),
//!   NLL, Brier, accuracy, confidence, entropy, confidence histogram, bootstrap
//!   intervals, TCE and [`metrics::summary::summarize`];
//! * [`calibrators`]: the [`calibrators::Calibrator`] trait and the calibrators,
//!   among them [`calibrators::temperature`];
//! * [`error`], the crate's one error type [`CalibError`].
//!
//! The conventions (bin edges, AdaECE variants, TCE objectives, AUROC kinds)
//! are those of the project's paper notes, §2; the crate README lists them
//! with worked examples.

pub mod binning;
pub mod calibrators;
pub mod error;
pub mod metrics;
pub mod scores;

pub use error::{CalibError, Result};
