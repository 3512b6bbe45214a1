//! # csam-nn: the networks, losses and optimisers of csam
//!
//! Everything that computes on a model's weights, on tch (Rust bindings to
//! libtorch): the architectures and their registry ([`model`]), the losses
//! ([`loss`]), the base optimisers, schedules and the SAM family ([`optim`]),
//! the curvature of the loss ([`curvature`]) and the device strings
//! ([`device`]). It knows nothing of datasets, run directories or
//! experiments.

pub mod curvature;
pub mod device;
pub mod loss;
pub mod mixing;
pub mod model;
pub mod optim;
pub mod torch_message;
