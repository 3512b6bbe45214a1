//! Gradients averaged over the ranks while the backward pass still runs, in
//! buckets, as PyTorch's DistributedDataParallel does, through the C++ shim
//! in `csrc/gradient_buckets.cpp`.
//!
//! A hook on every parameter copies its gradient into the parameter's bucket
//! as autograd produces it; a bucket whose gradients have all arrived starts
//! its all-reduce at once, so the communication of the layers near the
//! output overlaps the backward pass through the layers near the input.
//! Buckets are filled in reverse parameter order (the order backward reaches
//! a feed-forward model's parameters) and launched in their index order
//! only, so every rank calls the same collectives in the same order.

use std::ffi::c_char;
use std::sync::Arc;

use tch::Tensor;
use torch_sys::C_tensor;

use crate::process_group::{checked, RawGroup};
use crate::{DistError, ProcessGroup};

/// The C++ buckets with their hooks, opaque here.
#[repr(C)]
struct RawBuckets {
    _private: [u8; 0],
}

extern "C" {
    fn csam_dist_buckets_new(
        group: *mut RawGroup,
        params: *const *const C_tensor,
        n_params: usize,
        order: *const usize,
        bucket_ends: *const usize,
        n_buckets: usize,
        out: *mut *mut RawBuckets,
    ) -> *mut c_char;
    fn csam_dist_buckets_arm(buckets: *mut RawBuckets, rows: f64) -> *mut c_char;
    fn csam_dist_buckets_add(
        buckets: *mut RawBuckets,
        index: usize,
        grad: *const C_tensor,
    ) -> *mut c_char;
    fn csam_dist_buckets_finish(
        buckets: *mut RawBuckets,
        out: *mut *mut C_tensor,
        launched_early: *mut usize,
    ) -> *mut c_char;
    fn csam_dist_buckets_free(buckets: *mut RawBuckets);
}

/// How large the buckets grow: DDP's defaults are a first bucket (the
/// gradients backward produces first) of 1 MiB, so the first all-reduce
/// starts early, and 25 MiB for the others (`bucket_cap_mb`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketCaps {
    /// Cap of the first bucket (the last parameters'), in bytes.
    pub first_bytes: usize,
    /// Cap of every other bucket, in bytes.
    pub bytes: usize,
}

impl Default for BucketCaps {
    fn default() -> Self {
        BucketCaps {
            first_bytes: 1 << 20,
            bytes: 25 << 20,
        }
    }
}

impl BucketCaps {
    /// The buckets of parameters of `sizes` bytes: their indices, last
    /// parameter first, each bucket closed when the next parameter would
    /// take it past its cap (a parameter larger than the cap is a bucket of
    /// its own), as `torch.distributed`'s `compute_bucket_assignment_by_size`.
    pub fn layout(&self, sizes: &[usize]) -> Vec<Vec<usize>> {
        let mut buckets: Vec<Vec<usize>> = Vec::new();
        let mut current: Vec<usize> = Vec::new();
        let mut bytes = 0;
        for index in (0..sizes.len()).rev() {
            let cap = match buckets.is_empty() {
                true => self.first_bytes,
                false => self.bytes,
            };
            if !current.is_empty() && bytes + sizes[index] > cap {
                buckets.push(std::mem::take(&mut current));
                bytes = 0;
            }
            current.push(index);
            bytes += sizes[index];
        }
        if !current.is_empty() {
            buckets.push(current);
        }
        buckets
    }
}

/// The buckets of a fixed list of parameters, with a hook on each that acts
/// during [`GradientBuckets::arm`]'s round only. The hooks are removed when
/// this is dropped.
pub struct GradientBuckets {
    raw: *mut RawBuckets,
    group: Arc<ProcessGroup>,
    count: usize,
    params: usize,
}

// SAFETY: the C++ state is guarded by its own mutex; the hooks run on
// whichever thread runs the backward pass, as in DDP.
unsafe impl Send for GradientBuckets {}
unsafe impl Sync for GradientBuckets {}

impl std::fmt::Debug for GradientBuckets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GradientBuckets({} parameters in {} buckets)",
            self.params, self.count
        )
    }
}

/// A round's result: every parameter's gradient averaged over the ranks.
#[derive(Debug)]
pub struct ReducedGradients {
    /// The mean gradients, in the order of the parameters.
    pub grads: Vec<Tensor>,
    /// How many of the [`ReducedGradients::buckets`] started their
    /// all-reduce before [`Round::finish`]: during the backward pass (the
    /// overlap), or as gradients were added.
    pub launched_early: usize,
    /// Number of buckets.
    pub buckets: usize,
}

/// An armed round of [`GradientBuckets`]: the backward pass runs while it
/// lives, then [`Round::finish`]. Dropped unfinished (the backward pass
/// failed), it still waits for the collectives it started.
#[must_use = "a round must be finished"]
pub struct Round<'b> {
    buckets: &'b GradientBuckets,
    finished: bool,
}

impl GradientBuckets {
    /// Buckets over `params` (CPU tensors that require gradients), laid out
    /// by `caps`, reduced over `group`.
    pub fn new(
        group: Arc<ProcessGroup>,
        params: &[Tensor],
        caps: BucketCaps,
    ) -> Result<GradientBuckets, DistError> {
        if params.is_empty() {
            return Err(DistError::Tensor(
                "gradient buckets need at least one parameter".into(),
            ));
        }
        let sizes: Vec<usize> = params
            .iter()
            .map(|p| p.numel() * p.kind().elt_size_in_bytes())
            .collect();
        let layout = caps.layout(&sizes);
        let order: Vec<usize> = layout.iter().flatten().copied().collect();
        let ends: Vec<usize> = layout
            .iter()
            .scan(0, |end, bucket| {
                *end += bucket.len();
                Some(*end)
            })
            .collect();
        let pointers: Vec<*const C_tensor> = params.iter().map(|p| p.as_ptr()).collect();
        let mut raw = std::ptr::null_mut();
        // SAFETY: the arrays outlive the call; the shim keeps its own
        // references to the parameters; `raw` is written on success only.
        checked(unsafe {
            csam_dist_buckets_new(
                group.raw(),
                pointers.as_ptr(),
                pointers.len(),
                order.as_ptr(),
                ends.as_ptr(),
                ends.len(),
                &mut raw,
            )
        })
        .map_err(|message| group.failed("gradient buckets", message))?;
        Ok(GradientBuckets {
            raw,
            group,
            count: layout.len(),
            params: params.len(),
        })
    }

    /// Number of buckets.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Starts a round: the next backward pass's gradients of the parameters,
    /// weighted by this rank's `rows`, are summed over the ranks as they
    /// arrive. Every rank arms the same backward pass.
    pub fn arm(&self, rows: usize) -> Result<Round<'_>, DistError> {
        // SAFETY: `raw` is live while `self` is.
        checked(unsafe { csam_dist_buckets_arm(self.raw, rows as f64) })
            .map_err(|message| self.group.failed("gradient buckets", message))?;
        Ok(Round {
            buckets: self,
            finished: false,
        })
    }
}

impl Round<'_> {
    /// Hands parameter `index`'s gradient, computed before the round, to its
    /// bucket, as the parameter's hook does during a backward pass (a
    /// bucket complete with it starts its all-reduce).
    pub fn add(&self, index: usize, grad: &Tensor) -> Result<(), DistError> {
        // SAFETY: `raw` is live; the shim copies `grad` and keeps no reference.
        checked(unsafe { csam_dist_buckets_add(self.buckets.raw, index, grad.as_ptr()) })
            .map_err(|message| self.buckets.group.failed("gradient buckets", message))
    }

    /// Ends the round after the backward pass: buckets still waiting are
    /// launched (a parameter the pass did not reach counts with a zero
    /// gradient), every all-reduce is waited for, and each parameter's
    /// gradient is the row-weighted mean over the ranks, `sum_r rows_r g_r /
    /// sum_r rows_r`. An error when a collective failed (a rank died, the
    /// group's timeout passed).
    pub fn finish(mut self) -> Result<ReducedGradients, DistError> {
        self.finished = true;
        let buckets = self.buckets;
        let mut out: Vec<*mut C_tensor> = vec![std::ptr::null_mut(); buckets.params];
        let mut launched_early = 0;
        // SAFETY: `out` has one slot per parameter, which the shim fills with
        // tensors this call then owns, on success only.
        checked(unsafe {
            csam_dist_buckets_finish(buckets.raw, out.as_mut_ptr(), &mut launched_early)
        })
        .map_err(|message| {
            buckets
                .group
                .failed("all-reduce of gradient buckets", message)
        })?;
        Ok(ReducedGradients {
            // SAFETY: each pointer is a tensor the shim allocated for us.
            grads: out
                .into_iter()
                .map(|raw| unsafe { Tensor::from_ptr(raw) })
                .collect(),
            launched_early,
            buckets: buckets.count,
        })
    }
}

impl Drop for Round<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut out: Vec<*mut C_tensor> = vec![std::ptr::null_mut(); self.buckets.params];
            let mut launched = 0;
            // SAFETY: as in `finish`; the tensors of a successful finish are freed here.
            let result = checked(unsafe {
                csam_dist_buckets_finish(self.buckets.raw, out.as_mut_ptr(), &mut launched)
            });
            if result.is_ok() {
                out.into_iter()
                    .for_each(|raw| drop(unsafe { Tensor::from_ptr(raw) }));
            }
        }
    }
}

impl Drop for GradientBuckets {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `csam_dist_buckets_new` and is freed once;
        // no round borrows it any more.
        unsafe { csam_dist_buckets_free(self.raw) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reverse order, a 1 MiB first bucket, 25 MiB after, oversized
    /// parameters alone.
    #[test]
    fn layout_follows_ddp_caps() {
        let mib = 1 << 20;
        let caps = BucketCaps::default();
        let sizes = [10 * mib, 20 * mib, 30 * mib, mib / 2, mib / 2, mib / 4];
        assert_eq!(
            caps.layout(&sizes),
            vec![vec![5, 4], vec![3], vec![2], vec![1], vec![0]]
        );
        assert_eq!(caps.layout(&[4, 4]), vec![vec![1, 0]]);
        let tiny = BucketCaps {
            first_bytes: 4,
            bytes: 8,
        };
        assert_eq!(
            tiny.layout(&[4, 4, 4, 4]),
            vec![vec![3], vec![2, 1], vec![0]]
        );
    }
}
