//! `lanyard verifier` as the internet meets it (issue 22), over real
//! sockets against the mock: the claims reach the page as the service
//! wrote them, claims it can never use end the session instead of
//! "still trying" (and are logged once, by reason, never by value), a
//! flood of polls stays within the replica's budget for calls to the
//! service and a start past it is refused, the start limits are settings,
//! and every answer carries the security headers (HSTS only when a
//! trusted proxy says https).

use crate::support;

use bytes::Bytes;
use http::Method;
use lanyard::verifier::{CONTENT_SECURITY_POLICY, PERMISSIONS_POLICY};
use support::logs::Logs;
use support::sidecar::{Answer, get, send};
use support::verifier::{self, Browser, Running, Session, error_code};
use tokio::time::{Duration, Instant};

/// Presents `claims` (JSON text, as a wallet sends it) for `session`.
async fn present(running: &Running, session: &Session, claims: String) {
    let presented = send(
        Method::POST,
        &running.mock.wallet_present_url(&session.service_id),
        &[("content-type", "application/json")],
        Bytes::from(claims),
    )
    .await;
    assert_eq!(presented.status, 200, "{:?}", presented.body);
}

fn text(answer: &Answer) -> String {
    String::from_utf8(answer.body.to_vec()).unwrap()
}

#[tokio::test]
async fn claims_reach_the_page_digit_for_digit_and_a_portrait_fits() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&running).await;
    let portrait = "A".repeat(48 * 1024);
    let claims = format!(
        r#"{{"document_number": 123456789012345678901234567890, "height": 1.80, "portrait": "{portrait}"}}"#
    );
    present(&running, &session, claims.clone()).await;
    let verified = browser.until_ended(&running, &session.handle).await;
    assert_eq!(verified.status, 200);
    assert_eq!(
        text(&verified),
        format!(r#"{{"status":"verified","claims":{claims}}}"#),
        "the service's text, not re-encoded"
    );
}

#[tokio::test]
async fn claims_the_verifier_can_never_use_end_the_session_failed_within_a_few_polls() {
    let too_large = format!(r#"{{"portrait": "{}"}}"#, "A".repeat(300 * 1024));
    for claims in [r#"[1, 2]"#.to_string(), r#""text""#.to_string(), too_large] {
        let running = verifier::start(support::mock().await, None, &[]).await;
        let mut browser = Browser::default();
        let session = browser.start_session(&running).await;
        let calls_before = running.mock.counters().api_requests;
        present(&running, &session, claims).await;
        let ended = browser.until_ended(&running, &session.handle).await;
        assert_eq!(ended.status, 200, "{:?}", ended.body);
        let ended = ended.json();
        assert_eq!(ended["status"], "failed");
        // An id the page says in its language, not a sentence.
        assert_eq!(ended["reason"], "claims-unusable", "{ended}");
        assert!(ended.get("message").is_none(), "{ended}");
        let calls = running.mock.counters().api_requests - calls_before;
        assert!(calls <= 2, "{calls} polls of the service; one is enough");
        let again = browser.status(&running, &session.handle).await.json();
        assert_eq!(again["status"], "failed", "and stays so");
    }
}

/// The operator learns of claims the verifier can never use once, by the
/// reason (a field, never a value: the value is a claim), however many
/// times the page polls the ended session after.
#[tokio::test]
async fn claims_the_verifier_can_never_use_are_logged_once_by_reason_never_by_value() {
    let (logs, _guard) = Logs::capture();
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&running).await;
    present(
        &running,
        &session,
        r#"["Qwzxklaim", "DN-77441"]"#.to_string(),
    )
    .await;
    let ended = browser.until_ended(&running, &session.handle).await;
    assert_eq!(ended.json()["status"], "failed", "{:?}", ended.body);
    let calls = running.mock.counters().api_requests;
    // Polled on a second apart, as the page polls at first: for a session
    // this young, each poll would ask the service again were the ending
    // not known.
    for _ in 0..3 {
        tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await;
        let again = browser.status(&running, &session.handle).await;
        assert_eq!(again.json()["status"], "failed");
    }
    assert_eq!(
        running.mock.counters().api_requests,
        calls,
        "the ending is known: the service is not asked again"
    );

    let warnings: Vec<String> = logs
        .events()
        .iter()
        .filter(|event| event["level"] == "WARN")
        .filter_map(|event| event["fields"]["message"].as_str().map(str::to_string))
        .filter(|message| message.contains("claims"))
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("is `verified` with claims that are not a JSON object")
            && warnings[0].contains("the session ends failed"),
        "{}",
        warnings[0]
    );
    let text = String::from_utf8(logs.bytes()).unwrap();
    for claim in ["Qwzxklaim", "DN-77441"] {
        assert!(!text.contains(claim), "a claim reached the logs: {text}");
    }
}

/// Starts a session from `client`, waiting out the service budget's
/// refusals (503) as the page's user would press again; returns it with
/// the browser that started it.
async fn start_through_budget(running: &Running, client: &str) -> (Session, Browser) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut browser = Browser::default();
        let answer = browser
            .start_with(running, &[("x-forwarded-for", client)])
            .await;
        match answer.status.as_u16() {
            200 => return (Session::of(&answer.json()), browser),
            503 => assert!(Instant::now() < deadline, "the budget never refilled"),
            other => panic!("{other}: {:?}", answer.body),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_flood_of_polls_stays_within_the_replicas_budget_for_service_calls() {
    const BURST: u64 = 5;
    const PER_SECOND: f64 = 5.0;
    let running = verifier::start(
        support::mock().await,
        None,
        &[
            ("LANYARD_VERIFIER_SERVICE_CALLS", "5/1s"),
            ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
        ],
    )
    .await;
    let mut sessions = Vec::new();
    for n in 0..10 {
        // Each its own client: the per-client start limit is not the point.
        sessions.push(start_through_budget(&running, &format!("198.51.100.{n}")).await);
    }
    let calls_before = running.mock.counters().api_requests;
    let started = Instant::now();
    let flood_for = Duration::from_secs(2);
    let mut polls = 0u64;
    while started.elapsed() < flood_for {
        let answers = futures_join(&running, &sessions).await;
        polls += answers.len() as u64;
        assert!(answers.iter().all(|status| *status == 200), "{answers:?}");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let calls = running.mock.counters().api_requests - calls_before;
    let ceiling = BURST + (PER_SECOND * elapsed).ceil() as u64 + 1;
    assert!(
        calls <= ceiling,
        "{calls} calls to the service in {elapsed:.1} s; the budget allows {ceiling}"
    );
    assert!(
        calls > 0 && polls > 10 * calls,
        "{polls} polls, {calls} calls"
    );
}

/// One poll of every session, at once, by the browser that started it.
async fn futures_join(running: &Running, sessions: &[(Session, Browser)]) -> Vec<u16> {
    let mut tasks = tokio::task::JoinSet::new();
    for (session, browser) in sessions {
        let url = format!(
            "{}/api/status?transactionId={}",
            running.url, session.handle
        );
        let browser = Browser {
            cookie: browser.cookie.clone(),
        };
        tasks.spawn(async move {
            browser
                .request(Method::GET, &url, &[])
                .await
                .status
                .as_u16()
        });
    }
    tasks.join_all().await
}

/// A start that finds the replica's budget for service calls spent is
/// told so (docs/verifier.md, Errors: 503 `too_many_sessions`), under the
/// same security headers as every answer, and reaches no service. The
/// guide gives
/// `Retry-After` only to `rate_limited`, and this answer has none: when
/// the budget refills is not the page's to know.
#[tokio::test]
async fn a_start_past_the_service_budget_is_503_too_many_sessions_and_secured() {
    let running = verifier::start(
        support::mock().await,
        None,
        &[
            ("LANYARD_VERIFIER_SERVICE_CALLS", "1/1h"),
            ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
        ],
    )
    .await;
    let proxied = [
        ("x-forwarded-for", "203.0.113.9"),
        ("x-forwarded-proto", "https"),
    ];
    let spent = Browser::default().start_with(&running, &proxied).await;
    assert_eq!(spent.status, 200, "the burst's one call: {:?}", spent.body);
    let calls = running.mock.counters().api_requests;

    let refused = Browser::default().start_with(&running, &proxied).await;
    assert_eq!(refused.status, 503, "{:?}", refused.body);
    assert_eq!(error_code(&refused), "too_many_sessions");
    assert!(
        !refused.headers.contains_key("retry-after"),
        "{:?}",
        refused.headers
    );
    assert_secured(&refused, "a start past the budget", true);
    assert_eq!(
        running.mock.counters().api_requests,
        calls,
        "nothing reached the service"
    );
}

#[tokio::test]
async fn the_start_limits_are_settings() {
    let running = verifier::start(
        support::mock().await,
        None,
        &[("LANYARD_VERIFIER_CLIENT_STARTS", "2/1h")],
    )
    .await;
    let mut browser = Browser::default();
    let mut seen = Vec::new();
    for _ in 0..3 {
        seen.push(browser.start(&running).await.status.as_u16());
    }
    assert_eq!(seen, [200, 200, 429]);
}

/// `LANYARD_VERIFIER_STARTS` bounds all clients together: each start
/// here is a client of its own, far within its own limit (the default),
/// and the third is refused all the same, with `Retry-After` (one start
/// every 30 minutes after the burst) and before reaching the service.
#[tokio::test]
async fn the_start_limit_for_all_clients_together_is_a_setting() {
    let running = verifier::start(
        support::mock().await,
        None,
        &[
            ("LANYARD_VERIFIER_STARTS", "2/1h"),
            ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
        ],
    )
    .await;
    let mut seen = Vec::new();
    let mut refused = None;
    for client in ["198.51.100.1", "198.51.100.2", "198.51.100.3"] {
        let answer = Browser::default()
            .start_with(&running, &[("x-forwarded-for", client)])
            .await;
        seen.push(answer.status.as_u16());
        if answer.status == 429 {
            refused = Some(answer);
        }
    }
    assert_eq!(seen, [200, 200, 429]);
    let refused = refused.unwrap();
    assert_eq!(error_code(&refused), "rate_limited");
    let retry_after: u64 = refused.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (1..=1800).contains(&retry_after),
        "{retry_after} s; the next start is due 30 minutes after the burst"
    );
    assert_eq!(
        running.mock.counters().api_requests,
        2,
        "the refused start reached no service"
    );
}

fn assert_secured(answer: &Answer, what: &str, hsts: bool) {
    assert_eq!(
        answer.headers["content-security-policy"], CONTENT_SECURITY_POLICY,
        "{what}"
    );
    assert_eq!(
        answer.headers["permissions-policy"], PERMISSIONS_POLICY,
        "{what}"
    );
    assert_eq!(answer.headers["x-frame-options"], "DENY", "{what}");
    assert_eq!(
        answer.headers["x-content-type-options"], "nosniff",
        "{what}"
    );
    assert_eq!(
        answer.headers.contains_key("strict-transport-security"),
        hsts,
        "{what}"
    );
}

#[tokio::test]
async fn every_answer_is_secured_and_https_only_on_a_trusted_proxys_word() {
    for (hops, https, trusted) in [("0", true, false), ("1", false, false), ("1", true, true)] {
        let running = verifier::start(
            support::mock().await,
            None,
            &[("LANYARD_VERIFIER_FORWARDED_HOPS", hops)],
        )
        .await;
        let mut proxied = vec![("x-forwarded-for", "203.0.113.9")];
        if https {
            proxied.push(("x-forwarded-proto", "https"));
        }
        let url = &running.url;
        let case = format!("hops {hops}, https {https}");
        for (method, path, status) in [
            (Method::GET, "/", 200),
            (Method::GET, "/nope", 404),
            (Method::GET, "/api/status?transactionId=AAAA", 404),
            (Method::GET, "/api/status", 400),
            (Method::DELETE, "/api/start", 405),
            (Method::POST, "/api/start", 415),
        ] {
            let answer = send(
                method.clone(),
                &format!("{url}{path}"),
                &proxied,
                Bytes::new(),
            )
            .await;
            assert_eq!(answer.status, status, "{case}: {method} {path}");
            assert_secured(&answer, &format!("{case}: {method} {path}"), trusted);
        }
        let mut headers = proxied.clone();
        headers.push(("content-type", "application/json"));
        let started = send(
            Method::POST,
            &format!("{url}/api/start"),
            &headers,
            Bytes::new(),
        )
        .await;
        assert_eq!(started.status, 200, "{case}");
        assert_secured(&started, &format!("{case}: start"), trusted);
        let cookie = started.headers["set-cookie"].to_str().unwrap();
        assert_eq!(
            cookie.starts_with("__Host-lanyard_verifier=") && cookie.contains("; Secure"),
            trusted,
            "{case}: {cookie}"
        );
    }
    let direct = verifier::start(support::mock().await, None, &[]).await;
    let plain = get(&format!("{}/", direct.url)).await;
    assert_secured(&plain, "no proxy", false);
}
