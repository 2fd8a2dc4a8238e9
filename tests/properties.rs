//! Property tests for the parsers that read untrusted input: the credentials
//! file, the private key, the token endpoint's answer and the settings.
//! Whatever they are given, they must not panic; a refusal must say what is
//! wrong and where, one line per problem, and never quote key material or a
//! token. The plain tests after a property pin cases it found.

mod support;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use lanyard::config::{
    self, AnySetting, Config, ConfigError, CredentialSettings, Flags, Requirement, SETTINGS,
    Source, Sourced,
};
use lanyard::credentials::{self, parse_private_key};
use lanyard::token::exchange::{self, MAX_TOKEN_LIFETIME};
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};
use support::fixture;

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

// ---------------------------------------------------------------------------
// Private keys.
// ---------------------------------------------------------------------------

fn der_of(pem: &str) -> Vec<u8> {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("fixture is PEM")
}

fn armour(label: &str, der: &[u8], newline: &str, end: bool) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----{newline}");
    for chunk in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).expect("base64 is ASCII"));
        out.push_str(newline);
    }
    if end {
        out.push_str(&format!("-----END {label}-----{newline}"));
    }
    out
}

const LABELS: &[&str] = &[
    "PRIVATE KEY",
    "RSA PRIVATE KEY",
    "ENCRYPTED PRIVATE KEY",
    "EC PRIVATE KEY",
    "DSA PRIVATE KEY",
    "OPENSSH PRIVATE KEY",
    "PUBLIC KEY",
    "RSA PUBLIC KEY",
    "CERTIFICATE",
    "",
];

/// A way to damage the fixture key.
#[derive(Debug, Clone)]
enum Damage {
    FlipDerByte(Index, u8),
    TruncateDer(Index),
    TruncateText(Index),
    ReplaceChar(Index, char),
    DropLine(Index),
    Relabel(&'static str),
}

fn damage() -> impl Strategy<Value = Damage> + Clone {
    prop_oneof![
        (any::<Index>(), 1..=u8::MAX).prop_map(|(at, mask)| Damage::FlipDerByte(at, mask)),
        any::<Index>().prop_map(Damage::TruncateDer),
        any::<Index>().prop_map(Damage::TruncateText),
        (any::<Index>(), any::<char>()).prop_map(|(at, c)| Damage::ReplaceChar(at, c)),
        any::<Index>().prop_map(Damage::DropLine),
        select(LABELS).prop_map(Damage::Relabel),
    ]
}

fn damaged(pem: &str, damage: &Damage) -> String {
    let label = if pem.contains("RSA PRIVATE KEY") {
        "RSA PRIVATE KEY"
    } else {
        "PRIVATE KEY"
    };
    let der = der_of(pem);
    match damage {
        Damage::FlipDerByte(at, mask) => {
            let mut der = der;
            let i = at.index(der.len());
            der[i] ^= mask;
            armour(label, &der, "\n", true)
        }
        Damage::TruncateDer(at) => armour(label, &der[..at.index(der.len())], "\n", true),
        Damage::TruncateText(at) => cut(pem, *at).to_string(),
        Damage::ReplaceChar(at, c) => {
            let i = at.index(pem.len());
            pem.chars()
                .enumerate()
                .map(|(j, old)| if i == j { *c } else { old })
                .collect()
        }
        Damage::DropLine(at) => {
            let lines: Vec<&str> = pem.lines().collect();
            let drop = at.index(lines.len());
            lines
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != drop)
                .map(|(_, l)| format!("{l}\n"))
                .collect()
        }
        Damage::Relabel(to) => armour(to, &der, "\n", true),
    }
}

/// The fixture key (PKCS#8 or PKCS#1) with one thing wrong with it.
fn damaged_key() -> impl Strategy<Value = String> + Clone {
    (any::<bool>(), damage()).prop_map(|(pkcs1, damage)| {
        let pem = if pkcs1 { &*PKCS1 } else { &*PKCS8 };
        damaged(pem, &damage)
    })
}

/// PEM armour, of any label, around noise (sometimes starting like a DER
/// SEQUENCE, to get past the first byte of the DER parser).
fn armoured_noise() -> impl Strategy<Value = String> + Clone {
    (
        select(LABELS),
        any::<bool>(),
        prop::collection::vec(any::<u8>(), 16..600),
        select(&["\n", "\r\n", "\\n"][..]),
        any::<bool>(),
    )
        .prop_map(|(label, sequence, mut noise, newline, end)| {
            if sequence {
                let len = (noise.len() - 4) as u16;
                noise[..4].copy_from_slice(&[0x30, 0x82, (len >> 8) as u8, len as u8]);
            }
            armour(label, &noise, newline, end)
        })
}

/// Text shaped like PEM: armour lines, base64-ish runs, both kinds of line
/// break, in any order.
const PEM_LIKE: &str = concat!(
    "(-----(BEGIN|END) (RSA |EC |ENCRYPTED |OPENSSH )?(PRIVATE|PUBLIC) KEY-----",
    "|[A-Za-z0-9+/=]{0,70}|\\\\n|\r?\n| |Proc-Type: 4,ENCRYPTED){0,16}",
);

/// Anything someone might put where a key goes.
fn key_input() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        text(200),
        PEM_LIKE,
        damaged_key(),
        armoured_noise(),
        Just(PKCS8.clone()),
        Just(PKCS8.replace('\n', "\\n")),
    ]
}

fn check_key(input: &str) -> Result<(), TestCaseError> {
    match parse_private_key(input) {
        Ok(key) => prop_assert!(key.bits() >= 2048, "accepted a {}-bit key", key.bits()),
        Err(err) => {
            let shown = err.to_string();
            prop_assert!(!shown.trim().is_empty(), "empty key error");
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            assert_quotes_none(&shown, &secret_runs(input))?;
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn private_key_of_any_text_is_refused_without_echoing_it(input in key_input()) {
        check_key(&input)?;
    }

    #[test]
    fn damaged_private_key_is_refused_without_echoing_its_body(input in damaged_key()) {
        check_key(&input)?;
    }

    #[test]
    fn valid_key_is_accepted_with_any_line_break_style(
        breaks in prop::collection::vec(select(&["\n", "\\n", "\r\n"][..]), 32),
        padding in select(&["", " ", "\n", "\t\n  "][..]),
        pkcs1 in any::<bool>(),
    ) {
        let pem = if pkcs1 { &*PKCS1 } else { &*PKCS8 };
        let mut input = padding.to_string();
        for (i, line) in pem.lines().enumerate() {
            input.push_str(line);
            input.push_str(breaks[i % breaks.len()]);
        }
        input.push_str(padding);
        let key = parse_private_key(&input);
        prop_assert!(key.is_ok(), "{:?} for {input:?}", key.err());
        prop_assert_eq!(key.map(|k| k.bits()).ok(), Some(2048));
    }
}

// ---------------------------------------------------------------------------
// The credentials file.
// ---------------------------------------------------------------------------

fn file_settings() -> CredentialSettings {
    CredentialSettings {
        file: Some(Sourced {
            value: PathBuf::from(CREDENTIALS_PATH),
            source: Source::Env(config::CREDENTIALS_FILE.env),
        }),
        ..CredentialSettings::default()
    }
}

fn valid_file(key: &str) -> serde_json::Map<String, Value> {
    let Value::Object(object) = json!({
        "type": "service_account",
        "client_id": "sa-test-client",
        "private_key": key,
        "iam_audience": "https://iam.example.com",
        "token_uri": "https://iam.example.com/token",
        "organization_id": "org-test",
    }) else {
        unreachable!("an object literal")
    };
    object
}

/// One change to a valid credentials file.
#[derive(Debug, Clone)]
enum Edit {
    Remove,
    Set(Value),
    Key(String),
}

fn edit() -> impl Strategy<Value = (&'static str, Edit)> + Clone {
    prop_oneof![
        (
            select(FILE_FIELDS),
            prop_oneof![
                Just(Edit::Remove),
                json_value().prop_map(Edit::Set),
                text(60).prop_map(|s| Edit::Set(Value::String(s))),
                select(&["", "  ", "\n"][..]).prop_map(|s| Edit::Set(Value::String(s.into()))),
            ],
        ),
        prop_oneof![damaged_key(), armoured_noise()]
            .prop_map(|key| ("private_key", Edit::Key(key))),
    ]
}

fn edited(field: &str, edit: &Edit) -> serde_json::Map<String, Value> {
    let mut file = valid_file(&PKCS8);
    match edit {
        Edit::Remove => {
            file.remove(field);
        }
        Edit::Set(value) => {
            file.insert(field.into(), value.clone());
        }
        Edit::Key(key) => {
            file.insert(field.into(), Value::String(key.clone()));
        }
    }
    file
}

/// The loaded credentials, or a clear error that quotes no key.
fn check_credentials(bytes: &[u8], keys: &[String]) -> Result<(), TestCaseError> {
    match credentials::load_from(&file_settings(), Some(bytes)) {
        Ok(creds) => {
            let file: Value = serde_json::from_slice(bytes).expect("accepted file is JSON");
            prop_assert_eq!(
                file["type"].as_str().map(str::trim),
                Some("service_account")
            );
            prop_assert!(!creds.client_id.is_empty() && !creds.organization_id.is_empty());
            prop_assert!(!creds.iam_audience.is_empty());
            prop_assert!(creds.key.bits() >= 2048);
        }
        Err(err) => check_config_error(&err, keys)?,
    }
    Ok(())
}

/// A valid file's bytes, cut short or with one byte overwritten.
fn damaged_json() -> impl Strategy<Value = Vec<u8>> {
    (any::<bool>(), any::<Index>(), any::<u8>()).prop_map(|(truncate, at, byte)| {
        let mut bytes = Value::Object(valid_file(&PKCS8)).to_string().into_bytes();
        let i = at.index(bytes.len());
        if truncate {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        bytes
    })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn credentials_file_of_any_bytes_gives_a_clear_error_not_a_panic(
        bytes in prop_oneof![prop::collection::vec(any::<u8>(), 0..512), damaged_json()],
    ) {
        check_credentials(&bytes, std::slice::from_ref(&*PKCS8))?;
    }

    #[test]
    fn credentials_file_of_any_json_gives_a_clear_error_not_a_panic(value in json_value()) {
        check_credentials(value.to_string().as_bytes(), &[])?;
    }

    #[test]
    fn near_valid_credentials_file_names_the_broken_field_without_quoting_the_key(
        (field, edit) in edit(),
        pretty in any::<bool>(),
    ) {
        let file = Value::Object(edited(field, &edit));
        let bytes = if pretty {
            serde_json::to_vec_pretty(&file).expect("serialises")
        } else {
            serde_json::to_vec(&file).expect("serialises")
        };
        let mut keys = vec![PKCS8.clone()];
        if let Edit::Key(key) = &edit {
            keys.push(key.clone());
        }
        check_credentials(&bytes, &keys)?;
        if let Err(err) = credentials::load_from(&file_settings(), Some(&bytes)) {
            let shown = err.to_string();
            prop_assert!(shown.contains(field), "`{field}` not named in {shown:?}");
        }
    }
}

#[test]
fn credentials_file_field_with_control_characters_is_shown_escaped() {
    // Found by the property above: the `type` value was quoted raw, so a
    // NUL or a line break reached stderr inside the problem line.
    let bytes = br#"{"type":"!\u0000\n\u00a1"}"#;
    let err = credentials::load_from(&file_settings(), Some(bytes)).unwrap_err();
    assert_eq!(
        err.lines(),
        [format!(
            "credentials file {CREDENTIALS_PATH} (environment variable SA_CREDENTIALS_FILE): field `type` is `!\\u{{0}}\\n¡`, expected `service_account`"
        )]
    );
}

#[test]
fn valid_credentials_file_loads() {
    let bytes = Value::Object(valid_file(&PKCS8)).to_string();
    let creds = credentials::load_from(&file_settings(), Some(bytes.as_bytes())).unwrap();
    assert_eq!(creds.client_id, "sa-test-client");
    assert_eq!(creds.key.bits(), 2048);
}

// ---------------------------------------------------------------------------
// The token endpoint's answer.
// ---------------------------------------------------------------------------

/// The fixed "now" of every interpretation.
fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_000)
}

/// A `Retry-After` header, and what it said.
#[derive(Debug, Clone)]
enum RetryAfter {
    Absent,
    Seconds(u64, &'static str),
    /// An HTTP-date this many seconds from now.
    Date(i64),
    Text(String),
    Bytes(Vec<u8>),
}

impl RetryAfter {
    fn header(&self) -> Option<HeaderValue> {
        match self {
            RetryAfter::Absent => None,
            RetryAfter::Seconds(n, pad) => HeaderValue::from_str(&format!("{pad}{n}{pad}")).ok(),
            RetryAfter::Date(offset) => {
                let at = if *offset >= 0 {
                    now() + Duration::from_secs(offset.unsigned_abs())
                } else {
                    now() - Duration::from_secs(offset.unsigned_abs())
                };
                HeaderValue::from_str(&httpdate::fmt_http_date(at)).ok()
            }
            RetryAfter::Text(text) => HeaderValue::from_str(text).ok(),
            RetryAfter::Bytes(bytes) => HeaderValue::from_bytes(bytes).ok(),
        }
    }

    /// The delay the header asked for, read per RFC 9110 §10.2.3:
    /// delay-seconds or an HTTP-date; `None` when it asked for nothing.
    fn said(&self) -> Option<Duration> {
        match self {
            RetryAfter::Absent => None,
            RetryAfter::Seconds(n, _) => Some(Duration::from_secs(*n)),
            RetryAfter::Date(offset) => Some(Duration::from_secs((*offset).max(0) as u64)),
            RetryAfter::Text(_) | RetryAfter::Bytes(_) => {
                let header = self.header()?;
                let text = header.to_str().ok()?.trim();
                if let Ok(seconds) = text.parse::<u64>() {
                    return Some(Duration::from_secs(seconds));
                }
                let at = httpdate::parse_http_date(text).ok()?;
                Some(at.duration_since(now()).unwrap_or(Duration::ZERO))
            }
        }
    }
}

fn retry_after() -> impl Strategy<Value = RetryAfter> {
    const TEN_YEARS: i64 = 10 * 365 * 24 * 3600;
    prop_oneof![
        Just(RetryAfter::Absent),
        (any::<u64>(), select(&["", " ", "\t"][..])).prop_map(|(n, p)| RetryAfter::Seconds(n, p)),
        (0..100_000u64).prop_map(|n| RetryAfter::Seconds(n, "")),
        (-TEN_YEARS..TEN_YEARS).prop_map(RetryAfter::Date),
        prop_oneof![
            text(40),
            "[-+ ]?[0-9]{0,25}(\\.[0-9]{0,3})?[ a-z]{0,3}",
            concat!(
                "(Mon|Sun|Sunday|Xyz), [0-9]{1,2}[ -](Jan|Feb|Foo)[ -][0-9]{2,5} ",
                "[0-9]{2}:[0-9]{2}:[0-9]{2} (GMT|UTC|)",
            ),
            Just("Sun Nov  6 08:49:37 1994".to_string()),
            Just("Sunday, 06-Nov-94 08:49:37 GMT".to_string()),
            Just("Fri, 31 Dec 9999 23:59:59 GMT".to_string()),
        ]
        .prop_map(RetryAfter::Text),
        prop::collection::vec(any::<u8>(), 0..40).prop_map(RetryAfter::Bytes),
    ]
}

/// The error kind `interpret` must give for a refused answer of `status`.
fn kind_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=299 => "malformed",
        429 => "rate_limited",
        400..=499 => "rejected",
        500..=599 => "server_error",
        _ => "unexpected_status",
    }
}

fn check_answer(status: StatusCode, retry: &RetryAfter, body: &[u8]) -> Result<(), TestCaseError> {
    let mut headers = HeaderMap::new();
    if let Some(value) = retry.header() {
        headers.insert(header::RETRY_AFTER, value);
    }
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let token_in_body = parsed
        .as_ref()
        .and_then(|v| v.get("access_token")?.as_str())
        .map(str::to_string);
    match exchange::interpret(status, &headers, body, now()) {
        Ok(issued) => {
            prop_assert!(status.is_success(), "a token from HTTP {status}");
            let token = issued.access_token.expose();
            prop_assert!(!token.is_empty());
            prop_assert!(token.bytes().all(|b| b.is_ascii_graphic()), "{token:?}");
            let authorization = format!("Bearer {token}");
            prop_assert!(HeaderValue::from_str(&authorization).is_ok());
            prop_assert_eq!(Some(token), token_in_body.as_deref());
            let token_type = parsed.as_ref().and_then(|v| v.get("token_type")?.as_str());
            prop_assert!(
                token_type.is_some_and(|t| t.eq_ignore_ascii_case("bearer")),
                "accepted token_type {token_type:?}"
            );
            prop_assert!(issued.lifetime > Duration::ZERO);
            prop_assert!(issued.lifetime <= MAX_TOKEN_LIFETIME);
        }
        Err(err) => {
            let shown = err.to_string();
            prop_assert!(!shown.trim().is_empty(), "empty error");
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            prop_assert_eq!(err.kind(), kind_for(status), "{}", shown);
            if let Some(token) = token_in_body.filter(|t| t.chars().count() >= LEAK_RUN) {
                assert_quotes_none(&shown, &runs(&token))?;
            }
            if let Some(delay) = err.retry_after() {
                let said = retry.said();
                prop_assert!(
                    said.is_some_and(|said| delay <= said),
                    "retry after {delay:?}, the header said {said:?}"
                );
            }
        }
    }
    Ok(())
}

/// What a near-valid token response does with one of its fields.
#[derive(Debug, Clone)]
enum FieldEdit {
    Keep,
    Remove,
    Set(Value),
    /// A literal spliced into the JSON text, for numbers `Value` cannot hold.
    Raw(&'static str),
    /// The value of `access_token`, as a confused endpoint might send it.
    CopyToken,
}

const RAW_NUMBERS: &[&str] = &[
    "99999999999999999999",
    "18446744073709551616",
    "-9223372036854775809",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "-0.0",
    "1.0",
    "1E2",
    "0.0000",
    "86400.0",
    "86401",
    "1.7976931348623157e308",
];

/// b64token (RFC 6750 §2.1) of a realistic length.
const TOKEN: &str = "[A-Za-z0-9._~+/-]{20,64}=?";

fn field_edit(values: BoxedStrategy<Value>) -> impl Strategy<Value = FieldEdit> {
    prop_oneof![
        12 => Just(FieldEdit::Keep),
        1 => Just(FieldEdit::Remove),
        3 => values.prop_map(FieldEdit::Set),
        1 => json_value().prop_map(FieldEdit::Set),
        1 => select(RAW_NUMBERS).prop_map(FieldEdit::Raw),
        1 => Just(FieldEdit::CopyToken),
    ]
}

#[derive(Debug, Clone)]
struct TokenResponse {
    token: String,
    access_token: FieldEdit,
    token_type: FieldEdit,
    expires_in: FieldEdit,
    extra: Vec<(String, Value)>,
    padding: &'static str,
}

impl TokenResponse {
    fn body(&self) -> Vec<u8> {
        const RAW: &str = "\u{1}raw\u{1}";
        let mut object = serde_json::Map::new();
        for (key, value) in &self.extra {
            object.insert(key.clone(), value.clone());
        }
        let fields = [
            ("access_token", &self.access_token, json!(self.token)),
            ("token_type", &self.token_type, json!("Bearer")),
            ("expires_in", &self.expires_in, json!(3600)),
        ];
        let mut raws = Vec::new();
        for (name, edit, valid) in fields {
            let value = match edit {
                FieldEdit::Keep => valid,
                FieldEdit::Remove => continue,
                FieldEdit::Set(value) => value.clone(),
                FieldEdit::Raw(raw) => {
                    raws.push(*raw);
                    Value::String(format!("{RAW}{}", raws.len() - 1))
                }
                FieldEdit::CopyToken => json!(self.token),
            };
            object.insert(name.into(), value);
        }
        // A copy is of what `access_token` ended up holding.
        if let Some(token) = object.get("access_token").cloned() {
            for (name, edit) in [
                ("token_type", &self.token_type),
                ("expires_in", &self.expires_in),
            ] {
                if matches!(edit, FieldEdit::CopyToken) {
                    object.insert(name.into(), token.clone());
                }
            }
        }
        let mut text = Value::Object(object).to_string();
        for (i, raw) in raws.iter().enumerate() {
            text = text.replace(&format!("\"\\u0001raw\\u0001{i}\""), raw);
        }
        format!("{}{text}{}", self.padding, self.padding).into_bytes()
    }
}

fn token_response() -> impl Strategy<Value = TokenResponse> {
    let token_types = prop_oneof![
        select(
            &[
                "Bearer", "bearer", "BEARER", "bEaReR", " Bearer", "Bearer ", "mac", "DPoP", ""
            ][..]
        )
        .prop_map(Value::from),
        text(40).prop_map(Value::String),
    ]
    .boxed();
    let lifetimes = prop_oneof![
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        (-10i64..100_000).prop_map(Value::from),
        (-10i64..100_000).prop_map(|n| Value::String(n.to_string())),
        "[-+ ]?[0-9]{0,22}(\\.[0-9]{0,2})?(e[0-9])? ?".prop_map(Value::String),
        text(20).prop_map(Value::String),
    ]
    .boxed();
    let tokens = prop_oneof![
        TOKEN.prop_map(Value::String),
        text(40).prop_map(Value::String),
    ]
    .boxed();
    (
        TOKEN,
        field_edit(tokens),
        field_edit(token_types),
        field_edit(lifetimes),
        prop::collection::vec(("[a-z_]{1,16}", json_value()), 0..3),
        select(&["", " ", "\n", "\u{feff}"][..]),
    )
        .prop_map(
            |(token, access_token, token_type, expires_in, extra, padding)| TokenResponse {
                token,
                access_token,
                token_type,
                expires_in,
                extra,
                padding,
            },
        )
}

fn any_status() -> impl Strategy<Value = StatusCode> {
    prop_oneof![
        (100u16..=999),
        select(&[200u16, 201, 204, 400, 401, 403, 429, 500, 502, 503][..]),
    ]
    .prop_map(|code| StatusCode::from_u16(code).expect("100..=999 is a status"))
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn token_answer_of_any_status_and_body_gives_a_token_or_a_clear_error(
        status in any_status(),
        retry in retry_after(),
        body in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..256),
            json_value().prop_map(|v| v.to_string().into_bytes()),
        ],
    ) {
        check_answer(status, &retry, &body)?;
    }

    #[test]
    fn near_valid_token_response_is_accepted_only_when_sound_and_never_quoted(
        status in prop_oneof![3 => Just(StatusCode::OK), 1 => any_status()],
        response in token_response(),
        truncate in prop::option::weighted(0.1, any::<Index>()),
    ) {
        let mut body = response.body();
        if let Some(at) = truncate {
            body.truncate(at.index(body.len() + 1));
        }
        check_answer(status, &RetryAfter::Absent, &body)?;
    }

    #[test]
    fn retry_after_never_exceeds_what_the_header_said(
        status in select(&[429u16, 500, 502, 503, 504, 599][..]),
        retry in retry_after(),
    ) {
        let status = StatusCode::from_u16(status).expect("a status");
        check_answer(status, &retry, b"")?;
        if let RetryAfter::Seconds(..) | RetryAfter::Date(_) = retry {
            // A well-formed header is honoured exactly, not just bounded.
            let value = retry.header().expect("well-formed");
            let headers = HeaderMap::from_iter([(header::RETRY_AFTER, value)]);
            let err = exchange::interpret(status, &headers, b"", now()).expect_err("error status");
            prop_assert_eq!(err.retry_after(), retry.said());
        }
    }
}

#[test]
fn token_type_carrying_the_token_is_refused_without_quoting_it() {
    // Found by the property above: the first 32 characters of `token_type`
    // were quoted, and a confused endpoint may put the token there.
    let token = "AaAA+0A-a~aA-a+a+aaa";
    let body = json!({"access_token": token, "token_type": token, "expires_in": 3600});
    let err = exchange::interpret(
        StatusCode::OK,
        &HeaderMap::new(),
        body.to_string().as_bytes(),
        now(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token response is malformed: `token_type` is not Bearer"
    );
}

// ---------------------------------------------------------------------------
// Settings.
// ---------------------------------------------------------------------------

/// Values that are right, or nearly right, for some setting.
fn plausible() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        select(
            &[
                "true",
                "false",
                "yes",
                "0",
                "on",
                "TRUE",
                "maybe",
                "json",
                "text",
                "xml",
                "127.0.0.1:0",
                "0.0.0.0:8080",
                "[::1]:9090",
                "localhost:80",
                "10.0.0.1",
                "https://api.example.com/v1",
                "http://127.0.0.1:9/token",
                "http://api.example.com",
                "https://user:pw@x.example",
                "https://x.example/#frag",
                "https://x.example/?q=1",
                "ftp://x.example",
                "30",
                "90s",
                "5m",
                "1h",
                "250ms",
                "2h",
                "-1",
                "1.5s",
                "1d",
                "",
                " ",
                "18446744073709551615",
                "18446744073709551616h",
                "5 m",
            ][..]
        )
        .prop_map(String::from),
        (
            any::<u64>(),
            select(&["", "s", "ms", "m", "h", "d", " s"][..])
        )
            .prop_map(|(n, unit)| format!("{n}{unit}")),
    ]
}

/// A TOML basic string holding `s`.
fn toml_string(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn toml_value() -> impl Strategy<Value = String> + Clone {
    prop_oneof![
        text(30).prop_map(|s| toml_string(&s)),
        plausible().prop_map(|s| toml_string(&s)),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<bool>().prop_map(|b| b.to_string()),
        select(
            &[
                "1.5",
                "inf",
                "nan",
                "-0.0",
                "1e3",
                "[1, \"a\"]",
                "{ a = 1 }",
                "1979-05-27"
            ][..]
        )
        .prop_map(String::from),
    ]
}

/// Text shaped like TOML: punctuation, escapes and multi-line quotes.
const TOML_LIKE: &str = "([a-z_ =\"'\\[\\]{}.,#\n0-9-]|\\\\u[0-9A-F]{0,4}|\"\"\"){0,60}";

/// A config file: TOML text, maybe cut short, and the private key it holds.
fn toml_file() -> impl Strategy<Value = (String, Option<String>)> {
    let key = prop_oneof![
        text(30).prop_map(|s| toml_string(&s)),
        "[a-z_]{1,16}",
        select(SETTINGS).prop_map(|s| s.key().to_string()),
    ];
    let structured = (
        prop::collection::vec((key, toml_value()), 0..8),
        prop::option::of(key_input()),
        prop::option::weighted(0.3, any::<Index>()),
    )
        .prop_map(|(pairs, private_key, cut_at)| {
            let mut text = String::new();
            if let Some(pem) = &private_key {
                text.push_str(&format!("private_key = {}\n", toml_string(pem)));
            }
            for (k, v) in pairs {
                text.push_str(&format!("{k} = {v}\n"));
            }
            let text = match cut_at {
                Some(at) => cut(&text, at).to_string(),
                None => text,
            };
            (text, private_key)
        });
    prop_oneof![
        1 => text(200).prop_map(|t| (t, None)),
        1 => TOML_LIKE.prop_map(|t| (t, None)),
        3 => structured,
    ]
}

/// The value given to one environment variable or flag, before the files
/// it names are written.
#[derive(Debug, Clone)]
enum Given {
    Text(String),
    /// A name inside the case's directory (the file may not exist).
    PathIn(String),
    CredentialsFile(Vec<u8>, Vec<String>),
    ConfigFile(String, Option<String>),
}

fn credentials_body() -> impl Strategy<Value = (Vec<u8>, Vec<String>)> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..128).prop_map(|b| (b, vec![])),
        edit().prop_map(|(field, edit)| {
            let mut keys = vec![PKCS8.clone()];
            if let Edit::Key(key) = &edit {
                keys.push(key.clone());
            }
            (
                Value::Object(edited(field, &edit)).to_string().into_bytes(),
                keys,
            )
        }),
    ]
}

fn given_for(name: &'static str) -> BoxedStrategy<Given> {
    // File names stay inside the case's directory: a generated path must
    // not wander onto /dev/zero.
    let path_in = "[^/]{1,20}".prop_map(Given::PathIn);
    let text = prop_oneof![1 => text(40), 2 => plausible()].prop_map(Given::Text);
    match name {
        "SA_PRIVATE_KEY" => key_input().prop_map(Given::Text).boxed(),
        "SA_CREDENTIALS_FILE" => prop_oneof![
            3 => credentials_body().prop_map(|(b, keys)| Given::CredentialsFile(b, keys)),
            1 => path_in,
        ]
        .boxed(),
        config::CONFIG_ENV => prop_oneof![
            3 => toml_file().prop_map(|(t, key)| Given::ConfigFile(t, key)),
            1 => path_in,
        ]
        .boxed(),
        "LANYARD_CA_FILE" => prop_oneof![path_in, text].boxed(),
        _ => text.boxed(),
    }
}

#[derive(Debug, Clone)]
struct SettingsCase {
    /// Start from settings that work, so the overrides are what is tested.
    sound_base: bool,
    env: Vec<(&'static str, Given)>,
    flags: Vec<(&'static dyn AnySetting, Given)>,
    need: Requirement,
}

fn settings_case() -> impl Strategy<Value = SettingsCase> {
    let mut names: Vec<&'static str> = SETTINGS.iter().map(|s| s.env()).collect();
    names.push(config::CONFIG_ENV);
    let env_entry =
        select(names).prop_flat_map(|name| given_for(name).prop_map(move |g| (name, g)));
    let flagged: Vec<&'static dyn AnySetting> = SETTINGS
        .iter()
        .copied()
        .filter(|s| s.flag().is_some())
        .collect();
    let flag_entry =
        select(flagged).prop_flat_map(|s| given_for(s.env()).prop_map(move |g| (s, g)));
    (
        any::<bool>(),
        prop_oneof![
            1 => Just(Vec::new()),
            3 => prop::collection::vec(env_entry, 1..5),
        ],
        prop_oneof![
            2 => Just(Vec::new()),
            1 => prop::collection::vec(flag_entry, 1..3),
        ],
        select(
            &[
                Requirement::Upstream,
                Requirement::NoUpstream,
                Requirement::Demo,
                Requirement::AdminOnly,
            ][..],
        ),
    )
        .prop_map(|(sound_base, env, flags, need)| SettingsCase {
            sound_base,
            env,
            flags,
            need,
        })
}

/// Writes the files a case names into `dir`; returns the value to set and
/// the secrets it carries.
fn materialise(given: &Given, dir: &Path, n: usize) -> (String, Vec<String>) {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    match given {
        Given::Text(text) => (text.clone(), vec![]),
        Given::PathIn(name) => (path(name), vec![]),
        Given::CredentialsFile(bytes, keys) => {
            let file = dir.join(format!("credentials-{n}.json"));
            std::fs::write(&file, bytes).expect("temp file written");
            (file.to_string_lossy().into_owned(), keys.clone())
        }
        Given::ConfigFile(text, key) => {
            let file = dir.join(format!("lanyard-{n}.toml"));
            std::fs::write(&file, text).expect("temp file written");
            (
                file.to_string_lossy().into_owned(),
                key.iter().cloned().collect(),
            )
        }
    }
}

fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "true" | "1" | "yes" | "on"
    )
}

proptest! {
    #![proptest_config(cases(128))]

    #[test]
    fn settings_of_any_values_give_a_config_or_named_problems_without_the_key(
        case in settings_case(),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut env = HashMap::new();
        let mut flags = Flags::default();
        let mut secrets = Vec::new();
        let mut remote_allowed = false;
        if case.sound_base {
            let file = Value::Object(valid_file(&PKCS8)).to_string();
            let file = support::write(dir.path(), "sound.json", &file);
            env.insert(
                config::SERVICE_API_URL.env.to_string(),
                "https://api.example.com/v1".to_string(),
            );
            env.insert(
                config::CREDENTIALS_FILE.env.to_string(),
                file.to_string_lossy().into_owned(),
            );
            secrets.push(PKCS8.clone());
        }
        for (n, (name, given)) in case.env.iter().enumerate() {
            let (value, carried) = materialise(given, dir.path(), n);
            secrets.extend(carried);
            if *name == config::PRIVATE_KEY.env {
                secrets.push(value.clone());
            }
            if *name == config::CONFIG_ENV {
                let text = std::fs::read_to_string(&value).unwrap_or_default();
                let table: toml::Table = text.parse().unwrap_or_default();
                remote_allowed |= table.get(config::ALLOW_REMOTE.key).is_some_and(|v| {
                    v.as_bool() == Some(true)
                        || v.as_str().is_some_and(truthy)
                        || v.as_integer() == Some(1)
                });
            }
            remote_allowed |= *name == config::ALLOW_REMOTE.env && truthy(&value);
            env.insert(name.to_string(), value);
        }
        for (n, (setting, given)) in case.flags.iter().enumerate() {
            let (value, carried) = materialise(given, dir.path(), 100 + n);
            secrets.extend(carried);
            remote_allowed |= setting.key() == config::ALLOW_REMOTE.key && truthy(&value);
            flags.set(*setting, Some(value));
        }

        match Config::load(&flags, &env, case.need) {
            Ok(config) => {
                prop_assert!(
                    config.listen.ip().is_loopback() || remote_allowed,
                    "listening on {} without {}", config.listen, config::ALLOW_REMOTE.env
                );
                // The credentials and TLS the command needs were read and
                // checked by the load itself: `wire` reads nothing more.
                let needs_credentials =
                    matches!(case.need, Requirement::Upstream | Requirement::NoUpstream);
                prop_assert_eq!(
                    config.account.is_some(),
                    needs_credentials && !config.demo
                );
                prop_assert_eq!(config.tls.is_some(), case.need != Requirement::AdminOnly);
            }
            Err(err) => check_config_error(&err, &secrets)?,
        }
    }

    #[test]
    fn duration_of_any_text_is_read_or_refused_with_a_reason(
        raw in prop_oneof![text(30), plausible(), "[0-9 ]{0,25}(ms|s|m|h|d|)"],
    ) {
        match config::parse_duration(&raw) {
            Ok(duration) => {
                let trimmed = raw.trim();
                if let Ok(seconds) = trimmed.parse::<u64>() {
                    prop_assert_eq!(duration, Duration::from_secs(seconds));
                }
            }
            // Quoted as given: `ConfigError` escapes what would not print.
            Err(why) => prop_assert!(
                why.contains("is not a duration") || why.contains("is longer than a day"),
                "{why:?}"
            ),
        }
    }

    #[test]
    fn duration_with_a_unit_is_read_as_written(
        n in prop_oneof![any::<u64>(), 0..100_000u64],
        unit in select(&["", "s", "ms", "m", "h"][..]),
    ) {
        let expected = match unit {
            "" | "s" => Duration::from_secs(n),
            "ms" => Duration::from_millis(n),
            "m" => Duration::from_secs(n.saturating_mul(60)),
            _ => Duration::from_secs(n.saturating_mul(3600)),
        };
        let raw = format!("{n}{unit}");
        if expected > Duration::from_secs(24 * 3600) {
            let refused = format!("`{raw}` is longer than a day, the most any duration may be");
            prop_assert_eq!(config::parse_duration(&raw), Err(refused));
        } else {
            prop_assert_eq!(config::parse_duration(&raw), Ok(expected));
        }
    }
}

#[test]
fn setting_values_with_control_characters_stay_on_their_own_line() {
    // Found by the property above: values were quoted raw, so a line break
    // in one printed a second line that could pass for another problem.
    let mut flags = Flags::default();
    flags.set(&config::LISTEN, Some("\u{7f}"));
    let env = support::env(&[("LANYARD_LOG_FORMAT", "xml\nSERVICE_API_URL: forged")]);
    let err = Config::load(&flags, &env, Requirement::AdminOnly).unwrap_err();
    assert_eq!(
        err.to_string().lines().collect::<Vec<_>>(),
        [
            "LANYARD_LISTEN (flag --listen): `\\u{7f}` is not an address with a port (like 127.0.0.1:8080 or [::1]:8080)",
            "LANYARD_LOG_FORMAT (environment variable LANYARD_LOG_FORMAT): `xml\\nSERVICE_API_URL: forged` is not a log format (use json or text)",
        ]
    );
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
