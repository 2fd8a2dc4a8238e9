//! The proxy end to end over real sockets: header rules, path joining,
//! refused targets, streaming, lanyard's own errors, 401 and 403 handling,
//! TLS and HTTP/2 to the upstream, readiness and metrics.

use crate::support;
use crate::support::DefaultTokens;

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use lanyard::mock::Fault;
use support::sidecar::{self, get, send};
use support::tls::TestCa;
use support::upstream::TestUpstream;
use support::*;
use tokio::io::AsyncWriteExt;

const RULE: &str = "2b0c1a7e-5d4f-4e3a-8b2c-1d0e9f8a7b6c";

fn header_values(echo: &serde_json::Value, name: &str) -> Vec<String> {
    echo["headers"][name]
        .as_array()
        .map(|v| v.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn incoming_authorization_is_replaced_with_the_held_token() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let answer = send(
        Method::GET,
        &format!("{}/whoami", running.proxy),
        &[
            ("authorization", "Bearer forged"),
            ("proxy-authorization", "Basic c2VjcmV0"),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let echo = answer.json();
    let auth = header_values(&echo, "authorization");
    assert_eq!(auth.len(), 1, "{echo}");
    let token = auth[0].strip_prefix("Bearer ").unwrap();
    assert_eq!(running.mock.token_owner(token).as_deref(), Some(CLIENT_ID));
    assert!(header_values(&echo, "proxy-authorization").is_empty());
}

#[tokio::test]
async fn hop_by_hop_headers_are_dropped_and_others_kept() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    // Raw, since an HTTP client would not send most of these itself.
    let request = "GET /h HTTP/1.1\r\n\
         Host: app.internal\r\n\
         Connection: close, Upgrade, HTTP2-Settings, X-Hop\r\n\
         Upgrade: h2c\r\n\
         HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\
         Proxy-Connection: keep-alive\r\n\
         Keep-Alive: timeout=5\r\n\
         TE: gzip\r\n\
         Trailer: X-Checksum\r\n\
         X-Hop: 1\r\n\
         X-App: kept\r\n\
         \r\n";
    const HOP_BY_HOP: [&str; 8] = [
        "connection",
        "upgrade",
        "http2-settings",
        "proxy-connection",
        "keep-alive",
        "te",
        "trailer",
        "x-hop",
    ];
    // Sent to the upstream directly, every one of them arrives: the echo
    // would show them.
    let (_, body) = raw::to_end(&upstream.url, request).await;
    let direct: serde_json::Value = serde_json::from_slice(&body).unwrap();
    for name in HOP_BY_HOP {
        assert!(!header_values(&direct, name).is_empty(), "{name}: {direct}");
    }

    let (head, body) = raw::to_end(&running.proxy, request).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let echo: serde_json::Value = serde_json::from_slice(&body).unwrap();
    for gone in HOP_BY_HOP {
        assert!(
            header_values(&echo, gone).is_empty(),
            "{gone} forwarded: {echo}"
        );
    }
    assert_eq!(header_values(&echo, "x-app"), ["kept"]);
    assert_eq!(echo["version"], "HTTP/1.1");
}

#[tokio::test]
async fn host_is_the_upstreams() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let answer = send(
        Method::GET,
        &format!("{}/h", running.proxy),
        &[("host", "app.internal")],
        Bytes::new(),
    )
    .await;
    assert_eq!(
        header_values(&answer.json(), "host"),
        [format!("127.0.0.1:{}", upstream.addr.port())]
    );
}

#[tokio::test]
async fn path_and_query_join_the_base_url_prefix() {
    let upstream = TestUpstream::start(None).await;
    let base = format!("{}/base/v1/", upstream.url);
    let running = sidecar::ready_for(&base, &[]).await;
    let answer = get(&format!("{}/items/42?expand=true&x=%20y", running.proxy)).await;
    assert_eq!(
        answer.json()["path"],
        "/base/v1/items/42?expand=true&x=%20y"
    );
    let answer = get(&format!("{}/", running.proxy)).await;
    assert_eq!(answer.json()["path"], "/base/v1/");
}

/// Sends `request` as written: lanyard answers `status` with `error`,
/// and nothing reaches the upstream.
async fn refused_as_written(
    upstream: &TestUpstream,
    running: &sidecar::Running,
    request: &str,
    status: &str,
    error: &str,
) {
    let head = raw::head_of(&running.proxy, request).await;
    assert!(head.starts_with(&format!("HTTP/1.1 {status}")), "{head}");
    assert!(head.contains(&format!("lanyard-error: {error}")), "{head}");
    assert_eq!(upstream.requests(), 0);
}

#[tokio::test]
async fn absolute_form_for_another_host_is_refused_and_not_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let steal = "GET http://evil.example.com/steal HTTP/1.1\r\nHost: evil.example.com\r\n\r\n";
    refused_as_written(&upstream, &running, steal, "400", "forbidden_target").await;

    // Absolute form naming the upstream itself is fine.
    let request = format!(
        "GET http://127.0.0.1:{port}/ok HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n",
        port = upstream.addr.port()
    );
    assert!(
        raw::head_of(&running.proxy, &request)
            .await
            .starts_with("HTTP/1.1 200")
    );
}

#[tokio::test]
async fn connect_is_refused_and_not_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let connect = "CONNECT evil.example.com:443 HTTP/1.1\r\nHost: evil.example.com:443\r\n\r\n";
    refused_as_written(&upstream, &running, connect, "405", "method_not_allowed").await;
}

/// A sidecar whose token endpoint answers `status` to its first `times`
/// requests, once it has made its first attempt.
async fn after_a_failed_attempt(upstream: &str, status: u16, times: usize) -> sidecar::Running {
    let mock = mock().await;
    for _ in 0..times {
        mock.push_fault(Fault::server_error(status));
    }
    let running = sidecar::start(mock, upstream, &[]).await;
    wait_for(
        &mut running.process.default_tokens().state(),
        Duration::from_secs(5),
        |s| s.attempts >= 1,
    )
    .await;
    running
}

#[tokio::test]
async fn no_token_is_token_unavailable_and_nothing_is_forwarded() {
    let upstream = TestUpstream::start(None).await;
    let running = after_a_failed_attempt(&upstream.url, 503, 5).await;
    let answer = get(&format!("{}/x", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers["lanyard-error"], "token_unavailable");
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(answer.json()["error"], "token_unavailable");
    assert_eq!(upstream.requests(), 0);
}

#[tokio::test]
async fn unreachable_upstream_is_502_with_a_fixed_message() {
    let closed = closed_port();
    let running = sidecar::start(mock().await, &format!("http://{closed}"), &[]).await;
    running.ready().await;
    let answer = get(&format!("{}/x", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        answer.json(),
        serde_json::json!({"error": "upstream_unreachable", "message": "lanyard could not reach the service"})
    );
    assert_eq!(
        running
            .process
            .metrics
            .upstream_errors
            .with_label_values(&["connect"])
            .get(),
        1
    );
}

#[tokio::test]
async fn slow_upstream_is_504() {
    let (_upstream, running) = sidecar::echoing(&[("LANYARD_UPSTREAM_TIMEOUT", "200ms")]).await;
    let answer = get(&format!("{}/slow?ms=5000", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(answer.headers["lanyard-error"], "upstream_timeout");
    assert_eq!(
        running
            .process
            .metrics
            .upstream_errors
            .with_label_values(&["timeout"])
            .get(),
        1
    );
}

#[tokio::test]
async fn tls_upstream_with_a_private_ca_is_reached_over_http2() {
    let ca = TestCa::new();
    let upstream = TestUpstream::start(Some(ca.server.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", &ca.ca_pem);
    let running = sidecar::start(
        mock().await,
        &upstream.url,
        &[("LANYARD_CA_FILE", ca_file.to_str().unwrap())],
    )
    .await;
    running.ready().await;
    let answer = get(&format!("{}/tls", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::OK);
    let echo = answer.json();
    assert_eq!(echo["version"], "HTTP/2.0");
    assert_eq!(
        echo["authority"],
        format!("localhost:{}", upstream.addr.port())
    );
    assert_eq!(header_values(&echo, "authorization").len(), 1);
}

#[tokio::test]
async fn tls_upstream_with_an_unknown_ca_is_upstream_tls() {
    let ca = TestCa::new();
    let upstream = TestUpstream::start(Some(ca.server.clone())).await;
    let running = sidecar::start(mock().await, &upstream.url, &[]).await;
    running.ready().await;
    let answer = get(&format!("{}/tls", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::BAD_GATEWAY);
    assert_eq!(answer.headers["lanyard-error"], "upstream_tls");
    assert_eq!(
        running
            .process
            .metrics
            .upstream_errors
            .with_label_values(&["tls"])
            .get(),
        1
    );
}

#[tokio::test]
async fn upstream_403_is_passed_through_and_counted() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    for _ in 0..3 {
        let answer = get(&format!("{}/status/403", running.proxy)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        assert_eq!(answer.body, "status 403");
        assert!(!answer.headers.contains_key("lanyard-error"));
    }
    assert_eq!(running.process.metrics.upstream_forbidden.get(), 3);
}

/// A sidecar in front of the mock's own API, which checks tokens.
async fn api_sidecar() -> sidecar::Running {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let api = mock.api_url();
    let running = sidecar::start(mock, &api, &[]).await;
    running.ready().await;
    running
}

fn rule_url(running: &sidecar::Running, project: &str) -> String {
    format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/{project}/verifications/{RULE}",
        running.proxy
    )
}

#[tokio::test]
async fn unauthorized_leads_to_one_new_token_shared_by_concurrent_requests() {
    let running = api_sidecar().await;
    assert_eq!(
        get(&rule_url(&running, "proj-demo")).await.status,
        StatusCode::OK
    );
    running.mock.revoke_all_tokens();
    let before = running.mock.counters().token_requests;

    let mut requests = tokio::task::JoinSet::new();
    for _ in 0..16 {
        let url = rule_url(&running, "proj-demo");
        requests.spawn(async move { get(&url).await.status });
    }
    while let Some(status) = requests.join_next().await {
        assert_eq!(status.unwrap(), StatusCode::OK);
    }
    assert_eq!(running.mock.counters().token_requests, before + 1);
    assert_eq!(
        running
            .process
            .default_tokens()
            .current()
            .unwrap()
            .generation(),
        2
    );
    // Each request that met the 401 was retried once; one that started
    // after the renewal (the proxy threads run alongside this test's) went
    // out with the new token at once.
    let retries = running.process.metrics.upstream_unauthorized_retries.get();
    assert!((1..=16).contains(&retries), "{retries} retries");
}

#[tokio::test]
async fn unauthorized_with_a_small_chunked_body_is_retried() {
    let running = api_sidecar().await;
    running.mock.revoke_all_tokens();
    let url = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/credentials",
        running.proxy
    );
    let mut account = account();
    account.roles.push("credentials.api".into());
    running.mock.add_account(account);
    let body = support::upstream::UnsizedBody(Some(Bytes::from_static(br#"{"given_name":"Ada"}"#)));
    let request = http::Request::post(url)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = sidecar::client_for().request(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(
        running.process.metrics.upstream_unauthorized_retries.get(),
        1
    );
    let seen = running.mock.last_api_request().unwrap();
    assert_eq!(seen.headers["content-length"], "20");
}

#[tokio::test]
async fn unauthorized_with_a_large_body_is_passed_through() {
    let running = api_sidecar().await;
    running.mock.revoke_all_tokens();
    let url = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/credentials",
        running.proxy
    );
    let big = Bytes::from(vec![b' '; 100 * 1024]);
    let answer = send(
        Method::POST,
        &url,
        &[("content-type", "application/json")],
        big,
    )
    .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert!(!answer.headers.contains_key("lanyard-error"));
    assert_eq!(
        running.process.metrics.upstream_unauthorized_retries.get(),
        0
    );
    // The 401 still retires the token for the requests that follow.
    wait_for(
        &mut running.process.default_tokens().state(),
        Duration::from_secs(5),
        |s| s.generation >= 2,
    )
    .await;
    assert_eq!(
        get(&rule_url(&running, "proj-demo")).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn forbidden_project_is_passed_through_with_the_services_reason() {
    let running = api_sidecar().await;
    let answer = get(&rule_url(&running, "proj-other")).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert_eq!(answer.json()["missing"], "project_group");
    assert_eq!(running.process.metrics.upstream_forbidden.get(), 1);
}

#[tokio::test]
async fn readiness_waits_for_the_first_token() {
    let upstream = TestUpstream::start(None).await;
    let running = after_a_failed_attempt(&upstream.url, 500, 1).await;
    let answer = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    let reason = answer.json();
    assert_eq!(reason["reason"], "no token has been obtained yet");
    assert_eq!(reason["last_error"], "the token endpoint failed: HTTP 500");
    assert_eq!(
        get(&format!("{}/healthz", running.admin)).await.status,
        StatusCode::OK
    );

    running.ready().await;
    let answer = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.json()["status"], "ready");
}

#[tokio::test]
async fn readiness_is_lost_when_the_token_expires_unrenewed() {
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    // Renewed at 2.8-3.4 s, retired at 4 s (no margin, so the failed
    // renewal is seen well before the retirement).
    mock.set_expires_in(Some(4));
    // The first token request succeeds, every renewal after it fails.
    mock.push_fault(Fault::Pass);
    for _ in 0..50 {
        mock.push_fault(Fault::server_error(503));
    }
    let running = sidecar::start(mock, &upstream.url, &[("LANYARD_EXPIRY_MARGIN", "0")]).await;
    running.ready().await;
    // A 4 s token never has 10 s to go, but its renewal is on schedule:
    // ready (docs/tokens.md "Token lifetime").
    let answer = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(answer.status, StatusCode::OK);
    // Its renewal fails: with under 10 s to go, not ready.
    wait_for(
        &mut running.process.default_tokens().state(),
        Duration::from_secs(5),
        |s| s.failures_since_due >= 1,
    )
    .await;
    let answer = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        answer.json()["reason"],
        "the token has less than 10 s left before it is retired, and its renewal is failing"
    );

    let token = running.process.default_tokens().current().unwrap();
    tokio::time::sleep_until(token.expires_at()).await;
    assert!(running.process.default_tokens().current().is_none());
    let answer = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(
        answer.json()["reason"],
        "the token has been retired (its expiry margin reached) and could not be renewed"
    );
    let answer = get(&format!("{}/x", running.proxy)).await;
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(upstream.requests(), 0);
}

#[tokio::test]
async fn metrics_are_exported_under_the_contract_names_and_pass_promtool() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    get(&format!("{}/x", running.proxy)).await;
    get(&format!("{}/status/403", running.proxy)).await;
    let answer = get(&format!("{}/metrics", running.admin)).await;
    assert_eq!(answer.status, StatusCode::OK);
    let text = String::from_utf8(answer.body.to_vec()).unwrap();
    for (name, kind) in [
        ("lanyard_token_requests_total", "counter"),
        ("lanyard_token_request_duration_seconds", "histogram"),
        ("lanyard_token_expiry_timestamp_seconds", "gauge"),
        ("lanyard_proxy_requests_total", "counter"),
        ("lanyard_proxy_request_duration_seconds", "histogram"),
        ("lanyard_proxy_in_flight_requests", "gauge"),
        ("lanyard_upstream_errors_total", "counter"),
        ("lanyard_upstream_unauthorized_retries_total", "counter"),
        ("lanyard_upstream_forbidden_total", "counter"),
        ("lanyard_credentials_reloads_total", "counter"),
        ("lanyard_otel_spans_dropped_total", "counter"),
        ("lanyard_build_info", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} {kind}\n")),
            "{name} missing:\n{text}"
        );
    }
    // Token series carry the account's client_id and organization, one
    // account included.
    let organization = format!(
        ",organization=\"{}\",outcome=\"success\"}} 1",
        support::ORGANIZATION_ID
    );
    assert!(
        text.lines().any(
            |l| l.starts_with("lanyard_token_requests_total{client_id=\"")
                && l.ends_with(&organization)
        ),
        "{text}"
    );
    assert!(
        text.contains("lanyard_proxy_requests_total{code=\"200\",method=\"GET\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("lanyard_proxy_requests_total{code=\"403\",method=\"GET\"} 1\n"),
        "{text}"
    );
    assert!(text.contains(&format!(
        "lanyard_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    )));
    assert!(text.contains("process_resident_memory_bytes"), "{text}");

    let mut promtool = tokio::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is installed (Debian package prometheus; .ci/run installs it)");
    promtool
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .await
        .unwrap();
    let out = promtool.wait_with_output().await.unwrap();
    assert!(
        out.status.success(),
        "promtool: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn upstream_rejecting_every_token_does_not_hammer_the_token_endpoint() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    for _ in 0..20 {
        let answer = get(&format!("{}/status/401", running.proxy)).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        assert!(!answer.headers.contains_key("lanyard-error"));
    }
    // The first token, and one forced renewal; the rest are throttled.
    assert_eq!(running.mock.counters().token_requests, 2);
    assert_eq!(
        running.process.metrics.upstream_unauthorized_retries.get(),
        1
    );
}
