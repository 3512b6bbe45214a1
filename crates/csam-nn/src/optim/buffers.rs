//! Snapshot and restore of a model's buffers (BatchNorm running statistics).

use super::flat::FlatCopy;
use super::OptimError;
use tch::{nn::VarStore, Tensor};

/// The non-trainable variables of a `VarStore` (BatchNorm `running_mean` /
/// `running_var`) and a saved copy of their values, allocated once.
///
/// The SAM step captures them after the first forward pass and restores them
/// after the second, so running statistics move once per step, as if pass 2
/// ran with BatchNorm momentum 0 (docs/conventions.md, "The SAM step").
#[derive(Debug)]
pub struct BufferSnapshot {
    /// Buffers grouped by kind and device, each group with its flat copy.
    groups: Vec<(Vec<Tensor>, FlatCopy)>,
    /// Whether the copies hold a capture not yet restored.
    pending: bool,
}

impl BufferSnapshot {
    /// Tracks every variable of `vs` that does not require gradients.
    pub fn new(vs: &VarStore) -> Result<Self, OptimError> {
        // The store's mutex is only poisoned if another thread panicked while
        // holding it, after which no state is trustworthy anyway.
        let variables = vs.variables_.lock().expect("VarStore mutex poisoned");
        let mut named: Vec<(&String, &Tensor)> = variables
            .named_variables
            .iter()
            .filter(|(_, t)| !t.requires_grad())
            .collect();
        named.sort_by(|a, b| a.0.cmp(b.0));
        let mut grouped: Vec<Vec<Tensor>> = Vec::new();
        for (_, t) in named {
            let same = |g: &Vec<Tensor>| g[0].kind() == t.kind() && g[0].device() == t.device();
            match grouped.iter_mut().find(|g| same(g)) {
                Some(group) => group.push(t.shallow_clone()),
                None => grouped.push(vec![t.shallow_clone()]),
            }
        }
        let groups = grouped
            .into_iter()
            .map(|g| {
                let copy = FlatCopy::new(&g)?;
                Ok((g, copy))
            })
            .collect::<Result<_, OptimError>>()?;
        Ok(Self {
            groups,
            pending: false,
        })
    }

    /// Number of tracked buffers.
    pub fn len(&self) -> usize {
        self.groups.iter().map(|(g, _)| g.len()).sum()
    }

    /// Whether the model has no buffer.
    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Saves the current buffer values.
    pub fn capture(&mut self) -> Result<(), OptimError> {
        for (live, copy) in &mut self.groups {
            copy.capture(live)?;
        }
        self.pending = true;
        Ok(())
    }

    /// Writes the values of the last [`BufferSnapshot::capture`] back into the
    /// model's buffers; a no-op when that capture was already restored.
    pub fn restore(&mut self) -> Result<(), OptimError> {
        if std::mem::take(&mut self.pending) {
            for (live, copy) in &self.groups {
                copy.restore(live)?;
            }
        }
        Ok(())
    }
}
