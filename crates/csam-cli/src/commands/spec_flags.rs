//! The settings flags of `csam train`, built from the run specification's
//! key table ([`csam_train::spec::keys::KEYS`]): one flag per key, named as
//! the key with `-` for `_`, so a new setting needs no code here. A switch
//! is a bare flag with its `--no-` opposite (`--augment`, `--no-augment`),
//! and a key that chooses among names lists them ([`choices::of_key`]).

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use csam_train::spec::keys::{Key, ValueKind, KEYS};
use csam_train::train::ConfigError;

use super::choices::{self, Choices};

/// The settings flags that were given, as flat keys.
#[derive(Debug, Clone, Default)]
pub struct SpecFlags(pub toml::Table);

/// How a key's flag is spelled where that is not `--KEY` alone.
struct Spelling {
    key: &'static str,
    /// The flag's name instead of the key's.
    long: Option<&'static str>,
    /// Other names of the flag: an earlier name, or the name timm's
    /// train.py gives the same setting (the same meaning, not only the same
    /// word: see the README's "Shell completions" section for those left out).
    aliases: &'static [&'static str],
    short: Option<char>,
}

/// The keys whose flags are spelled otherwise. `--m` said too little: it is
/// `--m-sharpness`, and `--m` stays as its old name. timm's `--sched` (the
/// schedule's name), `--clip-grad` (a clip of the gradients' global L2 norm
/// at its default `--clip-mode norm`), `--drop` (the dropout rate before
/// the classifier) and `-b` (the mini-batch size) mean what csam's flags mean.
const SPELLINGS: &[Spelling] = &[
    Spelling {
        key: "m",
        long: Some("m-sharpness"),
        aliases: &["m"],
        short: None,
    },
    Spelling {
        key: "schedule",
        long: None,
        aliases: &["sched"],
        short: None,
    },
    Spelling {
        key: "clip",
        long: None,
        aliases: &["clip-grad"],
        short: None,
    },
    Spelling {
        key: "dropout",
        long: None,
        aliases: &["drop"],
        short: None,
    },
    Spelling {
        key: "batch_size",
        long: None,
        aliases: &[],
        short: Some('b'),
    },
];

fn spelling(key: &str) -> Option<&'static Spelling> {
    SPELLINGS.iter().find(|spelling| spelling.key == key)
}

/// The flag's name of a key, without dashes (`batch-size` for `batch_size`).
fn long(key: &str) -> String {
    match spelling(key).and_then(|spelling| spelling.long) {
        Some(long) => long.to_string(),
        None => key.replace('_', "-"),
    }
}

/// The flag of a key (`--batch-size` for `batch_size`, `--m-sharpness` for `m`).
pub fn flag(key: &str) -> String {
    format!("--{}", long(key))
}

/// The id clap stores a key's value under (distinct from derive fields).
fn id(key: &Key) -> String {
    format!("spec.{}", key.name)
}

/// The id of a switch's `--no-` flag.
fn off_id(key: &Key) -> String {
    format!("spec.no.{}", key.name)
}

fn arg(key: &Key) -> Arg {
    let arg = Arg::new(id(key))
        .long(long(key.name))
        .help(key.summary())
        .long_help(key.details().map(|_| key.help))
        .action(ArgAction::Set)
        .allow_negative_numbers(true);
    let arg = match spelling(key.name) {
        Some(spelling) => arg
            .visible_aliases(spelling.aliases.iter().copied())
            .short(spelling.short),
        None => arg,
    };
    match key.value {
        ValueKind::Text => match (choices::of_key(key.name), choices::suggested(key.name)) {
            (Some(names), _) => arg.value_parser(Choices::of(names)).value_name("NAME"),
            // Completions offer the common values; help's text describes the
            // rest (a path after `SOURCE:`), so it lists none of them.
            (None, Some(names)) => arg
                .value_parser(Choices::of(names))
                .hide_possible_values(true)
                .value_name("TEXT"),
            (None, None) => arg.value_name("TEXT"),
        },
        ValueKind::Count => arg.value_parser(clap::value_parser!(u64)).value_name("N"),
        ValueKind::Real => arg.value_parser(clap::value_parser!(f64)).value_name("X"),
        ValueKind::CountOrFraction => arg.value_name("N|FRACTION"),
        ValueKind::Switch => arg
            .action(ArgAction::SetTrue)
            .allow_negative_numbers(false)
            .overrides_with(off_id(key)),
        ValueKind::Counts => arg
            .value_parser(clap::value_parser!(u64))
            .value_delimiter(',')
            .value_name("N,N,..."),
    }
}

/// The `--no-` opposite of a switch (`--no-augment`).
fn off_arg(key: &Key) -> Arg {
    let name = long(key.name);
    Arg::new(off_id(key))
        .long(format!("no-{name}"))
        .help(format!("The opposite of --{name}"))
        .action(ArgAction::SetTrue)
        .overrides_with(id(key))
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
        ValueKind::Switch => {
            let on = matches.get_flag(&id);
            let off = matches.get_flag(&off_id(key));
            (on || off).then_some(toml::Value::Boolean(on))
        }
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
        cmd.args(KEYS.iter().flat_map(|key| match key.value {
            ValueKind::Switch => vec![arg(key), off_arg(key)],
            _ => vec![arg(key)],
        }))
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
        } => {
            // A selector the run does not set is absent from the specification.
            let this_run = match chosen.as_str() {
                "" => format!("leaves {} at its default", flag(selector)),
                chosen => format!("has {} {chosen}", flag(selector)),
            };
            format!(
                "{} applies only with {} {} (this run {this_run})",
                flag(key),
                flag(selector),
                applies_to.join("|"),
            )
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use csam_train::spec::keys::find;

    /// The settings flags parsed from `args`, as flat keys.
    fn parse(args: &[&str]) -> Result<toml::Table, clap::Error> {
        let command = SpecFlags::augment_args(Command::new("train").args_override_self(true));
        let matches =
            command.try_get_matches_from(std::iter::once("train").chain(args.iter().copied()))?;
        Ok(SpecFlags::from_arg_matches(&matches)?.0)
    }

    #[test]
    fn a_switch_and_its_opposite_set_the_key_and_the_last_one_wins() {
        let switches: Vec<&Key> = KEYS
            .iter()
            .filter(|k| k.value == ValueKind::Switch)
            .collect();
        assert!(switches.iter().any(|key| key.name == "augment"));
        for key in switches {
            let (on, off) = (flag(key.name), format!("--no-{}", long(key.name)));
            let value = |args: &[&str]| parse(args).unwrap().get(key.name).cloned();
            assert_eq!(value(&[&on]), Some(toml::Value::Boolean(true)), "{on}");
            assert_eq!(value(&[&off]), Some(toml::Value::Boolean(false)), "{off}");
            assert_eq!(value(&[&on, &off]), Some(toml::Value::Boolean(false)));
            assert_eq!(value(&[&off, &on]), Some(toml::Value::Boolean(true)));
            assert_eq!(
                value(&[]),
                None,
                "{on} not given leaves the key to the file"
            );
            // A switch takes no value.
            assert!(parse(&[&on, "false"]).is_err(), "{on} false");
        }
    }

    #[test]
    fn every_spelling_of_a_flag_sets_its_key() {
        for spelling in SPELLINGS {
            let key = find(spelling.key).unwrap();
            let value = match key.value {
                ValueKind::Count => "8".to_string(),
                ValueKind::Real => "0.25".to_string(),
                _ => choices::of_key(key.name).unwrap()[1].to_string(),
            };
            let expected = parse(&[&flag(key.name), &value]).unwrap();
            assert_eq!(expected.len(), 1, "{}", key.name);
            let names = spelling
                .aliases
                .iter()
                .map(|alias| format!("--{alias}"))
                .chain(spelling.short.map(|short| format!("-{short}")));
            for name in names {
                assert_eq!(parse(&[&name, &value]).unwrap(), expected, "{name}");
            }
        }
        assert_eq!(flag("m"), "--m-sharpness");
        assert_eq!(flag("batch_size"), "--batch-size");
    }
}
