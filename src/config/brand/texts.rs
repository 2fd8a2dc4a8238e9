//! The brand file's texts: each a table of translations keyed by BCP 47
//! language tag (`[purpose]`, `[claims.NAME]`), read and checked, and the
//! one fallback rule by which the page picks a translation for the
//! language it serves.

use unic_langid::LanguageIdentifier;

use crate::config::shown::is_hidden;
use unic_langid::subtags::{Language, Script};

/// A key or a value quoted in a problem, at most this many characters: a
/// brand file is not secret, but a problem is one line of a log.
const MAX_QUOTED: usize = 40;

/// Translations of one text, in tag order, each tag once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Texts(Vec<(LanguageIdentifier, String)>);

impl Texts {
    /// The translations `table` (the file's `[at]`) gives, each checked
    /// to hold at most `max` characters; every problem is added to
    /// `problems`, naming its key (`purpose.e_n`).
    pub fn read(table: &toml::Table, at: &str, max: usize, problems: &mut Vec<String>) -> Texts {
        let mut texts: Vec<(LanguageIdentifier, String)> = Vec::new();
        for (tag, value) in table {
            let key = format!("{at}.{}", quoted(tag));
            let lang = match parse_tag(tag) {
                Ok(lang) => lang,
                Err(why) => {
                    problems.push(format!("`{key}`: {why}"));
                    continue;
                }
            };
            let text = match value {
                toml::Value::String(text) => text,
                _ => {
                    problems.push(format!("`{key}`: must be a string"));
                    continue;
                }
            };
            if let Err(why) = check_text(text, max) {
                problems.push(format!("`{key}`: {why}"));
                continue;
            }
            if let Some((same, _)) = texts.iter().find(|(given, _)| *given == lang) {
                problems.push(format!(
                    "`{key}`: is the tag {same} again, written another way; give each language once"
                ));
                continue;
            }
            texts.push((lang, text.clone()));
        }
        texts.sort_by_key(|(lang, _)| lang.to_string());
        Texts(texts)
    }

    /// The translation for `lang`: the exact tag; else one of the same
    /// language (and script, when both name one) with any region or none,
    /// the tag without a region first (`de-AT` asks: `de`, else `de-CH`,
    /// `de-DE`, … in tag order; `de` asks: `de-AT`, …); else English by
    /// the same rule (`en`, else `en-GB`, …); else `None`.
    pub fn get(&self, lang: &LanguageIdentifier) -> Option<&str> {
        let exact = self.0.iter().find(|(given, _)| given == lang);
        exact
            .map(|(_, text)| text.as_str())
            .or_else(|| self.same_language(lang.language, lang.script))
            .or_else(|| self.same_language(english(), None))
    }

    fn same_language(&self, language: Language, script: Option<Script>) -> Option<&str> {
        self.0
            .iter()
            .filter(|(given, _)| {
                given.language == language
                    && (script.is_none() || given.script.is_none() || given.script == script)
            })
            // The first of the least specific: no region, no variants.
            .min_by_key(|(given, _)| (given.region.is_some(), given.variants().len()))
            .map(|(_, text)| text.as_str())
    }
}

fn english() -> Language {
    Language::from_bytes(b"en").unwrap_or_default()
}

/// A BCP 47 tag as `unic-langid` reads it, with hyphens (the `_` it also
/// takes is Unicode's, not BCP 47's) and naming a language (not `und`).
fn parse_tag(tag: &str) -> Result<LanguageIdentifier, String> {
    let malformed = || {
        "is not a well-formed BCP 47 language tag (like en, de-AT, zh-Hant, sr-Latn-RS)".to_string()
    };
    if tag.contains('_') {
        return Err(malformed());
    }
    let lang: LanguageIdentifier = tag.parse().map_err(|_| malformed())?;
    if lang.language.is_empty() {
        return Err("names no language (`und`); name the language the text is in".into());
    }
    Ok(lang)
}

/// Why `text` cannot be shown as one of the brand's texts: empty, longer
/// than `max` characters, or holding a character a person cannot see
/// ([`is_hidden`]), which would break the page's layout or disguise the
/// text around it.
pub fn check_text(text: &str, max: usize) -> Result<(), String> {
    let chars = text.chars().count();
    if text.trim().is_empty() {
        return Err("is empty".into());
    }
    if chars > max {
        return Err(format!(
            "is {chars} characters long; at most {max} are allowed"
        ));
    }
    if text.chars().any(is_hidden) {
        return Err(
            "has a control, bidirectional, invisible or format character (a line break, a tab, a bidirectional override or isolate, a zero-width space, a filler); the page shows it as one line of plain text".into(),
        );
    }
    Ok(())
}

/// `text` for a problem line: as it is when short, else its beginning and
/// an ellipsis.
pub fn quoted(text: &str) -> String {
    match text.char_indices().nth(MAX_QUOTED) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}
