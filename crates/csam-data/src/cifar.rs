//! CIFAR-10 and CIFAR-100 in their "binary version" files.
//!
//! A file is a sequence of fixed-size records: the label byte(s), then 3,072
//! image bytes: the 1,024 red, then green, then blue values of a 32x32 image,
//! rows top to bottom (already CHW).
//! - CIFAR-10: 1 label byte (`0..10`); `data_batch_1.bin` .. `data_batch_5.bin`
//!   (train) and `test_batch.bin`.
//! - CIFAR-100: 2 label bytes, coarse (`0..20`) then fine (`0..100`); the fine
//!   label is used (100 classes); `train.bin` and `test.bin`.
//!
//! The directory may be the one holding the files or its parent holding the
//! archive's folder (`cifar-10-batches-bin` / `cifar-100-binary`). The train
//! files may all be absent (a test-only source), but not some of them.

use std::path::{Path, PathBuf};

use super::error::{DataError, Result};
use super::part::{into_source, Classes, LabelLocation, Part};
use super::stream::ByteStream;
use super::DataSource;

/// Bytes of one 3x32x32 image.
const IMAGE_BYTES: usize = 3 * 32 * 32;

/// The record layout and file names of one CIFAR variant.
struct Variant {
    name: &'static str,
    /// Folder name inside the official archive.
    archive_folder: &'static str,
    /// Class count of each label byte, in record order.
    label_classes: &'static [usize],
    /// Which label byte is the sample's label.
    used_label: usize,
    train_files: &'static [&'static str],
    test_file: &'static str,
}

const CIFAR10: Variant = Variant {
    name: "cifar10",
    archive_folder: "cifar-10-batches-bin",
    label_classes: &[10],
    used_label: 0,
    train_files: &[
        "data_batch_1.bin",
        "data_batch_2.bin",
        "data_batch_3.bin",
        "data_batch_4.bin",
        "data_batch_5.bin",
    ],
    test_file: "test_batch.bin",
};

const CIFAR100: Variant = Variant {
    name: "cifar100",
    archive_folder: "cifar-100-binary",
    label_classes: &[20, 100],
    used_label: 1,
    train_files: &["train.bin"],
    test_file: "test.bin",
};

impl Variant {
    fn record_len(&self) -> usize {
        self.label_classes.len() + IMAGE_BYTES
    }

    fn n_classes(&self) -> usize {
        self.label_classes[self.used_label]
    }

    /// Reads one batch file: whole records only, every label byte in range.
    fn read_file(&self, path: &Path) -> Result<Part> {
        self.read_part(ByteStream::open(path)?)
    }

    /// Reads one batch from `stream` (a file or bytes in memory).
    fn read_part(&self, mut stream: ByteStream<'_>) -> Result<Part> {
        let path = stream.path().to_path_buf();
        let bytes = stream.read_to_end()?;
        let record_len = self.record_len();
        let n = bytes.len() / record_len;
        if bytes.len() % record_len != 0 {
            return Err(stream.truncated(((n + 1) * record_len) as u64, bytes.len() as u64));
        }
        let mut images = Vec::with_capacity(n * IMAGE_BYTES);
        let mut labels = Vec::with_capacity(n);
        for (i, record) in bytes.chunks_exact(record_len).enumerate() {
            for (j, &n_classes) in self.label_classes.iter().enumerate() {
                if record[j] as usize >= n_classes {
                    return Err(DataError::LabelOutOfRange {
                        path: path.clone(),
                        offset: (i * record_len + j) as u64,
                        label: record[j].into(),
                        n_classes,
                    });
                }
            }
            labels.push(record[self.used_label] as usize);
            images.extend_from_slice(&record[self.label_classes.len()..]);
        }
        Ok(Part {
            images,
            labels,
            shape: (3, 32, 32),
            label_locations: vec![LabelLocation {
                path,
                first: self.used_label as u64,
                stride: record_len as u64,
                count: n,
            }],
        })
    }

    /// One batch as a test-only source.
    fn read_batch(&self, stream: ByteStream<'_>) -> Result<DataSource> {
        let test = self.read_part(stream)?;
        into_source(self.name, None, test, Classes::Fixed(self.n_classes()))
    }

    /// The directory holding the files: `dir` or `dir/<archive folder>`.
    fn files_dir(&self, dir: &Path) -> Result<PathBuf> {
        [dir.to_path_buf(), dir.join(self.archive_folder)]
            .into_iter()
            .find(|d| d.join(self.test_file).is_file())
            .ok_or_else(|| DataError::Missing {
                path: dir.join(self.test_file),
                hint: format!(
                    "a {} directory holds {} (directly or in {}/)",
                    self.name, self.test_file, self.archive_folder
                ),
            })
    }

    fn load(&self, dir: &Path) -> Result<DataSource> {
        let dir = self.files_dir(dir)?;
        let present: Vec<PathBuf> = self
            .train_files
            .iter()
            .map(|f| dir.join(f))
            .filter(|p| p.is_file())
            .collect();
        let train = if present.is_empty() {
            None
        } else if present.len() < self.train_files.len() {
            let missing = self
                .train_files
                .iter()
                .map(|f| dir.join(f))
                .find(|p| !p.is_file());
            return Err(DataError::Missing {
                // Invariant: fewer present than listed, so one is missing.
                path: missing.expect("a missing train file"),
                hint: format!(
                    "{} needs all of {} or none (test only)",
                    self.name,
                    self.train_files.join(", ")
                ),
            });
        } else {
            let mut parts = present.iter().map(|p| self.read_file(p));
            // Invariant: `present` is not empty here.
            let mut train = parts.next().expect("at least one train file")?;
            for part in parts {
                train.append(part?);
            }
            Some(train)
        };
        let test = self.read_file(&dir.join(self.test_file))?;
        into_source(self.name, train, test, Classes::Fixed(self.n_classes()))
    }
}

/// One CIFAR-10 batch as a test-only source.
pub(crate) fn read_cifar10_batch(stream: ByteStream<'_>) -> Result<DataSource> {
    CIFAR10.read_batch(stream)
}

/// One CIFAR-100 file (fine labels) as a test-only source.
pub(crate) fn read_cifar100_batch(stream: ByteStream<'_>) -> Result<DataSource> {
    CIFAR100.read_batch(stream)
}

/// Loads CIFAR-10 binary batches from `dir` (see the module doc).
pub(crate) fn load_cifar10(dir: &Path) -> Result<DataSource> {
    CIFAR10.load(dir)
}

/// Loads CIFAR-100 binary files from `dir`, fine labels (see the module doc).
pub(crate) fn load_cifar100(dir: &Path) -> Result<DataSource> {
    CIFAR100.load(dir)
}
