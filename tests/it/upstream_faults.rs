//! How the proxy behaves when the upstream misbehaves, over real sockets:
//! connections cut mid-body or before the response, keep-alive connections
//! the upstream closes, an upstream too slow to answer or stalling its body,
//! and a response larger than memory. The upstreams here are hand-written
//! HTTP/1.1 on raw sockets, so each fault happens exactly where the test
//! puts it.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use support::raw::RawUpstream;
use support::sidecar::{self, get, send};
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

/// Any wait for something that should happen promptly fails the test after
/// this, rather than hanging it.
const PROMPTLY: Duration = Duration::from_secs(10);

async fn lanyard(upstream: &RawUpstream, extra: &[(&str, &str)]) -> sidecar::Running {
    let running = sidecar::start(support::mock().await, &upstream.url, extra).await;
    running.ready().await;
    running
}

fn upstream_errors(running: &sidecar::Running, kind: &str) -> u64 {
    running
        .process
        .metrics
        .upstream_errors
        .with_label_values(&[kind])
        .get()
}

/// A GET whose response body the test reads at its own pace.
async fn open(client: &Client<HttpConnector, Empty<Bytes>>, url: String) -> Response<Incoming> {
    let request = Request::get(url).body(Empty::new()).unwrap();
    tokio::time::timeout(PROMPTLY, client.request(request))
        .await
        .expect("response headers in time")
        .expect("the sidecar answers")
}

/// Reads a body to its end: the bytes received, and whether it ended
/// cleanly or in an error.
async fn drain(body: &mut Incoming) -> (u64, Result<(), hyper::Error>) {
    let mut received = 0u64;
    loop {
        match tokio::time::timeout(PROMPTLY, body.frame())
            .await
            .expect("the body ends in time")
        {
            None => return (received, Ok(())),
            Some(Err(err)) => return (received, Err(err)),
            Some(Ok(frame)) => received += frame.data_ref().map_or(0, |d| d.len() as u64),
        }
    }
}

/// The next data frame of a body that should have one.
async fn next_data(body: &mut Incoming) -> Bytes {
    tokio::time::timeout(PROMPTLY, body.frame())
        .await
        .expect("body data in time")
        .expect("more body")
        .expect("body data intact")
        .into_data()
        .expect("a data frame")
}

fn assert_lanyard_error(answer: &sidecar::Answer, status: StatusCode, code: &str, message: &str) {
    assert_eq!(answer.status, status);
    assert_eq!(answer.headers["lanyard-error"], code);
    assert_eq!(answer.headers["content-type"], "application/json");
    assert_eq!(
        answer.json(),
        serde_json::json!({"error": code, "message": message})
    );
}

#[tokio::test]
async fn upstream_cut_mid_body_ends_the_clients_body_in_an_error() {
    // Each `/cut` response announces 100 000 bytes (by length or chunked),
    // sends 1 000, then waits for the test to cut the connection.
    let cut = Arc::new(Notify::new());
    let cutter = cut.clone();
    let upstream = RawUpstream::start(move |mut conn| {
        let cut = cutter.clone();
        async move {
            while let Some(seen) = conn.next_request().await {
                if !seen.target.starts_with("/cut") {
                    if conn.ok().await.is_err() {
                        return;
                    }
                    continue;
                }
                let part = vec![b'x'; 1000];
                let mut response = Vec::new();
                if seen.target.contains("chunked") {
                    response
                        .extend(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3e8\r\n");
                    response.extend(&part);
                    response.extend(b"\r\n");
                } else {
                    response.extend(b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n");
                    response.extend(&part);
                }
                let _ = conn.write(&response).await;
                cut.notified().await;
                if seen.target.contains("reset") {
                    conn.reset();
                }
                return;
            }
        }
    })
    .await;
    let running = lanyard(&upstream, &[]).await;
    let http1 = sidecar::client_for::<Empty<Bytes>>();
    let http2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Empty<Bytes>>();

    for (client, version) in [(&http1, "HTTP/1.1"), (&http2, "HTTP/2")] {
        for framing in ["length", "chunked"] {
            for hangup in ["reset", "close"] {
                let case = format!("{version} client, {framing} upstream body, {hangup}");
                let url = format!("{}/cut?{framing}&{hangup}", running.proxy);
                let response = open(client, url).await;
                assert_eq!(response.status(), StatusCode::OK, "{case}");
                let mut body = response.into_body();
                // The part that was sent arrives before the cut...
                let first = next_data(&mut body).await;
                cut.notify_one();
                // ...and then the body ends in an error, never in a clean
                // end that would pass a truncated body off as whole.
                let (rest, end) = drain(&mut body).await;
                assert!(end.is_err(), "{case}: body ended cleanly");
                assert!(first.len() as u64 + rest < 100_000, "{case}");
            }
        }
    }

    // lanyard itself is unharmed.
    assert_eq!(get(&format!("{}/ok", running.proxy)).await.body, "ok");
}

#[tokio::test]
async fn upstream_hanging_up_before_response_headers_is_502_upstream_unreachable() {
    let upstream = RawUpstream::start(|mut conn| async move {
        while let Some(seen) = conn.next_request().await {
            if seen.target.starts_with("/hangup") {
                if seen.target.contains("reset") {
                    conn.reset();
                }
                return;
            }
            if conn.ok().await.is_err() {
                return;
            }
        }
    })
    .await;
    let running = lanyard(&upstream, &[]).await;

    for hangup in ["close", "reset"] {
        let answer = get(&format!("{}/hangup?{hangup}", running.proxy)).await;
        assert_lanyard_error(
            &answer,
            StatusCode::BAD_GATEWAY,
            "upstream_unreachable",
            "lanyard could not reach the service",
        );
    }
    // A GET may be sent again (see below): each reached the upstream
    // twice, then the client was told; counted once per client request.
    assert_eq!(upstream.connections(), 4);
    assert_eq!(upstream_errors(&running, "other"), 2);
    assert_eq!(get(&format!("{}/ok", running.proxy)).await.body, "ok");
}

#[tokio::test]
async fn upstream_switching_protocols_is_502_not_a_bare_101() {
    let upstream = RawUpstream::start(|mut conn| async move {
        if conn.next_request().await.is_some() {
            let _ = conn
                .write(b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\r\n")
                .await;
        }
    })
    .await;
    let running = lanyard(&upstream, &[]).await;
    let answer = get(&format!("{}/socket", running.proxy)).await;
    assert_lanyard_error(
        &answer,
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        "the service answered 101 Switching Protocols; lanyard forwards requests, not upgraded connections",
    );
    assert_eq!(upstream_errors(&running, "other"), 1);
}

/// Answers every request, then closes the connection: with
/// `Connection: close` when `announce`, else without warning.
async fn one_answer_per_connection(announce: bool) -> RawUpstream {
    RawUpstream::start(move |mut conn| async move {
        if conn.next_request().await.is_none() {
            return;
        }
        let response: &[u8] = if announce {
            b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok"
        } else {
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
        };
        let _ = conn.write(response).await;
    })
    .await
}

/// `n` requests, cycling through `methods`, each of which must succeed.
async fn sequence_succeeds(running: &sidecar::Running, methods: &[Method], n: usize) {
    for i in 0..n {
        let method = methods[i % methods.len()].clone();
        let body = if method == Method::POST {
            Bytes::from_static(b"{}")
        } else {
            Bytes::new()
        };
        let url = format!("{}/r/{i}", running.proxy);
        let answer = send(method.clone(), &url, &[], body).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "request {i} ({method}): {:?}",
            answer.body
        );
        assert_eq!(answer.body, "ok");
    }
}

#[tokio::test]
async fn upstream_answering_connection_close_serves_every_request() {
    let upstream = one_answer_per_connection(true).await;
    let running = lanyard(&upstream, &[]).await;
    // `Connection: close` keeps hyper from pooling the connection at all,
    // so even a POST is never sent on a dead one.
    sequence_succeeds(&running, &[Method::GET, Method::POST, Method::DELETE], 60).await;
    assert_eq!(upstream.connections(), 60);
}

#[tokio::test]
async fn upstream_closing_each_connection_after_its_response_serves_every_request() {
    let upstream = one_answer_per_connection(false).await;
    let running = lanyard(&upstream, &[]).await;
    // hyper sees the close as soon as it arrives and drops the pooled
    // connection; should a request still race the close, an idempotent one
    // is sent again (a POST would get 502, see the tests below).
    sequence_succeeds(&running, &[Method::GET, Method::PUT, Method::DELETE], 60).await;
    assert_eq!(upstream.connections(), 60);
}

/// Answers the first request on each connection; a second one is read and
/// then the connection closed unanswered, as when an upstream's idle
/// timeout fires just as lanyard reuses the connection. Reports the method
/// of every request it read.
async fn closing_reused_connections() -> (RawUpstream, mpsc::UnboundedReceiver<String>) {
    let (seen_tx, seen) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let seen_tx = seen_tx.clone();
        async move {
            let Some(first) = conn.next_request().await else {
                return;
            };
            let _ = seen_tx.send(first.method);
            if conn.ok().await.is_err() {
                return;
            }
            if let Some(second) = conn.next_request().await {
                let _ = seen_tx.send(second.method);
            }
        }
    })
    .await;
    (upstream, seen)
}

#[tokio::test]
async fn idempotent_request_on_a_pooled_connection_the_upstream_dropped_is_retried() {
    let (upstream, _seen) = closing_reused_connections().await;
    // Each proxy thread pools its own connections: with one, every request
    // after the first meets the pooled connection.
    let running = lanyard(&upstream, &[("LANYARD_WORKER_THREADS", "1")]).await;
    for i in 0..10 {
        for method in [Method::GET, Method::PUT, Method::DELETE] {
            let answer = send(
                method.clone(),
                &format!("{}/r/{i}", running.proxy),
                &[],
                Bytes::new(),
            )
            .await;
            assert_eq!(
                answer.status,
                StatusCode::OK,
                "request {i} ({method}): {:?}",
                answer.body
            );
        }
    }
    assert_eq!(upstream_errors(&running, "other"), 0);
}

#[tokio::test]
async fn non_idempotent_request_on_a_pooled_connection_the_upstream_dropped_is_not_replayed() {
    let (upstream, mut seen) = closing_reused_connections().await;
    // Each proxy thread pools its own connections: with one, every request
    // after the first meets the pooled connection.
    let running = lanyard(&upstream, &[("LANYARD_WORKER_THREADS", "1")]).await;
    assert_eq!(get(&format!("{}/warm", running.proxy)).await.body, "ok");
    let answer = send(
        Method::POST,
        &format!("{}/create", running.proxy),
        &[],
        Bytes::from_static(b"{}"),
    )
    .await;
    // The upstream may have acted on it: only the client can decide to
    // send it again.
    assert_lanyard_error(
        &answer,
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        "lanyard could not reach the service",
    );
    assert_eq!(seen.recv().await.as_deref(), Some("GET"));
    assert_eq!(seen.recv().await.as_deref(), Some("POST"));
    assert!(seen.try_recv().is_err(), "the POST was sent again");
    assert_eq!(upstream_errors(&running, "other"), 1);
}

#[tokio::test]
async fn upstream_silent_past_the_timeout_is_504_and_its_connection_is_dropped() {
    let (dropped_tx, mut dropped) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let dropped_tx = dropped_tx.clone();
        async move {
            if conn.next_request().await.is_some() {
                conn.until_closed().await;
                let _ = dropped_tx.send(());
            }
        }
    })
    .await;
    let running = lanyard(&upstream, &[("LANYARD_UPSTREAM_TIMEOUT", "1s")]).await;

    let started = Instant::now();
    let answer = get(&format!("{}/silent", running.proxy)).await;
    let waited = started.elapsed();
    assert_lanyard_error(
        &answer,
        StatusCode::GATEWAY_TIMEOUT,
        "upstream_timeout",
        "the service did not answer in time",
    );
    assert!(
        waited >= Duration::from_secs(1),
        "answered after {waited:?}"
    );
    assert_eq!(upstream_errors(&running, "timeout"), 1);
    // lanyard does not keep waiting on the upstream after giving up.
    tokio::time::timeout(PROMPTLY, dropped.recv())
        .await
        .expect("lanyard closed the upstream connection");
}

#[tokio::test]
async fn body_stalling_after_timely_headers_is_not_cut_and_blocks_nothing_else() {
    // `/stall` sends its headers and half its body at once, the rest when
    // the test says; any other path is answered at once.
    let resume = Arc::new(Notify::new());
    let resumer = resume.clone();
    let upstream = RawUpstream::start(move |mut conn| {
        let resume = resumer.clone();
        async move {
            while let Some(seen) = conn.next_request().await {
                if seen.target != "/stall" {
                    if conn.ok().await.is_err() {
                        return;
                    }
                    continue;
                }
                let head = b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nhello";
                if conn.write(head).await.is_err() {
                    return;
                }
                resume.notified().await;
                let _ = conn.write(b"world").await;
            }
        }
    })
    .await;
    let running = lanyard(&upstream, &[("LANYARD_UPSTREAM_TIMEOUT", "1s")]).await;
    let client = sidecar::client_for::<Empty<Bytes>>();

    let response = open(&client, format!("{}/stall", running.proxy)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    assert_eq!(next_data(&mut body).await, "hello");

    // Other requests go through while the body is stalled.
    for _ in 0..3 {
        assert_eq!(get(&format!("{}/other", running.proxy)).await.body, "ok");
    }
    // The upstream timeout is time to response headers: the stalled body
    // is neither failed nor ended at twice that.
    let stalled = tokio::time::timeout(Duration::from_secs(2), body.frame()).await;
    assert!(stalled.is_err(), "the stalled body moved: {stalled:?}");
    assert_eq!(upstream_errors(&running, "timeout"), 0);

    resume.notify_one();
    assert_eq!(next_data(&mut body).await, "world");
    let (more, end) = drain(&mut body).await;
    assert_eq!(more, 0);
    end.expect("the body ends cleanly");
}

/// Peak resident set size of this process so far (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

const CHUNK: usize = 64 * 1024;

/// Streams a chunked body of `/big?N` bytes (`/big` alone: until lanyard
/// stops reading), generated as it goes; reports how many bytes it wrote
/// before lanyard stopped reading, if it did.
async fn big_upstream() -> (RawUpstream, mpsc::UnboundedReceiver<u64>) {
    let (stopped_tx, stopped) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let stopped_tx = stopped_tx.clone();
        async move {
            while let Some(seen) = conn.next_request().await {
                let Some(size) = seen.target.strip_prefix("/big") else {
                    if conn.ok().await.is_err() {
                        return;
                    }
                    continue;
                };
                let limit = size
                    .trim_start_matches('?')
                    .parse::<u64>()
                    .unwrap_or(u64::MAX);
                let mut chunk = format!("{CHUNK:x}\r\n").into_bytes();
                chunk.extend(std::iter::repeat_n(b'x', CHUNK));
                chunk.extend(b"\r\n");
                if conn
                    .write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
                    .await
                    .is_err()
                {
                    return;
                }
                let mut sent = 0u64;
                while sent < limit {
                    if conn.write(&chunk).await.is_err() {
                        let _ = stopped_tx.send(sent);
                        return;
                    }
                    sent += CHUNK as u64;
                }
                if conn.write(b"0\r\n\r\n").await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    (upstream, stopped)
}

#[tokio::test]
async fn response_larger_than_memory_streams_through_in_bounded_memory() {
    // Eight times the growth allowed below: buffering would show at once.
    // Larger proves nothing more and costs the suite minutes, as a debug
    // build of hyper streams at about 10 MiB/s.
    const SIZE: u64 = 256 * 1024 * 1024;
    let (upstream, _stopped) = big_upstream().await;
    let running = lanyard(&upstream, &[]).await;
    // Warm the pools, so the baseline holds their buffers.
    assert_eq!(get(&format!("{}/warm", running.proxy)).await.body, "ok");
    let before = peak_rss();

    let started = Instant::now();
    let client = sidecar::client_for::<Empty<Bytes>>();
    let response = open(&client, format!("{}/big?{SIZE}", running.proxy)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let (received, end) = drain(&mut response.into_body()).await;
    end.expect("the body ends cleanly");
    assert_eq!(received, SIZE);
    let elapsed = started.elapsed();

    let grown = peak_rss().saturating_sub(before);
    eprintln!(
        "{} MiB in {elapsed:?}, peak RSS grew by {} KiB",
        SIZE >> 20,
        grown >> 10
    );
    // Other tests in this binary run alongside and share the process, so
    // the bound leaves them room; buffering would grow it by the body size.
    assert!(
        grown < 32 * 1024 * 1024,
        "peak memory grew by {} MiB streaming {} MiB",
        grown >> 20,
        SIZE >> 20
    );
}

#[tokio::test]
async fn client_abandoning_a_response_mid_stream_releases_the_upstream() {
    let (upstream, mut stopped) = big_upstream().await;
    let running = lanyard(&upstream, &[]).await;
    let client = sidecar::client_for::<Empty<Bytes>>();

    let response = open(&client, format!("{}/big", running.proxy)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = 0u64;
    while received < 8 * 1024 * 1024 {
        received += next_data(&mut body).await.len() as u64;
    }
    drop(body);
    drop(client);

    // lanyard stops reading from the upstream and closes that connection,
    // rather than pulling an endless body into nowhere.
    let sent = tokio::time::timeout(PROMPTLY, stopped.recv())
        .await
        .expect("the upstream saw lanyard stop reading")
        .unwrap();
    assert!(sent >= received);
    // Nothing is left counted in flight (the gauge covers the wait for
    // response headers, docs/admin.md "Metrics"), and the next request is served.
    assert_eq!(running.process.metrics.proxy_in_flight.get(), 0);
    assert_eq!(get(&format!("{}/after", running.proxy)).await.body, "ok");
    assert_eq!(running.process.metrics.proxy_in_flight.get(), 0);
}
