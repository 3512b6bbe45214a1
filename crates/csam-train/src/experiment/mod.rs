//! Experiments over many training runs: [`compare`] trains SGD, SAM and CSAM
//! (and ASAM) on one data set and model over several seeds with shared
//! hyperparameters (paper-notes §5: lr and weight decay tuned on SGD, reused
//! for the SAM family), then reports the paper's table, mean ± sample std over
//! seeds, with post-hoc calibration fitted on the validation split.
//!
//! A comparison directory holds:
//! - `compare.json`: the [`compare::CompareSettings`]; it identifies the
//!   comparison, so a rerun with the same settings resumes and one with
//!   different settings is refused;
//! - `runs/<method>-seed<k>/`: one `csam train` run directory per method and
//!   seed (see [`crate::train::rundir`]);
//! - `results.json` ([`results::CompareResults`]), `results.csv` (one row per
//!   run, see [`results::csv`]) and `table.md` (see [`table`]);
//! - `plots/`: per method, the reliability diagram and confidence histogram
//!   of the first seed's raw test predictions (SVG and PNG, see [`plots`]).

pub mod compare;
pub mod plots;
pub mod posthoc;
pub mod results;
pub mod table;
