//! A loaded train or test part before its class count is settled, and the
//! one place where labels are checked against that count (with the byte
//! offset of the offending label in its file).

use std::path::PathBuf;

use super::dataset::{DataSource, Dataset, SampleShape};
use super::error::{DataError, Result};

/// Where a run of `count` consecutive labels of a part sits in its file:
/// the `k`-th of them is at byte `first + k * stride`.
#[derive(Debug, Clone)]
pub(crate) struct LabelLocation {
    pub path: PathBuf,
    pub first: u64,
    pub stride: u64,
    pub count: usize,
}

/// Images (CHW, row-major) and labels as read, not yet checked against a
/// class count.
#[derive(Debug)]
pub(crate) struct Part {
    pub images: Vec<u8>,
    pub labels: Vec<usize>,
    pub shape: SampleShape,
    /// One entry per source file, in sample order (several for CIFAR-10's
    /// five training batches).
    pub label_locations: Vec<LabelLocation>,
}

/// How many classes a source has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Classes {
    /// Fixed by the format (10 for Fashion-MNIST and CIFAR-10, 100 for
    /// CIFAR-100); any label at or above it is an error.
    Fixed(usize),
    /// Generic sources (`idx:`, `npy:`): one more than the largest label in
    /// train and test together.
    Inferred,
}

impl Part {
    /// Appends `other` (same sample shape, checked by the caller).
    pub(crate) fn append(&mut self, mut other: Part) {
        self.images.append(&mut other.images);
        self.labels.append(&mut other.labels);
        self.label_locations.append(&mut other.label_locations);
    }

    /// File and byte offset of label `i`.
    fn locate(&self, mut i: usize) -> (PathBuf, u64) {
        for location in &self.label_locations {
            if i < location.count {
                return (
                    location.path.clone(),
                    location.first + i as u64 * location.stride,
                );
            }
            i -= location.count;
        }
        // Invariant: the locations' counts add up to labels.len().
        unreachable!("label index beyond the recorded label locations")
    }

    fn check_labels(&self, n_classes: usize) -> Result<()> {
        match self.labels.iter().position(|&l| l >= n_classes) {
            None => Ok(()),
            Some(i) => {
                let (path, offset) = self.locate(i);
                Err(DataError::LabelOutOfRange {
                    path,
                    offset,
                    label: self.labels[i] as u64,
                    n_classes,
                })
            }
        }
    }

    fn into_dataset(self, name: String, n_classes: usize) -> Result<Dataset> {
        self.check_labels(n_classes)?;
        Dataset::new(name, self.images, self.labels, self.shape, n_classes)
    }
}

/// Settles the class count, checks every label against it and assembles the
/// source; the parts are named `<name>/train` and `<name>/test`.
pub(crate) fn into_source(
    name: &str,
    train: Option<Part>,
    test: Part,
    classes: Classes,
) -> Result<DataSource> {
    let n_classes = match classes {
        Classes::Fixed(n) => n,
        // The training part's labels fix the classes where there is one: a
        // class only the test part holds can never be predicted, and counting
        // it would silently widen the model (a test set labelled 255: 256
        // outputs and 0% accuracy); such a test label is refused below.
        Classes::Inferred => {
            let largest = train
                .as_ref()
                .unwrap_or(&test)
                .labels
                .iter()
                .copied()
                .max()
                .ok_or_else(|| {
                    DataError::Invalid(format!("{name}: no samples to infer classes from"))
                })?;
            largest + 1
        }
    };
    let train = train
        .map(|part| part.into_dataset(format!("{name}/train"), n_classes))
        .transpose()?;
    let test = test.into_dataset(format!("{name}/test"), n_classes)?;
    DataSource::new(train, test)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(file: &str, labels: Vec<usize>, first: u64, stride: u64) -> Part {
        let count = labels.len();
        Part {
            images: vec![0; count],
            labels,
            shape: (1, 1, 1),
            label_locations: vec![LabelLocation {
                path: file.into(),
                first,
                stride,
                count,
            }],
        }
    }

    #[test]
    fn out_of_range_label_is_located_in_its_own_file() {
        let mut train = part("a.bin", vec![0, 1, 2], 0, 10);
        train.append(part("b.bin", vec![1, 9, 3], 4, 7));
        match into_source(
            "x",
            Some(train),
            part("t.bin", vec![0], 0, 1),
            Classes::Fixed(5),
        ) {
            Err(DataError::LabelOutOfRange {
                path,
                offset,
                label,
                n_classes,
            }) => {
                assert_eq!(path, PathBuf::from("b.bin"));
                assert_eq!((offset, label, n_classes), (4 + 7, 9, 5));
            }
            other => panic!("expected LabelOutOfRange, got {other:?}"),
        }
    }

    #[test]
    fn inferred_classes_are_the_training_parts_and_a_test_label_beyond_is_refused() {
        let source = into_source(
            "x",
            Some(part("a", vec![0, 4], 0, 1)),
            part("t", vec![2, 1], 0, 1),
            Classes::Inferred,
        )
        .unwrap();
        assert_eq!(source.test.n_classes, 5);
        assert_eq!(source.train.unwrap().n_classes, 5);
        assert_eq!(source.test.name, "x/test");
        let beyond = into_source(
            "x",
            Some(part("a", vec![0, 2], 0, 1)),
            part("t", vec![1, 255], 8, 1),
            Classes::Inferred,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(beyond, "t: label 255 at byte 9 is outside 0..=2");
        // Without a training part the test part's labels count.
        let alone = into_source("x", None, part("t", vec![3, 1], 0, 1), Classes::Inferred);
        assert_eq!(alone.unwrap().test.n_classes, 4);
    }
}
