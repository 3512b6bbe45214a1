//! Every calibrator by name: [`CalibratorKind`] parses the names used on the command
//! line, [`fit`] fits one with its default settings, and [`FittedCalibrator`] holds
//! the fitted parameters of any of them, with a JSON form tagged by `"method"`:
//!
//! ```json
//! {"method": "platt", "slope": 1.3, "intercept": -0.2}
//! ```
//!
//! Reading JSON validates the parameters (shapes such as a `K x K` matrix, finiteness,
//! monotone isotonic curves), so a loaded calibrator is always usable. Reading a file
//! ([`FittedCalibrator::load`]) is bounded by [`MAX_CALIBRATOR_FILE_BYTES`].

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::dirichlet::DirichletCalibration;
use super::histogram::HistogramBinning;
use super::isotonic::IsotonicCalibration;
use super::matrix::MatrixScaling;
use super::platt::PlattScaling;
use super::vector::VectorScaling;
use super::Calibrator;
use crate::error::{CalibError, Result};
use crate::io::{format_error, io_error, open_regular_file};

/// Declares the calibrators once: `Variant => "name", Type;` adds the variant to
/// [`CalibratorKind`] and [`FittedCalibrator`] and to every dispatch below. `Type`
/// must implement `Calibrator + Default + Clone + Debug + Serialize + Deserialize`,
/// with `Default` being the unfitted calibrator with its default settings.
macro_rules! calibrator_registry {
    ($($variant:ident => $name:literal, $calibrator:ty;)+) => {
        /// A post-hoc calibration method, by its command-line name.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum CalibratorKind {
            $(
                #[doc = concat!("`", $name, "`: [`", stringify!($calibrator), "`].")]
                $variant,
            )+
        }

        impl CalibratorKind {
            /// Every method, in the order of `--help` listings.
            pub const ALL: &'static [CalibratorKind] = &[$(Self::$variant),+];

            /// The command-line name (also the JSON `"method"` tag).
            pub fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)+
                }
            }

            fn fit_default(self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<FittedCalibrator> {
                match self {
                    $(Self::$variant => {
                        let mut calibrator = <$calibrator>::default();
                        calibrator.fit(logits, labels)?;
                        Ok(FittedCalibrator::$variant(calibrator))
                    })+
                }
            }
        }

        /// The fitted parameters of any calibrator. Serialised as a JSON object whose
        /// `"method"` field is the [`CalibratorKind`] name.
        #[derive(Clone, Debug, Serialize, Deserialize)]
        #[serde(tag = "method")]
        pub enum FittedCalibrator {
            $(
                #[doc = concat!("Fitted `", $name, "`.")]
                #[serde(rename = $name)]
                $variant($calibrator),
            )+
        }

        impl FittedCalibrator {
            /// Which method this is.
            pub fn kind(&self) -> CalibratorKind {
                match self {
                    $(Self::$variant(_) => CalibratorKind::$variant,)+
                }
            }

            /// The calibrator behind the common trait.
            pub fn as_calibrator(&self) -> &dyn Calibrator {
                match self {
                    $(Self::$variant(c) => c,)+
                }
            }

            fn as_calibrator_mut(&mut self) -> &mut dyn Calibrator {
                match self {
                    $(Self::$variant(c) => c,)+
                }
            }
        }
    };
}

calibrator_registry! {
    Temperature => "temperature", super::temperature::TemperatureScaling;
    Vector => "vector", VectorScaling;
    Matrix => "matrix", MatrixScaling;
    Dirichlet => "dirichlet", DirichletCalibration;
    Histogram => "histogram", HistogramBinning;
    Isotonic => "isotonic", IsotonicCalibration;
    Platt => "platt", PlattScaling;
}

impl fmt::Display for CalibratorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CalibratorKind {
    type Err = CalibError;

    /// Parses a method name (ASCII case-insensitive); an unknown name lists the valid ones.
    fn from_str(name: &str) -> Result<Self> {
        let wanted = name.trim();
        Self::ALL
            .iter()
            .copied()
            .find(|kind| kind.name().eq_ignore_ascii_case(wanted))
            .ok_or_else(|| {
                let valid: Vec<&str> = Self::ALL.iter().map(|k| k.name()).collect();
                CalibError::InvalidArgument(format!(
                    "unknown calibrator '{name}'; valid: {}",
                    valid.join(", ")
                ))
            })
    }
}

/// Fits calibrator `kind`, with its default settings, on validation logits
/// (`N x K`) and labels (`N`, in `0..K`).
pub fn fit(
    kind: CalibratorKind,
    logits: ArrayView2<'_, f64>,
    labels: &[usize],
) -> Result<FittedCalibrator> {
    kind.fit_default(logits, labels)
}

impl FittedCalibrator {
    /// Calibrated probabilities for logits with the fitted number of classes.
    pub fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        self.as_calibrator().transform(logits)
    }

    /// Pretty-printed JSON, tagged with `"method"`.
    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self)
            .map_err(|e| CalibError::InvalidArgument(format!("cannot write calibrator JSON: {e}")))
    }

    /// Reads JSON written by [`to_json`](Self::to_json), refusing malformed JSON,
    /// unknown methods and parameters of the wrong shape.
    pub fn from_json(json: &str) -> Result<Self> {
        serde_json::from_str(json)
            .map_err(|e| CalibError::InvalidArgument(format!("invalid calibrator JSON: {e}")))
    }
}

/// The largest calibrator file [`FittedCalibrator::load`] reads: 64 MiB.
///
/// The largest calibrators the CLI and the Python package save, in their
/// pretty-printed JSON at most 34 bytes a number (24 characters of the
/// shortest round-trip form, up to 8 of indentation, `,` and a newline):
///
/// * matrix scaling and Dirichlet calibration, `K^2 + K` numbers: 32 MB for
///   ImageNet's `K = 1000`, and up to `K = 1400` under the cap;
/// * isotonic regression, at most `4 (N + K)` numbers for `N` validation
///   rows (a class's curve keeps at most two thresholds, `x` and `y` each, per
///   pooled block, and every block after the first holds a row of that
///   class): up to `N + K = 490 000` under the cap;
/// * histogram binning, `K M` bin values (`M = 15`): up to `K = 130 000`;
/// * temperature, vector and Platt scaling: a few numbers, or `2 K`.
///
/// A file longer than this is refused before it is read, so a wrong path
/// cannot make a loader read gigabytes.
pub const MAX_CALIBRATOR_FILE_BYTES: u64 = 64 << 20;

impl FittedCalibrator {
    /// Reads a calibrator saved as [`to_json`](Self::to_json) writes it (`csam
    /// metrics --save-calibrators`, the Python package's `save`).
    ///
    /// Only a regular file is read: a device such as `/dev/zero`, a FIFO or
    /// a directory has no length to check and is refused. So is a file over
    /// [`MAX_CALIBRATOR_FILE_BYTES`], before any of it is read; and at most one
    /// byte past the cap is read, should the file grow meanwhile.
    pub fn load(path: &Path) -> Result<Self> {
        let (file, len) = open_regular_file(path)?;
        check_calibrator_size(path, len)?;
        let mut text = String::with_capacity(usize::try_from(len).unwrap_or(0));
        file.take(MAX_CALIBRATOR_FILE_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::InvalidData => {
                    format_error(path, "not a calibrator: the file is not UTF-8 text".into())
                }
                _ => io_error(path, e),
            })?;
        check_calibrator_size(path, text.len() as u64)?;
        Self::from_json(&text).map_err(|e| format_error(path, e.to_string()))
    }
}

/// Refuses a calibrator file of `len` bytes over [`MAX_CALIBRATOR_FILE_BYTES`].
fn check_calibrator_size(path: &Path, len: u64) -> Result<()> {
    if len > MAX_CALIBRATOR_FILE_BYTES {
        return Err(format_error(
            path,
            format!(
                "{len} bytes, more than a calibrator file holds (at most \
                 {MAX_CALIBRATOR_FILE_BYTES} bytes, 64 MiB); is this a calibrator?"
            ),
        ));
    }
    Ok(())
}

impl Calibrator for FittedCalibrator {
    fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Refits the same method (keeping its settings, e.g. regulariser or bin count).
    fn fit(&mut self, logits: ArrayView2<'_, f64>, labels: &[usize]) -> Result<()> {
        self.as_calibrator_mut().fit(logits, labels)
    }

    fn transform(&self, logits: ArrayView2<'_, f64>) -> Result<Array2<f64>> {
        self.as_calibrator().transform(logits)
    }
}
