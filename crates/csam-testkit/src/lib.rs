//! What csam's test suites share, so that every crate's tests behave alike on
//! any machine:
//!
//! - [`twin`]: the project venv's python for the PyTorch twins. A bare
//!   `cargo test` without the venv skips a twin with a notice; under
//!   `cargo xtask test`, which sets [`twin::REQUIRE_TWINS`] after creating the
//!   venv, a missing python can only be a broken set-up and fails the test.
//! - [`port`]: a loopback port a test owns for its lifetime (rendezvous stores
//!   of data-parallel tests), outside the range the kernel hands out.
//! - [`deadline`]: runs a closure that might hang, failing the test when it
//!   outlives its deadline instead of hanging the suite.
//! - [`roundoff`]: tolerances derived from a type's epsilon and the sizes of a
//!   computation, never read off one machine's result.

pub mod deadline;
pub mod port;
pub mod roundoff;
pub mod twin;
