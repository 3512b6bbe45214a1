//! The binary dataset parsers on bytes already in memory, each file giving a
//! test-only [`DataSource`] with its labels checked.
//!
//! [`load`](super::load) reads files through these same parsers (a file and
//! a byte slice are both a [`ByteStream`], or for `.npy` both an input of
//! csam-calib's `.npy` reader); this entry point exists for callers that
//! already hold the bytes: the fuzz targets (`fuzz/`) and tests. Gzip is
//! recognised by its magic bytes, as for files (`.npy` files are never
//! compressed).
//!
//! ```
//! use csam_data::parse::{self, InMemory};
//! use std::path::Path;
//!
//! // An IDX pair: one 1x2 image and its label.
//! let images = [0, 0, 8, 3, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 7, 9];
//! let labels = [0, 0, 8, 1, 0, 0, 0, 1, 4];
//! let source = parse::idx(
//!     InMemory { name: Path::new("images"), bytes: &images },
//!     InMemory { name: Path::new("labels"), bytes: &labels },
//! )?;
//! assert_eq!((source.test.n, source.test.n_classes), (1, 5));
//! // A header claiming 2^32 - 1 images is refused before anything is allocated.
//! let huge = [0, 0, 8, 3, 255, 255, 255, 255, 0, 0, 1, 0, 0, 0, 1, 0];
//! assert!(parse::idx(
//!     InMemory { name: Path::new("huge"), bytes: &huge },
//!     InMemory { name: Path::new("labels"), bytes: &labels },
//! )
//! .is_err());
//! # Ok::<(), csam_data::DataError>(())
//! ```

use std::path::Path;

use super::error::Result;
use super::part::{into_source, Classes};
use super::stream::ByteStream;
use super::{cifar, idx, npy, svhn, DataSource};

/// One file's bytes and the name that stands for it in error messages.
#[derive(Debug, Clone, Copy)]
pub struct InMemory<'a> {
    pub name: &'a Path,
    pub bytes: &'a [u8],
}

impl<'a> InMemory<'a> {
    fn stream(self) -> ByteStream<'a> {
        ByteStream::from_bytes(self.name, self.bytes)
    }
}

/// An IDX images file (rank 3) and labels file (rank 1), each optionally
/// gzipped; classes are inferred from the largest label.
pub fn idx(images: InMemory<'_>, labels: InMemory<'_>) -> Result<DataSource> {
    let part = idx::read_part(images.stream(), labels.stream())?;
    into_source("idx", None, part, Classes::Inferred)
}

/// A `uint8` images `.npy` and an integer labels `.npy`; `n_classes` as in
/// `npy:IMAGES,LABELS[,N]` (None: inferred).
pub fn npy(
    images: InMemory<'_>,
    labels: InMemory<'_>,
    n_classes: Option<usize>,
) -> Result<DataSource> {
    let part = npy::read_part(
        npy::input_from_bytes(images.name, images.bytes)?,
        npy::input_from_bytes(labels.name, labels.bytes)?,
    )?;
    into_source(
        "npy",
        None,
        part,
        n_classes.map_or(Classes::Inferred, Classes::Fixed),
    )
}

/// One CIFAR-10 binary batch (`data_batch_N.bin`, `test_batch.bin`).
pub fn cifar10_batch(batch: InMemory<'_>) -> Result<DataSource> {
    cifar::read_cifar10_batch(batch.stream())
}

/// One CIFAR-100 binary file (`train.bin`, `test.bin`), fine labels.
pub fn cifar100_batch(batch: InMemory<'_>) -> Result<DataSource> {
    cifar::read_cifar100_batch(batch.stream())
}

/// One SVHN MAT-file (`train_32x32.mat`, `test_32x32.mat`): level 5,
/// little-endian, its `X` and `y` read as `svhn:DIR` reads them.
pub fn svhn_mat(file: InMemory<'_>) -> Result<DataSource> {
    svhn::read_source(file.stream())
}
