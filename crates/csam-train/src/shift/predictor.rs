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

use std::path::{Path, PathBuf};

use ndarray::Array2;
use tch::nn::VarStore;
use tch::Device;

use crate::data::{Dataset, Normalization, SampleShape};
use crate::model::weights::load_safetensors_file;
use crate::model::{Mode, Model};
use crate::spec::RunSpec;
use crate::train::error::{Result, TrainError};
use crate::train::rundir::RunDir;
use crate::train::session::{build_network, predict_dataset, shape_of};

/// A trained run's configuration, normalisation and best weights.
#[derive(Debug, Clone)]
pub struct LoadedRun {
    /// The run directory.
    pub dir: PathBuf,
    /// Its spec.
    pub spec: RunSpec,
    /// The normalisation fitted on its training split.
    pub normalization: Normalization,
    /// `model.safetensors`.
    pub weights: PathBuf,
}

impl LoadedRun {
    /// Reads `config.toml` and `normalization.json` of the run at `dir` and
    /// checks that its best weights exist.
    pub fn open(dir: &Path) -> Result<LoadedRun> {
        let run_dir = RunDir::new(dir);
        let config_path = run_dir.config();
        let text = std::fs::read_to_string(&config_path).map_err(TrainError::io(
            "read the run's configuration (is --run a csam run directory?)",
            &config_path,
        ))?;
        let spec = RunSpec::from_saved_toml(&text, &config_path.display().to_string())?;
        let path = run_dir.normalization();
        let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
        let normalization = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
            path,
            message: e.to_string(),
        })?;
        let weights = run_dir.best_model();
        if !weights.exists() {
            return Err(TrainError::RunDir(format!(
                "{} does not exist: the run has not finished an epoch",
                weights.display()
            )));
        }
        Ok(LoadedRun {
            dir: dir.to_path_buf(),
            spec,
            normalization,
            weights,
        })
    }

    /// Builds the run's model for inputs shaped like `reference` (named
    /// `data` in messages) on `device` and loads its best weights.
    fn build(&self, reference: &Dataset, data: &str, device: Device) -> Result<(VarStore, Model)> {
        if reference.channels != self.normalization.channels() {
            return Err(TrainError::Data(format!(
                "{data} has {} channels but the run {} was trained on {}",
                reference.channels,
                self.dir.display(),
                self.normalization.channels()
            )));
        }
        let vs = VarStore::new(device);
        let (input, n_classes) = (shape_of(reference), reference.n_classes);
        let model = build_network(
            self.spec.model.arch,
            &vs,
            input,
            n_classes,
            &self.spec.model.options(),
        )?;
        // Checked tensor by tensor before libtorch copies anything: tch's own
        // `VarStore::load` would broadcast or fail inside libtorch.
        load_safetensors_file(&vs, &self.weights).map_err(|e| {
            let (c, h, w) = reference.sample_shape();
            TrainError::Data(format!(
                "{data} ({c}x{h}x{w} images, {n_classes} classes) does not fit the run {}, \
                 trained on {}: {e}; evaluate it on data of its training set's image size \
                 and class count",
                self.dir.display(),
                self.spec.data.source,
            ))
        })?;
        Ok((vs, model))
    }
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
    members: Vec<(LoadedRun, VarStore, Model)>,
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
    pub fn new(
        runs: Vec<LoadedRun>,
        reference: &Dataset,
        reference_name: &str,
        sampling: Sampling,
        batch_size: usize,
        device: Device,
    ) -> Result<Predictor> {
        let Some(first) = runs.first() else {
            return Err(TrainError::RunDir("no run to evaluate".into()));
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
                    return Err(TrainError::RunDir(format!(
                        "ensemble members must share data and model: {} has {what} {a:?}, {} has {b:?}",
                        first.dir.display(),
                        run.dir.display()
                    )));
                }
            }
        }
        if let Sampling::McDropout { passes, .. } = sampling {
            if passes == 0 {
                return Err(TrainError::RunDir(
                    "--mc-dropout needs at least 1 pass".into(),
                ));
            }
            if let Some(run) = runs.iter().find(|r| r.spec.model.dropout <= 0.0) {
                return Err(TrainError::RunDir(format!(
                    "{} was trained without dropout (dropout = 0): MC-Dropout needs a model with \
                     dropout; train one with `csam train --dropout 0.1 ...`",
                    run.dir.display()
                )));
            }
        }
        let shape = reference.sample_shape();
        let members = runs
            .into_iter()
            .map(|run| {
                let (vs, model) = run.build(reference, reference_name, device)?;
                Ok((run, vs, model))
            })
            .collect::<Result<Vec<_>>>()?;
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
    pub fn runs(&self) -> impl Iterator<Item = &LoadedRun> {
        self.members.iter().map(|(run, _, _)| run)
    }

    /// `N x K` probabilities on `dataset`: the mean over members and passes
    /// of the softmax of the logits. `dataset` must have the reference's
    /// sample shape (its labels are not used).
    pub fn probabilities(&self, dataset: &Dataset) -> Result<Array2<f64>> {
        if dataset.sample_shape() != self.shape {
            let (c, h, w) = dataset.sample_shape();
            let (rc, rh, rw) = self.shape;
            return Err(TrainError::Data(format!(
                "{} has images of {c}x{h}x{w} (CxHxW) but the model evaluates {} ({rc}x{rh}x{rw})",
                dataset.name, self.reference
            )));
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
                let predictions = predict_dataset(
                    model,
                    dataset,
                    &run.normalization,
                    self.batch_size,
                    self.device,
                    mode,
                )?;
                let bad = predictions.non_finite_rows();
                if bad > 0 {
                    return Err(TrainError::Metrics(format!(
                        "{bad} of {} examples of {} have NaN or infinite logits under {}",
                        dataset.n,
                        dataset.name,
                        run.dir.display()
                    )));
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
