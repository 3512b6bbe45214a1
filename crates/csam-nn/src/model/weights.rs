//! Importing safetensors weights (`csam train --init`, a run's best model)
//! into a model's [`VarStore`], checked tensor by tensor, and saving a
//! `VarStore` in the standard layout ([`save_safetensors`]).
//!
//! tch's `VarStore::load` broadcasts a stored tensor into a variable of
//! another shape (a `[5]` bias silently fills a `[10, 5]` weight) and turns a
//! variable into the stored dtype (a float64 file makes the model float64,
//! and its next forward pass fails). Here every variable must be present with
//! exactly its own shape; floating-point values are converted to the
//! variable's kind. Extra tensors are ignored (PyTorch's `state_dict` holds
//! BatchNorm's `num_batches_tracked`, which the VarStore has not).
//!
//! The bytes are parsed by the `safetensors` crate, which checks the header
//! length, the JSON header and every tensor's byte range against the buffer
//! before anything is allocated for the tensors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use safetensors::SafeTensors;
use tch::nn::VarStore;
use tch::{Kind, Tensor};

use crate::torch_message::message;

/// A weights file that cannot be loaded into the model (which is left as it
/// was).
#[derive(Debug, thiserror::Error)]
pub enum WeightsError {
    #[error("{}: cannot read: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: not a safetensors file: {reason}", path.display())]
    Format { path: PathBuf, reason: String },
    #[error("{}: tensor '{name}': {reason}", path.display())]
    Tensor {
        path: PathBuf,
        name: String,
        reason: String,
    },
}

/// Fits a stored tensor of another shape to a variable, where the
/// architecture defines how (a ViT's position embedding, for another image
/// size).
pub trait Resample {
    /// `stored` fitted to `wanted` for the variable `name`; `None` when the
    /// architecture does not fit that variable (its shape must then match).
    fn resample(&self, name: &str, stored: &Tensor, wanted: &[i64]) -> Option<Tensor>;
}

/// How [`load_safetensors_with`] treats a file.
#[derive(Default, Clone, Copy)]
pub struct LoadOptions<'a> {
    /// Variables under these names (the first component of a variable's
    /// name: `fc` keeps `fc.weight` and `fc.bias`) keep their values and are
    /// not looked up in the file: fine-tuning on other classes keeps the
    /// model's own classifier.
    pub kept: &'a [String],
    /// Fits tensors of another shape where the architecture allows it.
    pub resample: Option<&'a dyn Resample>,
}

/// Reads `path` and loads it with [`load_safetensors`].
pub fn load_safetensors_file(vs: &VarStore, path: &Path) -> Result<(), WeightsError> {
    load_safetensors_file_with(vs, path, LoadOptions::default())
}

/// Reads `path` and loads it with [`load_safetensors_with`].
pub fn load_safetensors_file_with(
    vs: &VarStore,
    path: &Path,
    options: LoadOptions,
) -> Result<(), WeightsError> {
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    load_safetensors_with(vs, &bytes, path, options)
}

/// The shape of every tensor in the safetensors file `path`, by name, read
/// and checked as a load would be but copying no tensor.
pub fn stored_shapes(path: &Path) -> Result<HashMap<String, Vec<usize>>, WeightsError> {
    let bytes = std::fs::read(path).map_err(|source| WeightsError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let file = deserialize(&bytes, path)?;
    Ok(file
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, view.shape().to_vec()))
        .collect())
}

/// The parsed safetensors `bytes` of `path`.
fn deserialize<'b>(bytes: &'b [u8], path: &Path) -> Result<SafeTensors<'b>, WeightsError> {
    SafeTensors::deserialize(bytes).map_err(|e| WeightsError::Format {
        path: path.to_path_buf(),
        reason: format!("{e:?}"),
    })
}

/// Loads safetensors `bytes` into the variables of `vs`; `path` names the
/// source in errors. Every tensor is checked before any variable is written,
/// so a refused file leaves the model as it was.
pub fn load_safetensors(vs: &VarStore, bytes: &[u8], path: &Path) -> Result<(), WeightsError> {
    load_safetensors_with(vs, bytes, path, LoadOptions::default())
}

/// [`load_safetensors`] with `options`: variables kept as they are, and
/// tensors of another shape fitted where the architecture says how.
pub fn load_safetensors_with(
    vs: &VarStore,
    bytes: &[u8],
    path: &Path,
    LoadOptions { kept, resample }: LoadOptions,
) -> Result<(), WeightsError> {
    let file = deserialize(bytes, path)?;
    let tensor_error = |name: &str, reason: String| WeightsError::Tensor {
        path: path.to_path_buf(),
        name: name.to_string(),
        reason,
    };
    let is_kept = |name: &str| kept.iter().any(|k| name.split('.').next() == Some(k));
    let mut variables: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(name, _)| !is_kept(name))
        .collect();
    variables.sort_by(|a, b| a.0.cmp(&b.0));
    let mut sources = Vec::with_capacity(variables.len());
    for (name, variable) in &variables {
        let view = file
            .tensor(name)
            .map_err(|_| tensor_error(name, "missing from the file".into()))?;
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let mut stored = Tensor::try_from(view).map_err(|e| tensor_error(name, message(&e)))?;
        let wanted = variable.size();
        if shape != wanted {
            let fitted = resample.and_then(|r| r.resample(name, &stored, &wanted));
            stored = fitted.filter(|t| t.size() == wanted).ok_or_else(|| {
                tensor_error(name, format!("shape {shape:?}, the model's is {wanted:?}"))
            })?;
        }
        if !is_float(stored.kind()) {
            return Err(tensor_error(
                name,
                format!("dtype {:?}, expected floating point", stored.kind()),
            ));
        }
        sources.push(stored.to_kind(variable.kind()));
    }
    tch::no_grad(|| {
        for ((name, variable), source) in variables.iter_mut().zip(&sources) {
            variable
                .f_copy_(source)
                .map_err(|e| tensor_error(name, message(&e)))?;
        }
        Ok(())
    })
}

fn is_float(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Half | Kind::BFloat16 | Kind::Float | Kind::Double
    )
}

/// Writes the variables of `vs` to the safetensors file `path` under their
/// names, each in the standard contiguous (row-major) layout: a
/// channels_last model's convolution weights ([`super::memory_format`]) are
/// written as a contiguous model's are, so the file does not depend on the
/// layout that computed it (safetensors stores no strides, and tch's
/// `VarStore::save` refuses a non-contiguous tensor).
pub fn save_safetensors(vs: &VarStore, path: &Path) -> Result<(), tch::TchError> {
    let tensors: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .map(|(name, t)| (name, t.contiguous()))
        .collect();
    Tensor::write_safetensors(&tensors, path)
}
