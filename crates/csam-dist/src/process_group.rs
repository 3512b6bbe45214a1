//! A c10d Gloo process group, through the C++ shim in
//! `csrc/process_group.cpp`.

use std::ffi::{c_char, c_int, c_longlong, CStr, CString};

use tch::{Device, Tensor};
use torch_sys::C_tensor;

use crate::{DistError, Rendezvous};

/// The C++ group object, opaque here.
#[repr(C)]
pub(crate) struct RawGroup {
    _private: [u8; 0],
}

/// A C++ collective in flight, opaque here.
#[repr(C)]
struct RawWork {
    _private: [u8; 0],
}

extern "C" {
    fn csam_dist_connect(
        host: *const c_char,
        port: c_int,
        rank: c_int,
        world_size: c_int,
        timeout_ms: c_longlong,
        out: *mut *mut RawGroup,
    ) -> *mut c_char;
    fn csam_dist_free(group: *mut RawGroup);
    fn csam_dist_free_error(message: *mut c_char);
    fn csam_dist_all_reduce_sum(
        group: *mut RawGroup,
        tensor: *const C_tensor,
        out: *mut *mut RawWork,
    ) -> *mut c_char;
    fn csam_dist_differentiable_sum(
        group: *mut RawGroup,
        tensor: *const C_tensor,
        out: *mut *mut C_tensor,
    ) -> *mut c_char;
    fn csam_dist_broadcast(
        group: *mut RawGroup,
        tensor: *const C_tensor,
        root: c_int,
        out: *mut *mut RawWork,
    ) -> *mut c_char;
    fn csam_dist_wait(work: *mut RawWork) -> *mut c_char;
    fn csam_dist_barrier(group: *mut RawGroup) -> *mut c_char;
}

/// Turns the shim's returned message (null: success) into a `Result`.
pub(crate) fn checked(message: *mut c_char) -> Result<(), String> {
    if message.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null result is a NUL-terminated string the shim allocated
    // and hands over; it is freed once, here.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    unsafe { csam_dist_free_error(message) };
    Err(text.trim().to_string())
}

/// The processes of a data-parallel job, joined through a [`Rendezvous`].
/// Collectives are called by every rank in the same order with tensors of
/// the same shapes, as in `torch.distributed`.
#[derive(Debug)]
pub struct ProcessGroup {
    raw: *mut RawGroup,
    rank: usize,
    world_size: usize,
}

// SAFETY: c10d's process groups may be used from any thread: Gloo's
// enqueues its collectives under a mutex and runs them on its own worker
// threads. Which order collectives from several threads run in is the
// caller's concern, as in torch.distributed.
unsafe impl Send for ProcessGroup {}
unsafe impl Sync for ProcessGroup {}

/// A collective started by [`ProcessGroup`], finished by [`Pending::wait`].
/// The tensor it works on must not be read or written until then.
#[must_use = "a collective must be waited for"]
pub struct Pending<'g> {
    raw: *mut RawWork,
    group: &'g ProcessGroup,
    operation: &'static str,
}

impl Pending<'_> {
    /// Waits for the collective; an error when a rank died, closed its
    /// connection, or the group's timeout passed.
    pub fn wait(mut self) -> Result<(), DistError> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: `raw` came from the shim and is waited for (and freed) once.
        checked(unsafe { csam_dist_wait(raw) })
            .map_err(|message| self.group.failed(self.operation, message))
    }
}

impl Drop for Pending<'_> {
    /// A collective dropped without waiting is waited for here, so that its
    /// tensor is never freed while Gloo still writes it; its error is lost.
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: as in `wait`; the returned message is freed by `checked`.
            let _ = checked(unsafe { csam_dist_wait(self.raw) });
        }
    }
}

impl ProcessGroup {
    /// Joins the job of `rendezvous`: rank 0 serves the store at
    /// `MASTER_ADDR:MASTER_PORT`, every rank connects to it, and the call
    /// returns once all `world_size` ranks have (or fails after the timeout).
    pub fn connect(rendezvous: &Rendezvous) -> Result<ProcessGroup, DistError> {
        let Rendezvous {
            rank, world_size, ..
        } = *rendezvous;
        let failed = |message: String| DistError::Connect {
            address: rendezvous.address(),
            rank,
            world_size,
            message,
        };
        let host = CString::new(rendezvous.master_addr.as_str())
            .map_err(|_| failed("the host name holds a NUL byte".into()))?;
        let timeout_ms =
            c_longlong::try_from(rendezvous.timeout.as_millis()).unwrap_or(c_longlong::MAX);
        let mut raw = std::ptr::null_mut();
        // SAFETY: the host string outlives the call; `raw` is written on success only.
        checked(unsafe {
            csam_dist_connect(
                host.as_ptr(),
                c_int::from(rendezvous.master_port),
                rank as c_int,
                world_size as c_int,
                timeout_ms,
                &mut raw,
            )
        })
        .map_err(failed)?;
        Ok(ProcessGroup {
            raw,
            rank,
            world_size,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Number of processes.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// Starts replacing `tensor` by its sum over the ranks, in place.
    pub fn start_all_reduce_sum(&self, tensor: &Tensor) -> Result<Pending<'_>, DistError> {
        check_tensor(tensor)?;
        let mut work = std::ptr::null_mut();
        // SAFETY: `tensor` is a live tensor; the shim keeps its own reference
        // to it until the work is waited for.
        checked(unsafe { csam_dist_all_reduce_sum(self.raw, tensor.as_ptr(), &mut work) })
            .map_err(|message| self.failed("all-reduce", message))?;
        Ok(self.pending(work, "all-reduce"))
    }

    /// Replaces `tensor` by its sum over the ranks, in place.
    pub fn all_reduce_sum(&self, tensor: &Tensor) -> Result<(), DistError> {
        self.start_all_reduce_sum(tensor)?.wait()
    }

    /// The sum of `tensor` over the ranks, as a new tensor that autograd
    /// differentiates: its backward pass sums the incoming gradient over the
    /// ranks (the adjoint of a sum all-reduce; `torch.distributed.nn`'s
    /// `all_reduce`), so every rank must run its backward pass too, in the
    /// same order. `tensor` may be in any layout; it is left unchanged.
    /// The collective in either pass fails (an error here, or of the
    /// backward call) when a rank is gone or the group's timeout passes.
    pub fn differentiable_sum(&self, tensor: &Tensor) -> Result<Tensor, DistError> {
        if tensor.device() != Device::Cpu {
            return Err(not_cpu(tensor.device()));
        }
        let mut out = std::ptr::null_mut();
        // SAFETY: `tensor` is live; `out` is written on success only, with a
        // tensor this call now owns.
        checked(unsafe { csam_dist_differentiable_sum(self.raw, tensor.as_ptr(), &mut out) })
            .map_err(|message| self.failed("differentiable all-reduce", message))?;
        // SAFETY: the shim allocated `out` for the caller, which frees it once.
        Ok(unsafe { Tensor::from_ptr(out) })
    }

    /// Copies rank `root`'s `tensor` into every rank's `tensor`, in place.
    pub fn broadcast(&self, tensor: &Tensor, root: usize) -> Result<(), DistError> {
        check_tensor(tensor)?;
        let mut work = std::ptr::null_mut();
        // SAFETY: as in `start_all_reduce_sum`.
        checked(unsafe {
            csam_dist_broadcast(self.raw, tensor.as_ptr(), root as c_int, &mut work)
        })
        .map_err(|message| self.failed("broadcast", message))?;
        self.pending(work, "broadcast").wait()
    }

    /// Returns once every rank has called it.
    pub fn barrier(&self) -> Result<(), DistError> {
        // SAFETY: the group is live.
        checked(unsafe { csam_dist_barrier(self.raw) })
            .map_err(|message| self.failed("barrier", message))
    }

    fn pending(&self, raw: *mut RawWork, operation: &'static str) -> Pending<'_> {
        Pending {
            raw,
            group: self,
            operation,
        }
    }

    /// The group's handle, for the other shim bindings.
    pub(crate) fn raw(&self) -> *mut RawGroup {
        self.raw
    }

    pub(crate) fn failed(&self, operation: &'static str, message: String) -> DistError {
        DistError::Collective {
            operation,
            rank: self.rank,
            world_size: self.world_size,
            message,
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        // SAFETY: `raw` came from `csam_dist_connect` and is freed once.
        unsafe { csam_dist_free(self.raw) }
    }
}

/// Gloo's collectives take dense, contiguous CPU tensors.
fn check_tensor(tensor: &Tensor) -> Result<(), DistError> {
    if tensor.device() != Device::Cpu {
        return Err(not_cpu(tensor.device()));
    }
    if !tensor.is_contiguous() {
        return Err(DistError::Tensor(
            "a collective needs a contiguous tensor".into(),
        ));
    }
    Ok(())
}

fn not_cpu(device: Device) -> DistError {
    DistError::Tensor(format!(
        "the Gloo process group runs on CPU tensors; this one is on {device:?} (NCCL for CUDA \
         tensors is not available yet)"
    ))
}
