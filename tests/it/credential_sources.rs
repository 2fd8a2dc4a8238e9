//! Where each credential comes from, through the binary as users run it:
//! `SA_*` variables overriding single fields of the credentials file, the
//! order of the organization id's sources, and each unusable credential or
//! URL refused with exit 2 and a line naming the setting and its source
//! (keys and URLs in `credential_sources/keys_and_urls.rs`).

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod keys_and_urls;

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::Output;

use base64::Engine as _;
use lanyard::mock::{MockAccount, MockService};
use serde_json::Value;
use support::*;

/// Nothing secret may appear in what lanyard prints on its own: no line of
/// the key's body, no assertion, no token.
fn assert_no_secret(out: &str, key_pem: &str) {
    for line in key_pem
        .lines()
        .map(str::trim)
        .filter(|l| l.len() > 8 && !l.starts_with("-----"))
    {
        assert!(!out.contains(line), "key material in output:\n{out}");
    }
    assert!(!out.contains("eyJ"), "an assertion in output:\n{out}");
    assert!(!out.contains("mock-"), "a token in output:\n{out}");
}

/// Asserts that the run was refused as bad input with exactly `expected`.
fn assert_refused(out: &Output, expected: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr, format!("lanyard: {expected}\n"));
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert_no_secret(&stderr, &fixture("rsa2048.pkcs8.pem"));
}

/// `lanyard token` with nothing but a credentials file: the fixture
/// account's, changed by `mutate`. Returns the file's path and the output.
async fn token_from_file(
    mock: &MockService,
    dir: &Path,
    mutate: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> (String, Output) {
    let file = creds_file(mock, dir, "creds.json", mutate);
    let out = lanyard(&["token"], env(&[("SA_CREDENTIALS_FILE", &file)])).await;
    (file, out)
}

/// `lanyard token` with the fixture account's credentials file less
/// `field`: refused with exactly `expected`, no token requested.
async fn refused_without(field: &str, expected: &str) -> MockService {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = token_from_file(&mock, dir.path(), |f| {
        f.remove(field);
    })
    .await;
    assert_refused(&out, expected);
    assert_eq!(mock.counters().token_requests, 0);
    mock
}

/// `lanyard token` with the fixture account's settings and `name` set to
/// `value`.
async fn token_with(mock: &MockService, dir: &Path, name: &str, value: &str) -> Output {
    lanyard(&["token"], settings(mock, dir, &[(name, value)])).await
}

/// The access token `lanyard token` printed, after checking it succeeded.
fn printed_token(out: &Output) -> String {
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .strip_suffix('\n')
        .expect("one line")
        .to_string()
}

/// The fixture account's credentials file, changed by `mutate`, written to
/// `name` in `dir`; returns its path.
fn creds_file(
    mock: &MockService,
    dir: &Path,
    name: &str,
    mutate: impl FnOnce(&mut serde_json::Map<String, Value>),
) -> String {
    let mut value: Value =
        serde_json::from_str(&credentials_json(mock, &fixture("rsa2048.pkcs8.pem"))).unwrap();
    mutate(value.as_object_mut().unwrap());
    write_private(dir, name, &value.to_string())
        .to_str()
        .expect("utf-8 path")
        .to_string()
}

/// The fixture account, in another organization.
fn account_in(organization_id: &str) -> MockAccount {
    MockAccount {
        organization_id: organization_id.into(),
        ..account()
    }
}

async fn mock_with(account: MockAccount) -> MockService {
    let mock = MockService::start().await.expect("mock starts");
    mock.add_account(account);
    mock
}

// ---- SA_* variables override single fields of the file ----

#[tokio::test]
async fn sa_client_id_overrides_the_files_client_id_and_the_rest_still_comes_from_the_file() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (file, alone) = token_from_file(&mock, dir.path(), |f| {
        f.insert("client_id".into(), "sa-not-known-to-the-mock".into());
    })
    .await;
    assert_eq!(alone.status.code(), Some(1));
    assert_eq!(
        text(&alone.stderr),
        "lanyard: the token endpoint refused the request: HTTP 401 (invalid_client: unknown client)\n"
    );

    let out = lanyard(
        &["token"],
        env(&[("SA_CREDENTIALS_FILE", &file), ("SA_CLIENT_ID", CLIENT_ID)]),
    )
    .await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
    let seen = mock.last_accepted().unwrap();
    assert_eq!(seen.form["client_id"], CLIENT_ID);
    assert_eq!(seen.claims["iss"], CLIENT_ID);
    assert_eq!(seen.claims["sub"], CLIENT_ID);
    // The fields not overridden still come from the file.
    assert_eq!(seen.claims["aud"], mock.audience());
    assert_eq!(seen.form["organization_id"], ORGANIZATION_ID);
}

#[tokio::test]
async fn sa_token_uri_overrides_the_files_token_uri_and_the_files_client_id_is_still_used() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let closed = closed_port();
    let (file, alone) = token_from_file(&mock, dir.path(), |f| {
        f.insert(
            "token_uri".into(),
            format!("http://{closed}/oauth2/token").into(),
        );
    })
    .await;
    assert_eq!(alone.status.code(), Some(1));
    assert!(
        text(&alone.stderr).starts_with("lanyard: cannot connect to the token endpoint"),
        "{}",
        text(&alone.stderr)
    );
    assert_eq!(mock.counters().token_requests, 0);

    let out = lanyard(
        &["token"],
        env(&[
            ("SA_CREDENTIALS_FILE", &file),
            ("SA_TOKEN_URI", &mock.token_url()),
        ]),
    )
    .await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
    assert_eq!(mock.counters().token_requests, 1);
    let seen = mock.last_accepted().unwrap();
    assert_eq!(seen.form["client_id"], CLIENT_ID);
    assert_eq!(seen.form["organization_id"], ORGANIZATION_ID);
}

#[tokio::test]
async fn sa_private_key_with_literal_newlines_overrides_the_files_key() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    // A valid RSA key, but not the one the mock knows for the account.
    let stranger = lanyard::mock::generate_rsa_key().unwrap();
    let (file, alone) = token_from_file(&mock, dir.path(), |f| {
        f.insert(
            "private_key".into(),
            stranger.private_pem.expose().to_string().into(),
        );
    })
    .await;
    assert_eq!(alone.status.code(), Some(1));
    assert_eq!(
        text(&alone.stderr),
        "lanyard: the token endpoint refused the request: HTTP 401 (invalid_client: the assertion's signature does not verify with the account's key)\n"
    );

    // As a key pasted into a Kubernetes manifest or a .env file arrives.
    let escaped = fixture("rsa2048.pkcs8.pem").replace('\n', "\\n");
    assert!(!escaped.contains('\n'));
    let out = lanyard(
        &["token"],
        env(&[("SA_CREDENTIALS_FILE", &file), ("SA_PRIVATE_KEY", &escaped)]),
    )
    .await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
    assert_no_secret(&text(&out.stderr), &fixture("rsa2048.pkcs8.pem"));
    assert_no_secret(&text(&out.stderr), stranger.private_pem.expose());
}

#[tokio::test]
async fn sa_iam_audience_overrides_the_files_audience() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (file, alone) = token_from_file(&mock, dir.path(), |f| {
        f.insert(
            "iam_audience".into(),
            "https://elsewhere.example/iam".into(),
        );
    })
    .await;
    assert_eq!(alone.status.code(), Some(1));
    assert_eq!(
        text(&alone.stderr),
        "lanyard: the token endpoint refused the request: HTTP 401 (invalid_client: claim `aud` is not this service's IAM audience)\n"
    );

    let out = lanyard(
        &["token"],
        env(&[
            ("SA_CREDENTIALS_FILE", &file),
            ("SA_IAM_AUDIENCE", &mock.audience()),
        ]),
    )
    .await;
    let token = printed_token(&out);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
    let seen = mock.last_accepted().unwrap();
    assert_eq!(seen.claims["aud"], mock.audience());
    assert_eq!(seen.claims["iss"], CLIENT_ID);
}

// ---- the organization id: SA_ORGANIZATION_ID > the file > ORG_ID ----

/// The `organization_id` form field of the token request `vars` lead to,
/// against a mock whose account is in `account_org`.
async fn organization_sent(
    account_org: &str,
    file_org: Option<&str>,
    vars: &[(&str, &str)],
) -> String {
    let mock = mock_with(account_in(account_org)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = creds_file(&mock, dir.path(), "creds.json", |f| match file_org {
        Some(org) => {
            f.insert("organization_id".into(), org.into());
        }
        None => {
            f.remove("organization_id");
        }
    });
    let mut all = env(&[("SA_CREDENTIALS_FILE", &file)]);
    all.extend(env(vars));
    let token = printed_token(&lanyard(&["token"], all).await);
    assert_eq!(mock.token_owner(&token).as_deref(), Some(CLIENT_ID));
    mock.last_accepted().unwrap().form["organization_id"].clone()
}

#[tokio::test]
async fn sa_organization_id_beats_the_files_organization_id_and_org_id() {
    let sent = organization_sent(
        "org-from-sa",
        Some("org-from-file"),
        &[
            ("SA_ORGANIZATION_ID", "org-from-sa"),
            ("ORG_ID", "org-from-org-id"),
        ],
    )
    .await;
    assert_eq!(sent, "org-from-sa");
}

#[tokio::test]
async fn the_files_organization_id_beats_org_id() {
    let sent = organization_sent(
        "org-from-file",
        Some("org-from-file"),
        &[("ORG_ID", "org-from-org-id")],
    )
    .await;
    assert_eq!(sent, "org-from-file");
}

#[tokio::test]
async fn org_id_fills_in_when_the_file_has_no_organization_id() {
    let sent = organization_sent("org-from-org-id", None, &[("ORG_ID", "org-from-org-id")]).await;
    assert_eq!(sent, "org-from-org-id");
}

#[tokio::test]
async fn no_organization_id_anywhere_is_refused_naming_every_source() {
    refused_without(
        "organization_id",
        "SA_ORGANIZATION_ID: not set (give `organization_id` in the credentials file, or set SA_ORGANIZATION_ID or ORG_ID)",
    )
    .await;
}

// ---- unusable credentials and URLs: exit 2, one line naming them ----

#[tokio::test]
async fn a_missing_token_uri_is_refused_naming_the_file_field_and_the_variable() {
    let expected =
        "SA_TOKEN_URI: not set (give `token_uri` in the credentials file or set SA_TOKEN_URI)";
    let mock = refused_without("token_uri", expected).await;

    // The same without a file, every other credential given by a variable.
    let out = lanyard(
        &["token"],
        env(&[
            ("SA_CLIENT_ID", CLIENT_ID),
            ("SA_PRIVATE_KEY", &fixture("rsa2048.pkcs8.pem")),
            ("SA_IAM_AUDIENCE", &mock.audience()),
            ("ORG_ID", ORGANIZATION_ID),
        ]),
    )
    .await;
    assert_refused(&out, expected);
    assert_eq!(mock.counters().token_requests, 0);
}

#[tokio::test]
async fn a_missing_private_key_is_refused_naming_the_file_field_and_the_variable() {
    refused_without(
        "private_key",
        "SA_PRIVATE_KEY: not set (give `private_key` in the credentials file or set SA_PRIVATE_KEY)",
    )
    .await;
}

#[tokio::test]
async fn a_non_utf8_variable_is_refused_by_name_without_echoing_its_value() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let base: Vec<(OsString, OsString)> = settings(&mock, dir.path(), &[])
        .into_iter()
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
    let with = |name: &str, value: &[u8]| {
        let mut vars = base.clone();
        vars.push((name.into(), OsStr::from_bytes(value).to_owned()));
        vars
    };

    let out = lanyard(&["token"], with("SA_CLIENT_ID", b"sa-\xff-client")).await;
    assert_refused(
        &out,
        "SA_CLIENT_ID (environment variable SA_CLIENT_ID): is not valid UTF-8",
    );

    // A key with one stray byte: refused, and not a line of it printed.
    let mut key = fixture("rsa2048.pkcs8.pem").into_bytes();
    key.insert(40, 0xff);
    let out = lanyard(&["check"], with("SA_PRIVATE_KEY", &key)).await;
    assert_refused(
        &out,
        "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): is not valid UTF-8",
    );
    assert_eq!(mock.counters().token_requests, 0);
}

#[tokio::test]
async fn a_non_utf8_variable_without_a_file_is_reported_once() {
    let mock = mock().await;
    let mut vars: Vec<(OsString, OsString)> = env(&[
        ("SA_PRIVATE_KEY", &fixture("rsa2048.pkcs8.pem")),
        ("SA_IAM_AUDIENCE", &mock.audience()),
        ("SA_TOKEN_URI", &mock.token_url()),
        ("ORG_ID", ORGANIZATION_ID),
    ])
    .into_iter()
    .map(|(k, v)| (k.into(), v.into()))
    .collect();
    vars.push((
        "SA_CLIENT_ID".into(),
        OsStr::from_bytes(b"sa-\xff-client").to_owned(),
    ));
    let out = lanyard(&["token"], vars).await;
    // The variable is set, so "not set" would be false.
    assert_refused(
        &out,
        "SA_CLIENT_ID (environment variable SA_CLIENT_ID): is not valid UTF-8",
    );
}

#[tokio::test]
async fn a_non_utf8_variable_does_not_hide_a_problem_with_the_files_field() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut json: serde_json::Value =
        serde_json::from_str(&credentials_json(&mock, &fixture("rsa2048.pkcs8.pem"))).unwrap();
    json["token_uri"] = "http://iam.example.com/token".into();
    let file = write(dir.path(), "sa.json", &json.to_string());
    let vars: Vec<(OsString, OsString)> = vec![
        ("SA_CREDENTIALS_FILE".into(), file.clone().into()),
        (
            "SA_TOKEN_URI".into(),
            OsStr::from_bytes(b"https://\xff/token").to_owned(),
        ),
    ];
    let out = lanyard(&["token"], vars).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{stderr}");
    assert_eq!(
        lines[0],
        "lanyard: SA_TOKEN_URI (environment variable SA_TOKEN_URI): is not valid UTF-8"
    );
    assert!(
        lines[1].starts_with(&format!(
            "lanyard: SA_TOKEN_URI (key `token_uri` in {}): must use https",
            file.display()
        )),
        "{stderr}"
    );
}
