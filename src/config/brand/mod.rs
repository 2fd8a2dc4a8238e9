//! `LANYARD_VERIFIER_BRAND_FILE` (docs/verifier.md "Branding"): the
//! relying party's name, logo, accent colour, and the texts the page shows
//! in its stead (why it asks, and each claim's label, per language), read
//! from a TOML file and checked once at start-up. Every problem is one
//! line naming its key; values are quoted only when short.
//!
//! - `texts`: the per-language tables and the fallback between languages;
//!   how a text is checked.
//! - `accent`: the colour, its contrast, and its CSS.
//! - `logo`: the PNG or SVG, and what an SVG may not hold.

mod accent;
mod logo;
mod texts;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use unic_langid::LanguageIdentifier;

use super::settings::VERIFIER_BRAND_FILE;
use super::sources::{Layers, Sourced, io_reason, toml_error_at};
use crate::files::read_small;

pub use accent::{Accent, MIN_CONTRAST};
pub use logo::{Logo, MAX_LOGO_BYTES, PNG, SVG};
use texts::{Texts, check_text, quoted};

/// The brand file, at most: a purpose and a few dozen labels in a few
/// dozen languages each.
pub const MAX_BRAND_FILE_BYTES: u64 = 256 * 1024;
/// `name`, at most: it is shown as who asks, in a heading.
pub const MAX_NAME: usize = 100;
/// A purpose, at most: a sentence or two under the heading.
pub const MAX_PURPOSE: usize = 300;
/// A claim's label, at most: it stands beside the claim's value.
pub const MAX_LABEL: usize = 60;
/// A claim's name, at most, as `LANYARD_OIDC_SUB_CLAIM` takes them.
const MAX_CLAIM_NAME: usize = 64;
/// A path, at most (Linux's `PATH_MAX`): a longer `logo` is no path, and
/// is not echoed.
const MAX_PATH: usize = 4096;
/// The file's keys; any other is a typo.
const KEYS: [&str; 5] = ["name", "logo", "accent", "purpose", "claims"];

/// The relying party as the verifier's page shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Brand {
    /// Who asks: 1 to [`MAX_NAME`] characters, no control characters.
    pub name: String,
    pub logo: Option<Logo>,
    pub accent: Option<Accent>,
    purpose: Texts,
    /// By claim name.
    labels: BTreeMap<String, Texts>,
}

impl Brand {
    /// The brand file at `path`; a relative `logo` is taken from the
    /// file's folder. Else every problem, each one line starting with the
    /// path.
    pub fn read(path: &Path) -> Result<Brand, Vec<String>> {
        let text = read_small(path, MAX_BRAND_FILE_BYTES, "a brand file")
            .and_then(|bytes| {
                String::from_utf8(bytes).map_err(|_| std::io::ErrorKind::InvalidData.into())
            })
            .map_err(|err| {
                vec![format!(
                    "{} cannot be read: {}",
                    path.display(),
                    io_reason(&err)
                )]
            })?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Brand::parse(&text, dir).map_err(|problems| {
            let path = path.display();
            problems
                .into_iter()
                .map(|why| format!("{path}: {why}"))
                .collect()
        })
    }

    /// The brand the TOML `text` describes, its `logo` read from `dir`
    /// when relative; else every problem, each naming its key.
    pub fn parse(text: &str, dir: &Path) -> Result<Brand, Vec<String>> {
        let table: toml::Table = text.parse().map_err(|err| vec![not_toml(text, &err)])?;
        Brand::from_table(&table, dir)
    }

    /// The brand `table` describes, as a brand file or a client's `brand`
    /// in the clients file (docs/oidc.md) gives it, its `logo` read from
    /// `dir` when relative; else every problem, each naming its key.
    pub fn from_table(table: &toml::Table, dir: &Path) -> Result<Brand, Vec<String>> {
        let mut problems = Vec::new();
        for key in table.keys().filter(|key| !KEYS.contains(&key.as_str())) {
            problems.push(format!(
                "unknown key `{}` (the keys are name, logo, accent, [purpose] and [claims.NAME]; see config/brand.example.toml)",
                quoted(key)
            ));
        }
        let name = match string(table, "name", &mut problems) {
            Some(name) => checked(check_text(name, MAX_NAME), "name", &mut problems)
                .map(|()| name.to_string()),
            None if !table.contains_key("name") => {
                problems.push("`name`: is required (who asks, as the page shows it)".into());
                None
            }
            None => None,
        };
        let logo = logo(table, dir, &mut problems);
        let accent = string(table, "accent", &mut problems)
            .and_then(|raw| checked(Accent::parse(raw), "accent", &mut problems));
        let purpose = match table.get("purpose") {
            None => Texts::default(),
            Some(toml::Value::Table(purpose)) => {
                Texts::read(purpose, "purpose", MAX_PURPOSE, &mut problems)
            }
            Some(_) => {
                problems.push(
                    "`purpose`: must be a table of texts by language tag: [purpose] en = \"…\""
                        .into(),
                );
                Texts::default()
            }
        };
        let labels = labels(table.get("claims"), &mut problems);
        match name {
            Some(name) if problems.is_empty() => Ok(Brand {
                name,
                logo,
                accent,
                purpose,
                labels,
            }),
            _ => Err(problems),
        }
    }

    /// Why the relying party asks, in `lang` or the nearest language given
    /// (the fallback of [`Brand::label`]); `None`: the page shows its own
    /// text.
    pub fn purpose(&self, lang: &LanguageIdentifier) -> Option<&str> {
        self.purpose.get(lang)
    }

    /// The label of the top-level claim `claim` in `lang`, by this
    /// fallback: the exact tag; else the same language (and script, when
    /// both name one) with any region or none, the one without a region
    /// first, then in tag order (`de-AT` asks: `de`, else `de-CH`, …;
    /// `de` asks: `de-AT`, …); else English by the same rule (`en`, else
    /// `en-GB`, …); else `None`, and the page shows a readable form of the
    /// claim's name.
    pub fn label(&self, claim: &str, lang: &LanguageIdentifier) -> Option<&str> {
        self.labels.get(claim)?.get(lang)
    }

    /// Every claim's label in `lang`, by the claim's name, as
    /// [`Brand::label`] finds it.
    pub fn labels(&self, lang: &LanguageIdentifier) -> BTreeMap<&str, &str> {
        self.labels
            .keys()
            .filter_map(|claim| Some((claim.as_str(), self.label(claim, lang)?)))
            .collect()
    }

    /// The CSS that sets the page's `--accent` and `--accent-fg` for its
    /// light colour scheme; `None` without an accent. The dark scheme
    /// keeps the page's own accent, chosen to read on its dark background.
    pub fn stylesheet(&self) -> Option<String> {
        self.accent.as_ref().map(Accent::stylesheet)
    }
}

/// Reads the brand file `LANYARD_VERIFIER_BRAND_FILE` names, recording
/// each of its problems under the setting.
pub(super) fn load(l: &mut Layers<'_>, file: &Sourced<PathBuf>) -> Option<Brand> {
    match Brand::read(&file.value) {
        Ok(brand) => Some(brand),
        Err(problems) => {
            for why in problems {
                l.problem(VERIFIER_BRAND_FILE.env, &file.source, &why);
            }
            None
        }
    }
}

/// The logo `logo` names, from `dir` when relative.
fn logo(table: &toml::Table, dir: &Path, problems: &mut Vec<String>) -> Option<Logo> {
    let path = string(table, "logo", problems)?;
    if path.len() > MAX_PATH {
        let why = format!("`logo`: is {} bytes long, longer than any path", path.len());
        problems.push(why);
        return None;
    }
    Logo::read(&dir.join(path))
        .map_err(|whys| problems.extend(whys.into_iter().map(|why| format!("`logo`: {why}"))))
        .ok()
}

/// `[claims.NAME]` tables: each claim's labels.
fn labels(claims: Option<&toml::Value>, problems: &mut Vec<String>) -> BTreeMap<String, Texts> {
    let claims = match claims {
        None => return BTreeMap::new(),
        Some(toml::Value::Table(claims)) => claims,
        Some(_) => {
            problems.push(
                "`claims`: must hold a table of labels per claim: [claims.age_over_18] en = \"…\""
                    .into(),
            );
            return BTreeMap::new();
        }
    };
    let mut labels = BTreeMap::new();
    for (claim, value) in claims {
        let key = format!("claims.{}", quoted(claim));
        if !is_claim_name(claim) {
            problems.push(format!(
                "`{key}`: is not a claim's name (letters, digits and `_-.:`, at most {MAX_CLAIM_NAME}), as the presented claims name them"
            ));
            continue;
        }
        match value {
            toml::Value::Table(texts) => {
                labels.insert(claim.clone(), Texts::read(texts, &key, MAX_LABEL, problems));
            }
            _ => problems.push(format!(
                "`{key}`: must be a table of labels by language tag: [{key}] en = \"…\""
            )),
        }
    }
    labels
}

/// A top-level claim's name as the service presents it.
fn is_claim_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_CLAIM_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b))
}

/// `key`'s string, if it is given as one; another type is a problem.
fn string<'t>(table: &'t toml::Table, key: &str, problems: &mut Vec<String>) -> Option<&'t str> {
    match table.get(key)? {
        toml::Value::String(value) => Some(value),
        _ => {
            problems.push(format!("`{key}`: must be a string"));
            None
        }
    }
}

/// The value, or `None` with its problem recorded under `key`.
fn checked<T>(read: Result<T, String>, key: &str, problems: &mut Vec<String>) -> Option<T> {
    read.map_err(|why| problems.push(format!("`{key}`: {why}")))
        .ok()
}

/// Where the TOML is broken and toml's word for it, without the line it
/// quotes.
fn not_toml(text: &str, err: &toml::de::Error) -> String {
    let at = toml_error_at(text, err);
    format!("is not valid TOML{at}: {}", quoted(err.message().trim()))
}
