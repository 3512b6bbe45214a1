//! The error type of the data module: every variant names the file (or the
//! spec) and, for malformed contents, the byte offset where reading stopped.

use std::path::PathBuf;

/// Result alias of the data module.
pub type Result<T> = std::result::Result<T, DataError>;

/// What went wrong while locating, reading, splitting or batching a dataset.
///
/// Offsets are byte offsets into the file as stored, except for gzipped files
/// and compressed MAT-file elements, where they count bytes of the
/// *decompressed* stream (said in the message).
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// The dataset spec string could not be parsed.
    #[error("bad dataset spec {spec:?}: {reason}")]
    BadSpec { spec: String, reason: String },

    /// A file or directory could not be opened or read.
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A file or directory the format requires is not there.
    #[error("{path} not found: {hint}")]
    Missing { path: PathBuf, hint: String },

    /// The file does not start with the bytes its format requires.
    #[error("{path}: wrong magic at byte {offset}: expected {expected}, found {found}")]
    BadMagic {
        path: PathBuf,
        offset: u64,
        expected: String,
        found: String,
    },

    /// The header is readable but describes something this loader refuses
    /// (wrong element type, wrong rank, absurd sizes, Fortran order...).
    #[error("{path}: bad header at byte {offset}: {reason}")]
    BadHeader {
        path: PathBuf,
        offset: u64,
        reason: String,
    },

    /// A gzip stream (or a zlib stream inside a file) that ends early or is
    /// corrupt.
    #[error("{path}: {format} stream broken after {offset} decompressed bytes: {source}")]
    Compressed {
        path: PathBuf,
        offset: u64,
        /// `gzip` or `zlib`.
        format: &'static str,
        #[source]
        source: std::io::Error,
    },

    /// The file ends before the data its header (or record layout) promises.
    #[error("{path}: truncated at byte {offset}{stream}: expected {expected} bytes in all, found {found}", stream = if *.decompressed { " of the decompressed stream" } else { "" })]
    Truncated {
        path: PathBuf,
        offset: u64,
        expected: u64,
        found: u64,
        decompressed: bool,
    },

    /// The file holds more bytes than its header (or record layout) accounts for.
    #[error("{path}: {extra} unexpected trailing bytes from byte {offset}{stream}", stream = if *.decompressed { " of the decompressed stream" } else { "" })]
    TrailingBytes {
        path: PathBuf,
        offset: u64,
        extra: u64,
        decompressed: bool,
    },

    /// A label at or above the class count.
    #[error(
        "{path}: label {label} at byte {offset} is outside 0..={last}",
        last = .n_classes.saturating_sub(1)
    )]
    LabelOutOfRange {
        path: PathBuf,
        offset: u64,
        label: u64,
        n_classes: usize,
    },

    /// A negative label (or one too large for this machine's `usize`).
    #[error("{path}: label {label} at byte {offset} is not a class index")]
    NotAClassIndex {
        path: PathBuf,
        offset: u64,
        label: i128,
    },

    /// A stored label value that does not name a class of its format (an
    /// SVHN `y` outside 1..10).
    #[error("{path}: label {value} at byte {offset} is not {expected}")]
    BadLabel {
        path: PathBuf,
        offset: u64,
        value: String,
        expected: String,
    },

    /// Images and labels disagree on the number of samples.
    #[error("{images} holds {n_images} images but {labels} holds {n_labels} labels")]
    CountMismatch {
        images: PathBuf,
        labels: PathBuf,
        n_images: usize,
        n_labels: usize,
    },

    /// An image whose size (or channel count) differs from the dataset's.
    #[error(
        "{path}: image is {found}, expected {expected} like the first image of the dataset \
         (an in-memory folder holds images of one size; imagenet:DIR streams images of any \
         size, cropped to 224x224)"
    )]
    ShapeMismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },

    /// An in-memory data set larger than the memory this machine has free.
    #[error(
        "{path}: its decoded images take {needed} bytes, more than the {available} bytes of \
         memory available; stream it instead: lay it out as DIR/train/<class>/ and \
         DIR/val/<class>/ and give imagenet:DIR (decoded batch by batch at 224x224)"
    )]
    TooLarge {
        path: PathBuf,
        needed: u64,
        available: u64,
    },

    /// A streamed source ([`crate::streaming`]) asked for as a whole in
    /// memory.
    #[error(
        "{spec} is streamed from disk batch by batch and has no in-memory form; \
             this use of it needs an in-memory data set"
    )]
    Streamed { spec: String },

    /// A data set too large to keep on a device
    /// ([`crate::LoaderOptions::resident`], [`crate::RESIDENT_DEVICE_LIMIT`]).
    #[error(
        "{name}: kept on {device}, its images padded by {padding} take {needed} bytes, more than \
         the {allowed} bytes allowed there; build its batches on the host instead"
    )]
    ResidentTooLarge {
        name: String,
        device: String,
        padding: usize,
        needed: u64,
        allowed: u64,
    },

    /// An image whose header declares more pixels than a streamed image may
    /// decode to ([`crate::streaming::loader::MAX_DECODED_BYTES`]), refused
    /// before its pixels are allocated.
    #[error(
        "image {path} declares {width}x{height} pixels, {bytes} bytes as RGB: more than the {limit} \
         bytes one image may decode to"
    )]
    ImageTooLarge {
        path: PathBuf,
        width: usize,
        height: usize,
        bytes: u128,
        limit: u64,
    },

    /// An image file the `image` crate cannot decode.
    #[error("cannot decode image {path}: {source}")]
    Decode {
        path: PathBuf,
        #[source]
        source: image::ImageError,
    },

    /// A malformed line of a text (CSV) dataset.
    #[error("{path}: line {line}: {reason}")]
    BadRecord {
        path: PathBuf,
        line: usize,
        reason: String,
    },

    /// A directory that should hold a dataset holds no usable sample.
    #[error("{path}: no samples found ({hint})")]
    Empty { path: PathBuf, hint: String },

    /// Two parts of one dataset (train / test) disagree on shape or classes.
    #[error("{name}: train and test disagree: {reason}")]
    Inconsistent { name: String, reason: String },

    /// A split, normalisation or loader request that the data cannot satisfy.
    #[error("{0}")]
    Invalid(String),
}

impl DataError {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        DataError::Io {
            path: path.into(),
            source,
        }
    }
}
