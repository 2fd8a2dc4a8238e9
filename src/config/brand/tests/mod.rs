//! The brand file's unit tests: the example as shipped, each refusal,
//! and the fallback between languages.

use std::path::{Path, PathBuf};

use super::*;

mod logo;

/// A folder holding `brand.toml` with `text`, and the files `files` name.
struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        Dir(tempfile::tempdir().unwrap())
    }

    fn write(&self, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path
    }

    fn path(&self) -> &Path {
        self.0.path()
    }
}

/// `text` parsed with its files read from `dir`.
fn parse_in(dir: &Dir, text: &str) -> Result<Brand, Vec<String>> {
    Brand::parse(text, dir.path())
}

fn parse(text: &str) -> Result<Brand, Vec<String>> {
    Brand::parse(text, Path::new("/nonexistent"))
}

/// The one problem `text` has.
fn problem(text: &str) -> String {
    let problems = parse(text).unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    problems.into_iter().next().unwrap()
}

fn lang(tag: &str) -> LanguageIdentifier {
    tag.parse().unwrap()
}

#[test]
fn the_example_loads_as_shipped() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/brand.example.toml");
    let brand = Brand::read(&path).unwrap();
    assert_eq!(brand.name, "Acme Bank");
    let logo = brand.logo.as_ref().expect("the example's logo");
    assert_eq!(logo.content_type, SVG);
    let shipped = std::fs::read(path.with_file_name("brand-logo.example.svg")).unwrap();
    assert_eq!(logo.bytes, shipped);
    assert_eq!(brand.accent.unwrap().hex(), "#1f4e8c");
    let claims = ["given_name", "family_name", "birth_date", "age_over_18"];
    for tag in ["en", "de", "fr", "es", "it", "pl", "ar"] {
        let purpose = brand.purpose(&lang(tag)).unwrap();
        assert!(purpose.contains("Acme Bank"), "{tag}: {purpose}");
        let labels: Vec<&str> = claims
            .iter()
            .map(|claim| brand.label(claim, &lang(tag)).unwrap())
            .collect();
        assert_eq!(labels.len(), 4, "{tag}");
        if tag != "en" {
            assert_ne!(
                brand.purpose(&lang(tag)),
                brand.purpose(&lang("en")),
                "{tag} is translated"
            );
        }
    }
    assert_eq!(brand.label("age_over_18", &lang("de")), Some("Über 18"));
    assert_eq!(brand.label("portrait", &lang("en")), None);
}

#[test]
fn a_minimal_file_is_a_name() {
    let brand = parse("name = \"Acme Bank\"").unwrap();
    assert_eq!(brand.name, "Acme Bank");
    assert_eq!((&brand.logo, brand.accent), (&None, None));
    assert_eq!(brand.stylesheet(), None);
    assert_eq!(brand.purpose(&lang("en")), None);
    assert_eq!(brand.label("given_name", &lang("en")), None);
}

#[test]
fn a_translation_falls_back_to_the_language_then_to_english() {
    let brand = parse(
        r#"
        name = "Acme Bank"
        [purpose]
        en-GB = "en-GB"
        en = "en"
        de = "de"
        de-CH = "de-CH"
        pt-BR = "pt-BR"
        pt-AO = "pt-AO"
        zh-Hant = "zh-Hant"
        [claims.age_over_18]
        de-AT = "de-AT"
        "#,
    )
    .unwrap();
    let purpose = |tag: &str| brand.purpose(&lang(tag));
    for (asks, given) in [
        ("de", "de"),
        ("de-CH", "de-CH"),
        ("DE-ch", "de-CH"),
        // The same language: without a region first, then in tag order.
        ("de-AT", "de"),
        ("pt", "pt-AO"),
        ("pt-PT", "pt-AO"),
        ("pt-BR", "pt-BR"),
        ("en-US", "en"),
        // A script both name must agree; one named once is no bar.
        ("zh-Hant-TW", "zh-Hant"),
        ("zh-TW", "zh-Hant"),
        // Then English, without a region first.
        ("zh-Hans", "en"),
        ("fr", "en"),
        ("ar-EG", "en"),
    ] {
        assert_eq!(purpose(asks), Some(given), "{asks}");
    }
    let label = |tag: &str| brand.label("age_over_18", &lang(tag));
    assert_eq!(label("de-AT"), Some("de-AT"));
    assert_eq!(label("de"), Some("de-AT"), "the reverse: a region for none");
    assert_eq!(label("de-DE"), Some("de-AT"));
    assert_eq!(label("en"), None, "no English to fall back to");
    assert_eq!(brand.label("given_name", &lang("de")), None);

    let english_by_region =
        parse("name = \"A\"\n[purpose]\nen-US = \"en-US\"\nen-GB = \"en-GB\"\nfr = \"fr\"")
            .unwrap();
    assert_eq!(english_by_region.purpose(&lang("ja")), Some("en-GB"));
}

#[test]
fn the_stylesheet_sets_the_accent_for_the_light_scheme_only() {
    let brand = parse("name = \"A\"\naccent = \"#1F4E8C\"").unwrap();
    let css = brand.stylesheet().unwrap();
    assert_eq!(
        css,
        "@media (prefers-color-scheme: light) {\n  :root {\n    --accent: #1f4e8c;\n    --accent-fg: #ffffff;\n  }\n}\n"
    );
    assert!(!css.contains("dark"));
    let short = parse("name = \"A\"\naccent = \"#036\"").unwrap();
    assert_eq!(short.accent.unwrap().hex(), "#003366");
    assert_eq!(short.accent.unwrap().rgb(), [0x00, 0x33, 0x66]);
}

#[test]
fn an_accent_that_does_not_read_on_white_is_refused_with_its_ratio() {
    let accepted = parse("name = \"A\"\naccent = \"#767676\"").unwrap();
    let ratio = accepted.accent.unwrap().contrast_on_white();
    assert!((4.54..4.55).contains(&ratio), "{ratio}");
    assert_eq!(accepted.accent.unwrap().foreground(), "#ffffff");
    assert_eq!(
        problem("name = \"A\"\naccent = \"#777777\""),
        "`accent`: #777777 has a contrast of 4.48:1 on the page's white background; at least 4.5:1 is needed for its links and buttons to read (WCAG 2.x, 1.4.3): choose a darker shade"
    );
    assert!(
        problem("name = \"A\"\naccent = \"#fff\"").contains("#ffffff has a contrast of 1.00:1")
    );
    for bad in ["1f4e8c", "#1f4e8", "#1f4e8c00", "#ggg", "blue", "#+1f4e8"] {
        assert_eq!(
            problem(&format!("name = \"A\"\naccent = \"{bad}\"")),
            format!("`accent`: `{bad}` is not a colour written #rrggbb or #rgb"),
        );
    }
    let long = format!("name = \"A\"\naccent = \"#{}\"", "1".repeat(5000));
    assert_eq!(
        problem(&long),
        "`accent`: is not a colour written #rrggbb or #rgb",
        "a long value is not quoted"
    );
    assert_eq!(
        problem("name = \"A\"\naccent = 0x1f4e8c"),
        "`accent`: must be a string"
    );
    // A refusal never rounds up to the minimum it misses.
    assert!(
        problem("name = \"A\"\naccent = \"#008580\"").contains("a contrast of 4.49:1"),
        "4.49995:1 is not said as 4.50:1"
    );
}

#[test]
fn unknown_keys_are_refused_as_typos() {
    assert_eq!(
        problem("name = \"A\"\naccnet = \"#1f4e8c\""),
        "unknown key `accnet` (the keys are name, logo, accent, [purpose] and [claims.NAME]; see config/brand.example.toml)"
    );
    let problems =
        parse("name = \"A\"\n[purposes]\nen = \"x\"\n[claim.given_name]\nen = \"x\"").unwrap_err();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].starts_with("unknown key `claim`"),
        "{problems:?}"
    );
    assert!(
        problems[1].starts_with("unknown key `purposes`"),
        "{problems:?}"
    );
    let long = format!("name = \"A\"\n{} = 1", "k".repeat(500));
    assert!(problem(&long).starts_with(&format!("unknown key `{}…`", "k".repeat(40))));
}

#[test]
fn the_name_is_required_on_one_short_line() {
    assert_eq!(
        problem("accent = \"#1f4e8c\""),
        "`name`: is required (who asks, as the page shows it)"
    );
    for (name, why) in [
        ("", "is empty"),
        ("  ", "is empty"),
        (
            "Acme\\nBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\tBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u202EBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u2028Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u2066Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u2069Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u200EBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u200FBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u061CBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u200BBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u200DBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\uFEFFBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u00ADBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u3164Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u115FBank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u1160Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\uFFA0Bank",
            "has a control, bidirectional, invisible or format character",
        ),
        (
            "Acme\\u2060Bank",
            "has a control, bidirectional, invisible or format character",
        ),
    ] {
        let problem = problem(&format!("name = \"{name}\""));
        assert!(
            problem.starts_with(&format!("`name`: {why}")),
            "{name}: {problem}"
        );
    }
    assert!(
        parse(&format!("name = \"{}\"", "é".repeat(100))).is_ok(),
        "characters, not bytes"
    );
    assert_eq!(
        problem(&format!("name = \"{}\"", "é".repeat(101))),
        "`name`: is 101 characters long; at most 100 are allowed"
    );
    assert_eq!(problem("name = 7"), "`name`: must be a string");
}

#[test]
fn language_tags_must_be_well_formed_bcp_47() {
    for tag in [
        "e_n",
        "de_AT",
        "x",
        "en-",
        "1en",
        "en-u-ca-gregory",
        "english-",
    ] {
        assert_eq!(
            problem(&format!("name = \"A\"\n[purpose]\n\"{tag}\" = \"x\"")),
            format!(
                "`purpose.{tag}`: is not a well-formed BCP 47 language tag (like en, de-AT, zh-Hant, sr-Latn-RS)"
            )
        );
    }
    assert_eq!(
        problem("name = \"A\"\n[claims.given_name]\ne_n = \"x\""),
        "`claims.given_name.e_n`: is not a well-formed BCP 47 language tag (like en, de-AT, zh-Hant, sr-Latn-RS)"
    );
    assert!(
        problem("name = \"A\"\n[purpose]\nund = \"x\"")
            .starts_with("`purpose.und`: names no language")
    );
    assert_eq!(
        problem("name = \"A\"\n[purpose]\nde-at = \"x\"\nde-AT = \"y\""),
        "`purpose.de-at`: is the tag de-AT again, written another way; give each language once"
    );
    // Well-formed is enough: a tag no translation elsewhere has is fine.
    let brand =
        parse("name = \"A\"\n[purpose]\ntlh = \"x\"\n[claims.a]\nsr-Latn-RS = \"y\"").unwrap();
    assert_eq!(brand.purpose(&lang("tlh")), Some("x"));
    assert_eq!(brand.label("a", &lang("sr-Latn")), Some("y"));
}

#[test]
fn purposes_and_labels_are_short_plain_lines() {
    let at_most = |at: &str, n: usize| format!("name = \"A\"\n[{at}]\nen = \"{}\"", "x".repeat(n));
    assert!(parse(&at_most("purpose", 300)).is_ok());
    assert_eq!(
        problem(&at_most("purpose", 301)),
        "`purpose.en`: is 301 characters long; at most 300 are allowed"
    );
    assert!(parse(&at_most("claims.age_over_18", 60)).is_ok());
    assert_eq!(
        problem(&at_most("claims.age_over_18", 61)),
        "`claims.age_over_18.en`: is 61 characters long; at most 60 are allowed"
    );
    assert!(
        problem("name = \"A\"\n[purpose]\nen = \"one\\ntwo\"").starts_with(
            "`purpose.en`: has a control, bidirectional, invisible or format character"
        )
    );
    assert!(
        problem("name = \"A\"\n[claims.age_over_18]\nde = \"\\u2067Über 18\"").starts_with(
            "`claims.age_over_18.de`: has a control, bidirectional, invisible or format character"
        )
    );
    assert_eq!(
        problem("name = \"A\"\n[purpose]\nen = \"\""),
        "`purpose.en`: is empty"
    );
    assert_eq!(
        problem("name = \"A\"\n[purpose]\nen = 1"),
        "`purpose.en`: must be a string"
    );
    assert!(problem("name = \"A\"\npurpose = \"x\"").starts_with("`purpose`: must be a table"));
    assert!(problem("name = \"A\"\nclaims = \"x\"").starts_with("`claims`: must hold a table"));
    assert!(
        problem("name = \"A\"\n[claims]\ngiven_name = \"x\"")
            .starts_with("`claims.given_name`: must be a table of labels")
    );
}

#[test]
fn claim_names_are_as_presented() {
    let ok = parse("name = \"A\"\n[claims.\"org.iso.18013.5.1:age_over_18\"]\nen = \"Over 18\"")
        .unwrap();
    assert_eq!(
        ok.label("org.iso.18013.5.1:age_over_18", &lang("en")),
        Some("Over 18")
    );
    for name in ["given name", "näme", "a/b", ""] {
        assert_eq!(
            problem(&format!("name = \"A\"\n[claims.\"{name}\"]\nen = \"x\"")),
            format!(
                "`claims.{name}`: is not a claim's name (letters, digits and `_-.:`, at most 64), as the presented claims name them"
            )
        );
    }
}

#[test]
fn every_problem_shows_in_one_run_and_the_file_names_them() {
    let dir = Dir::new();
    let path = dir.write(
        "brand.toml",
        "accent = \"#777777\"\ncolour = 1\n[purpose]\ne_n = \"x\"\n",
    );
    let problems = Brand::read(&path).unwrap_err();
    let shown = path.display().to_string();
    assert_eq!(problems.len(), 4, "{problems:?}");
    assert!(
        problems
            .iter()
            .all(|p| p.starts_with(&format!("{shown}: `"))
                || p.starts_with(&format!("{shown}: unknown key")))
    );
    let err = Brand::read(&dir.path().join("none.toml")).unwrap_err();
    assert_eq!(
        err,
        [format!(
            "{} cannot be read: no such file",
            dir.path().join("none.toml").display()
        )]
    );
    let not_toml = dir.write("broken.toml", "name = \"A\"\nlogo = \n");
    let err = Brand::read(&not_toml).unwrap_err();
    assert!(err[0].contains("is not valid TOML at line 2"), "{err:?}");
    let huge = dir.write("huge.toml", vec![b'#'; MAX_BRAND_FILE_BYTES as usize + 1]);
    let err = Brand::read(&huge).unwrap_err();
    assert!(
        err[0].ends_with("cannot be read: larger than 256 KiB; not a brand file"),
        "{err:?}"
    );
}
