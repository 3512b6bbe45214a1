//! # csam-lab: experiments on trained runs
//!
//! What csam does with runs once `csam-train` has trained them: the
//! comparison and the sweep with their report ([`experiment`]), evaluation
//! of a run under distribution shift, ensembles and MC-Dropout ([`shift`],
//! [`eval`]), and the sharpness of a run's loss at its weights
//! ([`sharpness`]).

pub mod error;
pub mod eval;
pub mod experiment;
pub mod sharpness;
pub mod shift;
