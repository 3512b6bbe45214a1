//! A trained run read back from its directory: the one reader that `csam
//! eval`, the shift evaluation, `csam sharpness` and the experiments use to
//! open a run and rebuild its network.

use std::path::{Path, PathBuf};

use csam_data::Normalization;
use csam_nn::model::weights::load_safetensors_file;
use csam_nn::model::{InputShape, Model};
use tch::{nn::VarStore, Device};

use super::error::{Result, TrainError};
use super::rundir::RunDir;
pub use super::saved_weights::Checkpoint;
use super::session::build_network;
use crate::spec::RunSpec;

/// A run's spec and the normalisation fitted on its training split, read
/// from its directory.
#[derive(Debug, Clone)]
pub struct TrainedRun {
    /// The run directory.
    pub dir: RunDir,
    /// Its spec (`config.toml`).
    pub spec: RunSpec,
    /// The normalisation fitted on its training split (`normalization.json`).
    pub normalization: Normalization,
}

impl TrainedRun {
    /// Reads `config.toml` and `normalization.json` of the run at `dir`.
    /// A directory without `config.toml` is [`TrainError::NotARun`], a
    /// missing one [`TrainError::NoSuchRun`].
    pub fn open(dir: &Path) -> Result<TrainedRun> {
        let run_dir = RunDir::new(dir);
        run_dir.require_run()?;
        let spec = run_dir.saved_spec()?;
        let path = run_dir.normalization();
        let text = std::fs::read_to_string(&path).map_err(TrainError::io("read", &path))?;
        let normalization = serde_json::from_str(&text).map_err(|e| TrainError::Corrupt {
            path,
            message: e.to_string(),
        })?;
        Ok(TrainedRun {
            dir: run_dir,
            spec,
            normalization,
        })
    }

    /// The path of the `which` weights, refused when the run has not written
    /// them yet.
    pub fn weights(&self, which: Checkpoint) -> Result<PathBuf> {
        let path = match which {
            Checkpoint::Best => self.dir.best_model(),
            Checkpoint::Last => self.dir.last_model(),
        };
        if path.is_file() {
            Ok(path)
        } else {
            Err(TrainError::NoWeights { path, which })
        }
    }

    /// Builds the run's network for examples of shape `input` with
    /// `n_classes` classes on `device` and loads its `which` weights, checked
    /// tensor by tensor before libtorch copies anything (tch's own
    /// `VarStore::load` would broadcast or fail inside libtorch): weights
    /// that do not fit are [`TrainError::Weights`].
    pub fn network(
        &self,
        (input, n_classes): (InputShape, usize),
        device: Device,
        which: Checkpoint,
    ) -> Result<(VarStore, Model)> {
        let weights = self.weights(which)?;
        let vs = VarStore::new(device);
        let model = build_network(&self.spec.model, &vs, (input, n_classes), None)?;
        load_safetensors_file(&vs, &weights)?;
        Ok((vs, model))
    }
}
