//! What identifies a sweep (`sweep.json`): its grid of radii and gammas and
//! the run every cell starts from. Below the sweep itself, so that its
//! results read the settings from here.

use serde::{Deserialize, Serialize};

use crate::experiment::base::{default_base, run_of};
use crate::experiment::settings::{add_warnings, check_grid_axis, check_seeds};
use csam_nn::optim::SamPolicy;
use csam_train::spec::{OptimizerFamily, RunSpec, UpdateRule, Warning};

use crate::error::Result;

/// What identifies a sweep: the grid and the run every cell starts from.
/// Saved as `sweep.json`, the base nested under `base`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSettings {
    /// Data, model, epochs and the shared hyperparameters of every run;
    /// each run sets its seed and its cell's update rule over it.
    #[serde(flatten, with = "crate::experiment::base::layout::file")]
    pub base: RunSpec,
    /// The seeds of every cell.
    pub seeds: Vec<u64>,
    /// Perturbation radii, in table order.
    pub rhos: Vec<f64>,
    /// CSAM gammas, in table order (0 is SAM).
    pub gammas: Vec<f64>,
    /// The efficient SAM policy of every cell (every step by default).
    #[serde(default, skip_serializing_if = "is_every")]
    pub policy: SamPolicy,
}

fn is_every(policy: &SamPolicy) -> bool {
    *policy == SamPolicy::Every
}

impl Default for SweepSettings {
    /// The paper's grid: rho from 0.02 to 0.2 (its rho figure), gamma
    /// 0 to 2 in steps of 0.5 (its rho x gamma table), on the default base
    /// ([`default_base`]) and seeds 0, 1 and 2, as `csam compare`.
    fn default() -> Self {
        SweepSettings {
            base: default_base(),
            seeds: vec![0, 1, 2],
            rhos: vec![0.02, 0.05, 0.1, 0.2],
            gammas: vec![0.0, 0.5, 1.0, 1.5, 2.0],
            policy: SamPolicy::Every,
        }
    }
}

impl SweepSettings {
    /// The optimizer of a cell: SAM for gamma = 0, CSAM otherwise.
    pub fn optimizer(gamma: f64) -> OptimizerFamily {
        match gamma == 0.0 {
            true => OptimizerFamily::Sam,
            false => OptimizerFamily::Csam,
        }
    }

    /// The spec of one run (checked by [`SweepSettings::validate`]).
    pub fn run_spec(&self, rho: f64, gamma: f64, seed: u64) -> RunSpec {
        let rule = UpdateRule::of_family(Self::optimizer(gamma), rho, gamma);
        let mut spec = run_of(&self.base, rule, seed);
        spec.optim.policy = self.policy;
        spec
    }

    /// Refuses empty or repeated lists and any setting a run would refuse
    /// (rho must be positive, gamma finite and non-negative), so that a
    /// sweep is recorded only once its settings are valid.
    pub fn validate(&self) -> Result<Vec<Warning>> {
        check_seeds(&self.seeds)?;
        check_grid_axis("rho", &self.rhos)?;
        check_grid_axis("gamma", &self.gammas)?;
        let mut warnings = Vec::new();
        for &rho in &self.rhos {
            for &gamma in &self.gammas {
                let spec = self.run_spec(rho, gamma, self.seeds[0]);
                add_warnings(&mut warnings, spec.validate()?);
            }
        }
        Ok(warnings)
    }

    /// Every (seed, rho, gamma) of the sweep, seed-major, so that every cell
    /// has a first value before any cell has a second.
    pub fn grid(&self) -> Vec<(u64, f64, f64)> {
        let mut grid = Vec::new();
        for &seed in &self.seeds {
            for &rho in &self.rhos {
                for &gamma in &self.gammas {
                    grid.push((seed, rho, gamma));
                }
            }
        }
        grid
    }
}
