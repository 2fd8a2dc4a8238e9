//! What declaring a setting means: its spellings, help, default and
//! reader in one [`Setting`], and [`AnySetting`] for what reads the table
//! whatever each setting's type. The table itself is `settings.rs`.

use super::values::Shown;

/// One user-facing setting, typed by the value it reads.
#[derive(Debug)]
pub struct Setting<T: 'static = String> {
    /// Key in the TOML config file.
    pub key: &'static str,
    /// Environment variable.
    pub env: &'static str,
    /// Command-line flag, if there is one. Secrets have none: a flag's value
    /// is visible to every user of the machine through the process list.
    pub flag: Option<&'static str>,
    /// The flag's placeholder in `--help`; `None` makes the flag a switch,
    /// given bare to mean `true`.
    pub value_name: Option<&'static str>,
    /// One line for `--help`; docs/settings.md's notes say more.
    pub help: &'static str,
    /// What applies when no source gives a value.
    pub default: DefaultValue<T>,
    /// Reads a given value (trimmed); the error is a reason that may quote
    /// the value, never for a secret setting.
    pub read: fn(&str) -> Result<T, String>,
    /// The value is a secret and is never printed.
    pub secret: bool,
}

/// What a setting is when nothing gives it a value.
#[derive(Debug)]
pub enum DefaultValue<T: 'static> {
    /// Unset.
    None,
    /// Unset, with what that means for the user (`from file`, `required
    /// for run and check`).
    Described(&'static str),
    /// This value.
    Value(T),
    /// Worked out at start-up; `shown` says how, for `--help` and docs/settings.md.
    Computed {
        value: fn() -> T,
        shown: fn() -> String,
    },
}

impl<T: Clone> Setting<T> {
    /// The declared default, for a setting declared with one.
    pub(super) fn default_value(&self) -> T {
        match &self.default {
            DefaultValue::Value(value) => value.clone(),
            DefaultValue::Computed { value, .. } => value(),
            // A declaration mistake, which any load in the tests meets.
            DefaultValue::None | DefaultValue::Described(_) => {
                unreachable!("{} has no default; read it with `given`", self.env)
            }
        }
    }
}

/// How a default reads in `--help` and in docs/settings.md's default column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShownDefault {
    /// No default (docs/settings.md: `none`).
    None,
    /// A value as a user would type it (docs/settings.md: in backticks).
    Value(String),
    /// How the value is worked out (docs/settings.md: as is).
    Computed(String),
    /// What unset means (docs/settings.md: as is).
    Described(&'static str),
}

/// A setting whatever its value type, for what reads the whole table: the
/// command line, the config file's keys, the docs/settings.md check.
pub trait AnySetting: Sync + std::fmt::Debug {
    /// [`Setting::key`].
    fn key(&self) -> &'static str;
    /// [`Setting::env`].
    fn env(&self) -> &'static str;
    /// [`Setting::flag`].
    fn flag(&self) -> Option<&'static str>;
    /// [`Setting::value_name`].
    fn value_name(&self) -> Option<&'static str>;
    /// [`Setting::help`].
    fn help(&self) -> &'static str;
    /// [`Setting::secret`].
    fn secret(&self) -> bool;
    /// [`Setting::default`], as `--help` and docs/settings.md show it.
    fn shown_default(&self) -> ShownDefault;
}

impl<T: Shown + Sync + std::fmt::Debug> AnySetting for Setting<T> {
    fn key(&self) -> &'static str {
        self.key
    }
    fn env(&self) -> &'static str {
        self.env
    }
    fn flag(&self) -> Option<&'static str> {
        self.flag
    }
    fn value_name(&self) -> Option<&'static str> {
        self.value_name
    }
    fn help(&self) -> &'static str {
        self.help
    }
    fn secret(&self) -> bool {
        self.secret
    }
    fn shown_default(&self) -> ShownDefault {
        match &self.default {
            DefaultValue::None => ShownDefault::None,
            DefaultValue::Described(text) => ShownDefault::Described(text),
            DefaultValue::Value(value) => ShownDefault::Value(value.shown()),
            DefaultValue::Computed { shown, .. } => ShownDefault::Computed(shown()),
        }
    }
}
