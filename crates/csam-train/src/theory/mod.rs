//! The paper's per-step theory diagnostics (Section 4, Figure 2; definitions
//! in docs/theory.md).
//!
//! Per step of a SAM / CSAM run whose spec sets `track_theory`: the
//! geometric means p_y and p~_y, Lemma 2's bound, lambda, lambda_0, H(p_y)
//! and ||g|| ([`TheoryRecord`]), logged to `theory.jsonl` in the run
//! directory; [`read_theory`], [`TheorySummary`] (the fraction of steps where
//! Lemma 2 held) and [`write_theory_plots`] read them back. The sharpness of
//! a finished run (the Hessian's extreme eigenvalues) is `csam_lab::sharpness`,
//! on `csam_nn::curvature`.

mod log;
mod plots;
mod record;

pub use log::{read_theory, theory_log, TheoryLog, TheorySummary};
pub use plots::{theory_charts, write_theory_plots, THEORY_PLOTS};
pub use record::{binary_entropy, TheoryRecord};
