//! What identifies a grid (`grid.json`): its pairs, its method and the run
//! every run starts from. Below the grid itself, so that its results read
//! the settings from here.

use serde::{Deserialize, Serialize};

use crate::experiment::compare_settings::CompareSettings;
use crate::experiment::method::{Method, Prediction};
use crate::experiment::method_settings::MethodSettings;
use crate::experiment::settings::{add_warnings, check_grid_axis, check_seeds, invalid};
use csam_train::spec::{OptimizerFamily, RunSpec, Warning};

use crate::error::Result;

/// One (lr, weight decay) pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GridPoint {
    /// Peak learning rate.
    pub lr: f64,
    /// Weight decay.
    pub weight_decay: f64,
}

/// `x` as the table and the run directories write it: exponent form below
/// 0.01 (`5e-4`, as weight decays are usually written), else plain (`0.05`).
/// Either form reads back as the same f64.
pub fn short(x: f64) -> String {
    match x != 0.0 && x.abs() < 0.01 {
        true => format!("{x:e}"),
        false => x.to_string(),
    }
}

/// What identifies a grid: the pairs, the method and the run every run
/// starts from. Saved as `grid.json`, the base nested under `base`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridSettings {
    /// Data, model, epochs and batch size of every run. Its `optim.lr` and
    /// `optim.weight_decay` are neither read nor saved: each run takes its
    /// pair's (see `keys`).
    #[serde(flatten, with = "super::keys::without_tuned")]
    pub base: RunSpec,
    /// The seeds of every pair.
    pub seeds: Vec<u64>,
    /// The method tuned (SGD with cross entropy by default).
    pub method: Method,
    /// Perturbation radius, read when the method's rule is of the SAM family.
    pub rho: f64,
    /// CSAM's gamma, read when the method's rule is CSAM.
    pub gamma: f64,
    /// Peak learning rates, in table order.
    pub lrs: Vec<f64>,
    /// Weight decays, in table order.
    pub weight_decays: Vec<f64>,
}

impl Default for GridSettings {
    /// The paper's grid on SGD (lr in {0.01, 0.05, 0.1}, weight decay in
    /// {1e-4, 5e-4, 1e-3}) with one seed, 0, and otherwise the settings of
    /// `csam compare` (its rho and gamma for a SAM-family method), so that
    /// the chosen pair is tuned for the runs it will be used in.
    fn default() -> Self {
        let compare = CompareSettings::default();
        GridSettings {
            base: compare.base,
            seeds: vec![0],
            method: Method::cross_entropy(OptimizerFamily::Sgd),
            rho: compare.rho,
            gamma: compare.gamma,
            lrs: vec![0.01, 0.05, 0.1],
            weight_decays: vec![1e-4, 5e-4, 1e-3],
        }
    }
}

impl GridSettings {
    /// The spec of one run: the method at `point` with `seed`, built as
    /// `csam compare` builds its runs, so that a run of the chosen pair is
    /// the comparison's run of the method.
    pub fn run_spec(&self, point: GridPoint, seed: u64) -> Result<RunSpec> {
        let mut base = self.base.clone();
        base.optim.lr = point.lr;
        base.optim.weight_decay = point.weight_decay;
        let compare = CompareSettings {
            base,
            seeds: vec![seed],
            methods: vec![self.method],
            rho: self.rho,
            gamma: self.gamma,
            // The method's built-in settings, as `csam compare` gives them
            // (ASAM's own radius).
            method_settings: MethodSettings::builtin().of(&[self.method]),
        };
        compare.run_spec(self.method, seed, 0)
    }

    /// Refuses empty or repeated lists and any setting a run would refuse
    /// (an lr must be finite and positive, a weight decay finite and
    /// non-negative), so that a grid is recorded only once its settings are
    /// valid.
    pub fn validate(&self) -> Result<Vec<Warning>> {
        check_seeds(&self.seeds)?;
        if self.method.prediction != Prediction::Single {
            return Err(invalid(
                "method",
                self.method.to_string(),
                "a grid tunes one network; tune the ensemble's or MC-Dropout's base method",
            ));
        }
        check_grid_axis("lrs", &self.lrs)?;
        check_grid_axis("weight_decays", &self.weight_decays)?;
        let mut warnings = Vec::new();
        for point in self.pairs() {
            add_warnings(
                &mut warnings,
                self.run_spec(point, self.seeds[0])?.validate()?,
            );
        }
        Ok(warnings)
    }

    /// Every (lr, weight decay), lr-major: the rows of the table.
    pub fn pairs(&self) -> Vec<GridPoint> {
        self.lrs
            .iter()
            .flat_map(|&lr| {
                self.weight_decays
                    .iter()
                    .map(move |&weight_decay| GridPoint { lr, weight_decay })
            })
            .collect()
    }

    /// Every (seed, lr, weight decay), seed-major, so that every pair has a
    /// first value before any pair has a second.
    pub fn runs(&self) -> Vec<(u64, GridPoint)> {
        let pairs = self.pairs();
        self.seeds
            .iter()
            .flat_map(|&seed| pairs.iter().map(move |&point| (seed, point)))
            .collect()
    }
}
