//! Data-parallel training on PyTorch's own distributed engine, c10d.
//!
//! csam does not implement collectives: a small C++ shim
//! (`csrc/process_group.cpp`, built by `build.rs` against libtorch's headers)
//! hands Rust the process group that `torch.distributed` itself uses, a
//! Gloo group rendezvousing through a `TCPStore`, and its all-reduce,
//! broadcast and barrier. Gloo runs the collectives on CPU tensors, over TCP
//! between processes on one machine or many. NCCL (CUDA tensors) is not
//! wired in yet.
//!
//! - [`Rendezvous`]: who this process is and where the group meets, read
//!   from the environment torchrun and Slurm launchers set (`RANK`,
//!   `WORLD_SIZE`, `LOCAL_RANK`, `MASTER_ADDR`, `MASTER_PORT`).
//! - [`ProcessGroup`]: the group, joined from a rendezvous; its collectives
//!   fail with [`DistError::Collective`] (never hang) when a rank dies or a
//!   collective outlasts the group's timeout.
//! - [`GradientBuckets`]: a model's gradients averaged over the group in
//!   buckets whose all-reduce starts while the backward pass still runs
//!   (DDP's overlap).

mod error;
mod gradient_buckets;
mod process_group;
pub mod rendezvous;

pub use error::DistError;
pub use gradient_buckets::{BucketCaps, GradientBuckets, ReducedGradients, Round};
pub use process_group::{Pending, ProcessGroup};
pub use rendezvous::Rendezvous;
