//! The run every run of an experiment starts from: a [`RunSpec`], the
//! `base` of `compare.json`, `sweep.json` and `grid.json` ([`layout`]; the
//! flat layout of earlier releases in `legacy`). Each run is the base with
//! the experiment's own settings over it: its seed and update rule
//! ([`run_of`]), and a comparison method's loss, mixing and model branches.
//! Here: the defaults, and the names the base is shown by.

pub mod layout;
mod legacy;

use csam_data::{DatasetSpec, DEFAULT_DATA};
use csam_nn::model::spec::TORCHSCRIPT_PREFIX;
use csam_train::spec::{ModelSpec, RunSpec, UpdateRule, ValSize};

use super::settings::invalid;
use crate::error::Result;

/// The defaults of `csam compare`, `csam sweep` and `csam grid`: the
/// default recipe of every run ([`RunSpec::recipe`]: the MLP, 20 epochs of
/// batch 128, lr 0.05 and weight decay 5e-4 from the SGD grid on the
/// validation split recorded in `docs/compare-defaults.md`, no
/// augmentation, SGD momentum 0.9, cosine decay to 0, best checkpoint by
/// validation NLL, float32, 15 bins: the docs/conventions.md "Experiment
/// protocol") on the whole of the bundled Fashion-MNIST ([`DEFAULT_DATA`]),
/// with the recipe's 20% of its 60,000 training images
/// ([`super::compare_settings::DEFAULT_VAL_FRACTION`]) held out as a count,
/// 12,000, as [`super::compare_settings::default_val_size`] counts it.
pub fn default_base() -> RunSpec {
    // Invariant: the default data set name parses.
    let source = DEFAULT_DATA.parse().expect("the default data set parses");
    let mut base = RunSpec::recipe(source);
    base.data.val_size = ValSize::Count(12_000);
    base
}

/// The spec of the run of `base` seeded `seed` that steps with `rule`. The
/// base's `track_theory` asks for the diagnostics of the runs that have a
/// perturbed point to track, so only those keep it.
pub fn run_of(base: &RunSpec, rule: UpdateRule, seed: u64) -> RunSpec {
    let mut spec = base.clone();
    spec.seed = seed;
    spec.optim.rule = rule;
    spec.track_theory &= spec.optim.rule.has_sam_point();
    spec.normalized()
}

/// The data set `name` names (`fashion-mnist-full`, `idx:DIR`); a name that
/// does not parse is refused as the setting `data`.
pub fn source_named(name: &str) -> Result<DatasetSpec> {
    name.parse()
        .map_err(|e: csam_data::DataError| invalid("data", name.to_string(), &e.to_string()))
}

/// The model `name` names (`mlp`, `torchscript:FILE`) with default options;
/// a name that does not parse is refused as the setting `model`.
pub fn model_named(name: &str) -> Result<ModelSpec> {
    ModelSpec::named(name).map_err(|reason| invalid("model", name.to_string(), &reason.to_string()))
}

/// The base's data set as it is named on the command line (`idx:/data/fm`),
/// in captions, titles and the default directory.
pub fn data_name(base: &RunSpec) -> String {
    base.data.source.to_string()
}

/// The base's model as it is named on the command line: its architecture,
/// or `torchscript:FILE` for a TorchScript file.
pub fn model_name(base: &RunSpec) -> String {
    match &base.model.script {
        Some(file) => format!("{TORCHSCRIPT_PREFIX}{}", file.display()),
        None => base.model.arch.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_train::spec::OptimizerFamily;

    #[test]
    fn a_torchscript_model_name_carries_its_file_into_every_run_and_is_shown_as_given() {
        let mut base = default_base();
        base.model = model_named("torchscript:models/net.pt").unwrap();
        base.data.source = source_named("idx:/data/fm").unwrap();
        let rule = UpdateRule::of_family(OptimizerFamily::Csam, 0.05, 1.0);
        let spec = run_of(&base, rule, 3);
        assert_eq!(spec.model.arch.name(), "torchscript");
        assert_eq!(
            spec.model.script.as_deref(),
            Some(std::path::Path::new("models/net.pt"))
        );
        assert_eq!(
            (model_name(&base), data_name(&base)),
            ("torchscript:models/net.pt".into(), "idx:/data/fm".into())
        );
        assert_eq!(model_name(&default_base()), "mlp");
        let error = model_named("torchscrypt:net.pt").unwrap_err().to_string();
        assert!(error.contains("unknown model"), "{error}");
    }

    #[test]
    fn a_run_keeps_the_theory_diagnostics_only_where_its_rule_has_a_perturbed_point() {
        let base = RunSpec {
            track_theory: true,
            ..default_base()
        };
        for (family, tracked) in [
            (OptimizerFamily::Sgd, false),
            (OptimizerFamily::Sam, true),
            (OptimizerFamily::Csam, true),
            (OptimizerFamily::Asam, false),
        ] {
            let spec = run_of(&base, UpdateRule::of_family(family, 0.05, 1.0), 7);
            assert_eq!((spec.track_theory, spec.seed), (tracked, 7), "{family}");
        }
    }
}
