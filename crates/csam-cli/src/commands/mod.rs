//! The subcommands of `csam`, one module each.

pub mod bench;
pub mod eval;
pub mod train;
