//! The page's languages (docs/translations.md): each translation in
//! `page/locales` parsed once at start-up with Project Fluent, the
//! language a request asks for chosen from them, and the messages the
//! page's HTML and script show, formatted for each language.

mod forms;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use fluent_bundle::concurrent::FluentBundle;
use fluent_bundle::{FluentArgs, FluentResource};
use fluent_langneg::{NegotiationStrategy, accepted_languages, negotiate_languages};
use unic_langid::LanguageIdentifier;

pub use forms::SELECTED;

include!(concat!(env!("OUT_DIR"), "/locales.rs"));

/// The language every translation is made from, and falls back to.
pub const SOURCE: &str = "en";
/// `Accept-Language` or `ui_locales`, at most: browsers and relying
/// parties send a few dozen bytes.
const MAX_LANGUAGE_LIST: usize = 512;

/// The messages of the page's script, formatted for a language, with
/// their placeables left as `{name}` for the script to fill in. Each
/// error code's message (`error-…`) and the messages of [`SELECTED`]
/// join them without being listed here.
pub const SCRIPT_MESSAGES: &[&str] = &[
    "show-qr",
    "hide-qr",
    "qr-label",
    "starting",
    "waiting-mobile",
    "waiting-desktop",
    "unreachable-retrying",
    "busy-retrying",
    "unreachable-start",
    "unreadable",
    "http-error",
    "session-unknown",
    "verified",
    "declined",
    "expired",
    "failed",
    "failed-claims-unusable",
    "failed-answer-unreadable",
    "return-verified",
    "return-declined",
    "return-expired",
    "return-failed",
    "value-true",
    "value-false",
    "control-character",
    "nested-too-deep",
    "empty-list",
    "empty-object",
];

/// The prefix of lanyard's own labels for claims (`claim-given_name`),
/// and, after a claim's key and `-`, for a part of it
/// (`claim-address-postal_code`).
pub const CLAIM_LABEL: &str = "claim-";

/// The placeables of the messages above, as the script fills them in.
const PLACEABLES: &[&str] = &["asker", "site", "status", "reason", "name", "age", "code"];

type Bundle = FluentBundle<FluentResource>;

/// One language of the page.
pub struct Language {
    pub tag: LanguageIdentifier,
    /// What the switch shows: the language's name for itself.
    pub name: String,
    pub rtl: bool,
    /// Every message by id, placeables as `{name}`; a message the
    /// translation lacks is the source's.
    messages: BTreeMap<String, String>,
    /// The same messages, for formatting with values when a page is
    /// rendered: numbers stay numbers, so that plural selectors work.
    bundle: Bundle,
}

impl Language {
    /// The message `id`; the id itself if no file has it (a test checks
    /// none is missing from the source).
    pub fn message<'a>(&'a self, id: &'a str) -> &'a str {
        self.messages.get(id).map_or(id, String::as_str)
    }

    /// The tag as `lang` takes it (`de`, `pt-BR`).
    pub fn tag(&self) -> String {
        self.tag.to_string()
    }

    /// Message `id` formatted with `args`, a count among them as a
    /// Fluent number (`FluentValue::from(21)`), so that its plural form
    /// is the language's own; `None` when no file has the message.
    pub fn format(&self, id: &str, args: &FluentArgs) -> Option<String> {
        let pattern = self.bundle.get_message(id)?.value()?;
        let mut errors = Vec::new();
        let text = self.bundle.format_pattern(pattern, Some(args), &mut errors);
        // A placeable missing from `args` shows as its name, which the
        // tests catch; the rest of the message is still the person's.
        Some(text.into_owned())
    }

    /// lanyard's labels for claims in this language, by claim key
    /// (`given_name`, `address-postal_code`), from every `claim-…`
    /// message but those of [`SELECTED`].
    pub fn claim_labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.messages.iter().filter_map(|(id, text)| {
            let key = id.strip_prefix(CLAIM_LABEL)?;
            (!SELECTED.iter().any(|s| s.id == id)).then_some((key, text.as_str()))
        })
    }
}

/// What a request says about the language it wants, in the order it
/// counts (docs/translations.md).
#[derive(Debug, Default, Clone, Copy)]
pub struct Asked<'a> {
    /// The page's language switch: `?lang=`.
    pub lang: Option<&'a str>,
    /// A relying party's `ui_locales` (OpenID Connect Core §3.1.2.1):
    /// tags separated by spaces, the preferred first.
    pub ui_locales: Option<&'a str>,
    /// The browser's `Accept-Language`.
    pub accept_language: Option<&'a str>,
}

/// Every language of the page, the source first.
pub struct Languages {
    list: Vec<Language>,
}

impl Languages {
    /// Parses every translation; `Err` names a file that does not parse,
    /// which the tests catch before a release does.
    pub fn load() -> Result<Languages, String> {
        let source = LOCALES
            .iter()
            .find(|(tag, _)| *tag == SOURCE)
            .ok_or("the page's English messages are missing")?;
        let base = messages(SOURCE, source.1)?;
        let mut list = vec![language(SOURCE, source.1, base.clone(), &base)?];
        for (tag, text) in LOCALES.iter().filter(|(tag, _)| *tag != SOURCE) {
            list.push(language(tag, text, messages(tag, text)?, &base)?);
        }
        Ok(Languages { list })
    }

    pub fn all(&self) -> &[Language] {
        &self.list
    }

    /// The language to show: the first of `?lang=`, `ui_locales` and
    /// `Accept-Language` that matches a translation (RFC 4647 lookup:
    /// `de-AT` gets `de`), each falling through to the next when it
    /// matches none; else the source.
    pub fn choose(&self, asked: Asked<'_>) -> &Language {
        let steps = [
            asked.lang.map(|tag| tags(tag, ' ')),
            asked.ui_locales.map(|list| tags(list, ' ')),
            asked
                .accept_language
                .filter(|header| header.len() <= MAX_LANGUAGE_LIST)
                .map(accepted_languages::parse),
        ];
        let available: Vec<LanguageIdentifier> = self.list.iter().map(|l| l.tag.clone()).collect();
        for requested in steps.into_iter().flatten() {
            let found =
                negotiate_languages(&requested, &available, None, NegotiationStrategy::Lookup);
            if let Some(tag) = found.first()
                && let Some(language) = self.list.iter().find(|l| l.tag == **tag)
            {
                return language;
            }
        }
        &self.list[0]
    }
}

/// The language tags of `list`, separated by `separator`; what does not
/// parse as one is left out, and a list longer than any real one is none.
fn tags(list: &str, separator: char) -> Vec<LanguageIdentifier> {
    if list.len() > MAX_LANGUAGE_LIST {
        return Vec::new();
    }
    list.split(separator)
        .filter_map(|tag| tag.parse().ok())
        .collect()
}

/// `text` parsed as a Fluent resource, or why not.
fn resource(tag: &str, text: &str) -> Result<FluentResource, String> {
    FluentResource::try_new(text.to_string())
        .map_err(|(_, errors)| format!("locales/{tag}.ftl does not parse: {errors:?}"))
}

/// `text`'s messages, formatted with each placeable as `{name}`.
fn messages(tag: &str, text: &str) -> Result<BTreeMap<String, String>, String> {
    let resource = resource(tag, text)?;
    let ids: Vec<String> = resource
        .entries()
        .filter_map(|entry| match entry {
            fluent_syntax::ast::Entry::Message(message) => Some(message.id.name.to_string()),
            _ => None,
        })
        .collect();
    let mut bundle = Bundle::new_concurrent(vec![language_id(tag)?]);
    // The page isolates what it fills in itself (dir=auto elements).
    bundle.set_use_isolating(false);
    bundle
        .add_resource(resource)
        .map_err(|errors| format!("locales/{tag}.ftl repeats a message: {errors:?}"))?;
    let mut args = FluentArgs::new();
    for name in PLACEABLES {
        args.set(*name, format!("{{{name}}}"));
    }
    let mut messages = BTreeMap::new();
    for id in ids {
        let Some(pattern) = bundle.get_message(&id).and_then(|m| m.value()) else {
            continue;
        };
        let mut errors = Vec::new();
        let text = bundle.format_pattern(pattern, Some(&args), &mut errors);
        if !errors.is_empty() {
            return Err(format!(
                "locales/{tag}.ftl: `{id}` does not format: {errors:?}"
            ));
        }
        messages.insert(id, text.into_owned());
    }
    Ok(messages)
}

fn language_id(tag: &str) -> Result<LanguageIdentifier, String> {
    tag.parse()
        .map_err(|_| format!("locales/{tag}.ftl: `{tag}` is not a BCP 47 language tag"))
}

/// The bundle a language formats with at render time: the source's
/// messages under the translation's, so that a message a file lacks
/// shows in English, as the start-up text does.
fn bundle(tag: &str, text: &str) -> Result<Bundle, String> {
    let mut bundle = Bundle::new_concurrent(vec![language_id(tag)?]);
    bundle.set_use_isolating(false);
    bundle.set_formatter(Some(forms::placeholder));
    if tag != SOURCE {
        let source = LOCALES
            .iter()
            .find(|(t, _)| *t == SOURCE)
            .map_or("", |(_, text)| text);
        // The source parsed when the languages were loaded.
        let _ = bundle.add_resource(resource(SOURCE, source)?);
    }
    bundle.add_resource_overriding(resource(tag, text)?);
    Ok(bundle)
}

fn language(
    tag: &str,
    text: &str,
    mut messages: BTreeMap<String, String>,
    base: &BTreeMap<String, String>,
) -> Result<Language, String> {
    for (id, text) in base {
        messages.entry(id.clone()).or_insert_with(|| text.clone());
    }
    let rtl = match messages.get("language-direction").map(String::as_str) {
        Some("rtl") => true,
        Some("ltr") => false,
        _ => {
            return Err(format!(
                "locales/{tag}.ftl: language-direction must be ltr or rtl"
            ));
        }
    };
    Ok(Language {
        tag: language_id(tag)?,
        name: messages
            .get("language-name")
            .cloned()
            .unwrap_or_else(|| tag.to_string()),
        rtl,
        messages,
        bundle: bundle(tag, text)?,
    })
}
