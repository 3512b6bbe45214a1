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
//! * [`parallel`]: [`parallel::Threads`], the thread count of the `par_*`
//!   metrics (rows split into contiguous chunks, partials merged in order);
//! * [`calibrators`]: the [`calibrators::Calibrator`] trait and the calibrators,
//!   among them [`calibrators::temperature`];
//! * [`error`], the crate's one error type [`CalibError`].
//!
//! ## Example
//!
//! ```
//! use csam_calib::binning::{Binning, EdgeConvention, Norm};
//! use csam_calib::metrics::{self, summary::{summarize, MetricOptions}};
//! use ndarray::array;
//!
//! // Confidences 1.0 (wrong) and 0.95 (right): the README's first worked case.
//! let probs = array![[1.0, 0.0], [0.95, 0.05]];
//! let labels = [1, 0];
//! let right_closed = Binning::default(); // 15 bins (lo, hi]
//! let with_one_bin = Binning::EqualWidth { n_bins: 15, edges: EdgeConvention::LeftClosedWithOneBin };
//! let a = metrics::ece(probs.view(), &labels, &right_closed, Norm::L1)?;
//! let b = metrics::ece(probs.view(), &labels, &with_one_bin, Norm::L1)?;
//! // A few f64 roundings of values <= 1 (~1e-16 each); another bin moves these by 0.05.
//! assert!((a - 0.475).abs() < 1e-12 && (b - 0.525).abs() < 1e-12);
//!
//! let summary = summarize(probs.view(), &labels, &MetricOptions::default())?;
//! assert_eq!(summary.accuracy, 0.5);
//! # Ok::<(), csam_calib::CalibError>(())
//! ```
//!
//! The conventions (bin edges, AdaECE variants, TCE objectives, AUROC kinds)
//! are stated, with worked examples, in the crate README's "Metric
//! conventions" (crates/csam-calib/README.md).

pub mod binning;
pub mod calibrators;
pub mod error;
pub mod io;
pub mod metrics;
mod pair_keys;
pub mod parallel;
pub mod plot;
mod prefetch;
mod radix;
mod row_scan;
pub mod scores;

pub use error::{CalibError, Result};
