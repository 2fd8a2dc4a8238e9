//! Keys that never leave a PKCS#11 token (issue 25), against a real
//! module: Debian's SoftHSM2, with a token directory per test. The binary
//! as users run it: `lanyard token`, `check` and `run` with a key in a
//! token, every way such a key is refused at start-up (exit 2, a message
//! naming the setting and what was looked for, never the PIN), and a
//! token that goes away under a running lanyard.
//!
//! SoftHSM2 never locks a PIN and never reports a final try: that rule is
//! a pure function of the token's flags, tested in src/hsm/open.rs. It
//! keeps a deleted object in a running process's cache: a key that went
//! away is shown by the token re-created without it (`inprocess`).

use crate::support;

#[path = "hsm/inprocess.rs"]
mod inprocess;
#[path = "hsm/refusals.rs"]
mod refusals;
#[path = "hsm/running.rs"]
mod running;
#[path = "hsm/softhsm.rs"]
pub(crate) mod softhsm;

use std::collections::HashMap;
use std::time::Duration;

use http::StatusCode;
use lanyard::mock::MockService;
use running::Running;
use softhsm::{MODULE, PIN, SoftHsm, TOKEN, in_child, is_child};
use support::sidecar::get;
use support::*;

const RULE: &str = "rule-hsm";
const FROM_ENV: &str = "SA_PRIVATE_KEY (environment variable SA_PRIVATE_KEY)";

/// The fixture account's settings against `mock`, its key named by `uri`,
/// and `hsm`'s configuration.
fn vars(mock: &MockService, hsm: &SoftHsm, uri: &str) -> HashMap<String, String> {
    env(&[
        ("SERVICE_API_URL", &mock.api_url()),
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_ORGANIZATION_ID", ORGANIZATION_ID),
        ("SA_IAM_AUDIENCE", &mock.audience()),
        ("SA_TOKEN_URI", &mock.token_url()),
        ("SA_PRIVATE_KEY", uri),
        ("SOFTHSM2_CONF", hsm.conf().to_str().unwrap()),
    ])
}

/// A credentials file with no `private_key`, the rest of the account's.
fn credentials_without_key(mock: &MockService, hsm: &SoftHsm) -> String {
    let mut value: serde_json::Value =
        serde_json::from_str(&credentials_json(mock, "unused")).unwrap();
    value.as_object_mut().unwrap().remove("private_key");
    let path = hsm.write("credentials.json", &value.to_string());
    path.to_str().unwrap().to_string()
}

/// The PIN a test gives lanyard; the wrong-PIN case reads this one.
const WRONG_PIN: &str = "0000-not-it";

fn assert_no_pin(out: &std::process::Output) {
    for stream in [&out.stdout, &out.stderr] {
        let stream = text(stream);
        assert!(!stream.contains(PIN), "the PIN is in the output");
        assert!(
            !stream.contains(WRONG_PIN),
            "the wrong PIN is in the output"
        );
    }
}

/// The rule path through the proxy, which the mock answers 200 with a
/// token it issued.
fn rule_url(running: &Running) -> String {
    format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/{RULE}",
        running.proxy
    )
}

#[tokio::test]
async fn token_command_signs_in_the_token_and_the_mock_accepts() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let out = lanyard(&["token"], &vars(&mock, &hsm, &hsm.uri())).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token = text(&out.stdout);
    let token = token.strip_suffix('\n').expect("one line");
    assert_eq!(mock.token_owner(token).as_deref(), Some(CLIENT_ID));
    assert_no_pin(&out);
}

#[tokio::test]
async fn a_credentials_file_may_leave_the_key_to_sa_private_key() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let vars = env(&[
        ("SA_CREDENTIALS_FILE", &credentials_without_key(&mock, &hsm)),
        ("SA_PRIVATE_KEY", &hsm.uri()),
        ("SOFTHSM2_CONF", hsm.conf().to_str().unwrap()),
    ]);
    let out = lanyard(&["token"], &vars).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        mock.token_owner(text(&out.stdout).trim()).as_deref(),
        Some(CLIENT_ID)
    );
    assert_no_pin(&out);
}

#[tokio::test]
async fn check_says_where_the_key_is_and_proves_a_signature() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let uri = hsm.uri().replace("object=sa-key", "object=sa-key;id=%01");
    let out = lanyard(&["check"], &vars(&mock, &hsm, &uri)).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[2],
        format!(
            "  ok    credentials  client id {CLIENT_ID}, organization {ORGANIZATION_ID}, RSA 2048-bit key"
        )
    );
    let place = format!(
        "  ok    key          RSA 2048-bit key `sa-key` (id 01) on PKCS#11 token `lanyard`, module {MODULE}; a test signature made there in "
    );
    assert!(lines[3].starts_with(&place), "{stdout}");
    assert!(
        lines[3].ends_with(" ms verifies with its public key"),
        "{stdout}"
    );
    assert!(lines[4].starts_with("  ok    token "), "{stdout}");
    assert_eq!(lines.last(), Some(&"all checks passed"));
    assert_no_pin(&out);
}

/// A URI as p11tool prints it, with the token's manufacturer, model,
/// serial and slot, and the library's version: each matched, the key used.
#[tokio::test]
async fn a_uri_copied_from_p11tool_names_the_token_by_all_it_gives() {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let (serial, slot) = hsm.serial_and_slot(TOKEN);
    let uri = hsm.uri().replace(
        "pkcs11:token=lanyard",
        &format!(
            "pkcs11:model=SoftHSM%20v2;manufacturer=SoftHSM%20project;serial={serial};slot-id={slot};token=lanyard;type=private;library-version=2"
        ),
    );
    let out = lanyard(&["token"], &vars(&mock, &hsm, &uri)).await;
    let stderr = text(&out.stderr);
    // The library's version is not the URI's: said, and nothing else.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "lanyard: {FROM_ENV}: module-path {MODULE} is not the library the URI names: its library-version is `2."
        )) && stderr.ends_with("`, the URI says `2.0`\n"),
        "{stderr}"
    );
    let uri = uri.replace(";library-version=2", "");
    let out = lanyard(&["token"], &vars(&mock, &hsm, &uri)).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        mock.token_owner(text(&out.stdout).trim()).as_deref(),
        Some(CLIENT_ID)
    );
    // Another serial is another token: the one present is listed with its.
    let other = uri.replace(&format!("serial={serial}"), "serial=0000");
    let out = lanyard(&["token"], &vars(&mock, &hsm, &other)).await;
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        format!(
            "lanyard: {FROM_ENV}: no token labelled `lanyard`, manufacturer `SoftHSM project`, model `SoftHSM v2`, serial `0000`, slot-id `{slot}` in the PKCS#11 module {MODULE}; tokens present: `lanyard` (manufacturer `SoftHSM project`, model `SoftHSM v2`, serial `{serial}`, slot-id `{slot}`)\n"
        )
    );
    assert_no_pin(&out);
}

/// A credentials file naming the key by URI is reloaded as any other: the
/// URI and the PIN file are read again, and the key opened anew next to
/// the one in use (one module, one login for both).
#[tokio::test]
async fn run_proxies_with_tokens_signed_in_the_token_and_a_reload_reopens_the_key() {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let file = |uri: &str| {
        let mut json: serde_json::Value =
            serde_json::from_str(&credentials_json(&mock, uri)).unwrap();
        json["private_key"] = uri.into();
        json.to_string()
    };
    let creds = hsm.write("credentials.json", &file(&hsm.uri()));
    let mut running = run_on_file(&mock, &hsm, &creds).await;
    assert_eq!(get(&rule_url(&running)).await.status, StatusCode::OK);

    let moved = hsm.write("pin-moved", &format!("{PIN}\n"));
    let uri = hsm.uri().replace(
        &hsm.pin_file().display().to_string(),
        &moved.display().to_string(),
    );
    std::fs::remove_file(hsm.pin_file()).unwrap();
    std::fs::write(&creds, file(&uri)).unwrap();
    running.signal("-HUP");
    let limit = Duration::from_secs(20);
    running
        .wait_for("credentials file changed: new credentials in use", limit)
        .await;
    let renewed = running.wait_for("token obtained", limit).await;
    assert_eq!(renewed["fields"]["generation"], 2);
    assert_eq!(get(&rule_url(&running)).await.status, StatusCode::OK);

    let (code, _) = running.stop().await;
    assert_eq!(code, Some(0));
}

/// `lanyard run` with the credentials file `creds` and no `SA_PRIVATE_KEY`,
/// once it holds a token.
async fn run_on_file(mock: &MockService, hsm: &SoftHsm, creds: &std::path::Path) -> Running {
    let mut vars = vars(mock, hsm, "");
    vars.remove("SA_PRIVATE_KEY");
    vars.insert("SA_CREDENTIALS_FILE".into(), creds.display().to_string());
    let mut running = Running::start(vars).await;
    running
        .wait_for("token obtained", Duration::from_secs(20))
        .await;
    running
}

/// Another PIN for the token, set under a running lanyard: no output may
/// show it either.
const NEW_PIN: &str = "Qx3v-user-8820";

/// `lanyard run` with its key named in a credentials file, once the token
/// has refused the PIN at run time: the token is re-created with
/// [`NEW_PIN`], and the renewal fails, then the next attempt's login.
async fn run_with_the_pin_refused() -> (MockService, SoftHsm, Running) {
    let mock = mock().await;
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let running = run_refusing_the_pin(&mock, &hsm).await;
    (mock, hsm, running)
}

/// What [`run_with_the_pin_refused`] starts, on `mock` and `hsm`.
async fn run_refusing_the_pin(mock: &MockService, hsm: &SoftHsm) -> Running {
    // Renewal at 70-85% of 12 s.
    mock.set_expires_in(Some(12));
    let mut json: serde_json::Value =
        serde_json::from_str(&credentials_json(mock, "unused")).unwrap();
    json["private_key"] = hsm.uri().into();
    let creds = hsm.write("credentials.json", &json.to_string());
    let mut running = run_on_file(mock, hsm, &creds).await;
    hsm.delete_token(TOKEN);
    hsm.init_token(TOKEN, NEW_PIN);
    hsm.import("rsa2048.pkcs8.pem", TOKEN, softhsm::OBJECT, "01", NEW_PIN);
    loop {
        let failed = running
            .wait_for("token request failed", Duration::from_secs(30))
            .await;
        if failed["fields"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("(CKR_PIN_INCORRECT)"))
        {
            return running;
        }
    }
}

/// The key loaded anew, a second token signed with it, then a clean stop.
async fn reloaded_then_renewed(mut running: Running, limit: Duration) {
    running
        .wait_for("credentials file changed: new credentials in use", limit)
        .await;
    let renewed = running.wait_for("token obtained", limit).await;
    assert_eq!(renewed["fields"]["generation"], 2);
    stop_with_no_pin(running).await;
}

async fn stop_with_no_pin(running: Running) {
    let (code, log) = running.stop().await;
    assert_eq!(code, Some(0));
    assert!(!log.contains(NEW_PIN), "the new PIN is in the log");
}

/// The PIN file is watched with the credentials file: once the token has
/// refused the PIN, a corrected PIN file is taken up as a changed
/// credentials file is, and signing resumes.
#[tokio::test]
async fn a_corrected_pin_file_is_taken_up_after_the_token_refused_the_pin() {
    let (_mock, hsm, running) = run_with_the_pin_refused().await;
    std::fs::write(hsm.pin_file(), format!("{NEW_PIN}\n")).unwrap();
    let limit = Duration::from_secs(20);
    reloaded_then_renewed(running, limit).await;
}

/// A key whose PIN the token refused signs nothing more, whatever happens
/// to the token; a SIGHUP loads it again from unchanged files, which tries
/// the PIN file once more.
#[tokio::test]
async fn sighup_tries_the_pin_again_after_the_token_refused_it() {
    let (_mock, hsm, mut running) = run_with_the_pin_refused().await;
    // The token is given back the PIN the file holds.
    hsm.delete_token(TOKEN);
    hsm.init_token(TOKEN, PIN);
    hsm.import("rsa2048.pkcs8.pem", TOKEN, softhsm::OBJECT, "01", PIN);
    running.signal("-HUP");
    let limit = Duration::from_secs(20);
    running
        .wait_for(
            "SIGHUP: the token refused the key's PIN; the credentials are loaded anew, and the PIN file's PIN tried once more",
            limit,
        )
        .await;
    reloaded_then_renewed(running, limit).await;
}

/// One more try of a refused PIN per SIGHUP would let signals lock the
/// token: with the files unchanged, a second SIGHUP tries nothing.
#[tokio::test]
async fn a_second_sighup_does_not_try_an_unchanged_refused_pin_again() {
    let (_mock, _hsm, mut running) = run_with_the_pin_refused().await;
    let limit = Duration::from_secs(20);
    running.signal("-HUP");
    running
        .wait_for(
            "SIGHUP: the token refused the key's PIN; the credentials are loaded anew, and the PIN file's PIN tried once more",
            limit,
        )
        .await;
    // Tried at the next login, and refused again.
    loop {
        let failed = running.wait_for("token request failed", limit).await;
        if failed["fields"]["error"]
            .as_str()
            .is_some_and(|error| error.contains("(CKR_PIN_INCORRECT)"))
        {
            break;
        }
    }
    running.signal("-HUP");
    running
        .wait_for(
            "SIGHUP: the token refused the key's PIN again, and neither the credentials file nor the PIN file changed since the last try; not trying it once more, since each wrong try brings the token closer to locking the PIN: correct the PIN file, which is taken up when it changes",
            limit,
        )
        .await;
    stop_with_no_pin(running).await;
}

/// The token goes away under a running lanyard: the scheduled renewal
/// fails with its own kind, counted; the held token keeps serving; and
/// once the token is back (re-created, the same key imported), the module
/// is finalized and initialised again and signing recovers.
#[tokio::test]
async fn a_token_lost_at_run_time_is_counted_while_the_held_token_serves_then_found_again() {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    // Renewal at 70-85% of 30 s; the token is sent until 27 s.
    mock.set_expires_in(Some(30));
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let mut running = Running::start(vars(&mock, &hsm, &hsm.uri())).await;
    running
        .wait_for("token obtained", Duration::from_secs(20))
        .await;

    hsm.delete_token(TOKEN);
    let failed = running
        .wait_for("token request failed", Duration::from_secs(40))
        .await;
    assert_eq!(failed["fields"]["kind"], "signing", "{failed}");
    let error = failed["fields"]["error"].as_str().unwrap();
    assert!(
        error.starts_with(&format!("signing the assertion failed: {FROM_ENV}: ")),
        "{error}"
    );
    assert_eq!(get(&rule_url(&running)).await.status, StatusCode::OK);
    let metrics = get(&format!("{}/metrics", running.admin)).await;
    let metrics = String::from_utf8_lossy(&metrics.body).into_owned();
    assert!(
        metrics.lines().any(
            |l| l.starts_with(r#"lanyard_token_requests_total{client_id="#)
                && l.contains(r#",outcome="signing"} "#)
        ),
        "{metrics}"
    );

    hsm.init_token(TOKEN, PIN);
    hsm.import("rsa2048.pkcs8.pem", TOKEN, softhsm::OBJECT, "01", PIN);
    let renewed = running
        .wait_for("token obtained", Duration::from_secs(40))
        .await;
    assert_eq!(renewed["fields"]["generation"], 2);
    assert_eq!(get(&rule_url(&running)).await.status, StatusCode::OK);
    let (code, log) = running.stop().await;
    assert_eq!(code, Some(0));
    assert!(log.contains("PKCS#11 session reopened"), "{log}");
}

/// `SA_CREDENTIALS_DIR` (docs/accounts.md): each file's key is its own,
/// one in the token and one a PEM, each organization's path carrying its
/// own account's token.
#[tokio::test]
async fn a_directory_account_may_keep_its_key_in_the_token() {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    mock.add_account(lanyard::mock::MockAccount {
        client_id: "sa-org-b".into(),
        organization_id: "org-b".into(),
        ..account()
    });
    let hsm = SoftHsm::with_key("rsa2048.pkcs8.pem");
    let dir = hsm.write("placed", "");
    let dir = dir.parent().unwrap().join("accounts");
    std::fs::create_dir(&dir).unwrap();
    let mut in_token: serde_json::Value =
        serde_json::from_str(&credentials_json(&mock, &hsm.uri())).unwrap();
    in_token["private_key"] = hsm.uri().into();
    std::fs::write(dir.join("a.json"), in_token.to_string()).unwrap();
    let mut pem: serde_json::Value =
        serde_json::from_str(&credentials_json(&mock, &fixture("rsa2048.pkcs8.pem"))).unwrap();
    pem["client_id"] = "sa-org-b".into();
    pem["organization_id"] = "org-b".into();
    std::fs::write(dir.join("b.json"), pem.to_string()).unwrap();
    let vars = env(&[
        ("SERVICE_API_URL", &mock.api_url()),
        ("SA_CREDENTIALS_DIR", dir.to_str().unwrap()),
        ("SOFTHSM2_CONF", hsm.conf().to_str().unwrap()),
    ]);
    let running = Running::start(vars).await;
    let rule_of = |organization: &str| {
        format!(
            "{}/organizations/{organization}/projects/proj-demo/verifications/{RULE}",
            running.proxy
        )
    };
    // The mock answers 200 only to a token of the path's organization.
    assert_eq!(get(&rule_of(ORGANIZATION_ID)).await.status, StatusCode::OK);
    assert_eq!(get(&rule_of("org-b")).await.status, StatusCode::OK);
    // `stop` fails the test should the log hold the PIN.
    let (code, _) = running.stop().await;
    assert_eq!(code, Some(0));
}
