//! Class probabilities of one trained run, a deep ensemble of runs, or
//! MC-Dropout, on any data set of the training images' shape.
//!
//! - Deep ensemble (Lakshminarayanan et al. 2017; size 5 in the paper's
//!   Table 1): the mean of the members' softmax probabilities. Members are
//!   separate `csam train` runs of the same data and model, usually differing
//!   only in `--seed`.
//! - MC-Dropout (Gal & Ghahramani 2016): the mean of the softmax
//!   probabilities of `passes` forward passes with dropout active and
//!   BatchNorm on its running statistics ([`Mode::McDropout`]). libtorch's
//!   random stream is reset to the request's seed before each data set, so a
//!   data set's probabilities do not depend on what was evaluated before it.

use ndarray::Array2;
use tch::nn::VarStore;
use tch::Device;

use crate::error::{LabError, Result};
use csam_data::SampleShape;
use csam_nn::model::weights::WeightsError;
use csam_nn::model::{Mode, Model};
use csam_train::train::error::TrainError;
use csam_train::train::run_data::{predict_files, StreamedBatches};
use csam_train::train::session::predict_dataset;
use csam_train::train::{Checkpoint, TrainedRun};

use super::eval_set::EvalSet;

/// Checks that `run` was trained on images of `reference`'s channel count
/// (named `data` in messages) and on at least its classes, then builds its
/// network for the run's class count with its best weights.
fn member_network(
    run: &TrainedRun,
    reference: &EvalSet<'_>,
    data: &str,
    device: Device,
) -> Result<(VarStore, Model)> {
    let (channels, height, width) = reference.sample_shape();
    if channels != run.normalization.channels() {
        return Err(LabError::Channels {
            data: data.to_string(),
            channels,
            run: run.dir.root().to_path_buf(),
            run_channels: run.normalization.channels(),
            trained_on: run.spec.data.source.to_string(),
        });
    }
    let (input, data_classes) = reference.network_shape();
    // The run's own class count, so that a stray label is refused before a
    // classifier of its size is built; the data may hold fewer classes.
    let n_classes = match run.n_classes(input, Checkpoint::Best)? {
        Some(run_classes) if data_classes > run_classes => {
            return Err(LabError::Classes {
                data: data.to_string(),
                data_classes,
                run: run.dir.root().to_path_buf(),
                run_classes,
                trained_on: run.spec.data.source.to_string(),
            })
        }
        Some(run_classes) => run_classes,
        None => data_classes,
    };
    let network = run
        .network((input, n_classes), device, Checkpoint::Best)
        .map_err(|error| match error {
            // A tensor that does not fit the model is the data's doing; a
            // file that cannot be read is the file's, named as it is.
            TrainError::Weights(source) if matches!(*source, WeightsError::Tensor { .. }) => {
                TrainError::WeightsMismatch {
                    data: data.to_string(),
                    shape: format!(
                        "{channels}x{height}x{width} images, {} classes",
                        reference.n_classes()
                    ),
                    run: run.dir.root().to_path_buf(),
                    trained_on: run.spec.data.source.to_string(),
                    source,
                }
            }
            other => other,
        })?;
    Ok(network)
}

/// How each member's probabilities are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sampling {
    /// One pass in eval mode (no dropout).
    Deterministic,
    /// `passes` passes with dropout active, libtorch seeded with `seed`.
    McDropout { passes: usize, seed: u64 },
}

/// One or more runs ready to predict, with the input shape they were set up for.
pub struct Predictor {
    members: Vec<(TrainedRun, VarStore, Model)>,
    sampling: Sampling,
    shape: SampleShape,
    reference: String,
    batch_size: usize,
    device: Device,
}

impl Predictor {
    /// Sets up `runs` for data shaped like `reference` (the in-distribution
    /// test set, named `reference_name` in messages). All runs must share the
    /// data spec and model; MC-Dropout needs runs trained with dropout.
    pub fn new<'r>(
        runs: Vec<TrainedRun>,
        reference: impl Into<EvalSet<'r>>,
        reference_name: &str,
        sampling: Sampling,
        batch_size: usize,
        device: Device,
    ) -> Result<Predictor> {
        let Some(first) = runs.first() else {
            return Err(LabError::NoRuns);
        };
        for run in &runs[1..] {
            for (what, a, b) in [
                (
                    "data",
                    &first.spec.data.source.to_string(),
                    &run.spec.data.source.to_string(),
                ),
                (
                    "model",
                    &first.spec.model.arch.to_string(),
                    &run.spec.model.arch.to_string(),
                ),
            ] {
                if a != b {
                    return Err(LabError::MembersDiffer {
                        what,
                        first: first.dir.root().to_path_buf(),
                        first_value: a.clone(),
                        other: run.dir.root().to_path_buf(),
                        other_value: b.clone(),
                    });
                }
            }
        }
        if let Sampling::McDropout { passes, .. } = sampling {
            if passes == 0 {
                return Err(LabError::NoPasses);
            }
        }
        let reference = reference.into();
        let shape = reference.sample_shape();
        let members = runs
            .into_iter()
            .map(|run| {
                let (vs, model) = member_network(&run, &reference, reference_name, device)?;
                Ok((run, vs, model))
            })
            .collect::<Result<Vec<_>>>()?;
        if let Sampling::McDropout { .. } = sampling {
            if let Some((run, _, _)) = members.iter().find(|(_, _, model)| !model.has_dropout()) {
                return Err(LabError::NoDropout {
                    run: run.dir.root().to_path_buf(),
                });
            }
        }
        Ok(Predictor {
            members,
            sampling,
            shape,
            reference: reference_name.to_string(),
            batch_size,
            device,
        })
    }

    /// Number of member runs.
    pub fn n_members(&self) -> usize {
        self.members.len()
    }

    /// The sampling of every member.
    pub fn sampling(&self) -> Sampling {
        self.sampling
    }

    /// The runs.
    pub fn runs(&self) -> impl Iterator<Item = &TrainedRun> {
        self.members.iter().map(|(run, _, _)| run)
    }

    /// `N x K` probabilities on `data`: the mean over members and passes
    /// of the softmax of the logits. `data` must have the reference's
    /// sample shape (its labels are not used).
    pub fn probabilities<'d>(&self, data: impl Into<EvalSet<'d>>) -> Result<Array2<f64>> {
        let data = data.into();
        if data.sample_shape() != self.shape {
            return Err(LabError::ImageShape {
                data: data.name().to_string(),
                shape: data.sample_shape(),
                reference: self.reference.to_string(),
                expected: self.shape,
            });
        }
        let (mode, passes) = match self.sampling {
            Sampling::Deterministic => (Mode::Eval, 1),
            Sampling::McDropout { passes, seed } => {
                tch::manual_seed(seed as i64);
                (Mode::McDropout, passes)
            }
        };
        let mut sum: Option<Array2<f64>> = None;
        for (run, _, model) in &self.members {
            for _ in 0..passes {
                let normalization = &run.normalization;
                let predictions = match data {
                    EvalSet::Images(dataset) => predict_dataset(
                        model,
                        dataset,
                        normalization,
                        self.batch_size,
                        self.device,
                        mode,
                    )?,
                    EvalSet::Files { files, workers } => {
                        let batches = StreamedBatches {
                            files,
                            batch_size: self.batch_size,
                            workers,
                        };
                        predict_files(model, batches, normalization, self.device, mode)?
                    }
                };
                let bad = predictions.non_finite_rows();
                if bad > 0 {
                    return Err(LabError::NonFiniteLogits {
                        bad,
                        n: data.len(),
                        data: data.name().to_string(),
                        run: run.dir.root().to_path_buf(),
                    });
                }
                let probs = csam_calib::scores::softmax(predictions.logits.mapv(f64::from).view());
                sum = Some(match sum {
                    Some(total) => total + probs,
                    None => probs,
                });
            }
        }
        // Invariant: there is at least one member and one pass.
        let total = sum.expect("at least one member and pass");
        Ok(total / (self.members.len() * passes) as f64)
    }
}
