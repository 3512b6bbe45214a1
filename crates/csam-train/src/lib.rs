//! # csam-train: one training run
//!
//! A run of csam: its typed specification ([`spec`]), the loop with its
//! checkpoints, run directory, lock and observer ([`train`]), the per-step
//! theory diagnostics it can record ([`theory`]), its TensorBoard event
//! files ([`tensorboard`]) and the step benchmark
//! ([`bench`]). Data comes from `csam-data`, networks, losses and optimisers
//! from `csam-nn`; experiments over many runs live in `csam-lab`.

pub mod bench;
pub mod spec;
pub mod tensorboard;
pub mod theory;
pub mod train;
