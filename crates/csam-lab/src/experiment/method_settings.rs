//! Each method's own settings in a comparison: the loss's parameters and the
//! update rule's (ASAM's radius, CSAM's gamma, ...), written as the flat keys
//! of `csam train` (`rho`, `focal_gamma`, `smoothing`, ...) per method name.
//!
//! A methods file is TOML, one table per method:
//!
//! ```toml
//! [asam]
//! rho = 1.0
//!
//! ["focal+csam"]
//! focal_gamma = 1.0
//! gamma = 0.5
//! ```
//!
//! Only keys of the loss, of the mixing, of the classifier head (BalCAL's),
//! of the ensemble (BatchEnsemble's, MIMO's), of the posterior (VI's), of the update rule
//! and of its efficient SAM policy (`looksam_k`) may be set: every method of
//! a comparison shares its data, model, epochs, base optimiser, learning
//! rate and seeds (the paper's protocol), so a key of those is refused, as
//! is a key its method does not read (`rho` for `sgd`). The settings are
//! layered over the built-in ones ([`MethodSettings::builtin`]) and over the
//! comparison's shared `--rho` and `--gamma`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::method::{Method, Prediction};
use csam_train::spec::{keys, RunSpec, SpecLayers};
use csam_train::train::ConfigError;

use crate::error::{LabError, Result};

/// Flat keys per method name, as a methods file writes them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MethodSettings(BTreeMap<String, toml::Table>);

/// The built-in settings: a method's own where its authors' differ from the
/// comparison's shared ones. ASAM's radius is 0.5, Kwon et al. 2021's on
/// CIFAR-10 ("ASAM: adaptive sharpness-aware minimization", Section 5):
/// its adaptive perturbation is measured relative to the weights, so SAM's
/// 0.05 barely moves them. bSAM's rho is 0.01, Möllenhoff and Khan 2023's
/// on CIFAR (their repository's README): its ascent `rho g / s` is not
/// normalised. Momentum-SAM's is 0.3, the default of its authors' optimizer
/// (MarlonBecker/MSAM, `optimizer/msam.py`; their CIFAR scripts take 3 with
/// lr 0.5): its perturbation follows the momentum, not the batch's gradient.
const BUILTIN: &str = r#"
[asam]
rho = 0.5

[bsam]
rho = 0.01

["msam+sam"]
rho = 0.3

["msam+csam"]
rho = 0.3
"#;

impl MethodSettings {
    /// The built-in settings ([`BUILTIN`]).
    pub fn builtin() -> MethodSettings {
        // Invariant: BUILTIN is valid, checked by a unit test.
        MethodSettings::parse(BUILTIN, "the built-in method settings")
            .expect("the built-in method settings parse")
    }

    /// Reads a methods file's text; `origin` names it in errors. Refuses a
    /// table whose name is not a method, a key that is not a loss or update
    /// rule key of `csam train`, and a value of the wrong kind.
    pub fn parse(text: &str, origin: &str) -> Result<MethodSettings> {
        let parse_error = |message: String| {
            LabError::from(ConfigError::Parse {
                origin: origin.to_string(),
                message,
            })
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| parse_error(e.message().to_string()))?;
        let mut settings = BTreeMap::new();
        for (name, value) in table {
            let method: Method = name.parse().map_err(parse_error)?;
            let toml::Value::Table(keys) = value else {
                return Err(parse_error(format!(
                    "`{name}` must be a table of settings ([{name}] followed by key = value lines)"
                )));
            };
            for key in keys.keys() {
                check_key(key, method)
                    .map_err(|reason| parse_error(format!("[{name}] {reason}")))?;
            }
            settings.insert(method.to_string(), keys);
        }
        Ok(MethodSettings(settings))
    }

    /// `self` with `file`'s keys over it, key by key.
    pub fn overridden_by(mut self, file: MethodSettings) -> MethodSettings {
        for (method, keys) in file.0 {
            self.0.entry(method).or_default().extend(keys);
        }
        self
    }

    /// Only the settings of `methods`: what a comparison of them records.
    pub fn of(&self, methods: &[Method]) -> MethodSettings {
        let names: Vec<String> = methods.iter().map(Method::to_string).collect();
        MethodSettings(
            self.0
                .iter()
                .filter(|(name, _)| names.contains(name))
                .map(|(name, keys)| (name.clone(), keys.clone()))
                .collect(),
        )
    }

    /// Whether no method has settings of its own.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// `spec` with `method`'s keys layered over it. A key the method does not
    /// read (`rho` for `sgd`, `smoothing` for `focal`) is refused.
    pub fn apply(&self, method: Method, spec: RunSpec) -> Result<RunSpec> {
        let Some(keys) = self.0.get(&method.to_string()) else {
            return Ok(spec);
        };
        let origin = format!("the settings of method {method}");
        let in_context = |source| LabError::MethodSettings {
            method: method.to_string(),
            source: Box::new(source),
        };
        let (spec, _runtime) = SpecLayers::new()
            .spec(&spec)
            .keys(keys.clone(), origin)
            .and_then(SpecLayers::build)
            .map_err(in_context)?;
        spec.validate().map_err(in_context)?;
        Ok(spec)
    }
}

/// Refuses a key that is not one of `method`'s own: its loss's, mixing's,
/// head's or update rule's parameters, and the dropout rate of MC-Dropout.
fn check_key(name: &str, method: Method) -> std::result::Result<(), String> {
    let key = keys::find(name).ok_or_else(|| format!("unknown key `{name}`"))?;
    let path = key.path;
    let own = matches!(path.first(), Some(&"loss" | &"mixing"))
        || path.starts_with(&["optim", "rule"])
        || path.starts_with(&["optim", "policy"])
        || path.starts_with(&["model", "head"])
        || path.starts_with(&["model", "ensemble"])
        || path.starts_with(&["model", "bayesian"])
        || (path == ["model", "dropout"] && matches!(method.prediction, Prediction::McDropout(_)));
    match own && path.last() != Some(&"kind") {
        true => Ok(()),
        false => Err(format!(
            "`{name}` cannot differ between methods: a comparison shares it (a method's own \
             settings are its loss's, mixing's, head's, ensemble's, posterior's and update \
             rule's parameters, and MC-Dropout's dropout rate)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::base::{default_base, run_of};
    use csam_nn::loss::{Focal, TrainingLoss};
    use csam_nn::model::{Ensemble, Head};
    use csam_train::spec::{OptimizerFamily, UpdateRule};

    fn spec_of(method: &str) -> (Method, RunSpec) {
        let method: Method = method.parse().unwrap();
        let rule = UpdateRule::of_family(method.rule, 0.05, 1.0);
        let mut spec = run_of(&default_base(), rule, 0);
        method.objective(spec.epochs).apply(&mut spec);
        spec.optim.policy = method.policy();
        (method, spec)
    }

    #[test]
    fn builtin_gives_asam_and_msam_their_own_radius_and_nothing_else() {
        let builtin = MethodSettings::builtin();
        let (asam, spec) = spec_of("asam");
        let spec = builtin.apply(asam, spec).unwrap();
        assert!(matches!(spec.optim.rule, UpdateRule::Asam { rho, .. } if rho == 0.5));
        for name in ["msam+sam", "msam+csam"] {
            let (msam, spec) = spec_of(name);
            let spec = builtin.apply(msam, spec).unwrap();
            let rho = spec.optim.rule.sharpness().map(|sharpness| sharpness.rho);
            assert_eq!(rho, Some(0.3), "{name}");
        }
        let (sam, spec) = spec_of("sam");
        assert_eq!(builtin.apply(sam, spec.clone()).unwrap(), spec);
        assert!(builtin
            .of(&[Method::cross_entropy(OptimizerFamily::Sam)])
            .is_empty());
    }

    #[test]
    fn a_file_sets_loss_and_rule_keys_over_the_builtin_ones() {
        let file = MethodSettings::parse(
            "[asam]\nrho = 1\n[\"focal+csam\"]\nfocal_gamma = 1.5\ngamma = 0.5\n\
             [balcal]\nbalcal_delta = 0.95\n[batchensemble]\nensemble_size = 2\n\
             [mimo]\nbatch_repetitions = 2\n",
            "methods.toml",
        )
        .unwrap();
        let settings = MethodSettings::builtin().overridden_by(file);
        let (asam, spec) = spec_of("asam");
        let spec = settings.apply(asam, spec).unwrap();
        assert!(matches!(spec.optim.rule, UpdateRule::Asam { rho, .. } if rho == 1.0));
        let (method, spec) = spec_of("focal+csam");
        let spec = settings.apply(method, spec).unwrap();
        assert_eq!(spec.loss, TrainingLoss::Focal(Focal { gamma: 1.5 }));
        assert!(
            matches!(spec.optim.rule, UpdateRule::Csam { gamma, rho, .. } if gamma == 0.5 && rho == 0.05)
        );
        let (method, spec) = spec_of("balcal");
        let spec = settings.apply(method, spec).unwrap();
        let expected = Head::Balcal {
            lambda: 0.8,
            delta: 0.95,
        };
        assert_eq!(spec.model.head, expected);
        let (method, spec) = spec_of("batchensemble");
        let spec = settings.apply(method, spec).unwrap();
        let expected = Ensemble::BatchEnsemble {
            size: 2,
            random_sign_init: -0.5,
        };
        assert_eq!(spec.model.ensemble, expected);
        let (method, spec) = spec_of("mimo");
        let spec = settings.apply(method, spec).unwrap();
        let expected = Ensemble::Mimo {
            size: 3,
            input_repetition: 0.0,
            batch_repetitions: 2,
        };
        assert_eq!(spec.model.ensemble, expected);
        // Recorded as given, and read back the same.
        let json = serde_json::to_string(&settings).unwrap();
        assert_eq!(
            serde_json::from_str::<MethodSettings>(&json).unwrap(),
            settings
        );
    }

    #[test]
    fn shared_keys_unknown_methods_and_keys_a_method_does_not_read_are_refused() {
        for (text, needle) in [
            ("[sgd]\nlr = 0.1\n", "cannot differ between methods"),
            ("[csam]\nepochs = 3\n", "cannot differ between methods"),
            (
                "[csam]\noptimizer = \"sam\"\n",
                "cannot differ between methods",
            ),
            (
                "[focal]\nloss = \"mbls\"\n",
                "cannot differ between methods",
            ),
            (
                "[sgd]\nhead = \"balcal\"\n",
                "cannot differ between methods",
            ),
            (
                "[sgd]\nensemble = \"batch-ensemble\"\n",
                "cannot differ between methods",
            ),
            ("[hinge]\nrho = 0.1\n", "unknown method"),
            ("[sam]\nrhoo = 0.1\n", "unknown key `rhoo`"),
            ("sam = 0.1\n", "must be a table"),
            ("[sam\n", "methods.toml"),
        ] {
            let error = MethodSettings::parse(text, "methods.toml")
                .unwrap_err()
                .to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
        let settings =
            MethodSettings::parse("[sgd]\nrho = 0.1\n[focal]\nsmoothing = 0.1\n", "m").unwrap();
        for method in ["sgd", "focal"] {
            let (method, spec) = spec_of(method);
            let error = settings.apply(method, spec).unwrap_err().to_string();
            assert!(
                error.contains("rho") || error.contains("smoothing"),
                "{error}"
            );
        }
        let settings = MethodSettings::parse("[focal]\nfocal_gamma = -1\n", "m").unwrap();
        let (method, spec) = spec_of("focal");
        let error = settings.apply(method, spec).unwrap_err().to_string();
        assert!(
            error.contains("method focal") && error.contains("focal_gamma"),
            "{error}"
        );
    }
}
