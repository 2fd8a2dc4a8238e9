//! The `lanyard run` process as operators run it: its logs hold no secret,
//! and SIGTERM drains a request in flight before exiting 0. Its limits on
//! the host (accept queue, open files, Unix socket, dumpability) are in
//! `process/limits.rs`.

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod limits;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bytes::Bytes;
use http::{Method, StatusCode};
use http_body_util::BodyExt;
use support::child::Process;
use support::sidecar::{get, send};
use support::upstream::TestUpstream;
use support::*;
use tokio::process::Command;

/// A `lanyard run` in front of a test upstream, with one request held at
/// the upstream and SIGTERM sent: the state both drain tests start from.
struct Draining {
    process: Process,
    upstream: TestUpstream,
    held: tokio::task::JoinHandle<support::sidecar::Answer>,
    _mock: lanyard::mock::MockService,
    _dir: tempfile::TempDir,
}

async fn draining_with_a_held_request(grace: &str) -> Draining {
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[("LANYARD_SHUTDOWN_GRACE", grace)]);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    let held_url = format!("{}/hold", process.proxy);
    let held = tokio::spawn(async move { get(&held_url).await });
    upstream.slow_requests_started(1).await;
    process.terminate();
    process
        .wait_for_log("shutting down: draining in-flight requests")
        .await;
    Draining {
        process,
        upstream,
        held,
        _mock: mock,
        _dir: dir,
    }
}

#[tokio::test]
async fn sigterm_lets_a_slow_request_finish_then_exits_0() {
    let Draining {
        process,
        upstream,
        held,
        ..
    } = draining_with_a_held_request("10s").await;

    // Draining: not ready, and no new connections.
    let ready = get(&format!("{}/readyz", process.admin)).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.json()["reason"], "shutting down");
    let refused = tokio::net::TcpStream::connect(process.proxy.trim_start_matches("http://")).await;
    assert!(
        refused.is_err(),
        "the proxy still accepts connections while draining"
    );

    upstream.release_held();
    let answer = held.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "held done");
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
}

#[tokio::test]
async fn sigterm_under_load_loses_no_request_that_had_started() {
    const CLIENTS: usize = 16;
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[("LANYARD_SHUTDOWN_GRACE", "20s")]);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    // Clients on keep-alive connections, each sending request after request
    // to an upstream that takes 100 ms, so at any moment most are in flight.
    let signalled = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicU64::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let url: http::Uri = format!("{}/slow?ms=100", process.proxy).parse().unwrap();
        let (signalled, completed) = (signalled.clone(), completed.clone());
        clients.spawn(async move {
            let client = support::sidecar::client();
            let mut failures = Vec::new();
            loop {
                match client.get(url.clone()).await {
                    Ok(response) => {
                        let status = response.status();
                        match response.into_body().collect().await.map(|b| b.to_bytes()) {
                            Ok(body) if status == StatusCode::OK && body == "slow done" => {
                                completed.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(_) => failures.push(format!("HTTP {status}")),
                            Err(err) => failures.push(format!("body cut off: {err}")),
                        }
                    }
                    // The listener is closed: this request never started.
                    // Whether an earlier one was lost, the upstream's count
                    // tells below.
                    Err(_) if signalled.load(Ordering::SeqCst) => break,
                    Err(err) => failures.push(format!("before the signal: {err}")),
                }
            }
            failures
        });
    }
    upstream.slow_requests_started(4 * CLIENTS as u64).await;
    signalled.store(true, Ordering::SeqCst);
    process.terminate();
    let in_flight = upstream.requests() - completed.load(Ordering::SeqCst);

    let (code, log) = process.finish().await;
    let mut failures = Vec::new();
    while let Some(client) = clients.join_next().await {
        failures.extend(client.unwrap());
    }
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
    assert!(failures.is_empty(), "{failures:?}");
    assert!(in_flight > 0, "requests were in flight when SIGTERM came");
    assert_eq!(
        completed.load(Ordering::SeqCst),
        upstream.requests(),
        "every request that reached the upstream was answered in full"
    );
}

#[tokio::test]
async fn second_signal_ends_the_drain_at_once() {
    // Every field bound: `..` would drop the upstream here, failing the held
    // request and ending the drain before the second signal arrives.
    let Draining {
        process,
        upstream: _upstream,
        held,
        _mock,
        _dir,
    } = draining_with_a_held_request("1h").await;
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("second signal: exiting now"), "{log}");
    held.abort();
}

const RULE: &str = "2b0c1a7e-5d4f-4e3a-8b2c-1d0e9f8a7b6c";

/// A mock with the fixture account and a rule, and `lanyard run` settings
/// for it at trace level.
async fn traced_settings(
    dir: &std::path::Path,
) -> (lanyard::mock::MockService, HashMap<String, String>) {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let mut vars = settings(&mock, dir, &[]);
    vars.insert("RUST_LOG".into(), "trace".into());
    (mock, vars)
}

/// Walks every path that handles a secret: a proxied request, a 401 with a
/// forced renewal and a retry, and a 403; then stops the process and
/// returns its whole log.
async fn exercise_and_stop(process: Process, mock: &lanyard::mock::MockService) -> String {
    let rule = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/{RULE}",
        process.proxy
    );
    assert_eq!(get(&rule).await.status, StatusCode::OK);
    mock.revoke_all_tokens();
    assert_eq!(get(&rule).await.status, StatusCode::OK);
    let other = rule.replace("proj-demo", "proj-other");
    assert_eq!(get(&other).await.status, StatusCode::FORBIDDEN);
    assert_eq!(mock.counters().tokens_issued, 2);

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    log
}

/// No line of the key, no assertion and no access token in `log`, though
/// the paths that handle them did log (the 403 hint among them).
fn assert_no_secret_in(log: &str) {
    let key = fixture("rsa2048.pkcs8.pem");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!log.contains(line), "a key line is in the log");
    }
    assert!(!log.contains("eyJ"), "an assertion (JWT) is in the log");
    assert!(!log.contains("mock-"), "an access token is in the log");
    assert!(
        log.contains("the service answered 403"),
        "the 403 hint is missing"
    );
}

#[tokio::test]
async fn logs_hold_no_key_assertion_or_token_even_at_trace_level() {
    let dir = tempfile::tempdir().unwrap();
    let (mock, vars) = traced_settings(dir.path()).await;
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    let log = exercise_and_stop(process, &mock).await;
    assert!(
        log.contains("\"level\":\"TRACE\""),
        "trace logging is off:\n{log}"
    );
    assert!(
        log.contains("\"message\":\"proxied\""),
        "no per-request log line:\n{log}"
    );
    assert_no_secret_in(&log);
}

#[tokio::test]
async fn text_logs_hold_no_key_assertion_or_token_even_at_trace_level() {
    let dir = tempfile::tempdir().unwrap();
    let (mock, vars) = traced_settings(dir.path()).await;
    let mut process = Process::launch(&["run"], vars, "text", false);
    let started = process
        .wait_for_line("lanyard started", |l| l.contains("lanyard started"))
        .await;
    let started = without_colour(&started);
    let field = |name: &str| {
        let prefix = format!("{name}=");
        started
            .split_whitespace()
            .find_map(|word| word.strip_prefix(&prefix))
            .map(|addr| format!("http://{addr}"))
            .unwrap_or_else(|| panic!("no {name}= in `{started}`"))
    };
    process.proxy = field("proxy");
    process.admin = field("admin");
    process
        .wait_for_line("token obtained", |l| l.contains("token obtained"))
        .await;

    let log = without_colour(&exercise_and_stop(process, &mock).await);
    assert!(
        log.lines().all(|line| !line.starts_with('{')),
        "not text logs:\n{log}"
    );
    assert!(log.contains(" TRACE "), "trace logging is off:\n{log}");
    assert!(
        log.lines()
            .any(|l| l.contains(" DEBUG ") && l.contains("proxied")),
        "no per-request log line:\n{log}"
    );
    assert_no_secret_in(&log);
}

/// `text` with ANSI escape sequences (colour, bold) removed.
fn without_colour(text: &str) -> String {
    let mut plain = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            // CSI: ESC [ parameters, then one final letter.
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    plain
}

#[tokio::test]
async fn sighup_reloads_the_credentials_file_at_once() {
    let mock = mock().await;
    let key = lanyard::mock::generate_rsa_key().unwrap();
    mock.add_account(lanyard::mock::MockAccount {
        client_id: "sa-rotated".into(),
        organization_id: ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec!["verifications.api".into()],
        projects: vec!["proj-demo".into()],
    });
    let dir = tempfile::tempdir().unwrap();
    let vars = settings(&mock, dir.path(), &[]);
    let file = vars["SA_CREDENTIALS_FILE"].clone();
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    process.signal("-HUP");
    process
        .wait_for_log("SIGHUP: the credentials file is unchanged")
        .await;

    let rotated = serde_json::json!({
        "type": "service_account",
        "organization_id": ORGANIZATION_ID,
        "client_id": "sa-rotated",
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    });
    std::fs::write(&file, rotated.to_string()).unwrap();
    process.signal("-HUP");
    let reloaded = process
        .wait_for_log("credentials file changed: new credentials in use")
        .await;
    assert_eq!(reloaded["fields"]["client_id"], "sa-rotated");
    assert_eq!(reloaded["fields"]["previous_client_id"], CLIENT_ID);
    let renewed = process.wait_for_log("token obtained").await;
    assert_eq!(renewed["fields"]["generation"], 2);
    assert_eq!(
        mock.last_accepted().map(|a| a.claims["iss"].clone()),
        Some("sa-rotated".into())
    );

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains(key.private_pem.expose().lines().nth(1).unwrap()));
}

#[tokio::test]
async fn sighup_with_no_credentials_file_stops_gracefully() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.remove("SA_CREDENTIALS_FILE");
    vars.extend(env(&[
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_ORGANIZATION_ID", ORGANIZATION_ID),
        ("SA_PRIVATE_KEY", &fixture("rsa2048.pkcs8.pem")),
        ("SA_IAM_AUDIENCE", &mock.audience()),
        ("SA_TOKEN_URI", &mock.token_url()),
    ]));
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    process.signal("-HUP");
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("no credentials file to reload"), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
}

/// The README's first command as a user runs it: the banner on stdout says
/// where the proxy and admin listen and which verification path to try;
/// through the proxy that path starts a session and polls it; SIGTERM ends
/// the process with 0.
async fn demo_serves_the_banners_verification_path(args: &[&str], vars: &[(&str, &str)]) {
    let mut process = Process::launch(args, env(vars), "json", true);
    let banner = process.stdout_through("Stop with Ctrl-C.").await;
    let word_after = |marker: &str| {
        banner
            .lines()
            .find_map(|line| line.trim().strip_prefix(marker))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no `{marker}` in the banner:\n{banner}"))
            .to_string()
    };
    let proxy = word_after("proxy ");
    let admin = word_after("admin ")
        .trim_end_matches("/healthz")
        .to_string();
    let verifier = word_after("verifier ");
    let page = get(&verifier).await;
    assert_eq!(page.status, StatusCode::OK, "{verifier}");
    assert!(String::from_utf8_lossy(&page.body).contains("Verify a credential"));
    let start = banner
        .lines()
        .find_map(|line| line.split("curl -s -X POST ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no start line in the banner:\n{banner}"))
        .to_string();
    // The free ports asked for, not the defaults (8080, 9090).
    for (url, default) in [(&proxy, ":8080"), (&admin, ":9090")] {
        assert!(
            url.starts_with("http://127.0.0.1:") && !url.ends_with(default),
            "{url}\n{banner}"
        );
    }
    assert!(start.starts_with(&format!("{proxy}/")), "{banner}");

    process.wait_for_log("token obtained").await;
    let ready = get(&format!("{admin}/readyz")).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["status"], "ready");

    let started = send(Method::POST, &start, &[], Bytes::new()).await;
    assert!(
        started.status.is_success(),
        "{}: {}",
        started.status,
        String::from_utf8_lossy(&started.body)
    );
    assert_eq!(started.headers["content-type"], "application/json");
    let session = started.json();
    let tx = session["transaction_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no transaction_id: {session}"));
    assert!(uuid::Uuid::parse_str(tx).is_ok(), "{session}");
    let poll = get(&format!("{start}/sessions/{tx}")).await;
    assert_eq!(poll.status, StatusCode::OK);
    assert_eq!(poll.json()["transaction_id"], tx);

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
}

#[tokio::test]
async fn lanyard_demo_serves_the_banners_verification_path_and_exits_0_on_sigterm() {
    demo_serves_the_banners_verification_path(&["demo"], &[]).await;
}

#[tokio::test]
async fn demo_mock_run_serves_the_banners_verification_path_and_exits_0_on_sigterm() {
    demo_serves_the_banners_verification_path(&["run"], &[("DEMO_MOCK", "true")]).await;
}

/// `DEMO_MOCK=true lanyard verifier`: the page and its API against the
/// embedded mock, with no settings at all; a session is started and the
/// mock wallet's page is where the wallet link leads.
#[tokio::test]
async fn demo_mock_verifier_serves_the_page_and_a_session() {
    let mut process = Process::launch(&["verifier"], env(&[("DEMO_MOCK", "true")]), "json", true);
    let started = process.wait_for_log("lanyard started").await;
    assert!(
        started["fields"].get("proxy").is_none(),
        "no proxy: {started}"
    );
    let verifier = format!("http://{}", started["fields"]["verifier"].as_str().unwrap());
    process.wait_for_log("token obtained").await;
    assert_eq!(get(&format!("{verifier}/")).await.status, StatusCode::OK);
    let answer = send(
        Method::POST,
        &format!("{verifier}/api/start"),
        &[("content-type", "application/json")],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    let wallet = answer.json()["wallet_url"].as_str().unwrap().to_string();
    let page = send(
        Method::GET,
        &wallet,
        &[("accept", "text/html")],
        Bytes::new(),
    )
    .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&page.body).contains("id=\"present\""));
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
}

/// `lanyard verifier` with none of its settings says each one is missing,
/// and starts nothing.
#[tokio::test]
async fn lanyard_verifier_names_each_missing_setting_and_exits_2() {
    let output = lanyard(&["verifier"], [("PATH", "/usr/bin:/bin")]).await;
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    for setting in [
        "SERVICE_API_URL",
        "PROJECT_ID",
        "RULE_ID",
        "WALLET_BASE_URL",
    ] {
        assert!(
            stderr.contains(&format!("lanyard: {setting}")),
            "{setting}:\n{stderr}"
        );
    }
}
