//! The closed sets of values of the command line, read from the declarations
//! that define them (the model registry, the run specification's enums, the
//! comparison's methods), so that `--help` lists them and shell completions
//! offer them without a second, hand-written list that could drift.
//!
//! The flags still accept any text: the library that owns a set parses the
//! value and refuses an unknown one with its own message (the same one a
//! config file's value gets), so a value is checked in one place.

use std::fmt;

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use csam_calib::binning::{AdaptiveVariant, EdgeConvention};
use csam_lab::experiment::method::{self, Method};
use csam_nn::loss::TrainingLoss;
use csam_nn::mixing::Mixing;
use csam_nn::model::memory_format::MemoryFormat;
use csam_nn::model::precision::Precision;
use csam_nn::model::{Bayesian, Ensemble, Head, ModelKind};
use csam_nn::optim::SamPolicy;
use csam_train::spec::{BaseSpec, BestMetric, OptimizerFamily, Schedule, UpdateRule};
use serde::de::{self, Deserialize, IntoDeserializer};

/// The tag field of the run specification's internally tagged enums.
const KIND: Option<&str> = Some("kind");

/// The names of a serde enum's variants, as its declaration spells them:
/// deserialising a name no variant has makes serde report every variant it
/// expected ([`de::Error::unknown_variant`]), which [`Expected`] keeps.
/// `tag` is the field of an internally tagged enum, None for a plain one.
fn variants<T: for<'de> Deserialize<'de>>(tag: Option<&'static str>) -> Vec<&'static str> {
    const NO_VARIANT: &str = "\u{0}";
    let result = match tag {
        Some(tag) => T::deserialize(de::value::MapDeserializer::<_, Expected>::new(
            [(tag, NO_VARIANT)].into_iter(),
        )),
        None => T::deserialize(IntoDeserializer::<Expected>::into_deserializer(NO_VARIANT)),
    };
    match result {
        Err(Expected(Some(names))) => names.to_vec(),
        _ => Vec::new(),
    }
}

/// The deserialisation error of [`variants`]: the variant names serde
/// expected, when the error was an unknown variant.
#[derive(Debug)]
struct Expected(Option<&'static [&'static str]>);

impl fmt::Display for Expected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("not a variant")
    }
}

impl std::error::Error for Expected {}

impl de::Error for Expected {
    fn custom<T: fmt::Display>(_: T) -> Self {
        Expected(None)
    }

    fn unknown_variant(_: &str, expected: &'static [&'static str]) -> Self {
        Expected(Some(expected))
    }
}

/// The names a run specification key (`csam train --KEY`) chooses from, or
/// None where its value is open (a path, a number, `--data cifar10:DIR`).
pub fn of_key(key: &str) -> Option<Vec<&'static str>> {
    Some(match key {
        "model" => model_names(),
        "loss" => TrainingLoss::NAMES.to_vec(),
        "mixing" => variants::<Mixing>(KIND),
        "head" => variants::<Head>(KIND),
        "ensemble" => variants::<Ensemble>(KIND),
        "bayesian" => variants::<Bayesian>(KIND),
        "base_optimizer" => variants::<BaseSpec>(KIND),
        "schedule" => variants::<Schedule>(KIND),
        "optimizer" => variants::<UpdateRule>(KIND),
        "sam_policy" => policy_names(),
        "best_metric" => variants::<BestMetric>(None),
        "edges" => variants::<EdgeConvention>(None),
        "adaptive" => variants::<AdaptiveVariant>(None),
        "precision" => precision_names(),
        "memory_format" => memory_format_names(),
        _ => return None,
    })
}

/// The common values of a key whose value is open (`data`: the bundled data
/// sets, beside `SOURCE:PATH`), which completions offer and help leaves to
/// the key's own text; None for other keys.
pub fn suggested(key: &str) -> Option<Vec<&'static str>> {
    match key {
        "data" => Some(data_names()),
        _ => None,
    }
}

/// The bundled data sets, the values of `--data` that completions offer
/// (beside them, `SOURCE:PATH` names files).
pub fn data_names() -> Vec<&'static str> {
    csam_data::BUNDLED_NAMES.to_vec()
}

/// The precisions of a model's forward passes.
pub fn precision_names() -> Vec<&'static str> {
    variants::<Precision>(None)
}

/// The layouts of a convolutional model's weights and batches.
pub fn memory_format_names() -> Vec<&'static str> {
    variants::<MemoryFormat>(None)
}

/// The model registry's architectures (`torchscript` takes its file as
/// `torchscript:FILE` or `--script FILE`).
pub fn model_names() -> Vec<&'static str> {
    ModelKind::all().map(|kind| kind.name()).collect()
}

/// The efficient SAM policies and `every`.
pub fn policy_names() -> Vec<&'static str> {
    SamPolicy::all().iter().map(SamPolicy::name).collect()
}

/// The update rules by name.
pub fn rule_names() -> Vec<&'static str> {
    variants::<OptimizerFamily>(None)
}

/// The parts a comparison's method is written with (`focal+rst+csam`): the
/// update rules, the objectives and the efficient SAM policies.
pub fn method_parts() -> Vec<&'static str> {
    let policies = policy_names().into_iter().filter(|name| *name != "every");
    rule_names()
        .into_iter()
        .chain(method::objective_names())
        .chain(policies)
        .collect()
}

/// A text value that help and completions describe by `names`; any text
/// passes to the owner's own parser ([`Choices::of`]), which refuses an
/// unknown one in its words.
#[derive(Clone)]
pub struct Choices {
    names: Vec<&'static str>,
}

impl Choices {
    /// The choices `names`.
    pub fn of(names: Vec<&'static str>) -> Choices {
        Choices { names }
    }
}

impl TypedValueParser for Choices {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(self.names.iter().copied().map(PossibleValue::new)))
    }
}

/// A comparison's method (`csam compare --methods`, `csam grid --method`),
/// parsed by [`Method`]'s own rules, with its parts ([`method_parts`]) for
/// help and completions.
#[derive(Clone)]
pub struct MethodParser;

impl TypedValueParser for MethodParser {
    type Value = Method;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Method, clap::Error> {
        let text = StringValueParser::new().parse_ref(cmd, arg, value)?;
        // Worded as clap's own refusal of a value.
        text.parse().map_err(|reason: String| {
            let flag = arg.map_or(String::new(), |arg| format!(" for '{arg}'"));
            clap::Error::raw(
                clap::error::ErrorKind::ValueValidation,
                format!("invalid value '{text}'{flag}: {reason}\n"),
            )
            .with_cmd(cmd)
        })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(method_parts().into_iter().map(PossibleValue::new)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use csam_train::spec::keys::{Applies, ValueKind, KEYS};
    use csam_train::spec::SpecLayers;

    /// Every name offered for a key builds a run specification: the lists
    /// are the spec's own (torchscript needs its file, given here, and a
    /// key read by one branch only gets that branch).
    #[test]
    fn every_offered_name_is_accepted_by_the_spec() {
        let mut checked = 0;
        for key in KEYS.iter().filter(|key| key.value == ValueKind::Text) {
            let Some(names) = of_key(key.name) else {
                continue;
            };
            assert!(names.len() >= 2, "{}: {names:?}", key.name);
            for name in names {
                let mut flat = toml::Table::new();
                flat.insert("data".into(), "digits".into());
                // A posterior trains without weight decay.
                flat.insert("weight_decay".into(), 0.0.into());
                if let Applies::When { selector, values } = key.applies {
                    flat.insert(selector.into(), values.names()[0].into());
                }
                flat.insert(key.name.into(), name.into());
                if name == "torchscript" {
                    flat.insert("script".into(), "model.pt".into());
                }
                let built = SpecLayers::new().flags(flat).and_then(SpecLayers::build);
                assert!(built.is_ok(), "--{} {name}: {:?}", key.name, built.err());
                checked += 1;
            }
        }
        assert!(checked > 40, "{checked}");
    }

    /// A name no variant has is refused by the spec, so the check above
    /// can fail.
    #[test]
    fn a_name_not_offered_is_refused_by_the_spec() {
        let mut flat = toml::Table::new();
        flat.insert("data".into(), "digits".into());
        flat.insert("optimizer".into(), "adamw".into());
        assert!(!variants::<UpdateRule>(KIND).contains(&"adamw"));
        assert!(SpecLayers::new()
            .flags(flat)
            .and_then(SpecLayers::build)
            .is_err());
    }

    #[test]
    fn variants_follow_the_serde_declaration() {
        let metrics = variants::<BestMetric>(None);
        assert!(metrics.contains(&"nll") && metrics.contains(&"accuracy"));
        for name in metrics {
            let metric: BestMetric = name.parse().unwrap();
            assert_eq!(metric.to_string(), name);
        }
        let schedules = variants::<Schedule>(KIND);
        assert!(schedules.contains(&"cosine") && schedules.contains(&"step"));
        assert_eq!(rule_names().len(), variants::<UpdateRule>(KIND).len());
    }

    #[test]
    fn every_method_part_parses_as_a_method() {
        for part in method_parts() {
            let name = match policy_names().contains(&part) {
                true => format!("{part}+sam"),
                false => part.to_string(),
            };
            assert!(name.parse::<Method>().is_ok(), "{name}");
        }
    }
}
