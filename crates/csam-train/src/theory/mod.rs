//! The paper's theory diagnostics (Section 4, Figure 2, the sharpness table;
//! definitions and settings in docs/theory.md).
//!
//! - Per step of a SAM / CSAM run trained with `--track-theory`: the
//!   geometric means p_y and p~_y, Lemma 2's bound, lambda, lambda_0, H(p_y)
//!   and ||g|| ([`TheoryRecord`]), logged to `theory.jsonl` in the run
//!   directory; [`read_theory`], [`TheorySummary`] (the fraction of steps
//!   where Lemma 2 held) and [`write_theory_plots`] read them back.
//! - `csam sharpness`: kappa_max and kappa_min of the training loss's
//!   Hessian at theta, at theta~ and along the segment between them
//!   ([`sharpness::measure_run`]), from exact Hessian-vector products
//!   ([`LossSurface`]), power iteration ([`top_eigenvalue`]) and Lanczos
//!   ([`lanczos_min`]).

pub mod eigen;
pub mod hessian;
mod log;
mod plots;
mod record;
pub mod sharpness;

pub use eigen::{lanczos_min, power_iteration, top_eigenvalue, Eigen, PowerSettings};
pub use hessian::LossSurface;
pub use log::{read_theory, theory_log, TheoryLog, TheorySummary};
pub use plots::{theory_charts, write_theory_plots, THEORY_PLOTS};
pub use record::{binary_entropy, TheoryRecord};
