//! The named trainable parameters of a `VarStore`, in a fixed order.

use super::OptimError;
use tch::{nn::VarStore, Tensor};

/// Trainable variables of a `VarStore` with their names, sorted by name (a
/// deterministic order shared by the optimisers and the SAM step).
#[derive(Debug)]
pub struct Params {
    names: Vec<String>,
    tensors: Vec<Tensor>,
}

impl Params {
    /// The variables of `vs` that require gradients (shallow clones: updates
    /// through them change the store).
    pub fn from_var_store(vs: &VarStore) -> Self {
        // The store's mutex is only poisoned if another thread panicked while
        // holding it, after which no state is trustworthy anyway.
        let variables = vs.variables_.lock().expect("VarStore mutex poisoned");
        let mut named: Vec<(String, Tensor)> = variables
            .named_variables
            .iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(n, t)| (n.clone(), t.shallow_clone()))
            .collect();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        let (names, tensors) = named.into_iter().unzip();
        Self { names, tensors }
    }

    /// Parameter names (the `VarStore` / PyTorch state-dict keys).
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// The parameter tensors, aligned with [`Params::names`].
    pub fn tensors(&self) -> &[Tensor] {
        &self.tensors
    }

    /// Number of parameter tensors.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there is no trainable parameter.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    /// Checks that `grads` has one tensor per parameter with the same shape,
    /// kind and device.
    pub(crate) fn check_aligned(&self, grads: &[Tensor], what: &str) -> Result<(), OptimError> {
        if grads.len() != self.tensors.len() {
            return Err(OptimError::Mismatch(format!(
                "{} {what} tensors for {} parameters",
                grads.len(),
                self.tensors.len()
            )));
        }
        for ((name, p), g) in self.names.iter().zip(&self.tensors).zip(grads) {
            if p.size() != g.size() || p.kind() != g.kind() || p.device() != g.device() {
                return Err(OptimError::Mismatch(format!(
                    "{what} of '{name}' is {:?} {:?} on {:?}, the parameter {:?} {:?} on {:?}",
                    g.kind(),
                    g.size(),
                    g.device(),
                    p.kind(),
                    p.size(),
                    p.device()
                )));
            }
        }
        Ok(())
    }
}

/// Global L2 norm `sqrt(sum_i ||t_i||^2)` as a 0-d tensor on the tensors' device
/// (no host synchronisation), computed on their concatenation.
pub(crate) fn global_norm(tensors: &[Tensor]) -> Result<Tensor, OptimError> {
    Ok(super::flat::flatten(tensors)?.norm())
}

/// Copies the state entries named in `targets` into their tensors. Every entry
/// is checked (present, same shape) before any is copied, so a failed load
/// leaves the optimiser unchanged.
pub(crate) fn load_entries(
    state: &[(String, Tensor)],
    targets: Vec<(String, &mut Tensor)>,
) -> Result<(), OptimError> {
    let mut sources = Vec::with_capacity(targets.len());
    for (name, dst) in &targets {
        let (_, src) = state
            .iter()
            .find(|(n, _)| n == name)
            .ok_or_else(|| OptimError::Mismatch(format!("state entry '{name}' is missing")))?;
        if src.size() != dst.size() {
            return Err(OptimError::Mismatch(format!(
                "state entry '{name}' has shape {:?}, expected {:?}",
                src.size(),
                dst.size()
            )));
        }
        sources.push(src);
    }
    let _guard = tch::no_grad_guard();
    for ((_, dst), src) in targets.into_iter().zip(sources) {
        dst.f_copy_(src)?;
    }
    Ok(())
}
