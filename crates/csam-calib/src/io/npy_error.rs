//! Why a `.npy` input was refused, as a value that keeps the byte offsets a
//! caller needs to point at the problem in its own terms (csam-train's image
//! loader reports them as dataset errors with offsets). Everyone else gets it
//! as a [`CalibError`], with the same one-line message.

use std::path::PathBuf;

use super::array::{format_error, io_error};
use crate::error::CalibError;

/// A refused `.npy` input: which one (`path`, or the name standing for bytes
/// in memory) and why.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct NpyError {
    pub path: PathBuf,
    #[source]
    pub problem: NpyProblem,
}

/// What is wrong with a `.npy` input. Offsets are bytes from its start.
#[derive(Debug, thiserror::Error)]
pub enum NpyProblem {
    /// The operating system refused to open or read it (missing, a
    /// directory, a device error).
    #[error("{0}")]
    Io(#[source] std::io::Error),
    /// It does not start with `\x93NUMPY`; `found` holds its first 6 bytes.
    #[error("not a .npy file (the magic string \\x93NUMPY is missing)")]
    BadMagic { found: Vec<u8> },
    /// It has `found` bytes where its prefix, header or shape needs
    /// `expected`; checked before anything is allocated for the data.
    #[error("truncated: {detail}")]
    Truncated {
        expected: u64,
        found: u64,
        detail: String,
    },
    /// `extra` bytes follow the data, which ends at byte `end`.
    #[error("{extra} unexpected bytes after the data, which ends at byte {end}")]
    TrailingBytes { end: u64, extra: u64 },
    /// A header that is malformed or describes an array the reader refuses
    /// (version, syntax, dtype, Fortran order, a size that overflows), or a
    /// value it cannot represent; `offset` is where the header (or the
    /// value) starts.
    #[error("{detail}")]
    Invalid { offset: u64, detail: String },
    /// The bytes stopped arriving part-way through what the length promised,
    /// or their container (an `.npz` member) is corrupt.
    #[error("{}reading {what}: {source}", if source.kind() == std::io::ErrorKind::UnexpectedEof { "truncated: " } else { "" })]
    Broken {
        what: String,
        source: std::io::Error,
    },
}

impl From<NpyError> for CalibError {
    /// An operating-system failure stays [`CalibError::Io`]; every other
    /// refusal is a [`CalibError::Format`] with the same message.
    fn from(error: NpyError) -> Self {
        match error.problem {
            NpyProblem::Io(source) => io_error(&error.path, source),
            problem => format_error(&error.path, problem.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn becomes_the_calib_error_with_the_same_message() {
        let refusal = NpyError {
            path: "a.npy".into(),
            problem: NpyProblem::TrailingBytes { end: 80, extra: 2 },
        };
        let text = refusal.to_string();
        let calib = CalibError::from(refusal);
        assert!(matches!(calib, CalibError::Format { .. }), "{calib:?}");
        assert_eq!(calib.to_string(), text);
        assert_eq!(
            text,
            "a.npy: 2 unexpected bytes after the data, which ends at byte 80"
        );

        let missing = NpyError {
            path: "b.npy".into(),
            problem: NpyProblem::Io(std::io::ErrorKind::NotFound.into()),
        };
        assert!(matches!(CalibError::from(missing), CalibError::Io { .. }));
    }
}
