//! Snapshot and restore of a model's buffers (BatchNorm running statistics).

use tch::{nn::VarStore, Tensor};

/// The non-trainable variables of a `VarStore` (BatchNorm `running_mean` /
/// `running_var`) and a saved copy of their values, allocated once.
///
/// The SAM step captures them after the first forward pass and restores them
/// after the second, so running statistics move once per step (paper-notes §1:
/// momentum 0 for pass 2).
#[derive(Debug)]
pub struct BufferSnapshot {
    live: Vec<Tensor>,
    saved: Vec<Tensor>,
    /// Whether `saved` holds a capture not yet restored.
    pending: bool,
}

impl BufferSnapshot {
    /// Tracks every variable of `vs` that does not require gradients.
    pub fn new(vs: &VarStore) -> Self {
        // The store's mutex is only poisoned if another thread panicked while
        // holding it, after which no state is trustworthy anyway.
        let variables = vs.variables_.lock().expect("VarStore mutex poisoned");
        let live: Vec<Tensor> = variables
            .named_variables
            .values()
            .filter(|t| !t.requires_grad())
            .map(|t| t.shallow_clone())
            .collect();
        let saved = live.iter().map(|t| t.detach().copy()).collect();
        Self {
            live,
            saved,
            pending: false,
        }
    }

    /// Number of tracked buffers.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether the model has no buffer.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Saves the current buffer values.
    pub fn capture(&mut self) {
        self.pending = true;
        let _guard = tch::no_grad_guard();
        for (saved, live) in self.saved.iter_mut().zip(&self.live) {
            saved.copy_(live);
        }
    }

    /// Writes the values of the last [`BufferSnapshot::capture`] back into the
    /// model's buffers; a no-op when that capture was already restored.
    pub fn restore(&mut self) {
        if !std::mem::take(&mut self.pending) {
            return;
        }
        let _guard = tch::no_grad_guard();
        for (live, saved) in self.live.iter().zip(&self.saved) {
            live.shallow_clone().copy_(saved);
        }
    }
}
