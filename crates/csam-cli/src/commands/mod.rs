//! The subcommands of `csam`, one module each.

pub mod bench;
pub mod compare;
pub mod eval;
pub mod train;
