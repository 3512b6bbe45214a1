//! Experiments over many training runs.
//!
//! - [`compare`] trains SGD, SAM and CSAM (and ASAM) on one data set and
//!   model over several seeds with shared hyperparameters (docs/conventions.md, "Experiment protocol":
//!   lr and weight decay tuned on SGD, reused for the SAM family), then
//!   reports the paper's table, mean ± sample std over seeds, with post-hoc
//!   calibration fitted on the validation split.
//! - [`sweep`] trains CSAM over a rho x gamma grid (the paper's rho x gamma
//!   table and its rho and gamma figures).
//! - [`grid`] trains SGD over an lr x weight decay grid and chooses the pair
//!   with the best validation accuracy: the lr and weight decay the
//!   comparison then shares (paper §5.1).
//! - [`report`] writes each experiment's figures and self-contained
//!   `report.html`.
//!
//! The experiments share [`base`] (the run every run starts from, nested
//! as `base` in each settings file, and read from the flat keys of earlier
//! releases), [`settings`] (the directory identified by its settings file)
//! and [`runs`] (train a run or reuse it when it finished); [`progress`]
//! counts the runs and epochs trained and estimates the time left, for the
//! caller's progress bar.
//!
//! A comparison directory holds:
//! - `compare.json`: the [`compare_settings::CompareSettings`]; it identifies the
//!   comparison, so a rerun with the same settings resumes and one with
//!   different settings is refused;
//! - `runs/<method>-seed<k>/`: one `csam train` run directory per method and
//!   seed (see [`csam_train::train::rundir`]);
//! - `results.json` ([`results::CompareResults`]), `results.csv` (one row per
//!   run, see [`results::csv`]) and `table.md` (see [`table`]);
//! - `plots/`: per method, the reliability diagram and confidence histogram
//!   of the first seed's raw test predictions, ECE after post-hoc calibration,
//!   ECE and TCE over epochs, the entropy distribution (SVG and PNG, see
//!   [`report::compare`]);
//! - `report.html`: all of it on one self-contained page.

pub mod base;
pub mod cluster;
pub mod combined;
pub mod compare;
pub mod compare_dir;
pub mod compare_settings;
pub mod diverged;
pub mod grid;
pub mod method;
pub mod method_settings;
pub mod posthoc;
pub mod progress;
pub mod report;
pub mod results;
pub mod runs;
pub mod settings;
pub mod sweep;
pub mod table;
