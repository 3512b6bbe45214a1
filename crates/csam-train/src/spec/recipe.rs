//! The default recipe: what a new run takes where no file and no flag sets
//! a value. `csam train` builds its runs over it ([`SpecLayers::over_recipe`])
//! and the experiments (`csam compare`, `sweep`, `grid`) start their base run
//! from it, so a run trained alone and a run of the default comparison
//! differ only in what their commands say. It is the experiment protocol of
//! `docs/compare-defaults.md`: the MLP, 20 epochs of batch 128, lr 0.05
//! and weight decay 5e-4 (chosen by SGD's validation accuracy on
//! Fashion-MNIST), no augmentation, 20% of the training part held out for
//! validation; everything else is [`RunSpec`]'s own default (SGD momentum
//! 0.9, cosine decay to 0, plain steps, cross entropy, float32).
//!
//! The recipe is the same for every data set but for its validation
//! hold-out: a fraction, so the count follows the size of the data's
//! training part, and none for a streamed source (`imagenet:DIR`), which
//! holds out its own and refuses any other ([`ValSize::default`] there).
//!
//! [`RunSpec`]'s own defaults (ResNet-20, 200 epochs, lr 0.1, augmentation,
//! 10% validation: the paper's CIFAR-10 recipe) remain what a saved
//! `config.toml` means where it leaves a key out ([`RunSpec::from_saved_toml`]);
//! csam writes every one of the recipe's keys into it, so a run resumes with
//! the settings it started with, whichever defaults were current then.
//!
//! [`SpecLayers::over_recipe`]: super::SpecLayers::over_recipe

use csam_data::DatasetSpec;

use super::{DataSpec, ModelSpec, RunSpec, UpdateRule, ValSize};

/// The fraction of the training part the recipe holds out for validation.
pub const DEFAULT_VAL_FRACTION: f64 = 0.2;

/// The flat keys the recipe sets over [`RunSpec`]'s own defaults (the MLP's
/// hidden widths follow from its name when the spec is normalised).
pub(super) const RECIPE_KEYS: [&str; 7] = [
    "model",
    "val_size",
    "augment",
    "epochs",
    "batch_size",
    "lr",
    "weight_decay",
];

impl RunSpec {
    /// The default recipe on `data` (see the module doc), normalised.
    pub fn recipe(data: DatasetSpec) -> RunSpec {
        let val_size = match data.is_streamed() {
            true => ValSize::default(),
            false => ValSize::Fraction(DEFAULT_VAL_FRACTION),
        };
        let mut spec = RunSpec::new(DataSpec {
            val_size,
            augment: false,
            ..DataSpec::new(data)
        });
        // Invariant: the MLP is a registered architecture.
        spec.model = ModelSpec::named("mlp").expect("mlp is registered");
        spec.epochs = 20;
        spec.batch_size = 128;
        spec.optim.lr = 0.05;
        spec.optim.weight_decay = 5e-4;
        spec.normalized()
    }

    /// The run's recipe in one line, the settings a reader checks first:
    /// `recipe: model mlp, data digits, epochs 20, lr 0.05, batch 128,
    /// optimizer sgd, rule csam (rho 0.05, gamma 1), augmentation off,
    /// precision fp32`. `csam train` prints it before it trains.
    pub fn recipe_line(&self) -> String {
        let rule = match &self.optim.rule {
            UpdateRule::Sgd => "sgd".to_string(),
            UpdateRule::Csam { rho, gamma, .. } => format!("csam (rho {rho}, gamma {gamma})"),
            UpdateRule::Bsam { rho, .. } => format!("bsam (rho {rho})"),
            rule => {
                let rho = rule.sharpness().map_or(0.0, |s| s.rho);
                format!("{} (rho {rho})", rule.family())
            }
        };
        let augmentation = match self.data.augment {
            true => "on",
            false => "off",
        };
        format!(
            "recipe: model {}, data {}, epochs {}, lr {}, batch {}, optimizer {}, rule {rule}, \
             augmentation {augmentation}, precision {}",
            self.model.arch,
            self.data.source,
            self.epochs,
            self.optim.lr,
            self.batch_size,
            self.optim.base.name(),
            self.model.precision.name(),
        )
    }
}

/// The recipe's values of [`RECIPE_KEYS`] on `data`, as flat keys.
pub(super) fn recipe_keys(data: DatasetSpec) -> toml::Table {
    let flat = RunSpec::recipe(data).to_flat();
    RECIPE_KEYS
        .iter()
        .filter_map(|name| flat.get(*name).map(|v| (name.to_string(), v.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::keys::find;

    #[test]
    fn the_recipe_differs_from_the_specs_own_defaults_in_its_keys_only() {
        let data = DataSpec::new(DatasetSpec::Digits);
        let recipe = RunSpec::recipe(DatasetSpec::Digits);
        let changed = RunSpec::new(data).normalized().differences(&recipe);
        assert!(changed.contains(&"epochs".to_string()), "{changed:?}");
        for name in changed.iter().filter(|name| *name != "mlp_hidden") {
            assert!(RECIPE_KEYS.contains(&name.as_str()), "{name}");
        }
        assert_eq!(recipe_keys(DatasetSpec::Digits).len(), RECIPE_KEYS.len());
    }

    #[test]
    fn the_recipe_line_names_the_settings_of_the_run() {
        let mut spec = RunSpec::recipe(DatasetSpec::Digits);
        assert_eq!(
            spec.recipe_line(),
            "recipe: model mlp, data digits, epochs 20, lr 0.05, batch 128, optimizer sgd, \
             rule sgd, augmentation off, precision fp32"
        );
        spec.optim.rule = UpdateRule::of_family(crate::spec::OptimizerFamily::Csam, 0.1, 0.5);
        spec.data.augment = true;
        let line = spec.recipe_line();
        assert!(
            line.contains("rule csam (rho 0.1, gamma 0.5), augmentation on"),
            "{line}"
        );
        spec.optim.rule = UpdateRule::of_family(crate::spec::OptimizerFamily::Asam, 0.5, 1.0);
        let line = spec.recipe_line();
        assert!(line.contains("rule asam (rho 0.5),"), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    #[test]
    fn a_streamed_source_keeps_the_validation_it_holds_out_itself() {
        let imagenet: DatasetSpec = "imagenet:/data/imagenet".parse().unwrap();
        let recipe = RunSpec::recipe(imagenet.clone());
        assert_eq!(recipe.data.val_size, ValSize::default());
        let built = built(
            crate::spec::SpecLayers::over_recipe(),
            "data = \"imagenet:/data/imagenet\"",
        );
        assert_eq!(built, recipe);
        let digits = RunSpec::recipe(DatasetSpec::Digits);
        assert_eq!(
            digits.data.val_size,
            ValSize::Fraction(DEFAULT_VAL_FRACTION)
        );
    }

    /// The spec `layers` build over `flat` flags.
    fn built(layers: crate::spec::SpecLayers, flat: &str) -> RunSpec {
        let flags: toml::Table = flat.parse().unwrap();
        layers.flags(flags).unwrap().build().unwrap().0
    }

    #[test]
    fn layers_over_the_recipe_take_its_values_where_no_layer_sets_them() {
        use crate::spec::SpecLayers;
        let digits = "data = \"digits\"";
        assert_eq!(
            built(SpecLayers::over_recipe(), digits),
            RunSpec::recipe(DatasetSpec::Digits)
        );
        // Without the recipe: the spec's own defaults, as before it.
        let own = built(SpecLayers::new(), digits);
        assert_eq!(
            own,
            RunSpec::new(DataSpec::new(DatasetSpec::Digits)).normalized()
        );
        assert_eq!((own.model.arch.name(), own.epochs), ("resnet20", 200));
        // A value given wins; a key the recipe's model reads applies to it.
        let given = built(
            SpecLayers::over_recipe(),
            "data = \"digits\"\nlr = 0.1\naugment = true\nmlp_hidden = [64]",
        );
        assert_eq!((given.optim.lr, given.data.augment), (0.1, true));
        assert_eq!(given.model.mlp_hidden, Some(vec![64]));
        assert_eq!(given.epochs, 20);
        // Another model takes none of the MLP's settings.
        let cnn = built(
            SpecLayers::over_recipe(),
            "data = \"digits\"\nmodel = \"cnn\"",
        );
        assert_eq!((cnn.model.arch.name(), cnn.model.mlp_hidden), ("cnn", None));
        let error = SpecLayers::over_recipe()
            .flags(
                "data = \"digits\"\nmemory_format = \"channels_last\""
                    .parse()
                    .unwrap(),
            )
            .unwrap()
            .build()
            .unwrap_err();
        assert!(
            matches!(&error, crate::spec::ConfigError::Inapplicable { chosen, .. } if chosen == "mlp"),
            "{error}"
        );
    }

    /// The default a key's help states, as written between `(default ` and `)`.
    fn stated_default(name: &str) -> String {
        let summary = find(name).unwrap().summary();
        let start = summary.find("(default ").unwrap() + "(default ".len();
        let length = summary[start..].find(')').unwrap();
        summary[start..start + length].to_string()
    }

    #[test]
    fn every_key_of_the_recipe_states_its_value_as_its_default() {
        for (name, value) in recipe_keys(DatasetSpec::Digits) {
            let stated = stated_default(&name);
            let agrees = match &value {
                toml::Value::String(text) => stated == *text,
                toml::Value::Boolean(on) => stated == on.to_string(),
                number => {
                    stated.parse::<f64>().ok()
                        == number.as_float().or(number.as_integer().map(|n| n as f64))
                }
            };
            assert!(agrees, "{name}: help says {stated}, the recipe {value}");
        }
    }
}
