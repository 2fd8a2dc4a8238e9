//! The verifier's answers to what no page of its own sends: each bad
//! request, the page's files under the policy, the bound on starts, a
//! planted cookie, a poll cut off mid-call.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::Method;
use lanyard::verifier::CONTENT_SECURITY_POLICY;
use support::sidecar::{get, send};
use support::verifier::{self, Browser, error_code};

use super::{Script, metric, scripted};

/// A request the verifier refuses: method, path, headers, how many bytes
/// of body, and the status and error code it gets.
type Refused = (
    Method,
    &'static str,
    &'static [(&'static str, &'static str)],
    usize,
    u16,
    &'static str,
);

const JSON: (&str, &str) = ("content-type", "application/json");

const REFUSED: [Refused; 14] = [
    (Method::GET, "/api/status", &[], 0, 400, "bad_request"),
    (
        Method::GET,
        "/api/status?transactionId=",
        &[],
        0,
        400,
        "bad_request",
    ),
    (
        Method::GET,
        "/api/status?transactionId=..%2Fadmin",
        &[],
        0,
        400,
        "bad_request",
    ),
    (
        Method::GET,
        "/api/status?transactionId=a&transactionId=b",
        &[],
        0,
        400,
        "bad_request",
    ),
    // Well-formed, but opens under no key.
    (
        Method::GET,
        "/api/status?transactionId=no-such-tx",
        &[],
        0,
        404,
        "not_found",
    ),
    (
        Method::POST,
        "/api/status?transactionId=x",
        &[],
        0,
        405,
        "method_not_allowed",
    ),
    (Method::GET, "/api/start", &[], 0, 405, "method_not_allowed"),
    (Method::GET, "/api/other", &[], 0, 404, "not_found"),
    (Method::DELETE, "/", &[], 0, 405, "method_not_allowed"),
    (
        Method::POST,
        "/api/start",
        &[JSON],
        4096,
        413,
        "payload_too_large",
    ),
    // A form post, as another site's page can send without asking.
    (
        Method::POST,
        "/api/start",
        &[("content-type", "application/x-www-form-urlencoded")],
        0,
        415,
        "unsupported_media_type",
    ),
    (
        Method::POST,
        "/api/start",
        &[],
        0,
        415,
        "unsupported_media_type",
    ),
    (
        Method::POST,
        "/api/start",
        &[JSON, ("sec-fetch-site", "cross-site")],
        0,
        403,
        "cross_site_request",
    ),
    (
        Method::GET,
        "/api/status?transactionId=x",
        &[("sec-fetch-site", "same-site")],
        0,
        403,
        "cross_site_request",
    ),
];

/// The status line's first 12 bytes for a chunked body over the limit,
/// which declares no length: lanyard reads up to the limit, no further.
async fn unsized_body_over_the_limit(url: &str) -> Vec<u8> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = "POST /api/start HTTP/1.1\r\nhost: verifier\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
    let chunk = format!("800\r\n{}\r\n0\r\n\r\n", "x".repeat(0x800));
    stream
        .write_all(format!("{head}{chunk}").as_bytes())
        .await
        .unwrap();
    let mut answer = vec![0u8; 12];
    stream.read_exact(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn bad_requests_get_clear_errors() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut browser = Browser::default();
    browser.start(&running).await;
    let url = &running.url;
    let cookie = browser.cookie.clone().unwrap();
    for (method, path, headers, body, status, code) in REFUSED {
        let target = format!("{url}{path}");
        let mut all = headers.to_vec();
        all.push(("cookie", &cookie));
        let answer = send(method.clone(), &target, &all, Bytes::from(vec![b'x'; body])).await;
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
    assert_eq!(unsized_body_over_the_limit(url).await, b"HTTP/1.1 413");

    // A cookie lanyard did not issue names no browser, though its id is
    // the right shape.
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
