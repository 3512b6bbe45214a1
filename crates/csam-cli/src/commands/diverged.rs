//! The lines an experiment ends with when some of its runs diverged: the
//! experiment still succeeds when one run finished (its tables mark the
//! diverged ones), and each diverged run is named here with its reason.

use std::path::Path;

use csam_lab::experiment::diverged::DivergedRun;

/// Prints one line per run of `diverged`, its directory under the
/// experiment directory `out` and where and why it diverged.
pub fn print_diverged<K>(out: &Path, diverged: &[DivergedRun<K>]) {
    for run in diverged {
        println!(
            "{}: {} (recorded in its diverged.json; remove that file to train it again)",
            out.join(&run.run_dir).display(),
            run.divergence
        );
    }
}
