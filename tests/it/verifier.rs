//! `lanyard verifier` over real sockets against the mock service: a
//! session started and polled to its end, bound to its browser; each
//! refusal of the service and each bad input, as the page and the operator
//! see them; the bound on starts; no claim in any log. Bad requests, the
//! page's files, floods of starts and planted cookies are in
//! `verifier/requests.rs`; session keys and their rotation in
//! `verifier/keys.rs`.

use crate::support;
use crate::support::DefaultTokens;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod keys;
mod requests;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::logs::Logs;
use support::sidecar::{Answer, get, send};
use support::verifier::{self, Browser, PROJECT, RULE, Running, error_code};
use tokio::net::TcpListener;

async fn metric(running: &Running, outcome: &str) -> u64 {
    let text = String::from_utf8(
        get(&format!("{}/metrics", running.admin))
            .await
            .body
            .to_vec(),
    )
    .unwrap();
    let series = format!("lanyard_verifier_sessions_total{{outcome=\"{outcome}\"}} ");
    text.lines()
        .find_map(|line| line.strip_prefix(&series))
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_session_is_started_polled_to_its_claims_and_bound_to_its_browser() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    let started = browser.start(&running).await;
    assert_eq!(started.status, 200, "{:?}", started.body);
    assert_eq!(started.headers["cache-control"], "no-store");
    let cookie = started.headers["set-cookie"].to_str().unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/api"] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    let session = started.json();
    let tx = session["transaction_id"].as_str().unwrap();
    let service_id = verifier::service_id(&session);
    assert!(
        !tx.contains(&service_id),
        "the page's handle, not the service's id"
    );
    let request_uri = session["request_uri"].as_str().unwrap();
    assert!(request_uri.starts_with("openid4vp://?"), "{request_uri}");
    let wallet_url = session["wallet_url"].as_str().unwrap();
    assert_eq!(
        wallet_url,
        format!(
            "{}?{}",
            running.mock.wallet_url(),
            request_uri.split_once('?').unwrap().1
        )
    );
    assert!(session["qr_svg"].as_str().unwrap().contains("<svg"));
    assert_eq!(session["expires_in"], 300);

    let pending = browser.status(&running, tx).await;
    assert_eq!(pending.status, 200);
    assert_eq!(pending.json()["status"], "pending");

    // Anyone else asking gets nothing: no cookie, or another browser's.
    let stranger = Browser::default().status(&running, tx).await;
    assert_eq!(
        (stranger.status, error_code(&stranger).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let mut other = Browser::default();
    other.start(&running).await;
    assert_ne!(other.cookie, browser.cookie);
    assert_eq!(other.status(&running, tx).await.status, 404);

    let presented = send(
        Method::POST,
        &running.mock.wallet_present_url(&service_id),
        &[],
        Bytes::from_static(br#"{"given_name":"Ada","age_over_21":true}"#),
    )
    .await;
    assert_eq!(presented.status, 200);
    let verified = browser.until_ended(&running, tx).await;
    assert_eq!(verified.status, 200);
    assert_eq!(verified.headers["cache-control"], "no-store");
    assert_eq!(
        verified.json(),
        serde_json::json!({"status": "verified", "claims": {"given_name": "Ada", "age_over_21": true}})
    );
    assert_eq!(other.status(&running, tx).await.status, 404, "still bound");
    assert_eq!(metric(&running, "started").await, 2);
    assert_eq!(metric(&running, "verified").await, 1);
}

#[tokio::test]
async fn a_declined_session_ends_declined() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&running).await;
    let decline = running
        .mock
        .wallet_present_url(&session.service_id)
        .replace("/present", "/decline");
    assert_eq!(
        send(Method::POST, &decline, &[], Bytes::new()).await.status,
        200
    );
    let ended = browser.until_ended(&running, &session.handle).await;
    assert_eq!(ended.json(), serde_json::json!({"status": "declined"}));
    assert_eq!(metric(&running, "declined").await, 1);
}

#[tokio::test]
async fn a_session_past_its_lifetime_expires() {
    let running = verifier::start(
        support::mock().await,
        None,
        &[("LANYARD_VERIFIER_SESSION_TTL", "1s")],
    )
    .await;
    let mut browser = Browser::default();
    let started = browser.start(&running).await.json();
    assert_eq!(started["expires_in"], 1);
    let tx = started["transaction_id"].as_str().unwrap();
    let ended = browser.until_ended(&running, tx).await;
    assert_eq!(ended.json(), serde_json::json!({"status": "expired"}));
    assert_eq!(metric(&running, "expired").await, 1);
}

/// A service that answers every request as the test sets it.
#[derive(Clone)]
enum Script {
    Answer(u16, &'static str),
    Hang,
    /// Starts a session (`tx-1`), then answers every poll so.
    Poll(u16, &'static str),
    /// As `Poll(200, body)`, but the first poll never gets an answer.
    HangOnce(&'static str),
}

async fn scripted(script: Script) -> (String, tokio::task::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let script = Arc::new(Mutex::new(script));
    let task = tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let script = script.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let mut held = script.lock().unwrap();
                    let script = match held.clone() {
                        Script::Poll(..) | Script::HangOnce(_) if req.method() == Method::POST => {
                            Script::Answer(
                                201,
                                r#"{"transaction_id":"tx-1","request_uri":"openid4vp://?request_uri=x"}"#,
                            )
                        }
                        Script::Poll(status, body) => Script::Answer(status, body),
                        Script::HangOnce(body) => {
                            *held = Script::Poll(200, body);
                            Script::Hang
                        }
                        other => other,
                    };
                    drop(held);
                    async move {
                        match script {
                            Script::Answer(status, body) => {
                                let mut response =
                                    Response::new(Full::new(Bytes::from_static(body.as_bytes())));
                                *response.status_mut() = StatusCode::from_u16(status).unwrap();
                                Ok::<_, Infallible>(response)
                            }
                            Script::Hang | Script::Poll(..) | Script::HangOnce(_) => {
                                std::future::pending().await
                            }
                        }
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    (url, task)
}

/// Starts a session against a service set up by `prepare`, and returns
/// the page's answer and the operator's log.
async fn refused_start(
    service: Option<&str>,
    extra: &[(&str, &str)],
    prepare: impl FnOnce(&lanyard::mock::MockService),
) -> (Answer, Logs, Running) {
    let (logs, _guard) = Logs::capture();
    let mock = support::mock().await;
    prepare(&mock);
    let running = verifier::start(mock, service, extra).await;
    let answer = Browser::default().start(&running).await;
    (answer, logs, running)
}

#[tokio::test]
async fn each_refusal_of_the_service_reaches_the_page_and_the_log() {
    let other_rule = "6b2c0d4f-8e3a-4f9b-a7d1-2a3b4c5d6e7f";
    let cases = [
        // 403: the account is not in the project's group (docs/service.md §5.4).
        (
            "403",
            vec![("PROJECT_ID", "proj-other")],
            502,
            "service_refused",
            "docs/service.md §5.4",
        ),
        // 404: no such rule, or a draft.
        (
            "404",
            vec![("RULE_ID", other_rule)],
            502,
            "rule_not_found",
            "RULE_ID must be the UUID of a published rule",
        ),
    ];
    for (name, extra, status, code, logged) in cases {
        let (answer, logs, running) = refused_start(None, &extra, |mock| {
            mock.add_rule("proj-other", RULE);
        })
        .await;
        assert_eq!(answer.status.as_u16(), status, "{name}: {:?}", answer.body);
        assert_eq!(error_code(&answer), code, "{name}");
        assert!(
            logs.count(logged) >= 1,
            "{name}: no log line with {logged:?}: {:?}",
            logs.events()
        );
        assert_eq!(metric(&running, "failed").await, 1, "{name}");
        assert_eq!(metric(&running, "started").await, 0, "{name}");
    }
}

#[tokio::test]
async fn a_draft_rule_is_refused_as_unknown() {
    let draft = "7c3d1e5a-9f4b-4a0c-b8e2-3b4c5d6e7f80";
    let (answer, logs, _running) = refused_start(None, &[("RULE_ID", draft)], |mock| {
        mock.add_draft_rule(PROJECT, draft);
    })
    .await;
    assert_eq!(answer.status, 502, "{:?}", answer.body);
    assert_eq!(error_code(&answer), "rule_not_found");
    assert!(logs.count("published rule") >= 1);
}

#[tokio::test]
async fn a_401_even_to_a_renewed_token_is_a_refusal_of_the_account() {
    let (answer, logs, running) = refused_start(None, &[], |_| {}).await;
    assert_eq!(answer.status, 200, "the first start works");
    running.mock.set_revoke_on_issue(true);
    running.mock.revoke_all_tokens();
    let answer = Browser::default().start(&running).await;
    assert_eq!(answer.status, 502, "{:?}", answer.body);
    assert_eq!(error_code(&answer), "service_refused");
    assert!(
        logs.count("401 even to a renewed token") >= 1,
        "{:?}",
        logs.events()
    );
}

/// The 401 rule's other branch: the service refuses the held token and
/// no new one can be had, so the page is told to retry (`token_unavailable`,
/// docs: docs/tokens.md "Renewal and retries"), never that the account is refused.
#[tokio::test]
async fn a_401_while_no_new_token_can_be_had_tells_the_page_to_retry() {
    let (answer, _logs, running) =
        refused_start(None, &[("LANYARD_UPSTREAM_TIMEOUT", "2s")], |_| {}).await;
    assert_eq!(answer.status, 200, "the first start works");
    running.mock.set_token_outage(true);
    running.mock.revoke_all_tokens();
    let answer = Browser::default().start(&running).await;
    assert_eq!(answer.status, 503, "{:?}", answer.body);
    assert_eq!(error_code(&answer), "token_unavailable");
}

#[tokio::test]
async fn a_failing_slow_or_strange_service_is_a_clear_error() {
    let (failing, _a) = scripted(Script::Answer(503, "down")).await;
    let (slow, _b) = scripted(Script::Hang).await;
    let (strange, _c) = scripted(Script::Answer(200, r#"{"id":"not what lanyard assumes"}"#)).await;
    for (service, extra, status, code, logged) in [
        (&failing, vec![], 502, "service_error", "HTTP 503"),
        (
            &slow,
            vec![("LANYARD_UPSTREAM_TIMEOUT", "1s")],
            504,
            "upstream_timeout",
            "did not answer",
        ),
        (
            &strange,
            vec![],
            502,
            "service_error",
            "not what lanyard assumes",
        ),
    ] {
        let (answer, logs, _running) = refused_start(Some(service), &extra, |_| {}).await;
        assert_eq!(answer.status.as_u16(), status, "{code}: {:?}", answer.body);
        assert_eq!(error_code(&answer), code);
        let text = serde_json::to_string(&logs.events()).unwrap();
        assert!(text.contains(logged), "{code}: no {logged:?} in {text}");
    }
}

#[tokio::test]
async fn what_a_poll_meets_decides_how_the_session_ends() {
    for (status, body, page, then) in [
        // The service no longer knows the session: it ended there.
        (404, "gone", 200, "expired"),
        // The account is refused: polling again cannot help.
        (403, "no", 502, "failed"),
        // Perhaps passing: the session stays pending.
        (503, "down", 502, "pending"),
        // An answer lanyard can never read: asking again gives the same,
        // so it ends failed at once, with a message for the page.
        (200, "{}", 200, "failed"),
        (200, "<html>", 200, "failed"),
        (
            200,
            r#"{"status":"verified","claims":[1,2]}"#,
            200,
            "failed",
        ),
    ] {
        let (service, _task) = scripted(Script::Poll(status, body)).await;
        let running = verifier::start(support::mock().await, Some(&service), &[]).await;
        let mut browser = Browser::default();
        let tx = browser.start_session(&running).await.handle;
        let first = browser.status(&running, &tx).await;
        assert_eq!(first.status.as_u16(), page, "{status}: {:?}", first.body);
        let after = browser.status(&running, &tx).await;
        assert_eq!(after.json()["status"], then, "after a {status}");
        if then != "pending" {
            assert_eq!(metric(&running, then).await, 1, "after a {status}");
        }
    }
}

#[tokio::test]
async fn with_no_token_the_page_is_told_so() {
    let (answer, _logs, _running) = refused_start(None, &[], |mock| {
        mock.set_token_outage(true);
    })
    .await;
    assert_eq!(answer.status, 503);
    assert_eq!(error_code(&answer), "token_unavailable");
}

#[tokio::test]
async fn no_claim_reaches_the_logs_even_at_trace_level() {
    let logs = Logs::default();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(logs.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&running).await;
    let claims = br#"{"given_name":"Qwzxklaim","document_number":"DN-77441"}"#;
    let presented = send(
        Method::POST,
        &running.mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from_static(claims),
    )
    .await;
    assert_eq!(presented.status, 200);
    let verified = browser.until_ended(&running, &session.handle).await;
    assert_eq!(verified.json()["claims"]["given_name"], "Qwzxklaim");

    let scrape = get(&format!("{}/metrics", running.admin)).await;
    let scrape = String::from_utf8(scrape.body.to_vec()).unwrap();
    assert!(scrape.contains("lanyard_verifier_sessions_total"));
    for claim in ["Qwzxklaim", "DN-77441"] {
        assert!(!scrape.contains(claim), "a claim reached the metrics");
    }

    let text = String::from_utf8(logs.bytes()).unwrap();
    assert!(text.lines().count() > 20, "trace logging was on: {text}");
    for claim in ["Qwzxklaim", "DN-77441"] {
        assert!(!text.contains(claim), "a claim reached the logs");
    }
    assert_eq!(
        running.process.default_tokens().current().map(|_| ()),
        Some(())
    );
    let token = running.process.default_tokens().current().unwrap();
    let bearer = token
        .authorization()
        .to_str()
        .unwrap()
        .trim_start_matches("Bearer ");
    assert!(!text.contains(bearer), "the token reached the logs");
}

#[tokio::test]
async fn the_verifier_settings_are_checked_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mock = support::mock().await;
    // Every problem of one set of settings, one line each.
    let problems = |extra: &[(&str, &str)]| {
        let map = support::settings(&mock, dir.path(), extra);
        lanyard::config::Config::load(
            &lanyard::config::Flags::default(),
            &map,
            lanyard::config::Requirement::Verifier,
        )
        .unwrap_err()
        .lines()
        .join("\n")
    };
    /// Settings given, and the problems each must name.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str]);
    let cases: [Case; 2] = [
        (
            &[("RULE_ID", "ver_0123")],
            &[
                "PROJECT_ID: is required",
                "WALLET_BASE_URL: is required",
                "RULE_ID (environment variable RULE_ID): is the rule's `ver_` identifier",
            ],
        ),
        (
            &[
                ("PROJECT_ID", "a/b"),
                ("RULE_ID", "not-a-uuid"),
                ("WALLET_BASE_URL", "javascript:alert(1)"),
            ],
            &[
                "PROJECT_ID (environment variable PROJECT_ID): has characters that cannot appear in a URL path segment",
                "RULE_ID (environment variable RULE_ID): is not a UUID",
                "WALLET_BASE_URL (environment variable WALLET_BASE_URL): the scheme `javascript:` is not a link to a wallet",
            ],
        ),
    ];
    for (extra, named) in cases {
        let text = problems(extra);
        for line in named {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }
}
