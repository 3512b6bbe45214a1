//! What identifies a comparison (`compare.json`) and what it evaluates
//! besides: [`CompareSettings`], the request for shifted data, and the
//! defaults that derive from the data. Below the comparison itself, so that
//! its results and tables read the settings from here.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::base::{default_base, run_of};
use super::compare_dir::CompareDir;
use super::method::{Method, MC_DROPOUT_RATE};
use super::method_settings::MethodSettings;
use super::settings::{add_warnings, check_seeds, invalid, repeated};
use csam_data::{self as data, DatasetSpec};
use csam_train::spec::{OptimizerFamily, RunSpec, UpdateRule, Warning};

use crate::error::{LabError, Result};

/// The fraction of the training part held out for validation when no
/// validation size is given: the default recipe's.
pub use csam_train::spec::DEFAULT_VAL_FRACTION;

/// How far apart the seeds of a deep ensemble's members lie: member `j` of
/// the replicate seeded `s` trains with seed `s + 1,000,000 j` (so that the
/// members of small seeds do not reuse another replicate's seed).
pub const MEMBER_SEED_STRIDE: u64 = 1_000_000;

/// What identifies a comparison: the run every run starts from, and what
/// each method sets over it. Every run uses the base's lr and weight decay
/// (docs/conventions.md, "Experiment protocol": tuned on SGD, reused for the
/// SAM family). Saved as `compare.json`, the base nested under `base`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompareSettings {
    /// Data, model, epochs and the shared hyperparameters of every run;
    /// each run sets its seed, its update rule and its method's objective
    /// over it ([`CompareSettings::run_spec`]).
    #[serde(flatten, with = "super::base::layout::file")]
    pub base: RunSpec,
    /// The seeds of every method.
    pub seeds: Vec<u64>,
    /// The methods, in table order.
    pub methods: Vec<Method>,
    /// Perturbation radius of the SAM family's methods without their own.
    pub rho: f64,
    /// CSAM's gamma, for the methods without their own.
    pub gamma: f64,
    /// Each method's own settings (loss and update-rule keys), layered over
    /// the shared ones; left out of `compare.json` when none.
    #[serde(default, skip_serializing_if = "MethodSettings::is_empty")]
    pub method_settings: MethodSettings,
}

impl Default for CompareSettings {
    /// The default comparison of `csam compare`: the default base
    /// ([`default_base`]), seeds 0, 1 and 2, SGD, SAM and CSAM, rho 0.05
    /// and gamma 1 from the paper (docs/conventions.md, "Experiment
    /// protocol").
    fn default() -> Self {
        CompareSettings {
            base: default_base(),
            seeds: vec![0, 1, 2],
            methods: vec![
                Method::cross_entropy(OptimizerFamily::Sgd),
                Method::cross_entropy(OptimizerFamily::Sam),
                Method::cross_entropy(OptimizerFamily::Csam),
            ],
            rho: 0.05,
            gamma: 1.0,
            method_settings: MethodSettings::default(),
        }
    }
}

impl CompareSettings {
    /// The spec of member `member` of `method`'s replicate `seed` (member 0
    /// for one network or MC-Dropout). Member 0 trains with `seed` on its
    /// split, as a single run does; member `j >= 1` of a deep ensemble with
    /// seed `seed + MEMBER_SEED_STRIDE * j` on member 0's split
    /// (`split_seed`), so that the members differ in initialisation and data
    /// order alone and the validation split is held out of every member.
    /// MC-Dropout's network trains with [`MC_DROPOUT_RATE`] dropout unless
    /// the method's settings give its `dropout`.
    pub fn run_spec(&self, method: Method, seed: u64, member: usize) -> Result<RunSpec> {
        let member_seed = (member as u64)
            .checked_mul(MEMBER_SEED_STRIDE)
            .and_then(|offset| seed.checked_add(offset))
            .ok_or_else(|| {
                invalid(
                    "seeds",
                    seed.to_string(),
                    "too large for an ensemble's member seeds",
                )
            })?;
        let rule = UpdateRule::of_family(method.rule, self.rho, self.gamma);
        let mut spec = run_of(&self.base, rule, member_seed);
        method.objective(spec.epochs).apply(&mut spec);
        spec.optim.policy = method.policy();
        if member > 0 {
            spec.data.split_seed = Some(seed);
        }
        if method.training().dropout {
            spec.model.dropout = MC_DROPOUT_RATE;
        }
        // The theory diagnostics are defined on unmixed batches.
        spec.track_theory &= spec.mixing.is_none();
        self.method_settings.apply(method, spec)
    }

    /// Refuses an empty or repeated method or seed list and any setting a
    /// run would refuse, names (data, model) included, so that a comparison
    /// is recorded only once its settings are valid. Returns the runs'
    /// warnings (legal but unusual settings), each once.
    pub fn validate(&self) -> Result<Vec<Warning>> {
        if self.methods.is_empty() {
            return Err(invalid(
                "methods",
                String::new(),
                "name at least one method",
            ));
        }
        if let Some(m) = repeated(&self.methods) {
            return Err(invalid(
                "methods",
                m.to_string(),
                "a method is listed twice",
            ));
        }
        check_seeds(&self.seeds)?;
        let seed = self.seeds[0];
        let mut warnings = Vec::new();
        for (index, &method) in self.methods.iter().enumerate() {
            let spec = self.run_spec(method, seed, 0)?;
            add_warnings(&mut warnings, spec.validate()?);
            if method.training().dropout && spec.model.dropout == 0.0 {
                return Err(invalid(
                    "methods",
                    method.to_string(),
                    "MC-Dropout samples dropout masks: its dropout must be above 0",
                ));
            }
            let sharing = self.methods[..index]
                .iter()
                .find(|other| other.training() == method.training());
            if let Some(&other) = sharing {
                if self.run_spec(other, seed, 0)? != spec {
                    return Err(invalid(
                        "methods",
                        format!("{other},{method}"),
                        &format!(
                            "both train the runs {}, so their settings in the methods file \
                             must agree",
                            CompareDir::relative_run(method.training(), seed, 0)
                        ),
                    ));
                }
            }
        }
        Ok(warnings)
    }

    /// Whether `change` to the comparison's shared settings (its `rho`, its
    /// `gamma`) reaches any run: false when no method takes the setting
    /// (SGD's, or a method whose own settings set it), so that a flag that
    /// would change nothing can be refused.
    pub fn runs_read(&self, change: impl FnOnce(&mut CompareSettings)) -> Result<bool> {
        let mut changed = self.clone();
        change(&mut changed);
        let Some(&seed) = self.seeds.first() else {
            return Ok(false);
        };
        for &method in &self.methods {
            if self.run_spec(method, seed, 0)? != changed.run_spec(method, seed, 0)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The keys in which `self` and `other` differ.
    pub fn differences(&self, other: &CompareSettings) -> Vec<String> {
        super::settings::differences(self, other)
    }
}

/// [`DEFAULT_VAL_FRACTION`] of the training part of `data` (rounded down, at
/// least 1): the validation size when none is given. (`csam train` holds out
/// the fraction itself, rounded to the nearest count: the same count for
/// every bundled data set.)
pub fn default_val_size(data: &str) -> Result<usize> {
    let spec: DatasetSpec = data.parse()?;
    let source = data::load(&spec)?;
    let n_train = source
        .train
        .map(|t| t.n)
        .ok_or_else(|| LabError::NoTrainingPart {
            data: data.to_string(),
        })?;
    Ok(((n_train as f64 * DEFAULT_VAL_FRACTION) as usize).max(1))
}

/// The default directory of an experiment on the data set named `data`
/// and the model named `model`, as the user named them:
/// `runs/<kind>-<data>-<model>`, with the data spec made file-name safe.
pub fn default_out(kind: &str, data: &str, model: &str) -> PathBuf {
    let data = crate::eval::report_name(data);
    PathBuf::from("runs").join(format!("{kind}-{data}-{model}"))
}

/// Data to evaluate every method on besides the test split: corrupted test
/// data and an out-of-distribution set (the paper's Table 1).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ShiftRequest {
    /// A directory of corrupted test data in CIFAR-10-C's layout (as `csam
    /// corrupt` writes it).
    pub corruptions: Option<PathBuf>,
    /// An out-of-distribution data set spec, whose test split is scored
    /// against the comparison's.
    pub ood: Option<String>,
}

impl ShiftRequest {
    /// Whether anything is asked for.
    pub fn is_empty(&self) -> bool {
        self.corruptions.is_none() && self.ood.is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rho_and_gamma_reach_the_runs_of_the_methods_that_take_them() {
        // The methods with their built-in settings, as `csam compare` runs them.
        let with = |names: &str| {
            let methods: Vec<Method> = names.split(',').map(|name| name.parse().unwrap()).collect();
            CompareSettings {
                method_settings: MethodSettings::builtin().of(&methods),
                methods,
                ..CompareSettings::default()
            }
        };
        let rho = |s: &mut CompareSettings| s.rho = 0.3;
        let gamma = |s: &mut CompareSettings| s.gamma = 2.0;
        assert!(!with("sgd").runs_read(rho).unwrap());
        assert!(!with("sgd,focal").runs_read(gamma).unwrap());
        // ASAM and bSAM have their own radius in the built-in settings.
        assert!(!with("sgd,asam,bsam").runs_read(rho).unwrap());
        assert!(with("sgd,vasso").runs_read(rho).unwrap());
        assert!(!with("sam").runs_read(gamma).unwrap());
        assert!(with("sam,focal+csam").runs_read(gamma).unwrap());
    }

    #[test]
    fn posterior_methods_anneal_over_their_authors_share_of_the_comparisons_epochs() {
        let methods: Vec<Method> = ["rank1", "vi+csam", "sgd"]
            .iter()
            .map(|name| name.parse().unwrap())
            .collect();
        let mut settings = CompareSettings {
            methods: methods.clone(),
            ..CompareSettings::default()
        };
        settings.base.epochs = 7;
        let annealing = |settings: &CompareSettings, method: Method| {
            let spec = settings.run_spec(method, 0, 0).unwrap();
            (spec.epochs, spec.model.bayesian.kl_annealing_epochs())
        };
        // 200 of the authors' 250 epochs: 5.6 of 7, rounded.
        assert_eq!(annealing(&settings, methods[0]), (7, 6));
        assert_eq!(annealing(&settings, methods[1]), (7, 6));
        assert_eq!(annealing(&settings, methods[2]), (7, 0));
        // A methods file's setting comes over the recipe.
        settings.method_settings =
            MethodSettings::parse("[rank1]\nkl_annealing_epochs = 2\n", "methods.toml").unwrap();
        assert_eq!(annealing(&settings, methods[0]), (7, 2));
        assert_eq!(annealing(&settings, methods[1]), (7, 6));
    }

    #[test]
    fn default_out_is_file_safe() {
        assert_eq!(
            default_out("compare", "idx:/data/fm", "mlp"),
            PathBuf::from("runs/compare-idx--data-fm-mlp")
        );
    }
}
