//! The data branch of a run: which data set, how much of its training part is
//! held out for validation, and how training batches are drawn.

use serde::{Deserialize, Serialize};

use super::check::invalid;
use super::ConfigError;
use csam_data::{DatasetSpec, Splits};

/// The data of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSpec {
    /// The data set (`fashion-mnist`, `digits`, `idx:DIR`, `cifar10:DIR`, ...).
    #[serde(with = "super::text")]
    pub source: DatasetSpec,
    /// How much of the training part is held out for validation (early
    /// stopping, post-hoc calibration).
    #[serde(default)]
    pub val_size: ValSize,
    /// The seed of the validation hold-out; `None` (the default, left out of
    /// `config.toml`): the run's seed. Runs that must share one split but
    /// differ in initialisation and data order (the members of a deep
    /// ensemble, whose validation predictions are averaged and calibrated)
    /// set it to one value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_seed: Option<u64>,
    /// Random crop with padding and horizontal flip (where the data allows a
    /// mirror) on training batches.
    #[serde(default = "yes")]
    pub augment: bool,
    /// Reshuffle the training set every epoch (false: file order).
    #[serde(default = "yes")]
    pub shuffle: bool,
}

fn yes() -> bool {
    true
}

impl DataSpec {
    /// The data set `source` with the default split and batch drawing.
    pub fn new(source: DatasetSpec) -> DataSpec {
        DataSpec {
            source,
            val_size: ValSize::default(),
            split_seed: None,
            augment: true,
            shuffle: true,
        }
    }

    /// The seed of the validation hold-out of a run seeded `run_seed`.
    pub fn split_seed(&self, run_seed: u64) -> u64 {
        self.split_seed.unwrap_or(run_seed)
    }

    /// Loads the data set and splits off the validation hold-out of a run
    /// seeded `run_seed`: the train / validation / test parts the run trains,
    /// selects and reports on.
    pub fn splits(&self, run_seed: u64) -> Result<Splits, csam_data::DataError> {
        let source = csam_data::load(&self.source)?;
        let n_train = source.train.as_ref().map_or(0, |train| train.n);
        csam_data::split(
            source,
            self.val_size.count(n_train),
            self.split_seed(run_seed),
        )
    }

    /// Checks the validation size (its fit to the data set is checked when
    /// the data is loaded, see [`ValSize::count`]).
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self.val_size {
            ValSize::Count(0) => Err(invalid(
                "val_size",
                0,
                "the best checkpoint is chosen on validation data: hold out at least 1 example",
            )),
            ValSize::Fraction(f) if !(f > 0.0 && f < 1.0) => Err(invalid(
                "val_size",
                f,
                "a fraction of the training part must lie in (0, 1); a whole number is a count",
            )),
            _ => Ok(()),
        }
    }
}

/// The validation hold-out: a number of examples, or a fraction of the
/// training part. Written as an integer (`5000`) or a float (`0.1`); the
/// split is stratified by class either way.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ValSize {
    /// This many examples.
    Count(usize),
    /// This fraction of the training part, rounded to the nearest example
    /// (at least 1).
    Fraction(f64),
}

impl Default for ValSize {
    /// 10% of the training part: fits every data set, from digits' 1,442
    /// training images to ImageNet's 1.28 million.
    fn default() -> Self {
        ValSize::Fraction(0.1)
    }
}

impl ValSize {
    /// The number of examples held out of a training part of `n_train`.
    pub fn count(self, n_train: usize) -> usize {
        match self {
            ValSize::Count(n) => n,
            ValSize::Fraction(f) => ((f * n_train as f64).round() as usize).max(1),
        }
    }
}

impl std::fmt::Display for ValSize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ValSize::Count(n) => write!(f, "{n}"),
            ValSize::Fraction(x) => write!(f, "{x}"),
        }
    }
}
