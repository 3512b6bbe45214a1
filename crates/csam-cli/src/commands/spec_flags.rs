//! The settings flags of `csam train`, built from the run specification's
//! key table ([`csam_train::spec::keys::KEYS`]): one flag per key, named as
//! the key with `-` for `_`, so a new setting needs no code here.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use csam_train::spec::keys::{Key, ValueKind, KEYS};
use csam_train::train::ConfigError;

/// The settings flags that were given, as flat keys.
#[derive(Debug, Clone, Default)]
pub struct SpecFlags(pub toml::Table);

/// The flag of a key (`--batch-size` for `batch_size`).
pub fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

/// The id clap stores a key's value under (distinct from derive fields).
fn id(key: &Key) -> String {
    format!("spec.{}", key.name)
}

fn arg(key: &Key) -> Arg {
    let name = key.name.replace('_', "-");
    let arg = Arg::new(id(key))
        .long(name)
        .help(key.help)
        .action(ArgAction::Set)
        .allow_negative_numbers(true);
    match key.value {
        ValueKind::Text => arg.value_name("TEXT"),
        ValueKind::Count => arg.value_parser(clap::value_parser!(u64)).value_name("N"),
        ValueKind::Real => arg.value_parser(clap::value_parser!(f64)).value_name("X"),
        ValueKind::CountOrFraction => arg.value_name("N|FRACTION"),
        ValueKind::Switch => arg
            .value_parser(clap::value_parser!(bool))
            .num_args(0..=1)
            .default_missing_value("true")
            .value_name("BOOL"),
        ValueKind::Counts => arg
            .value_parser(clap::value_parser!(u64))
            .value_delimiter(',')
            .value_name("N,N,..."),
    }
}

/// A value typed as a count or a fraction: `5000` or `0.1`.
fn count_or_fraction(text: &str) -> Result<toml::Value, clap::Error> {
    let bad = || {
        clap::Error::raw(
            clap::error::ErrorKind::ValueValidation,
            format!("`{text}` is neither a count (5000) nor a fraction (0.1)\n"),
        )
    };
    match text.parse::<i64>() {
        Ok(n) => Ok(toml::Value::Integer(n)),
        Err(_) => text
            .parse::<f64>()
            .map(toml::Value::Float)
            .map_err(|_| bad()),
    }
}

fn value(key: &Key, matches: &ArgMatches) -> Result<Option<toml::Value>, clap::Error> {
    let id = id(key);
    let int = |n: u64| toml::Value::Integer(n.min(i64::MAX as u64) as i64);
    Ok(match key.value {
        ValueKind::Text => matches
            .get_one::<String>(&id)
            .map(|s| toml::Value::String(s.clone())),
        ValueKind::Count => matches.get_one::<u64>(&id).map(|&n| int(n)),
        ValueKind::Real => matches.get_one::<f64>(&id).map(|&x| toml::Value::Float(x)),
        ValueKind::CountOrFraction => matches
            .get_one::<String>(&id)
            .map(|s| count_or_fraction(s))
            .transpose()?,
        ValueKind::Switch => matches
            .get_one::<bool>(&id)
            .map(|&b| toml::Value::Boolean(b)),
        ValueKind::Counts => matches
            .get_many::<u64>(&id)
            .map(|values| toml::Value::Array(values.map(|&n| int(n)).collect())),
    })
}

impl FromArgMatches for SpecFlags {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut flags = SpecFlags::default();
        flags.update_from_arg_matches(matches)?;
        Ok(flags)
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        for key in KEYS {
            if let Some(value) = value(key, matches)? {
                self.0.insert(key.name.to_string(), value);
            }
        }
        Ok(())
    }
}

impl Args for SpecFlags {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(KEYS.iter().map(arg))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A spec error in the command line's words: keys become flags, so the
/// message names what the user typed.
pub fn explain(error: &ConfigError) -> String {
    match error {
        ConfigError::Inapplicable {
            key,
            selector,
            chosen,
            applies_to,
        } => format!(
            "{} applies only with {} {} (this run has {} {chosen})",
            flag(key),
            flag(selector),
            applies_to.join("|"),
            flag(selector),
        ),
        other => other.to_string(),
    }
}

/// A refused value of a command whose flags are its settings' fields
/// (`csam sharpness`): the key written as its flag.
pub fn explain_value(error: &ConfigError) -> String {
    match error {
        ConfigError::Invalid { key, value, reason } => {
            format!("invalid {} {value}: {reason}", flag(key))
        }
        other => explain(other),
    }
}
