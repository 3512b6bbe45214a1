//! What a predictor evaluates: a data set in memory, or image files streamed
//! from disk (an `imagenet:` test part, an ImageNet-C severity folder).

use std::sync::Arc;

use csam_data::streaming::ImageFiles;
use csam_data::{Dataset, SampleShape};
use csam_nn::model::InputShape;
use csam_train::train::run_data::STREAMED_IMAGE_SIZE;

/// A data set to predict on.
#[derive(Debug, Clone, Copy)]
pub enum EvalSet<'a> {
    /// Decoded images in memory.
    Images(&'a Dataset),
    /// Image files, decoded by `workers` threads at the evaluation
    /// transform's [`STREAMED_IMAGE_SIZE`].
    Files {
        files: &'a Arc<ImageFiles>,
        workers: usize,
    },
}

impl<'a> From<&'a Dataset> for EvalSet<'a> {
    fn from(dataset: &'a Dataset) -> Self {
        EvalSet::Images(dataset)
    }
}

impl EvalSet<'_> {
    /// The set's name in messages.
    pub fn name(&self) -> &str {
        match self {
            EvalSet::Images(d) => &d.name,
            EvalSet::Files { files, .. } => &files.name,
        }
    }

    /// Number of examples.
    pub fn len(&self) -> usize {
        match self {
            EvalSet::Images(d) => d.n,
            EvalSet::Files { files, .. } => files.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of classes.
    pub fn n_classes(&self) -> usize {
        match self {
            EvalSet::Images(d) => d.n_classes,
            EvalSet::Files { files, .. } => files.n_classes(),
        }
    }

    /// The labels, in order.
    pub fn labels(&self) -> &[usize] {
        match self {
            EvalSet::Images(d) => &d.labels,
            EvalSet::Files { files, .. } => &files.labels,
        }
    }

    /// `(channels, height, width)` of the examples the model sees.
    pub fn sample_shape(&self) -> SampleShape {
        match self {
            EvalSet::Images(d) => d.sample_shape(),
            EvalSet::Files { .. } => (3, STREAMED_IMAGE_SIZE, STREAMED_IMAGE_SIZE),
        }
    }

    /// The model's input shape and class count for this set.
    pub fn network_shape(&self) -> (InputShape, usize) {
        let (c, h, w) = self.sample_shape();
        let input = InputShape {
            channels: c as i64,
            height: h as i64,
            width: w as i64,
        };
        (input, self.n_classes())
    }
}
