//! # csam-train: train classifiers that know how sure they are
//!
//! The training engine of csam, on tch (Rust bindings to libtorch, the kernels
//! PyTorch runs, on CPU and CUDA).

/// The libtorch device tensors of a run live on: `Cuda(0)` when a GPU is
/// visible, the CPU otherwise.
pub fn default_device() -> tch::Device {
    tch::Device::cuda_if_available()
}

pub mod bench;
pub mod data;
pub mod device;
pub mod experiment;
pub mod loss;
pub mod model;
pub mod optim;
pub mod shift;
pub mod spec;
pub mod theory;
pub mod torch_message;
pub mod train;
