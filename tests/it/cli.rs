//! The binary as users run it: `lanyard token`, `lanyard check`, and every
//! kind of bad input with its message and exit code.

use crate::support;
use crate::support::DefaultTokens;

use std::collections::HashMap;
use std::path::Path;

use lanyard::mock::{Fault, MockService};
use serde_json::Value;
use support::*;

/// Nothing secret may appear in what lanyard prints on its own.
pub(crate) fn assert_no_secret(out: &str) {
    let key = fixture("rsa2048.pkcs8.pem");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!out.contains(line), "key material in output:\n{out}");
    }
    assert!(!out.contains("eyJ"), "an assertion in output:\n{out}");
    assert!(!out.contains("mock-"), "a token in output:\n{out}");
}

#[tokio::test]
async fn token_command_prints_only_the_access_token() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = lanyard(&["token"], &settings(&mock, dir.path(), &[])).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let token = stdout.strip_suffix('\n').expect("one line");
    assert!(!token.contains('\n'));
    assert_eq!(mock.token_owner(token).as_deref(), Some(CLIENT_ID));
    assert_no_secret(&text(&out.stderr));
}

#[tokio::test]
async fn token_command_does_not_need_the_upstream_url() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.remove("SERVICE_API_URL");
    let out = lanyard(&["token"], &vars).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
}

#[tokio::test]
async fn token_command_exits_1_when_the_token_endpoint_refuses() {
    let mock = mock().await;
    mock.push_fault(Fault::invalid_client());
    let dir = tempfile::tempdir().unwrap();
    let out = lanyard(&["token"], &settings(&mock, dir.path(), &[])).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(
        text(&out.stderr),
        "lanyard: the token endpoint refused the request: HTTP 401 (invalid_client: client authentication failed)\n"
    );
}

#[tokio::test]
async fn token_command_exits_1_when_the_token_endpoint_is_down() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let closed = closed_port();
    let vars = settings(
        &mock,
        dir.path(),
        &[("SA_TOKEN_URI", &format!("http://{closed}/token"))],
    );
    let out = lanyard(&["token"], &vars).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).starts_with("lanyard: cannot connect to the token endpoint"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn check_reports_each_step_and_exits_0() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let out = lanyard(&["check"], &settings(&mock, dir.path(), &[])).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "lanyard check");
    assert!(lines[1].starts_with("  ok    settings"), "{stdout}");
    assert_eq!(
        lines[2],
        format!(
            "  ok    credentials  client id {CLIENT_ID}, organization {ORGANIZATION_ID}, RSA 2048-bit key"
        )
    );
    assert!(
        lines[3].starts_with("  ok    token        obtained from http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        lines[4].starts_with(&format!(
            "  ok    upstream     {} answered HTTP ",
            mock.api_url()
        )),
        "{stdout}"
    );
    assert!(lines[5].starts_with("  skip  rule"), "{stdout}");
    assert_eq!(lines[6], "all checks passed");
    assert_no_secret(&stdout);
}

#[tokio::test]
async fn token_and_check_say_when_the_lifetime_is_assumed() {
    let mock = mock().await;
    mock.set_expires_in(None);
    let dir = tempfile::tempdir().unwrap();
    let vars = settings(&mock, dir.path(), &[("LANYARD_LOG_FORMAT", "text")]);

    let out = lanyard(&["check"], &vars).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let token_line = stdout
        .lines()
        .find(|l| l.starts_with("  ok    token"))
        .unwrap();
    assert!(
        token_line.ends_with("valid for 300 s (assumed: the response has no expires_in)"),
        "{stdout}"
    );

    let out = lanyard(&["token"], &vars).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("the token response has no expires_in; assuming the default lifetime"),
        "{stderr}"
    );
    assert_no_secret(&stderr);
}

#[tokio::test]
async fn a_bad_rust_log_is_reported_and_text_logs_carry_no_colour_codes_off_a_terminal() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let vars = settings(
        &mock,
        dir.path(),
        &[("LANYARD_LOG_FORMAT", "text"), ("RUST_LOG", "lanyard=[")],
    );
    let out = lanyard(&["token"], &vars).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("RUST_LOG is not a valid filter; logging at info"),
        "{stderr}"
    );
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
}

#[tokio::test]
async fn check_exits_1_and_says_why_when_the_token_request_fails() {
    let mock = mock().await;
    mock.push_fault(Fault::server_error(503));
    let dir = tempfile::tempdir().unwrap();
    let out = lanyard(&["check"], &settings(&mock, dir.path(), &[])).await;
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("  FAIL  token        the token endpoint failed: HTTP 503"),
        "{stdout}"
    );
    assert!(stdout.ends_with("1 check(s) failed\n"), "{stdout}");
}

/// A new RSA key for ID tokens, written to `name` in `d`: its path, its
/// PEM and its `kid`.
fn oidc_key(d: &Path, name: &str) -> (std::path::PathBuf, lanyard::Secret, String) {
    let pem = lanyard::mock::generate_rsa_key().unwrap().private_pem;
    let kid = lanyard::config::credentials::parse_private_key(pem.expose())
        .unwrap()
        .public()
        .unwrap()
        .kid();
    (write(d, name, pem.expose()), pem, kid)
}

/// Nothing of the account's, no client's `secret`, no line of the ID
/// token key `pem` in `out`.
fn assert_no_provider_secret(out: &str, secret: &str, pem: &str) {
    assert_no_secret(out);
    assert!(!out.contains(secret), "a client's secret in output:\n{out}");
    for line in pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!out.contains(line), "the ID token key in output:\n{out}");
    }
}

/// With `LANYARD_OIDC_ISSUER` set, `check` reads the provider as
/// `verifier` does and reports it: its issuer, its clients, its key by
/// size and `kid`, and the previous key when one is published; never a
/// key or a client's secret. A provider that could not start is exit 2.
#[tokio::test]
async fn check_reports_the_openid_connect_provider_and_never_its_key_or_secrets() {
    const SECRET: &str = "the-shops-secret-0123456789";
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let clients = serde_json::json!({"clients": [
        {"client_id": "shop", "client_secret": SECRET, "redirect_uris": ["https://shop.example/cb"]},
        {"client_id": "spa", "redirect_uris": ["http://127.0.0.1:3000/cb"]},
    ]});
    let clients = write(d, "clients.json", &clients.to_string());
    let (current, current_pem, kid) = oidc_key(d, "oidc.pem");
    let (previous, _, previous_kid) = oidc_key(d, "oidc.previous.pem");
    let provider = [
        ("LANYARD_OIDC_ISSUER", "http://127.0.0.1/wallet"),
        ("LANYARD_OIDC_CLIENTS_FILE", clients.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", current.to_str().unwrap()),
    ];
    let provider_line = "  ok    provider     OpenID Connect issuer http://127.0.0.1/wallet, 2 clients, discovery at http://127.0.0.1/wallet/.well-known/openid-configuration";
    let no_secret = |out: &str| assert_no_provider_secret(out, SECRET, current_pem.expose());

    let out = lanyard(&["check"], &settings(&mock, d, &provider)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[2].starts_with("  ok    credentials"), "{stdout}");
    assert_eq!(lines[3], provider_line);
    assert_eq!(
        lines[4],
        format!(
            "  ok    id token key RSA 2048-bit PEM key; kid {kid}; no previous key is published"
        )
    );
    assert!(lines[5].starts_with("  ok    token"), "{stdout}");
    assert_eq!(lines.last(), Some(&"all checks passed"));
    no_secret(&stdout);
    no_secret(&text(&out.stderr));

    let mut with_previous = provider.to_vec();
    with_previous.push(("LANYARD_OIDC_PREVIOUS_KEY_FILE", previous.to_str().unwrap()));
    let out = lanyard(&["check"], &settings(&mock, d, &with_previous)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert_eq!(
        stdout.lines().nth(4),
        Some(
            format!(
                "  ok    id token key RSA 2048-bit PEM key; kid {kid}; the previous key, kid {previous_kid}, is published too"
            )
            .as_str()
        )
    );
    no_secret(&stdout);

    // The account's own key as the provider's: nothing is checked.
    let account_key = fixture_path("rsa2048.pkcs8.pem");
    let mut own_key = provider.to_vec();
    own_key[2].1 = account_key.to_str().unwrap();
    let out = lanyard(&["check"], &settings(&mock, d, &own_key)).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = text(&out.stderr);
    assert!(
        stderr.starts_with(
            "lanyard: LANYARD_OIDC_SIGNING_KEY_FILE (environment variable LANYARD_OIDC_SIGNING_KEY_FILE): is the service account's key; "
        ),
        "{stderr}"
    );
    no_secret(&stderr);
}

/// A bad input: the variables set, and the one line lanyard must print.
type BadInput = (Vec<(String, String)>, String);

fn bad_input(vars: &[(&str, &str)], expected: String) -> BadInput {
    let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
    (vars.collect(), expected)
}

/// A credentials file `name` in `d`: the mock's account with `key`.
fn creds_with_key(mock: &MockService, d: &Path, name: &str, key: &str) -> String {
    write_private(d, name, &credentials_json(mock, key))
        .to_str()
        .unwrap()
        .to_string()
}

/// A credentials file `name` in `d`: the mock's account, changed by `mutate`.
fn creds_with(mock: &MockService, d: &Path, name: &str, mutate: &dyn Fn(&mut Value)) -> String {
    let good_key = fixture("rsa2048.pkcs8.pem");
    let mut value: Value = serde_json::from_str(&credentials_json(mock, &good_key)).unwrap();
    mutate(&mut value);
    write(d, name, &value.to_string())
        .to_str()
        .unwrap()
        .to_string()
}

/// Each key lanyard cannot sign with, in a credentials file or a variable.
fn bad_keys(mock: &MockService, d: &Path) -> Vec<BadInput> {
    let key_case = |file: &str| creds_with_key(mock, d, &format!("{file}.json"), &fixture(file));
    let prefix = |path: &str| format!("SA_PRIVATE_KEY (key `private_key` in {path}): ");
    let not_rsa = "is an EC, Ed25519 or other non-RSA key; RS256 needs an RSA key";
    let mut cases = Vec::new();
    let mut case = |file: &str, why: &str| {
        let path = key_case(file);
        cases.push(bad_input(
            &[("SA_CREDENTIALS_FILE", &path)],
            format!("{}{why}", prefix(&path)),
        ));
    };
    case("ec-p256.sec1.pem", "is an EC key; RS256 needs an RSA key");
    case("ec-p256.pkcs8.pem", not_rsa);
    case("ed25519.pem", not_rsa);
    case(
        "rsa1024.pem",
        "is an RSA key shorter than 2048 bits; generate a 2048-bit or longer key",
    );
    for file in ["rsa2048.encrypted.pem", "rsa2048.pkcs1-encrypted.pem"] {
        case(
            file,
            "is encrypted; lanyard needs an unencrypted key (decrypt it with `openssl pkey -in key.pem -out plain.pem` and keep the result in a Secret)",
        );
    }
    case("rsa2048.pub.pem", "is a public key, not a private key");
    let garbage = creds_with_key(
        mock,
        d,
        "garbage.json",
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw",
    );
    cases.push(bad_input(
        &[("SA_CREDENTIALS_FILE", &garbage)],
        format!(
            "{}is not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)",
            prefix(&garbage)
        ),
    ));
    let env_creds = creds_with_key(mock, d, "env-override.json", &fixture("rsa2048.pkcs8.pem"));
    cases.push(bad_input(
        &[("SA_CREDENTIALS_FILE", &env_creds), ("SA_PRIVATE_KEY", "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcw")],
        "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): is not a PEM private key (expected a -----BEGIN PRIVATE KEY----- block)".into(),
    ));
    cases
}

/// Each credentials file or setting lanyard refuses for what is not its key.
fn bad_files_and_settings(mock: &MockService, d: &Path) -> Vec<BadInput> {
    let http = creds_with(mock, d, "http.json", &|v| {
        v["token_uri"] = "http://iam.example.com/token".into()
    });
    let no_client = creds_with(mock, d, "no-client.json", &|v| {
        v.as_object_mut().unwrap().remove("client_id");
    });
    let wrong_type = creds_with(mock, d, "wrong-type.json", &|v| {
        v["type"] = "authorized_user".into()
    });
    let not_json = write(d, "not-json.json", "{\"private_key\": \"-----BEGIN")
        .to_str()
        .unwrap()
        .to_string();
    let env_creds = creds_with_key(mock, d, "env-override.json", &fixture("rsa2048.pkcs8.pem"));
    vec![
        bad_input(
            &[("SA_CREDENTIALS_FILE", &http)],
            format!(
                "SA_TOKEN_URI (key `token_uri` in {http}): must use https: the token would cross the network in clear text (plain http is accepted on loopback only)"
            ),
        ),
        bad_input(
            &[("SA_CREDENTIALS_FILE", &no_client)],
            "SA_CLIENT_ID: not set (give `client_id` in the credentials file or set SA_CLIENT_ID)"
                .into(),
        ),
        bad_input(
            &[("SA_CREDENTIALS_FILE", &wrong_type)],
            format!(
                "credentials file {wrong_type} (environment variable SA_CREDENTIALS_FILE): field `type` is `authorized_user`, expected `service_account`"
            ),
        ),
        bad_input(
            &[("SA_CREDENTIALS_FILE", &not_json)],
            format!(
                "credentials file {not_json} (environment variable SA_CREDENTIALS_FILE): is not valid JSON (line 1, column 27)"
            ),
        ),
        bad_input(
            &[("SA_CREDENTIALS_FILE", "/nonexistent/creds.json")],
            "credentials file /nonexistent/creds.json (environment variable SA_CREDENTIALS_FILE): cannot be read: no such file".into(),
        ),
        bad_input(
            &[],
            "no credentials: set SA_CREDENTIALS_FILE to the JSON file downloaded from the Portal, or set SA_CLIENT_ID, SA_PRIVATE_KEY, SA_IAM_AUDIENCE and SA_TOKEN_URI".into(),
        ),
        bad_input(
            &[("SA_CREDENTIALS_FILE", &env_creds), ("LANYARD_TOKEN_TIMEOUT", "fast")],
            "LANYARD_TOKEN_TIMEOUT (environment variable LANYARD_TOKEN_TIMEOUT): `fast` is not a duration (use seconds, or a value like 90s, 5m, 1h)".into(),
        ),
    ]
}

/// Each bad input: the settings, and the one line lanyard must print.
#[tokio::test]
async fn bad_input_is_refused_with_exit_2_and_a_message_naming_it() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cases = bad_keys(&mock, dir.path());
    cases.extend(bad_files_and_settings(&mock, dir.path()));
    for (vars, expected) in cases {
        let vars: HashMap<String, String> = vars.into_iter().collect();
        let out = lanyard(&["token"], &vars).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{vars:?}: {stderr}");
        assert_eq!(stderr, format!("lanyard: {expected}\n"), "{vars:?}");
        assert!(out.stdout.is_empty());
        assert_no_secret(&stderr);
    }
}

#[tokio::test]
async fn every_problem_is_listed_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ec = write(dir.path(), "ec.pem", &fixture("ec-p256.pkcs8.pem"));
    let vars = env(&[
        ("LANYARD_LISTEN", "0.0.0.0:8080"),
        ("LANYARD_ASSERTION_TTL", "0"),
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_PRIVATE_KEY", &std::fs::read_to_string(&ec).unwrap()),
        ("SA_TOKEN_URI", "http://iam.example.com/token"),
    ]);
    let out = lanyard(&["check"], &vars).await;
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 7, "{stderr}");
    assert!(
        lines[0].starts_with("lanyard: SERVICE_API_URL: is required"),
        "{stderr}"
    );
    assert!(lines[1].starts_with("lanyard: LANYARD_LISTEN (environment variable LANYARD_LISTEN): 0.0.0.0:8080 is not a loopback address"), "{stderr}");
    assert!(lines[2].contains("LANYARD_ASSERTION_TTL"), "{stderr}");
    // The credentials' problems come in the same run.
    assert!(
        lines[3].starts_with("lanyard: SA_IAM_AUDIENCE: not set"),
        "{stderr}"
    );
    assert!(
        lines[4].starts_with("lanyard: SA_ORGANIZATION_ID: not set"),
        "{stderr}"
    );
    assert!(
        lines[5].starts_with(
            "lanyard: SA_TOKEN_URI (environment variable SA_TOKEN_URI): must use https"
        ),
        "{stderr}"
    );
    assert!(
        lines[6]
            .starts_with("lanyard: SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY): is an EC"),
        "{stderr}"
    );
    assert_no_secret(&stderr);
}

#[tokio::test]
async fn flags_override_the_environment() {
    let vars = env(&[("LANYARD_ASSERTION_TTL", "2h")]);
    let out = lanyard(&["token", "--assertion-ttl", "2x"], &vars).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr)
            .contains("LANYARD_ASSERTION_TTL (flag --assertion-ttl): `2x` is not a duration"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test]
async fn check_probes_the_rule_path_and_explains_a_403() {
    const RULE: &str = "2b0c1a7e-5d4f-4e3a-8b2c-1d0e9f8a7b6c";
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let dir = tempfile::tempdir().unwrap();
    let member = settings(
        &mock,
        dir.path(),
        &[("PROJECT_ID", "proj-demo"), ("RULE_ID", RULE)],
    );
    let out = lanyard(&["check"], &member).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("  ok    rule         the rule path answered HTTP 200"),
        "{stdout}"
    );

    let outsider = settings(
        &mock,
        dir.path(),
        &[("PROJECT_ID", "proj-other"), ("RULE_ID", RULE)],
    );
    let out = lanyard(&["check"], &outsider).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("  FAIL  rule         HTTP 403: the service account likely lacks the role for this API (verifications.api or credentials.api) or membership of the project's group"),
        "{stdout}"
    );
}

/// `healthcheck` needs nothing but the admin address: the image runs it
/// every few seconds and it must not read the key.
/// `DEMO_MOCK` where it has no meaning is refused by name, not taken as a
/// reason to skip the account; `healthcheck` runs in the demo's container
/// too, and ignores it.
#[tokio::test]
async fn demo_mock_for_check_or_token_is_refused_by_name() {
    for command in ["check", "token"] {
        let out = lanyard(&[command], &env(&[("DEMO_MOCK", "true")])).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.starts_with(
                "lanyard: DEMO_MOCK (environment variable DEMO_MOCK): `true`, but `lanyard check` and `lanyard token` have no demo"
            ),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("please report this"), "{stderr}");
    }
}

fn admin_only(admin: &str) -> HashMap<String, String> {
    env(&[("LANYARD_ADMIN_LISTEN", admin.trim_start_matches("http://"))])
}

#[tokio::test]
async fn healthcheck_exits_0_when_the_sidecar_is_ready() {
    let running = support::sidecar::start(mock().await, "http://127.0.0.1:9", &[]).await;
    running.ready().await;
    let out = lanyard(&["healthcheck"], &admin_only(&running.admin)).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("ready: the token expires in "),
        "{stdout}"
    );
    assert_no_secret(&stdout);
}

#[tokio::test]
async fn healthcheck_exits_1_and_says_why_when_no_token_is_held() {
    let mock = mock().await;
    mock.push_fault(Fault::invalid_client());
    let running = support::sidecar::start(mock, "http://127.0.0.1:9", &[]).await;
    assert!(
        running
            .process
            .default_tokens()
            .first_outcome()
            .await
            .is_err()
    );
    let out = lanyard(&["healthcheck"], &admin_only(&running.admin)).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        "not ready: no token has been obtained yet (last error: the token endpoint refused the request: HTTP 401 (invalid_client: client authentication failed))\n"
    );
}

#[tokio::test]
async fn healthcheck_exits_1_when_nothing_listens() {
    let closed = closed_port();
    let out = lanyard(&["healthcheck"], &admin_only(&closed.to_string())).await;
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stdout),
        format!(
            "cannot reach the admin listener at {closed}: nothing listens there (is lanyard running, with this LANYARD_ADMIN_LISTEN?)\n"
        )
    );
}
