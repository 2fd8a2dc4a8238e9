use fluent_bundle::{FluentArgs, FluentValue};

use super::*;
use crate::verifier::errors::page_codes;

fn source() -> BTreeMap<String, String> {
    messages(
        SOURCE,
        LOCALES.iter().find(|(t, _)| *t == SOURCE).unwrap().1,
    )
    .unwrap()
}

#[test]
fn every_shipped_translation_parses_and_has_every_message() {
    let languages = Languages::load().unwrap();
    let source = source();
    for id in SCRIPT_MESSAGES {
        assert!(source.contains_key(*id), "{id} is not in en.ftl");
    }
    for selected in SELECTED {
        assert!(
            source.contains_key(selected.id),
            "{} is not in en.ftl",
            selected.id
        );
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

/// Each code the page can be given, crossed with each shipped file: the
/// file's own message, not English standing in for it.
#[test]
fn every_error_code_has_a_message_in_every_language() {
    let codes = page_codes();
    for code in [
        "not_found",
        "rate_limited",
        "too_many_connections",
        "uri_too_long",
    ] {
        assert!(codes.contains(&code), "{code} is not among {codes:?}");
    }
    let mut missing = Vec::new();
    for (tag, text) in LOCALES {
        let own = messages(tag, text).unwrap();
        for code in &codes {
            if !own.contains_key(&format!("error-{code}")) {
                missing.push(format!("{tag}.ftl: error-{code}"));
            }
        }
    }
    assert!(missing.is_empty(), "no message for {missing:?}");
}

fn language<'a>(languages: &'a Languages, tag: &str) -> &'a Language {
    languages.all().iter().find(|l| l.tag() == tag).unwrap()
}

fn asked<'a>(lang: Option<&'a str>, ui: Option<&'a str>, accept: Option<&'a str>) -> Asked<'a> {
    Asked {
        lang,
        ui_locales: ui,
        accept_language: accept,
    }
}

#[test]
fn the_language_is_the_switchs_then_ui_locales_then_the_browsers_then_english() {
    let languages = Languages::load().unwrap();
    let chosen = |lang, ui, accept| languages.choose(asked(lang, ui, accept)).tag();
    // Each step, when it matches a shipped language.
    assert_eq!(chosen(Some("pl"), Some("de"), Some("fr")), "pl");
    assert_eq!(chosen(None, Some("ja de-CH"), Some("fr")), "de");
    assert_eq!(chosen(None, None, Some("de-AT,de;q=0.9,en;q=0.5")), "de");
    assert_eq!(chosen(None, None, None), "en");
    // Each falling through when it matches none.
    assert_eq!(chosen(Some("xx-!!"), Some("ja"), Some("ar-EG")), "ar");
    assert_eq!(chosen(Some("ja"), None, Some("it")), "it");
    assert_eq!(chosen(Some("ja"), Some("ko zh"), Some("es-MX")), "es");
    assert_eq!(chosen(Some("ja"), Some("ko"), Some("ja, zh;q=0.8")), "en");
    assert!(languages.choose(asked(None, None, Some("ar-EG"))).rtl);
    // Hostile lists are read as none.
    let (spaced, listed) = ("de ".repeat(1000), "de,".repeat(1000));
    assert_eq!(chosen(None, Some(&spaced), Some("fr")), "fr");
    assert_eq!(chosen(None, None, Some(&listed)), "en");
    assert_eq!(chosen(None, None, Some("*")), "en");
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

/// `claim-age_over` formatted at render time with `age` as a number.
fn age_label(language: &Language, age: u64) -> String {
    let mut args = FluentArgs::new();
    args.set("age", FluentValue::from(age));
    language.format("claim-age_over", &args).unwrap()
}

#[test]
fn counts_take_the_plural_form_of_their_language() {
    let languages = Languages::load().unwrap();
    let pl = language(&languages, "pl");
    let shown: Vec<String> = [1, 2, 5, 22, 25].map(|n| age_label(pl, n)).into();
    assert_eq!(
        shown,
        [
            "Ukończony 1 rok",
            "Ukończone 2 lata",
            "Ukończone 5 lat",
            "Ukończone 22 lata",
            "Ukończone 25 lat"
        ]
    );
    let ar = language(&languages, "ar");
    let shown: Vec<String> = [0, 1, 2, 3, 11, 100].map(|n| age_label(ar, n)).into();
    assert_eq!(
        shown,
        [
            "العمر 0 عام أو أكثر",
            "العمر عام واحد أو أكثر",
            "العمر عامان أو أكثر",
            "العمر 3 أعوام أو أكثر",
            "العمر 11 عامًا أو أكثر",
            "العمر 100 عام أو أكثر"
        ]
    );
    assert_eq!(age_label(&languages.all()[0], 21), "At least 21 years old");
}

#[test]
fn the_script_gets_every_plural_form_with_the_count_left_to_fill() {
    let languages = Languages::load().unwrap();
    let age = SELECTED.iter().find(|s| s.id == "claim-age_over").unwrap();
    let keys = |tag: &str| -> Vec<String> {
        let forms = age.forms(language(&languages, tag), &[]);
        assert!(forms.count);
        assert!(
            forms
                .forms
                .values()
                .all(|text| !text.contains(char::is_numeric)),
            "{tag}: {:?}",
            forms.forms
        );
        forms.forms.keys().cloned().collect()
    };
    assert_eq!(keys("en"), ["one", "other"]);
    assert_eq!(keys("pl"), ["few", "many", "one", "other"]);
    assert_eq!(keys("ar"), ["few", "many", "one", "other", "two", "zero"]);
    let pl = age.forms(language(&languages, "pl"), &[]);
    assert_eq!(pl.forms["few"], "Ukończone {age} lata");
}

#[test]
fn the_retry_message_is_one_sentence_per_code_in_every_language() {
    let languages = Languages::load().unwrap();
    let retrying = SELECTED.iter().find(|s| s.id == "retrying").unwrap();
    let codes = page_codes();
    for language in languages.all() {
        let forms = retrying.forms(language, &codes);
        assert_eq!(forms.forms.len(), codes.len() + 1, "{}", language.tag());
        for (code, text) in &forms.forms {
            assert!(!text.contains('{'), "{} {code}: {text}", language.tag());
        }
    }
}
