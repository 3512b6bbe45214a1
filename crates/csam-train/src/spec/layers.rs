//! Building a [`RunSpec`] from layers of settings: defaults (the spec's own,
//! or the default recipe's, [`SpecLayers::over_recipe`]) < a settings file
//! (nested, or flat keys) < flat keys from the command line. Flat keys
//! are placed in the tree by [`keys::KEYS`]; a flat key given for a branch
//! that does not read it (`rho` on an SGD run) is refused, never ignored.

use std::fmt;
use std::path::Path;

use serde::Deserialize;

use super::keys::{self, Applies, Key, Scope, ValueKind};
use super::recipe;
use super::ConfigError;
use super::{DataSpec, RunSpec, Runtime, SCHEMA_VERSION};
use csam_data::DatasetSpec;

/// A setting that is legal but probably not what the user meant.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning(pub String);

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What to do with a flat key that its branch does not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inapplicable {
    /// Refuse it: the user asked for something the run would ignore.
    Refuse,
    /// Drop it: a flat `config.toml` of an earlier release wrote every key.
    Drop,
}

/// Settings layered so far, and the flat keys given for them.
#[derive(Debug, Clone)]
pub struct SpecLayers {
    nested: toml::Table,
    runtime: toml::Table,
    given: Vec<&'static Key>,
    origins: Vec<String>,
    inapplicable: Inapplicable,
    /// The default recipe lies below the layers.
    recipe: bool,
}

impl Default for SpecLayers {
    fn default() -> Self {
        SpecLayers {
            nested: toml::Table::new(),
            runtime: toml::Table::new(),
            given: Vec::new(),
            origins: Vec::new(),
            inapplicable: Inapplicable::Refuse,
            recipe: false,
        }
    }
}

impl SpecLayers {
    /// No settings yet: every key at the spec's own default ([`RunSpec::new`]).
    pub fn new() -> SpecLayers {
        SpecLayers::default()
    }

    /// No settings yet, over the default recipe ([`RunSpec::recipe`]): each
    /// of the recipe's keys that no layer sets takes the recipe's value, the
    /// others the spec's own default. What `csam train` starts a run from.
    pub fn over_recipe() -> SpecLayers {
        SpecLayers {
            recipe: true,
            ..SpecLayers::default()
        }
    }

    /// Layers a settings file: the nested layout of a `config.toml` (with
    /// `schema`), or flat keys.
    pub fn file(self, path: &Path) -> Result<SpecLayers, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let origin = path.display().to_string();
        let table = parse_table(&text, &origin)?;
        self.table(table, origin)
    }

    /// Layers a whole spec (a resumed run's own), under the layers after it.
    pub fn spec(mut self, spec: &RunSpec) -> SpecLayers {
        // Invariant: as in `RunSpec::to_toml`.
        let table = toml::Table::try_from(spec).expect("RunSpec serialises to TOML");
        merge(&mut self.nested, table);
        self.origins.push("the run's config.toml".to_string());
        self
    }

    /// Layers flat keys (the command line's flags, `-` written `_`).
    pub fn flags(self, flat: toml::Table) -> Result<SpecLayers, ConfigError> {
        self.keys(flat, "command-line flags".to_string())
    }

    /// The layers of a run's saved `config.toml` (see [`RunSpec::from_saved_toml`]).
    pub(crate) fn saved(table: toml::Table, origin: &str) -> Result<SpecLayers, ConfigError> {
        let layers = SpecLayers {
            inapplicable: Inapplicable::Drop,
            ..SpecLayers::default()
        };
        layers.table(table, origin.to_string())
    }

    fn table(mut self, mut table: toml::Table, origin: String) -> Result<SpecLayers, ConfigError> {
        let Some(schema) = table.remove("schema") else {
            // Flat keys take no tables: a `[optim]` table is the nested
            // layout without its version line.
            if let Some((name, _)) = table.iter().find(|(_, value)| value.is_table()) {
                return Err(ConfigError::Parse {
                    origin,
                    message: format!(
                        "[{name}] is a table of the nested layout, which needs `schema = \
                         {SCHEMA_VERSION}` at the top of the file (a file without `schema` \
                         holds flat keys)"
                    ),
                });
            }
            return self.keys(table, origin);
        };
        match schema.as_integer() {
            Some(v) if v == i64::from(SCHEMA_VERSION) => {}
            _ => {
                return Err(ConfigError::Parse {
                    origin,
                    message: format!(
                        "schema = {schema} is not a layout this release reads (it writes and \
                         reads schema {SCHEMA_VERSION}, and the flat layout without a schema)"
                    ),
                })
            }
        }
        merge(&mut self.nested, table);
        self.origins.push(origin);
        Ok(self)
    }

    /// Layers flat keys from `origin` (named in errors): places them in the
    /// tree.
    pub fn keys(mut self, flat: toml::Table, origin: String) -> Result<SpecLayers, ConfigError> {
        let mut nested = toml::Table::new();
        for (name, value) in flat {
            let key = keys::find(&name).ok_or_else(|| ConfigError::Parse {
                origin: origin.clone(),
                message: format!("unknown key `{name}`"),
            })?;
            let value = typed(key, value).map_err(|message| ConfigError::Parse {
                origin: origin.clone(),
                message,
            })?;
            match key.scope {
                Scope::Run => insert(&mut nested, key.path, value),
                Scope::Runtime => {
                    self.runtime.insert(key.name.to_string(), value);
                }
            }
            self.given.retain(|k| k.name != key.name);
            self.given.push(key);
        }
        merge(&mut self.nested, nested);
        self.origins.push(origin);
        Ok(self)
    }

    /// The spec (normalised, not yet validated) and the runtime settings.
    pub fn build(mut self) -> Result<(RunSpec, Runtime), ConfigError> {
        if self.recipe {
            // A source that does not parse is refused below, as the data.
            let source = lookup(&self.nested, &["data", "source"])
                .and_then(toml::Value::as_str)
                .and_then(|text| text.parse::<DatasetSpec>().ok())
                .unwrap_or(DatasetSpec::Digits);
            for (name, value) in recipe::recipe_keys(source) {
                // Invariant: the recipe's keys are keys of the table.
                let key = keys::find(&name).expect("the recipe's keys are keys");
                if lookup(&self.nested, key.path).is_none() {
                    insert(&mut self.nested, key.path, value);
                }
            }
        }
        let defaults = defaults();
        self.check_applicable(&defaults)?;
        fill_default_branches(&mut self.nested, &defaults);
        let origin = self.origins.join(" and ");
        let has_data = matches!(self.nested.get("data"), Some(toml::Value::Table(d)) if d.contains_key("source"));
        if !has_data {
            return Err(ConfigError::Invalid {
                key: "data",
                value: String::new(),
                reason: "no data set given: name one (e.g. fashion-mnist, digits, cifar10:DIR)"
                    .to_string(),
            });
        }
        if let Some(toml::Value::Table(model)) = self.nested.get_mut("model") {
            super::model::split_torchscript_name(model)?;
        }
        let spec = RunSpec::deserialize(toml::Value::Table(self.nested)).map_err(|e| {
            ConfigError::Parse {
                origin: if origin.is_empty() {
                    "defaults".into()
                } else {
                    origin
                },
                message: e.message().to_string(),
            }
        })?;
        let runtime = Runtime::deserialize(toml::Value::Table(self.runtime)).map_err(|e| {
            ConfigError::Parse {
                origin: "runtime settings".into(),
                message: e.message().to_string(),
            }
        })?;
        Ok((spec.normalized(), runtime))
    }

    /// Refuses (or, for an old flat `config.toml`, drops) each given flat key
    /// whose branch is not the one chosen.
    fn check_applicable(&mut self, defaults: &toml::Table) -> Result<(), ConfigError> {
        for key in std::mem::take(&mut self.given) {
            let Applies::When { selector, values } = key.applies else {
                continue;
            };
            if lookup(&self.nested, key.path).is_none() {
                // A later layer chose another branch and dropped this key with
                // the old branch's settings.
                continue;
            }
            // Invariant: every selector is a key of the table.
            let selector_key = keys::find(selector).expect("selectors are keys");
            let chosen = lookup(&self.nested, selector_key.path)
                .or_else(|| lookup(defaults, selector_key.path))
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            // A branch name may carry its argument after a colon
            // (`torchscript:FILE`).
            let branch = chosen.split(':').next().unwrap_or_default();
            if values.contains(branch) {
                continue;
            }
            match self.inapplicable {
                Inapplicable::Refuse => {
                    return Err(ConfigError::Inapplicable {
                        key: key.name,
                        selector,
                        chosen,
                        applies_to: values.names(),
                    })
                }
                Inapplicable::Drop => remove(&mut self.nested, key.path),
            }
        }
        Ok(())
    }
}

fn parse_table(text: &str, origin: &str) -> Result<toml::Table, ConfigError> {
    text.parse()
        .map_err(|e: toml::de::Error| ConfigError::Parse {
            origin: origin.to_string(),
            message: e.message().to_string(),
        })
}

/// Checks a flat value against its key's kind; branch names are
/// case-insensitive (`CSAM` is `csam`).
fn typed(key: &Key, value: toml::Value) -> Result<toml::Value, String> {
    use toml::Value as V;
    let wrong = |expected: &str| Err(format!("`{}` takes {expected}, got {value}", key.name));
    match (key.value, &value) {
        (ValueKind::Text, V::String(s)) if key.path.last() == Some(&"kind") => {
            Ok(V::String(s.to_ascii_lowercase()))
        }
        (ValueKind::Text, V::String(_)) => Ok(value),
        (ValueKind::Count, V::Integer(n)) if *n >= 0 => Ok(value),
        (ValueKind::Real, V::Float(_)) => Ok(value),
        (ValueKind::Real, V::Integer(n)) => Ok(V::Float(*n as f64)),
        (ValueKind::CountOrFraction, V::Integer(n)) if *n >= 0 => Ok(value),
        (ValueKind::CountOrFraction, V::Float(_)) => Ok(value),
        (ValueKind::Switch, V::Boolean(_)) => Ok(value),
        (ValueKind::Counts, V::Array(items))
            if items.iter().all(|v| v.as_integer().is_some_and(|n| n >= 0)) =>
        {
            Ok(value)
        }
        (ValueKind::Text, _) => wrong("text"),
        // A negative number is told the bound; a value of another kind only
        // the kind, since each key has its own least value (epochs: 1).
        (ValueKind::Count, V::Integer(_)) => wrong("a whole number >= 0"),
        (ValueKind::Count, _) => wrong("a whole number"),
        (ValueKind::Real, _) => wrong("a number"),
        (ValueKind::CountOrFraction, _) => wrong("a count or a fraction"),
        (ValueKind::Switch, _) => wrong("true or false"),
        (ValueKind::Counts, _) => wrong("a list of whole numbers >= 0"),
    }
}

/// The tree of a spec with every default (the data source left out).
fn defaults() -> toml::Table {
    let spec = RunSpec::new(DataSpec::new(DatasetSpec::Digits));
    // Invariant: as in `RunSpec::to_toml`.
    let mut table = toml::Table::try_from(spec).expect("RunSpec serialises to TOML");
    remove(&mut table, &["data", "source"]);
    table
}

/// Gives every branch table that names no branch (a `[optim.rule]` with only
/// `rho`, say) its default branch, so its keys are read by that branch.
fn fill_default_branches(nested: &mut toml::Table, defaults: &toml::Table) {
    for key in keys::KEYS.iter().filter(|k| k.path.last() == Some(&"kind")) {
        let parent = &key.path[..key.path.len() - 1];
        let Some(default) = lookup(defaults, key.path).cloned() else {
            continue;
        };
        if let Some(toml::Value::Table(table)) = lookup_mut(nested, parent) {
            table.entry("kind").or_insert(default);
        }
    }
}

/// Layers `over` onto `base`. A table of `over` that chooses another branch
/// (`kind`) than `base`'s replaces it whole: the old branch's settings do
/// not carry over to the new one.
fn merge(base: &mut toml::Table, over: toml::Table) {
    let switches = match (base.get("kind"), over.get("kind")) {
        (Some(old), Some(new)) => old != new,
        _ => false,
    };
    if switches {
        base.clear();
    }
    for (name, value) in over {
        match (base.get_mut(&name), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(value)) => merge(inner, value),
            (_, value) => {
                base.insert(name, value);
            }
        }
    }
}

fn lookup<'a>(table: &'a toml::Table, path: &[&str]) -> Option<&'a toml::Value> {
    let (last, parents) = path.split_last()?;
    let mut table = table;
    for name in parents {
        table = table.get(*name)?.as_table()?;
    }
    table.get(*last)
}

fn lookup_mut<'a>(table: &'a mut toml::Table, path: &[&str]) -> Option<&'a mut toml::Value> {
    let (first, rest) = path.split_first()?;
    let value = table.get_mut(*first)?;
    match rest.is_empty() {
        true => Some(value),
        false => lookup_mut(value.as_table_mut()?, rest),
    }
}

fn insert(table: &mut toml::Table, path: &[&str], value: toml::Value) {
    // Invariant: every key's path has at least one part.
    let (last, parents) = path.split_last().expect("key paths are not empty");
    let mut table = table;
    for name in parents {
        let entry = table
            .entry(name.to_string())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        // Invariant: made a table just above.
        table = entry.as_table_mut().expect("a table");
    }
    table.insert(last.to_string(), value);
}

fn remove(table: &mut toml::Table, path: &[&str]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    if parents.is_empty() {
        table.remove(*last);
    } else if let Some(toml::Value::Table(parent)) = lookup_mut(table, parents) {
        parent.remove(*last);
    }
}

/// The flat keys of a nested tree: each key whose path holds a value.
pub(super) fn flatten(nested: &toml::Table) -> toml::Table {
    keys::KEYS
        .iter()
        .filter(|k| k.scope == Scope::Run)
        .filter_map(|k| lookup(nested, k.path).map(|v| (k.name.to_string(), v.clone())))
        .collect()
}

/// Appends to `changed` the names of the leaves in which `ours` and
/// `theirs` differ: the flat key of the path where there is one, the dotted
/// path otherwise.
pub(super) fn diff_paths(
    ours: &toml::Table,
    theirs: &toml::Table,
    path: &mut Vec<String>,
    changed: &mut Vec<String>,
) {
    let mut names: Vec<&String> = ours.keys().chain(theirs.keys()).collect();
    names.sort();
    names.dedup();
    for name in names {
        path.push(name.clone());
        match (ours.get(name), theirs.get(name)) {
            (Some(toml::Value::Table(a)), Some(toml::Value::Table(b))) => {
                diff_paths(a, b, path, changed)
            }
            (a, b) if a != b => changed.push(match keys::at_path(path) {
                Some(key) => key.name.to_string(),
                None => path.join("."),
            }),
            _ => {}
        }
        path.pop();
    }
}
