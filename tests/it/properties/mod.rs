//! Property tests for the parsers that read untrusted input: the credentials
//! file, the private key, the token endpoint's answer, the settings, and
//! the organization a request path names.
//! Whatever they are given, they must not panic; a refusal must say what is
//! wrong and where, one line per problem, and never quote key material or a
//! token. The plain tests after a property pin cases it found.

use crate::support;

// One module per parser; what they share (the checks of a clear,
// secret-free error, and the strategies) is below.
mod credentials_file;
mod keys;
mod organization_paths;
mod settings;
mod token_answer;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use lanyard::config::credentials::{self, parse_private_key};
use lanyard::config::{
    self, AnySetting, Config, ConfigError, CredentialSettings, Flags, Requirement, SETTINGS,
    Source, Sourced,
};
use lanyard::token::exchange::{self, MAX_TOKEN_LIFETIME};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use support::fixture;

use credentials_file::{Edit, edit, edited, file_settings, valid_file};
use keys::{armoured_noise, damaged_key, key_input};
use token_answer::now;

/// A quoted run this long from a key or a token is a leak, not chance.
const LEAK_RUN: usize = 20;

/// Where the credentials file "is" for the in-memory loads.
const CREDENTIALS_PATH: &str = "/run/secrets/lanyard/credentials.json";

/// The fields of a credentials file, the JSON downloaded from the Portal.
const FILE_FIELDS: &[&str] = &[
    "type",
    "client_id",
    "private_key",
    "iam_audience",
    "token_uri",
    "organization_id",
];

static PKCS8: LazyLock<String> = LazyLock::new(|| fixture("rsa2048.pkcs8.pem"));
static PKCS1: LazyLock<String> = LazyLock::new(|| fixture("rsa2048.pkcs1.pem"));

/// No failure files: a case worth keeping becomes an explicit test below.
fn cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------
// What a clear, secret-free error looks like.
// ---------------------------------------------------------------------------

/// Every `LEAK_RUN`-character run of `secret`.
fn runs(secret: &str) -> Vec<String> {
    let chars: Vec<char> = secret.chars().collect();
    chars
        .windows(LEAK_RUN)
        .map(|run| run.iter().collect())
        .collect()
}

/// Every `LEAK_RUN`-character run of a key's body: its lines without the
/// PEM armour (which error messages may name), literal `\n` read as a
/// line break.
fn secret_runs(pem: &str) -> Vec<String> {
    pem.replace("\\n", "\n")
        .lines()
        .map(str::trim)
        .filter(|line| !line.contains("-----"))
        .flat_map(runs)
        .collect()
}

fn assert_quotes_none(text: &str, runs: &[String]) -> Result<(), TestCaseError> {
    if let Some(run) = runs.iter().find(|run| text.contains(run.as_str())) {
        return Err(TestCaseError::fail(format!(
            "quotes secret material {run:?}: {text:?}"
        )));
    }
    Ok(())
}

/// The ways a value of `setting` can have reached lanyard, as its error
/// lines spell them.
fn is_source_of(setting: &dyn AnySetting, source: &str) -> bool {
    source == format!("environment variable {}", setting.env())
        || setting
            .flag()
            .is_some_and(|flag| source == format!("flag {flag}"))
        || source.starts_with(&format!("key `{}` in ", setting.key()))
}

/// Checks one problem line: it starts with the setting at fault (its
/// variable, or the config or credentials file), says where the value came
/// from when there was one, and gives a reason.
fn check_problem_line(line: &str) -> Result<(), String> {
    let fail = |why: &str| Err(format!("{why}: {line:?}"));
    if line.chars().any(char::is_control) {
        return fail("control character in an error line");
    }
    let reason = |why: &str| {
        if why.trim().is_empty() {
            fail("no reason given")
        } else {
            Ok(())
        }
    };
    // `... (<source>): <why>`, the source satisfying `ok`. A path before
    // or inside the source may itself hold " (" or "): ", so every split
    // is tried.
    let sourced = |rest: &str, ok: &dyn Fn(&str) -> bool| {
        let found = rest.match_indices(" (").any(|(open, _)| {
            let after = &rest[open + 2..];
            after
                .match_indices("): ")
                .any(|(close, _)| ok(&after[..close]) && !after[close + 3..].trim().is_empty())
        });
        if found {
            Ok(())
        } else {
            fail("no source naming the setting, or no reason")
        }
    };
    if let Some(why) = line.strip_prefix("no credentials: ") {
        return reason(why);
    }
    if let Some(rest) = line.strip_prefix("config file ") {
        if let Some((_, why)) = rest.split_once(": unknown key `") {
            return reason(why);
        }
        return sourced(rest, &|source| {
            source == format!("environment variable {}", config::CONFIG_ENV)
                || source == "flag --config"
        });
    }
    if let Some(rest) = line.strip_prefix("credentials file ") {
        return sourced(rest, &|source| {
            is_source_of(&config::CREDENTIALS_FILE, source)
        });
    }
    if let Some(why) = line.strip_prefix(&format!("{}: ", config::CONFIG_ENV)) {
        return reason(why);
    }
    for setting in SETTINGS {
        let Some(rest) = line.strip_prefix(setting.env()) else {
            continue;
        };
        // A missing value has no source to name.
        if let Some(why) = rest.strip_prefix(": ") {
            return reason(why);
        }
        if rest.starts_with(" (") {
            return sourced(rest, &|source| is_source_of(*setting, source));
        }
    }
    fail("names no setting")
}

/// A settings or credentials error: at least one line, every printed line
/// a clear problem, none quoting any of `secrets`.
fn check_config_error(err: &ConfigError, secrets: &[String]) -> Result<(), TestCaseError> {
    prop_assert!(!err.lines().is_empty(), "an error without a problem");
    let runs: Vec<String> = secrets.iter().flat_map(|s| secret_runs(s)).collect();
    // Each problem is printed as a line of its own; splitting the joined
    // text shows an embedded line break as a line that names nothing.
    for line in err.to_string().lines() {
        check_problem_line(line).map_err(TestCaseError::fail)?;
        assert_quotes_none(line, &runs)?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Shared strategies.
// ---------------------------------------------------------------------------

/// Any text up to `max` characters, control characters and all.
fn text(max: usize) -> impl Strategy<Value = String> + Clone {
    prop::collection::vec(any::<char>(), 0..=max).prop_map(String::from_iter)
}

fn json_key() -> impl Strategy<Value = String> + Clone {
    prop_oneof![select(FILE_FIELDS).prop_map(String::from), text(12)]
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> + Clone {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        text(40).prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((json_key(), inner), 0..4)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

/// The start of `text`, up to a byte position `at` picks (moved back to a
/// character boundary).
fn cut(text: &str, at: Index) -> &str {
    let mut end = at.index(text.len() + 1);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[test]
fn deeply_nested_input_is_refused_without_overflowing_the_stack() {
    // Generated input is never this deep; an overflow would abort the whole
    // process rather than fail one request or one start-up.
    let depth = 100_000;
    let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let err = credentials::load_from(&file_settings(), Some(json.as_bytes())).unwrap_err();
    assert!(err.lines()[0].contains("is not valid JSON"), "{err}");
    let err = exchange::interpret(StatusCode::OK, &HeaderMap::new(), json.as_bytes(), now());
    assert_eq!(
        err.unwrap_err().to_string(),
        "the token response is malformed: the body is not JSON"
    );

    let dir = tempfile::tempdir().expect("temp dir");
    let toml = format!("listen = {}{}", "[".repeat(depth), "]".repeat(depth));
    let path = support::write(dir.path(), "deep.toml", &toml);
    let env = support::env(&[(config::CONFIG_ENV, path.to_str().expect("utf-8 path"))]);
    let err = Config::load(&Flags::default(), &env, Requirement::AdminOnly).unwrap_err();
    assert!(err.lines()[0].contains("is not valid TOML"), "{err}");
}
