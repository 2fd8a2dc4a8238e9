//! The page's languages (docs/translations.md): each translation in
//! `page/locales` parsed once at start-up with Project Fluent, the
//! language a browser asks for chosen from them, and the messages the
//! page's HTML and script show, formatted for each language.

use std::collections::BTreeMap;

use fluent_bundle::{FluentArgs, FluentBundle, FluentResource};
use fluent_langneg::{NegotiationStrategy, accepted_languages, negotiate_languages};
use unic_langid::LanguageIdentifier;

include!(concat!(env!("OUT_DIR"), "/locales.rs"));

/// The language every translation is made from, and falls back to.
pub const SOURCE: &str = "en";
/// `Accept-Language`, at most: browsers send a few dozen bytes.
const MAX_ACCEPT_LANGUAGE: usize = 512;

/// The messages of the page's script, formatted for a language, with
/// their placeables left as `{name}` for the script to fill in.
pub const SCRIPT_MESSAGES: &[&str] = &[
    "show-qr",
    "hide-qr",
    "qr-label",
    "starting",
    "waiting-mobile",
    "waiting-desktop",
    "unreachable-retrying",
    "busy-retrying",
    "retrying",
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
    "error-rate_limited",
    "error-too_many_sessions",
    "error-token_unavailable",
    "error-service_refused",
    "error-rule_not_found",
    "error-service_error",
    "error-upstream_unreachable",
    "error-upstream_timeout",
    "error-bad_request",
    "value-true",
    "value-false",
    "control-character",
    "nested-too-deep",
    "empty-list",
    "empty-object",
];

/// The placeables of the messages above, as the script fills them in.
const PLACEABLES: &[&str] = &["asker", "site", "status", "reason", "name"];

/// One language of the page, its messages formatted.
pub struct Language {
    pub tag: LanguageIdentifier,
    /// What the switch shows: the language's name for itself.
    pub name: String,
    pub rtl: bool,
    /// Every message by id, placeables as `{name}`; a message the
    /// translation lacks is the source's.
    messages: BTreeMap<String, String>,
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
        let mut list = vec![language(SOURCE, base.clone(), &base)?];
        for (tag, text) in LOCALES.iter().filter(|(tag, _)| *tag != SOURCE) {
            list.push(language(tag, messages(tag, text)?, &base)?);
        }
        Ok(Languages { list })
    }

    pub fn all(&self) -> &[Language] {
        &self.list
    }

    /// The language to show: `asked` (the page's switch, `?lang=`) when
    /// there is such a translation, else the best match for the browser's
    /// `Accept-Language` (RFC 4647 lookup: `de-AT` gets `de`), else the
    /// source.
    pub fn choose(&self, asked: Option<&str>, accept_language: Option<&str>) -> &Language {
        if let Some(asked) = asked.and_then(|tag| tag.parse::<LanguageIdentifier>().ok())
            && let Some(found) = self.list.iter().find(|l| l.tag == asked)
        {
            return found;
        }
        let header = accept_language
            .filter(|h| h.len() <= MAX_ACCEPT_LANGUAGE)
            .unwrap_or("");
        let requested = accepted_languages::parse(header);
        let available: Vec<LanguageIdentifier> = self.list.iter().map(|l| l.tag.clone()).collect();
        let default = &self.list[0].tag;
        let chosen = negotiate_languages(
            &requested,
            &available,
            Some(default),
            NegotiationStrategy::Lookup,
        );
        let tag = chosen.first().copied().unwrap_or(default);
        self.list
            .iter()
            .find(|l| l.tag == *tag)
            .unwrap_or(&self.list[0])
    }
}

/// `text`'s messages, formatted with each placeable as `{name}`.
fn messages(tag: &str, text: &str) -> Result<BTreeMap<String, String>, String> {
    let id: LanguageIdentifier = tag
        .parse()
        .map_err(|_| format!("locales/{tag}.ftl: `{tag}` is not a BCP 47 language tag"))?;
    let resource = FluentResource::try_new(text.to_string())
        .map_err(|(_, errors)| format!("locales/{tag}.ftl does not parse: {errors:?}"))?;
    let ids: Vec<String> = resource
        .entries()
        .filter_map(|entry| match entry {
            fluent_syntax::ast::Entry::Message(message) => Some(message.id.name.to_string()),
            _ => None,
        })
        .collect();
    let mut bundle = FluentBundle::new(vec![id]);
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

fn language(
    tag: &str,
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
        tag: tag
            .parse()
            .map_err(|_| format!("`{tag}` is not a language tag"))?,
        name: messages
            .get("language-name")
            .cloned()
            .unwrap_or_else(|| tag.to_string()),
        rtl,
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_translation_parses_and_has_every_message() {
        let languages = Languages::load().unwrap();
        let source = messages(
            SOURCE,
            LOCALES.iter().find(|(t, _)| *t == SOURCE).unwrap().1,
        )
        .unwrap();
        for id in SCRIPT_MESSAGES {
            assert!(source.contains_key(*id), "{id} is not in en.ftl");
        }
        for (tag, text) in LOCALES {
            let own = messages(tag, text).unwrap();
            let missing: Vec<&String> = source.keys().filter(|id| !own.contains_key(*id)).collect();
            assert!(missing.is_empty(), "{tag}.ftl lacks {missing:?}");
            let extra: Vec<&String> = own.keys().filter(|id| !source.contains_key(*id)).collect();
            assert!(
                extra.is_empty(),
                "{tag}.ftl has ids en.ftl lacks: {extra:?}"
            );
        }
        assert!(languages.all().len() >= LOCALES.len());
        assert_eq!(languages.all()[0].tag(), "en");
    }

    #[test]
    fn the_language_is_the_switchs_then_the_browsers_best_match_then_english() {
        let languages = Languages::load().unwrap();
        let has = |tag: &str| languages.all().iter().any(|l| l.tag() == tag);
        if has("de") {
            assert_eq!(
                languages
                    .choose(None, Some("de-AT,de;q=0.9,en;q=0.5"))
                    .tag(),
                "de"
            );
            assert_eq!(languages.choose(Some("en"), Some("de")).tag(), "en");
        }
        if has("ar") {
            let ar = languages.choose(None, Some("ar-EG"));
            assert_eq!(ar.tag(), "ar");
            assert!(ar.rtl);
        }
        assert_eq!(languages.choose(None, Some("ja, zh;q=0.8")).tag(), "en");
        assert_eq!(languages.choose(Some("xx-!!"), None).tag(), "en");
        assert_eq!(
            languages.choose(None, Some(&"de,".repeat(1000))).tag(),
            "en"
        );
        assert_eq!(languages.choose(None, Some("*")).tag(), "en");
    }

    #[test]
    fn placeables_stay_for_the_script_to_fill() {
        let languages = Languages::load().unwrap();
        let en = &languages.all()[0];
        assert_eq!(
            en.message("http-error"),
            "Something went wrong (HTTP {status}). Please start again."
        );
        assert!(en.message("asker").starts_with("{asker} "));
        assert_eq!(en.message("no-such-id"), "no-such-id");
    }
}
