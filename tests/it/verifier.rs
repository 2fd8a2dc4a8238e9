//! `lanyard verifier` over real sockets against the mock service: a
//! session started and polled to its end, bound to its browser; each
//! refusal of the service and each bad input, as the page and the operator
//! see them; the bound on starts; no claim in any log.

use crate::support;
use crate::support::DefaultTokens;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lanyard::mock::{MockAccount, generate_rsa_key};
use lanyard::verifier::CONTENT_SECURITY_POLICY;
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
async fn bad_requests_get_clear_errors() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    browser.start(&running).await;
    let url = &running.url;
    let cases = [
        (
            Method::GET,
            format!("{url}/api/status"),
            vec![],
            Bytes::new(),
            400,
            "bad_request",
        ),
        (
            Method::GET,
            format!("{url}/api/status?transactionId="),
            vec![],
            Bytes::new(),
            400,
            "bad_request",
        ),
        (
            Method::GET,
            format!("{url}/api/status?transactionId=..%2Fadmin"),
            vec![],
            Bytes::new(),
            400,
            "bad_request",
        ),
        (
            Method::GET,
            format!("{url}/api/status?transactionId=a&transactionId=b"),
            vec![],
            Bytes::new(),
            400,
            "bad_request",
        ),
        (
            Method::GET,
            format!("{url}/api/status?transactionId=no-such-tx"), // well-formed, opens under no key
            vec![],
            Bytes::new(),
            404,
            "not_found",
        ),
        (
            Method::POST,
            format!("{url}/api/status?transactionId=x"),
            vec![],
            Bytes::new(),
            405,
            "method_not_allowed",
        ),
        (
            Method::GET,
            format!("{url}/api/start"),
            vec![],
            Bytes::new(),
            405,
            "method_not_allowed",
        ),
        (
            Method::GET,
            format!("{url}/api/other"),
            vec![],
            Bytes::new(),
            404,
            "not_found",
        ),
        (
            Method::DELETE,
            format!("{url}/"),
            vec![],
            Bytes::new(),
            405,
            "method_not_allowed",
        ),
        (
            Method::POST,
            format!("{url}/api/start"),
            vec![("content-type", "application/json")],
            Bytes::from(vec![b'x'; 4096]),
            413,
            "payload_too_large",
        ),
        // A form post, as another site's page can send without asking.
        (
            Method::POST,
            format!("{url}/api/start"),
            vec![("content-type", "application/x-www-form-urlencoded")],
            Bytes::new(),
            415,
            "unsupported_media_type",
        ),
        (
            Method::POST,
            format!("{url}/api/start"),
            vec![],
            Bytes::new(),
            415,
            "unsupported_media_type",
        ),
        (
            Method::POST,
            format!("{url}/api/start"),
            vec![
                ("content-type", "application/json"),
                ("sec-fetch-site", "cross-site"),
            ],
            Bytes::new(),
            403,
            "cross_site_request",
        ),
        (
            Method::GET,
            format!("{url}/api/status?transactionId=x"),
            vec![("sec-fetch-site", "same-site")],
            Bytes::new(),
            403,
            "cross_site_request",
        ),
    ];
    for (method, target, headers, body, status, code) in cases {
        let mut all = headers.clone();
        let cookie = browser.cookie.clone().unwrap();
        all.push(("cookie", &cookie));
        let answer = send(method.clone(), &target, &all, body).await;
        assert_eq!(
            answer.status.as_u16(),
            status,
            "{method} {target}: {:?}",
            answer.body
        );
        assert_eq!(error_code(&answer), code, "{method} {target}");
        assert!(!answer.json()["message"].as_str().unwrap().is_empty());
    }
    let allow = send(Method::GET, &format!("{url}/api/start"), &[], Bytes::new()).await;
    assert_eq!(allow.headers["allow"], "POST");

    // The page's own requests, and a typed-in address, are let through.
    for site in ["same-origin", "none"] {
        let answer = send(
            Method::GET,
            &format!("{url}/api/status?transactionId=x"),
            &[("sec-fetch-site", site)],
            Bytes::new(),
        )
        .await;
        assert_eq!(answer.status, 404, "{site}");
    }

    // A body over the limit with no length declared: read up to the limit.
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /api/start HTTP/1.1\r\nhost: verifier\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    let chunk = format!("800\r\n{}\r\n0\r\n\r\n", "x".repeat(0x800));
    tokio::io::AsyncWriteExt::write_all(&mut stream, format!("{head}{chunk}").as_bytes())
        .await
        .unwrap();
    let mut answer = vec![0u8; 12];
    tokio::io::AsyncReadExt::read_exact(&mut stream, &mut answer)
        .await
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");

    // A cookie lanyard did not issue names no browser, though its id is
    // the right shape.
    let cookie = browser.cookie.clone().unwrap();
    let forged = cookie.split_once('.').unwrap().0.to_string();
    let tx = browser.start_session(&running).await.handle;
    let answer = send(
        Method::GET,
        &format!("{url}/api/status?transactionId={tx}"),
        &[("cookie", &forged)],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, 404, "a forged cookie");

    // A head too large for the server's limit.
    let huge = "x".repeat(70 * 1024);
    let answer = send(
        Method::GET,
        &format!("{url}/"),
        &[("x-big", &huge)],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, 431);
}

#[tokio::test]
async fn the_page_and_its_files_are_served_under_the_policy() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/verifier.js", "text/javascript; charset=utf-8"),
        ("/assets/verifier.css", "text/css; charset=utf-8"),
    ] {
        let answer = get(&format!("{}{path}", running.url)).await;
        assert_eq!(answer.status, 200, "{path}");
        assert_eq!(answer.headers["content-type"], content_type);
        assert_eq!(
            answer.headers["content-security-policy"],
            CONTENT_SECURITY_POLICY
        );
        assert_eq!(answer.headers["x-content-type-options"], "nosniff");
    }
    assert_eq!(get(&format!("{}/nope", running.url)).await.status, 404);
}

#[tokio::test]
async fn a_flood_of_starts_from_one_client_is_bounded() {
    // A refill an hour away: what a slow machine's clock allows plays no
    // part; the refill itself is `limits`' unit test on the paused clock.
    let running = verifier::start(
        support::mock().await,
        None,
        &[("LANYARD_VERIFIER_CLIENT_STARTS", "10/1h")],
    )
    .await;
    let mut statuses = Vec::new();
    let mut retry_after = None;
    // Without a cookie, as a script would: each start would be a new browser.
    for _ in 0..15 {
        let answer = Browser::default().start(&running).await;
        if answer.status == 429 {
            assert_eq!(error_code(&answer), "rate_limited");
            let seconds = answer.headers["retry-after"].to_str().unwrap();
            retry_after = Some(seconds.parse::<u64>().unwrap());
        }
        statuses.push(answer.status.as_u16());
    }
    let mut expected = vec![200; 10];
    expected.extend([429; 5]);
    assert_eq!(statuses, expected);
    assert!(
        retry_after.is_some_and(|s| (1..=360).contains(&s)),
        "{retry_after:?}"
    );
    assert_eq!(
        metric(&running, "started").await,
        10,
        "only those reached the service"
    );
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_client_has_its_own_limit() {
    let running = verifier::start(
        support::mock().await,
        None,
        &[("LANYARD_VERIFIER_FORWARDED_HOPS", "1")],
    )
    .await;
    let start = |forwarded: &'static str| {
        let url = format!("{}/api/start", running.url);
        async move {
            let headers = [
                ("content-type", "application/json"),
                ("x-forwarded-for", forwarded),
            ];
            send(Method::POST, &url, &headers, Bytes::new())
                .await
                .status
        }
    };
    // The client's own entry before the proxy's is not believed: these
    // are all 198.51.100.7.
    let mut statuses = Vec::new();
    for forwarded in ["198.51.100.7", "203.0.113.1, 198.51.100.7"]
        .into_iter()
        .cycle()
        .take(11)
    {
        statuses.push(start(forwarded).await.as_u16());
    }
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        1,
        "{statuses:?}"
    );
    assert_eq!(
        start("198.51.100.8").await,
        200,
        "another client behind the same proxy"
    );
}

/// A browser that holds another browser's cookie (planted by a sibling
/// subdomain with a longer path, so sent first) and the service's own
/// transaction id (read off the victim's QR code) reads nothing; the
/// victim's page, sending both cookies, still reads its session.
#[tokio::test]
async fn a_planted_cookie_and_the_service_s_id_read_nothing() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut planter = Browser::default();
    planter.start_session(&running).await;
    let planted = planter.cookie.clone().unwrap();
    let mut victim = Browser::default();
    victim.start_session(&running).await;
    let own = victim.cookie.clone().unwrap();
    victim.cookie = Some(format!("{planted}; {own}"));
    let session = victim.start_session(&running).await;

    for id in [&session.service_id, &session.handle.to_uppercase()] {
        let answer = planter.status(&running, id).await;
        assert_eq!(answer.status, 404, "{id}: {:?}", answer.body);
        assert_eq!(error_code(&answer), "not_found");
    }
    let presented = send(
        Method::POST,
        &running.mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from_static(br#"{"given_name":"Ada"}"#),
    )
    .await;
    assert_eq!(presented.status, 200);
    let verified = victim.until_ended(&running, &session.handle).await;
    assert_eq!(verified.json()["claims"]["given_name"], "Ada");
    let answer = planter.status(&running, &session.service_id).await;
    assert_eq!(answer.status, 404, "nor once verified");
}

/// A poll whose client goes away while the service is slow (a phone
/// sending the page to the background) leaves nothing behind: the next
/// poll asks the service again and the session ends verified, well
/// before the call that was cut off could have timed out.
#[tokio::test]
async fn a_poll_cut_off_mid_call_does_not_freeze_its_session() {
    let (service, _task) = scripted(Script::HangOnce(
        r#"{"status":"verified","claims":{"given_name":"Ada"}}"#,
    ))
    .await;
    let running = verifier::start(
        support::mock().await,
        Some(&service),
        &[("LANYARD_UPSTREAM_TIMEOUT", "1h")],
    )
    .await;
    let mut browser = Browser::default();
    let tx = browser.start_session(&running).await.handle;
    let cut = tokio::time::timeout(Duration::from_secs(1), browser.status(&running, &tx)).await;
    assert!(
        cut.is_err(),
        "the first poll hangs: {:?}",
        cut.map(|a| a.status)
    );
    let verified = browser.until_ended(&running, &tx).await;
    assert_eq!(
        verified.json(),
        serde_json::json!({"status": "verified", "claims": {"given_name": "Ada"}})
    );
}

fn session_key(byte: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

/// `LANYARD_VERIFIER_SESSION_KEY=new,old` answers sessions sealed under
/// the old key and seals new ones under the new; a replica that holds
/// only a key nobody sealed with answers the clean 404 the page offers a
/// new start for.
#[tokio::test]
async fn a_given_session_key_rotates_and_a_key_nobody_holds_ends_cleanly() {
    let mock = Arc::new(support::mock().await);
    let (old, new) = (session_key(1), session_key(2));
    let both = format!("{new},{old}");
    let replica = |key: &str| {
        let key = key.to_string();
        let mock = mock.clone();
        async move {
            verifier::start_shared(mock, None, &[("LANYARD_VERIFIER_SESSION_KEY", &key)]).await
        }
    };
    let before = replica(&old).await;
    let mut browser = Browser::default();
    let first = browser.start_session(&before).await;
    let first_cookie = browser.cookie.clone().unwrap();

    let rotating = replica(&both).await;
    assert_eq!(
        browser.status(&rotating, &first.handle).await.json()["status"],
        "pending"
    );
    // A start under the new key replaces the old key's cookie, naming the
    // same browser: the session its other tab started under the old
    // cookie is still its own.
    let second = browser.start_session(&rotating).await;
    assert_ne!(browser.cookie.as_ref(), Some(&first_cookie));
    assert_eq!(browser.status(&rotating, &second.handle).await.status, 200);
    assert_eq!(
        browser.status(&rotating, &first.handle).await.json()["status"],
        "pending",
        "the other tab's session"
    );

    let after = replica(&new).await;
    assert_eq!(browser.status(&after, &second.handle).await.status, 200);
    let old_browser = Browser {
        cookie: Some(first_cookie),
    };
    let gone = old_browser.status(&after, &first.handle).await;
    assert_eq!(gone.status, 404, "{:?}", gone.body);
    assert_eq!(error_code(&gone), "not_found");
    let unknown = verifier::start_shared(
        mock.clone(),
        None,
        &[("LANYARD_VERIFIER_SESSION_KEY", &session_key(3))],
    )
    .await;
    assert_eq!(browser.status(&unknown, &second.handle).await.status, 404);
    // A replica with another key says why, and counts it: nothing else
    // would tell its operator why every session it is sent fails.
    assert_eq!(unknown.process.metrics.verifier_handles_unopened.get(), 1);
}

/// A key derived from the service account's key survives a credentials
/// rotation that reaches replicas at different moments: each answers the
/// sessions the other started before, during and after.
#[tokio::test]
async fn a_derived_session_key_survives_a_credentials_rotation_across_replicas() {
    let mock = Arc::new(support::mock().await);
    let key = generate_rsa_key().expect("a key");
    mock.add_account(MockAccount {
        client_id: "sa-rotated".into(),
        organization_id: support::ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec!["verifications.api".into()],
        projects: vec![PROJECT.into()],
    });
    let rotated = serde_json::json!({
        "type": "service_account",
        "organization_id": support::ORGANIZATION_ID,
        "client_id": "sa-rotated",
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    })
    .to_string();
    let a = verifier::start_shared(mock.clone(), None, &[]).await;
    let b = verifier::start_shared(mock.clone(), None, &[]).await;
    let mut browser = Browser::default();
    let before = browser.start_session(&b).await;
    assert_eq!(
        browser.status(&a, &before.handle).await.status,
        200,
        "same key"
    );

    rotate(&a, &rotated).await;
    assert_eq!(
        browser.status(&a, &before.handle).await.status,
        200,
        "the previous key"
    );
    let during = browser.start_session(&a).await;
    let answer = browser.status(&b, &during.handle).await;
    assert_eq!(
        answer.status, 200,
        "b has not seen the new Secret yet: {:?}",
        answer.body
    );

    rotate(&b, &rotated).await;
    let after = browser.start_session(&b).await;
    for session in [&before, &during, &after] {
        for replica in [&a, &b] {
            assert_eq!(browser.status(replica, &session.handle).await.status, 200);
        }
    }
}

/// docs/verifier.md "Running many", Counting: `started` by the replica that started
/// a session, an ending by each replica the first time it answers it, and
/// never again however often it is polled.
#[tokio::test]
async fn each_replica_counts_the_start_it_made_and_each_ending_once() {
    let mock = Arc::new(support::mock().await);
    let a = verifier::start_shared(mock.clone(), None, &[]).await;
    let b = verifier::start_shared(mock.clone(), None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&a).await;
    let pending = browser.status(&b, &session.handle).await;
    assert_eq!(pending.json()["status"], "pending");
    let presented = send(
        Method::POST,
        &mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from_static(br#"{"given_name":"Ada"}"#),
    )
    .await;
    assert_eq!(presented.status, 200);
    let verified = browser.until_ended(&b, &session.handle).await;
    assert_eq!(verified.json()["status"], "verified");
    browser.status(&b, &session.handle).await;
    assert_eq!(
        (metric(&a, "started").await, metric(&b, "started").await),
        (1, 0)
    );
    assert_eq!(
        (metric(&a, "verified").await, metric(&b, "verified").await),
        (0, 1)
    );

    for _ in 0..2 {
        let answer = browser.status(&a, &session.handle).await;
        assert_eq!(answer.json()["status"], "verified");
    }
    assert_eq!(
        (metric(&a, "verified").await, metric(&b, "verified").await),
        (1, 1)
    );
}

/// Replaces a replica's credentials file, as a Secret's update does, and
/// waits for the reload.
async fn rotate(replica: &Running, contents: &str) {
    let staged = replica.credentials.with_extension("new");
    std::fs::write(&staged, contents).unwrap();
    std::fs::rename(&staged, &replica.credentials).unwrap();
    let mut reloads = replica.process.reloads.clone().expect("a file is watched");
    support::wait_for(&mut reloads, Duration::from_secs(10), |r| r.succeeded >= 1).await;
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
