//! Where values come from: command-line flags, the environment and the
//! TOML config file, layered in that order of precedence over each
//! setting's default. Each value keeps its source for error messages.

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use super::declaration::{AnySetting, Setting};
use super::settings::{CONFIG_ENV, SETTINGS};

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    Env(&'static str),
    File { path: PathBuf, key: &'static str },
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(name) => write!(f, "environment variable {name}"),
            Source::File { path, key } => write!(f, "key `{key}` in {}", path.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// A value together with where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T: fmt::Debug> fmt::Debug for Sourced<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self.value, self.source)
    }
}

/// An environment variable is set but is not valid UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUnicode;

/// Read access to environment variables, so tests pass a map instead of
/// mutating the process environment.
pub trait Env {
    /// The variable's value, `None` when unset.
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(NotUnicode),
        }
    }
}

impl<S: std::hash::BuildHasher> Env for HashMap<String, String, S> {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        Ok(self.get(name).cloned())
    }
}

/// Values given on the command line, keyed by setting key; `cli.rs` fills
/// it from the flags it built out of the settings table.
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub values: BTreeMap<&'static str, String>,
}

impl Flags {
    /// Records a flag's value when it was given.
    pub fn set(&mut self, setting: &dyn AnySetting, value: Option<impl Into<String>>) {
        if let Some(value) = value {
            self.values.insert(setting.key(), value.into());
        }
    }
}

/// A value was given but cannot be used; the problem is recorded already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Reported;

/// The merged sources, answering "what is this setting and where from",
/// and collecting every problem on the way.
pub(super) struct Layers<'a> {
    flags: &'a Flags,
    env: &'a dyn Env,
    file: Option<(PathBuf, toml::Table)>,
    pub(super) errors: Vec<String>,
    pub(super) warnings: Vec<String>,
    /// Settings whose variable was set but unreadable: reported once, and
    /// not again as unset.
    pub(super) unreadable: Vec<&'static str>,
    /// Something the settings name did not answer (a key's HSM).
    pub(super) unanswered: bool,
}

impl<'a> Layers<'a> {
    /// Locates and reads the config file, if one is given.
    pub(super) fn open(flags: &'a Flags, env: &'a dyn Env) -> Layers<'a> {
        let mut errors = Vec::new();
        let file = match (&flags.config, env.var(CONFIG_ENV)) {
            (Some(path), _) => Some((path.clone(), Source::Flag("--config"))),
            (None, Ok(Some(path))) if !path.trim().is_empty() => {
                Some((PathBuf::from(path), Source::Env(CONFIG_ENV)))
            }
            (None, Err(NotUnicode)) => {
                errors.push(format!(
                    "{CONFIG_ENV} (environment variable {CONFIG_ENV}): is not valid UTF-8"
                ));
                None
            }
            _ => None,
        }
        .and_then(|(path, source)| {
            read_file(&path, &source, &mut errors).map(|table| (path, table))
        });
        Layers {
            flags,
            env,
            file,
            errors,
            warnings: Vec::new(),
            unreadable: Vec::new(),
            unanswered: false,
        }
    }

    /// The setting's text from the first source that gives it.
    fn raw<T>(&mut self, setting: &Setting<T>) -> Result<Option<Sourced<String>>, Reported> {
        if let (Some(flag), Some(value)) = (setting.flag, self.flags.values.get(setting.key)) {
            return Ok(Some(Sourced {
                value: value.clone(),
                source: Source::Flag(flag),
            }));
        }
        match self.env.var(setting.env) {
            Ok(Some(value)) if !value.trim().is_empty() => {
                return Ok(Some(Sourced {
                    value,
                    source: Source::Env(setting.env),
                }));
            }
            // An empty variable is how a Kubernetes manifest or a shell
            // unsets a value; treat it as not given.
            Ok(_) => {}
            Err(NotUnicode) => {
                self.errors.push(format!(
                    "{} (environment variable {}): is not valid UTF-8",
                    setting.env, setting.env
                ));
                self.unreadable.push(setting.env);
                return Err(Reported);
            }
        }
        let Some((path, table)) = &self.file else {
            return Ok(None);
        };
        let Some(value) = table.get(setting.key) else {
            return Ok(None);
        };
        let source = Source::File {
            path: path.clone(),
            key: setting.key,
        };
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => {
                self.problem(
                    setting.env,
                    &source,
                    "must be a string, a number or a boolean",
                );
                return Err(Reported);
            }
        };
        Ok(Some(Sourced {
            value: text,
            source,
        }))
    }

    /// The setting's value as given, read by its declared reader; `Ok(None)`
    /// when no source gives it.
    pub(super) fn given<T>(
        &mut self,
        setting: &Setting<T>,
    ) -> Result<Option<Sourced<T>>, Reported> {
        let Some(raw) = self.raw(setting)? else {
            return Ok(None);
        };
        match (setting.read)(raw.value.trim()) {
            Ok(value) => Ok(Some(Sourced {
                value,
                source: raw.source,
            })),
            Err(why) => {
                self.problem(setting.env, &raw.source, &why);
                Err(Reported)
            }
        }
    }

    /// As [`Layers::given`], when only a usable value matters.
    pub(super) fn optional<T>(&mut self, setting: &Setting<T>) -> Option<Sourced<T>> {
        self.given(setting).ok().flatten()
    }

    /// The value as given, else the declared default. A bad value is
    /// reported and the default stands in, so that the checks between
    /// settings still run and every problem shows in one run.
    pub(super) fn value<T: Clone>(&mut self, setting: &Setting<T>) -> T {
        self.optional(setting)
            .map_or_else(|| setting.default_value(), |given| given.value)
    }

    pub(super) fn problem(&mut self, env: &str, source: &Source, why: &str) {
        self.errors.push(format!("{env} ({source}): {why}"));
    }
}

/// Reads the TOML config file, refusing keys lanyard does not know so a
/// typo is an error rather than a silently ignored setting.
fn read_file(path: &Path, source: &Source, errors: &mut Vec<String>) -> Option<toml::Table> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            errors.push(format!(
                "config file {} ({source}): cannot be read: {}",
                path.display(),
                io_reason(&err)
            ));
            return None;
        }
    };
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(err) => {
            // The private key may be on the offending line: report only
            // its position.
            errors.push(format!(
                "config file {} ({source}): is not valid TOML{}",
                path.display(),
                toml_error_at(&text, &err)
            ));
            return None;
        }
    };
    for key in table.keys() {
        if !SETTINGS.iter().any(|s| s.key() == key) {
            errors.push(format!(
                "config file {}: unknown key `{key}` (see config/lanyard.example.toml for the keys)",
                path.display()
            ));
        }
    }
    Some(table)
}

/// Where a TOML text breaks, as ` at line N`: toml's own `Display`
/// quotes the offending line, which may hold a secret, so no message
/// shows more of the text than this.
pub(super) fn toml_error_at(text: &str, err: &toml::de::Error) -> String {
    err.span()
        .map(|span| {
            let line = text[..span.start].matches('\n').count() + 1;
            format!(" at line {line}")
        })
        .unwrap_or_default()
}

pub use crate::files::io_reason;
