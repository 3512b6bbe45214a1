//! A trained run read back from its directory: the one reader that `csam
//! eval`, the shift evaluation, `csam sharpness` and the experiments use to
//! open a run and rebuild its network.

use std::path::{Path, PathBuf};

use csam_data::Normalization;
use csam_nn::model::weights::{load_safetensors_file, stored_shapes};
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

    /// The number of classes the run's `which` weights output, read from
    /// the file's tensor shapes before any network of the caller's class
    /// count is built: a label of 10^9 in the data to evaluate must be
    /// refused, not turned into a classifier of 10^9 rows. The network is
    /// built without its weights for 2 and for 3 classes; every tensor whose
    /// shape differs between the two grows by the same step per class (a
    /// classifier's rows, a MIMO head's members times classes), so its
    /// stored shape gives the count. `None` where no tensor depends on the
    /// class count (a TorchScript module fixes its own) or the stored shapes
    /// follow no such step (the load then names the tensor that does not fit).
    pub fn n_classes(&self, input: InputShape, which: Checkpoint) -> Result<Option<usize>> {
        let stored = stored_shapes(&self.weights(which)?)
            .map_err(|error| TrainError::Weights(Box::new(error)))?;
        let [two, three] = [2, 3].map(|n_classes| {
            let vs = VarStore::new(Device::Cpu);
            build_network(&self.spec.model, &vs, (input, n_classes), None)?;
            Ok::<_, TrainError>(vs.variables())
        });
        let (two, three) = (two?, three?);
        let mut found = None;
        for (name, at_two) in &two {
            let (Some(at_three), Some(stored)) = (three.get(name), stored.get(name)) else {
                continue;
            };
            match class_count(&at_two.size(), &at_three.size(), stored) {
                Some(None) => {}
                Some(Some(count)) if found.is_none_or(|found| found == count) => {
                    found = Some(count)
                }
                _ => return Ok(None),
            }
        }
        Ok(found)
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

/// The class count at which a tensor of shape `at_two` for 2 classes and
/// `at_three` for 3 has the shape `stored` in the dimensions that depend on
/// it: `Some(None)` when none does, `None` when `stored` is no such shape.
fn class_count(at_two: &[i64], at_three: &[i64], stored: &[usize]) -> Option<Option<usize>> {
    if at_two == at_three {
        return Some(None);
    }
    if at_two.len() != stored.len() || at_three.len() != stored.len() {
        return None;
    }
    let mut count = None;
    for ((&two, &three), &stored) in at_two.iter().zip(at_three).zip(stored) {
        let (two, three) = (usize::try_from(two).ok()?, usize::try_from(three).ok()?);
        if two == three {
            // Not the class count's: another image size (a ViT's position
            // embedding) is the load's to fit or refuse.
            continue;
        }
        // The dimension is `base + step * classes`.
        let step = three.checked_sub(two)?;
        let base = two.checked_sub(2 * step)?;
        let classes = stored.checked_sub(base).filter(|d| d % step == 0)? / step;
        if count.is_some_and(|c| c != classes) {
            return None;
        }
        count = Some(classes);
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::class_count;

    #[test]
    fn a_class_dependent_shape_gives_its_count() {
        // A classifier's weight [K, 64] and a MIMO head's bias [3K].
        assert_eq!(class_count(&[2, 64], &[3, 64], &[10, 64]), Some(Some(10)));
        assert_eq!(class_count(&[6], &[9], &[30]), Some(Some(10)));
        // A tensor that does not depend on the class count, stored for
        // another image size or not: the load fits or refuses it.
        assert_eq!(class_count(&[64, 3], &[64, 3], &[64, 3]), Some(None));
        assert_eq!(class_count(&[65, 192], &[65, 192], &[197, 192]), Some(None));
        assert_eq!(class_count(&[64, 3], &[64, 3], &[64]), Some(None));
        // The class rows count; another feature width is the load's to refuse.
        assert_eq!(class_count(&[2, 64], &[3, 64], &[10, 128]), Some(Some(10)));
    }

    #[test]
    fn a_shape_no_class_count_gives_is_none() {
        assert_eq!(class_count(&[6], &[9], &[31]), None);
        assert_eq!(class_count(&[2, 64], &[3, 64], &[10]), None);
        // Two dimensions that disagree on the count.
        assert_eq!(class_count(&[2, 2], &[3, 3], &[10, 11]), None);
    }
}
