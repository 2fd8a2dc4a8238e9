//! Clients that take none of what lanyard sends them (`LANYARD_SEND_TIMEOUT`),
//! over real sockets on several loopback addresses: HTTP/2 streams held at
//! a zero flow-control window are reset, and a connection whose every
//! stream so waits gives way at the listener's limit; an HTTP/1.1 client
//! that stops reading is closed, while a slow upstream is not cut; the
//! admin listener caps each address and keeps answering its probes; a
//! start whose body never comes is closed early and still spends the
//! client's starts; and one verified answer is shared by every stream
//! that polls it. The admin listener's floods are in `slow_clients/admin.rs`.

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod admin;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use bytes::Bytes;
use h2::Reason;
use http::Method;
use http_body_util::BodyExt;
use support::flood::{
    NEIGHBOUR, PROMPTLY, allow_sockets, connect_from, exchange, half_open, metric, non_reader,
    stalled_after, until_closed, until_metric,
};
use support::h2raw::{ZeroWindow, any_closed, assert_one_byte_then_cancelled};
use support::raw::RawUpstream;
use support::sidecar;
use support::upstream::TestUpstream;
use support::verifier::{self, Browser};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::Instant;

const GET_PAGE: &[u8] = b"GET / HTTP/1.1\r\nhost: verifier\r\n\r\n";
const OPEN: &str = "lanyard_verifier_connections";
const REFUSED: &str = "lanyard_verifier_connections_refused_total";
const EVICTED: &str = "lanyard_verifier_connections_evicted_total";
const STALLED_VERIFIER: &str = r#"lanyard_connections_stalled_total{listener="verifier"}"#;
const STALLED_PROXY: &str = r#"lanyard_connections_stalled_total{listener="proxy"}"#;
const STALLED_ADMIN: &str = r#"lanyard_connections_stalled_total{listener="admin"}"#;
/// The admin listener's cap on one client's connections
/// (`process::limits::ADMIN_CONNECTIONS_PER_CLIENT`, which lanyard does
/// not export).
const ADMIN_PER_CLIENT: usize = 8;
/// The admin listener's connection limit (`ADMIN_MAX_CONNECTIONS`).
const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Time past a deadline lanyard keeps for a loaded CI machine to act on
/// it and for the test to see it: the bounds below are "the timeout plus
/// this", never a claim about speed.
const MARGIN: Duration = Duration::from_secs(15);

/// A loopback address of its own for each role in a test: Linux routes
/// all of 127.0.0.0/8 to `lo`. [`NEIGHBOUR`] (127.0.0.2) is the client
/// that must keep being served; 127.0.0.1, where the `support` helpers'
/// scrapes come from, is left to them.
fn loopback(n: u8) -> IpAddr {
    assert!(n >= 3, "127.0.0.1 and .2 have their roles");
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A kept-alive connection from [`NEIGHBOUR`] that has had the page.
async fn served_neighbour(addr: SocketAddr) -> TcpStream {
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let page = exchange(&mut stream, GET_PAGE).await;
    assert_eq!(page.status, 200, "{}", text(&page.body));
    stream
}

/// A probe as the kubelet makes it: a fresh connection from `source`, one
/// request, closed by the server after its answer.
async fn probe(source: IpAddr, admin: SocketAddr, path: &str) -> u16 {
    let mut stream = connect_from(source, admin).await;
    let request = format!("GET {path} HTTP/1.1\r\nhost: admin\r\nconnection: close\r\n\r\n");
    let answer = exchange(&mut stream, request.as_bytes()).await;
    // Gone from the address's count before the next probe.
    until_closed(&mut stream, PROMPTLY).await;
    answer.status
}

/// `/healthz` then `/readyz` from `source`, each of which must be 200.
async fn probes_pass(source: IpAddr, admin: SocketAddr, round: usize) {
    for path in ["/healthz", "/readyz"] {
        let status = tokio::time::timeout(PROMPTLY, probe(source, admin, path))
            .await
            .unwrap_or_else(|_| panic!("round {round}: {path} unanswered in {PROMPTLY:?}"));
        assert_eq!(status, 200, "round {round}: {path}");
    }
}

/// The status of a GET over HTTP/2 (hyper's client, which reads what it
/// is sent) on a fresh connection from `source`.
async fn h2_get(source: IpAddr, to: SocketAddr, path: &str) -> u16 {
    let io = hyper_util::rt::TokioIo::new(connect_from(source, to).await);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    let driver = tokio::spawn(connection);
    let request = http::Request::get(format!("http://{to}{path}"))
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let answer = sender
        .send_request(request)
        .await
        .expect("an HTTP/2 answer");
    let status = answer.status().as_u16();
    answer.into_body().collect().await.expect("the whole body");
    driver.abort();
    status
}

/// A verifier with `LANYARD_SEND_TIMEOUT` at `timeout`, and the address
/// it listens on.
async fn verifier_sending_within(timeout: &str) -> (verifier::Running, SocketAddr) {
    let send_timeout = [("LANYARD_SEND_TIMEOUT", timeout)];
    let running = verifier::start(support::mock().await, None, &send_timeout).await;
    let addr = running.process.verifier_addr.unwrap();
    (running, addr)
}

/// Each stream in `ended` was reset by lanyard (CANCEL), none before
/// `timeout` (the first request plus the send timeout).
fn assert_cancelled_after(ended: &[(Option<Reason>, Instant)], timeout: Instant) {
    for (reason, at) in ended {
        assert_eq!(*reason, Some(Reason::CANCEL), "lanyard reset the stream");
        assert!(
            *at >= timeout,
            "a stream reset {:?} before the send timeout",
            timeout - *at
        );
    }
}

#[tokio::test]
async fn verifier_streams_held_at_a_zero_window_are_reset_while_others_are_served() {
    const SEND_TIMEOUT: Duration = Duration::from_secs(2);
    // 144 streams from three addresses, six connections each: within one
    // client's 32 connections and a connection's 8 streams
    // (`VERIFIER_STREAMS_PER_CONNECTION`).
    const HOLDERS: [u8; 3] = [3, 4, 5];
    const CONNECTIONS_EACH: usize = 6;
    const STREAMS_EACH: usize = 8;
    const STREAMS: usize = HOLDERS.len() * CONNECTIONS_EACH * STREAMS_EACH;
    let (running, addr) = verifier_sending_within("2s").await;
    let mut neighbour = served_neighbour(addr).await;

    // No stream's timer can start before this.
    let began = Instant::now();
    let mut connections = Vec::new();
    let mut resets = JoinSet::new();
    let mut served = 0;
    for n in HOLDERS {
        for _ in 0..CONNECTIONS_EACH {
            let mut connection = ZeroWindow::open(loopback(n), addr).await;
            for _ in 0..STREAMS_EACH {
                let held = connection.hold("/", &[]).await.expect("the page's head");
                assert_eq!(held.status, 200);
                resets.spawn(async move { (held.reset().await, Instant::now()) });
            }
            connections.push(connection);
            // While the streams just opened are held, and before those
            // still to come are.
            let answer = exchange(&mut neighbour, GET_PAGE).await;
            assert_eq!(answer.status, 200, "the neighbour, after {served} pages");
            served += 1;
        }
    }

    // The neighbour goes on asking, a few times a second, until the last
    // stream is reset.
    let mut asked = tokio::time::interval(Duration::from_millis(100));
    let mut ended = Vec::new();
    let deadline = began + SEND_TIMEOUT + MARGIN;
    while ended.len() < STREAMS {
        tokio::select! {
            next = resets.join_next() => ended.push(next.expect("a stream").unwrap()),
            _ = asked.tick() => {
                let answer = exchange(&mut neighbour, GET_PAGE).await;
                assert_eq!(answer.status, 200, "the neighbour, after {served} pages");
                served += 1;
            }
            () = tokio::time::sleep_until(deadline) => panic!(
                "{} of {STREAMS} streams reset within the send timeout and {MARGIN:?}",
                ended.len()
            ),
        }
    }
    assert_cancelled_after(&ended, began + SEND_TIMEOUT);
    assert_eq!(
        metric(&running.admin, STALLED_VERIFIER).await,
        STREAMS as f64,
        "each reset stream counted once, no connection"
    );

    // The streams were reset, not their connections: each takes another.
    for connection in &mut connections {
        assert!(!connection.is_closed());
        let again = connection.hold("/", &[]).await.expect("a new stream");
        assert_eq!(again.status, 200);
    }
    assert_eq!(exchange(&mut neighbour, GET_PAGE).await.status, 200);
}

#[tokio::test]
async fn at_the_verifier_limit_a_connection_held_at_a_zero_window_gives_way() {
    const LIMIT: usize = 8;
    let running = verifier::start(
        support::mock().await,
        None,
        &[
            ("LANYARD_MAX_CONNECTIONS", &LIMIT.to_string()),
            // Far beyond the test: what frees a slot is eviction, not the
            // send timeout.
            ("LANYARD_SEND_TIMEOUT", "60s"),
        ],
    )
    .await;
    let addr = running.process.verifier_addr.unwrap();
    // Every slot, each from an address of its own (one client's cap is
    // not the point), each with its page's answer waiting on its window.
    let mut holders = Vec::new();
    let mut held = Vec::new();
    for n in 0..LIMIT {
        let mut connection = ZeroWindow::open(loopback(10 + n as u8), addr).await;
        let answer = connection.hold("/", &[]).await.expect("the page's head");
        assert_eq!(answer.status, 200);
        held.push(answer);
        holders.push(connection);
    }
    until_metric(&running.admin, OPEN, |open| open == LIMIT as f64).await;

    // A newcomer has the page rather than a 503.
    let _newcomer = served_neighbour(addr).await;
    assert_eq!(metric(&running.admin, EVICTED).await, 1.0);
    assert_eq!(metric(&running.admin, REFUSED).await, 0.0);
    tokio::time::timeout(PROMPTLY, any_closed(&holders))
        .await
        .expect("one held connection was closed to make room");
    let closed = holders.iter().filter(|c| c.is_closed()).count();
    assert_eq!(closed, 1, "one connection gave way");
    assert_eq!(metric(&running.admin, STALLED_VERIFIER).await, 0.0);
}

#[tokio::test]
async fn a_proxy_client_that_stops_reading_is_closed_at_the_send_timeout() {
    const SEND_TIMEOUT: Duration = Duration::from_secs(2);
    // Far more than the socket buffers between the upstream and the
    // client hold (a few MiB on loopback), so lanyard's writes wait.
    const BODY: usize = 64 * 1024 * 1024;
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_SEND_TIMEOUT", "2s")]).await;
    let proxy = running.process.proxy_addr.unwrap();
    let request = format!("GET /download?bytes={BODY} HTTP/1.1\r\nhost: lanyard\r\n\r\n");
    let (mut client, began) = non_reader(proxy, &request).await;

    // The client reads nothing: the only sign of the close it could see
    // is the count.
    let stalled_after = stalled_after(&running.admin, STALLED_PROXY, began, SEND_TIMEOUT).await;
    assert!(
        stalled_after <= SEND_TIMEOUT + MARGIN,
        "cut only after {stalled_after:?}"
    );
    // Reading now drains what the buffers held, then finds the end: the
    // answer was cut, not resumed.
    let received = until_closed(&mut client, PROMPTLY).await;
    assert!(received < BODY, "{received} bytes: the whole answer came");
    assert_eq!(metric(&running.admin, STALLED_PROXY).await, 1.0);
    // The next client is served as ever.
    let answer = sidecar::get(&format!("{}/after", running.proxy)).await;
    assert_eq!(answer.status, 200);
}

#[tokio::test]
async fn an_upstream_that_pauses_longer_than_the_send_timeout_is_passed_through_whole() {
    const PAUSE: Duration = Duration::from_secs(3);
    const HALF: usize = 1024 * 1024;
    let upstream = RawUpstream::start(|mut conn| async move {
        while conn.next_request().await.is_some() {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", 2 * HALF);
            let sent = async {
                conn.write(head.as_bytes()).await?;
                conn.write(&vec![b'a'; HALF]).await?;
                // The pause is the behaviour under test: the upstream,
                // not the client, is what keeps lanyard waiting.
                tokio::time::sleep(PAUSE).await;
                conn.write(&vec![b'b'; HALF]).await
            };
            if sent.await.is_err() {
                return;
            }
        }
    })
    .await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_SEND_TIMEOUT", "1s")]).await;
    let proxy = running.process.proxy_addr.unwrap();
    let check = |body: &[u8], what: &str| {
        assert_eq!(body.len(), 2 * HALF, "{what}: the whole answer");
        assert!(body[..HALF].iter().all(|b| *b == b'a'), "{what}");
        assert!(body[HALF..].iter().all(|b| *b == b'b'), "{what}");
    };

    // HTTP/1.1 and HTTP/2, each reading as it comes, at once.
    let url = format!("{}/paused", running.proxy);
    let http1 = tokio::spawn(async move { sidecar::get(&url).await });
    let http2 = tokio::spawn(async move {
        let io = hyper_util::rt::TokioIo::new(TcpStream::connect(proxy).await.unwrap());
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(connection);
        let request = http::Request::get(format!("http://{proxy}/paused"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let answer = sender.send_request(request).await.expect("an answer");
        assert_eq!(answer.status(), 200);
        answer
            .into_body()
            .collect()
            .await
            .expect("the body")
            .to_bytes()
    });
    let within = PAUSE + MARGIN;
    let http1 = tokio::time::timeout(within, http1)
        .await
        .expect("HTTP/1.1 in time")
        .unwrap();
    assert_eq!(http1.status, 200);
    check(&http1.body, "HTTP/1.1");
    let http2 = tokio::time::timeout(within, http2)
        .await
        .expect("HTTP/2 in time")
        .unwrap();
    check(&http2, "HTTP/2");
    assert_eq!(upstream.served().len(), 2);
    assert_eq!(metric(&running.admin, STALLED_PROXY).await, 0.0);
}

/// A `/api/start` that announces a body and sends none.
const START_WITHOUT_BODY: &[u8] = b"POST /api/start HTTP/1.1\r\nhost: verifier\r\ncontent-type: application/json\r\ncontent-length: 1024\r\n\r\n";
const START: &[u8] = b"POST /api/start HTTP/1.1\r\nhost: verifier\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}";

#[tokio::test]
async fn a_start_whose_body_never_comes_is_closed_early_and_spends_a_start() {
    const CLIENT_STARTS: usize = 3;
    // The body timeout is a minute, so a close well within it is the
    // start's own short wait, not the body timeout.
    const BODY_TIMEOUT: Duration = Duration::from_secs(60);
    const CLOSED_WITHIN: Duration = Duration::from_secs(10);
    let running = verifier::start(
        support::mock().await,
        None,
        &[
            ("LANYARD_BODY_TIMEOUT", "60s"),
            (
                "LANYARD_VERIFIER_CLIENT_STARTS",
                &format!("{CLIENT_STARTS}/1h"),
            ),
        ],
    )
    .await;
    let addr = running.process.verifier_addr.unwrap();
    let (staller, other) = (loopback(3), loopback(4));

    let mut attempts = JoinSet::new();
    for _ in 0..CLIENT_STARTS {
        attempts.spawn(async move {
            let mut stream = connect_from(staller, addr).await;
            stream.write_all(START_WITHOUT_BODY).await.unwrap();
            let began = Instant::now();
            let mut said = Vec::new();
            let read = tokio::time::timeout(CLOSED_WITHIN, stream.read_to_end(&mut said)).await;
            assert!(
                read.is_ok(),
                "still open after {CLOSED_WITHIN:?} (the body timeout is {BODY_TIMEOUT:?})"
            );
            assert!(said.is_empty(), "answered: {}", text(&said));
            began.elapsed()
        });
    }
    while let Some(closed_after) = attempts.join_next().await {
        let closed_after = closed_after.unwrap();
        assert!(closed_after < CLOSED_WITHIN, "{closed_after:?}");
    }

    // Those attempts spent the address's starts.
    let mut stream = connect_from(staller, addr).await;
    let refused = exchange(&mut stream, START).await;
    assert_eq!(refused.status, 429, "{:.300}", text(&refused.body));
    assert_eq!(refused.header("lanyard-error"), "rate_limited");
    // Another address's are its own.
    let mut stream = connect_from(other, addr).await;
    let started = exchange(&mut stream, START).await;
    assert_eq!(started.status, 200, "{:.300}", text(&started.body));
}

/// This process's resident memory, in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().strip_suffix("kB"))
        .map(|value| value.trim().parse().unwrap())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

#[tokio::test]
async fn streams_held_on_a_verified_answer_share_it_rather_than_copy_it() {
    // 240 streams of a 250 KiB answer: 60 MB were each to hold a copy.
    // Small scale, in this process alongside other tests, so the bound
    // is loose; nothing here measures the full scale.
    const CONNECTIONS: usize = 30;
    const STREAMS_EACH: usize = 8;
    const CLAIMS: usize = 250 * 1024;
    const GROWTH_BOUND: u64 = 30 * 1024 * 1024;
    // The streams must be held while memory is read.
    let (running, addr) = verifier_sending_within("120s").await;
    let mut browser = Browser::default();
    let session = browser.start_session(&running).await;
    let claims = serde_json::json!({ "portrait": "x".repeat(CLAIMS) }).to_string();
    let presented = sidecar::send(
        Method::POST,
        &running.mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from(claims),
    )
    .await;
    assert_eq!(presented.status, 200);
    // The first poll fetches the claims; those after it are served what
    // it kept.
    let verified = browser.until_ended(&running, &session.handle).await;
    assert_eq!(verified.json()["status"], "verified");
    assert!(verified.body.len() > CLAIMS);

    let path = format!("/api/status?transactionId={}", session.handle);
    let cookie = browser.cookie.clone().unwrap();
    let before = resident();
    let mut connections = Vec::new();
    let mut held = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut connection = ZeroWindow::open(NEIGHBOUR, addr).await;
        for _ in 0..STREAMS_EACH {
            let answer = connection
                .hold(&path, &[("cookie", &cookie)])
                .await
                .expect("the status's head");
            assert_eq!(answer.status, 200);
            held.push(answer);
        }
        connections.push(connection);
    }
    let grown = resident().saturating_sub(before);
    assert!(
        grown < GROWTH_BOUND,
        "{} MiB more resident with {} streams held",
        grown / (1024 * 1024),
        held.len()
    );
    assert!(connections.iter().all(|c| !c.is_closed()));
}

#[tokio::test]
async fn streams_whose_last_frame_waits_behind_a_one_byte_window_are_reset_too() {
    const SEND_TIMEOUT: Duration = Duration::from_secs(2);
    // With a byte of window, hyper hands over an answer's frame and, were
    // it the last, would end the stream's task with the frame still queued
    // in h2 and nothing timing it.
    const STREAMS: usize = 20;
    let (running, addr) = verifier_sending_within("2s").await;
    let began = Instant::now();
    let mut connection = ZeroWindow::with_window(loopback(6), addr, 1).await;
    let mut resets = JoinSet::new();
    for _ in 0..STREAMS {
        let held = connection.hold("/", &[]).await.expect("the page's head");
        assert_eq!(held.status, 200);
        let mut body = held.body;
        resets.spawn(async move {
            let mut received = 0;
            loop {
                match body.data().await {
                    Some(Ok(data)) => received += data.len(),
                    Some(Err(err)) => return (received, err.reason()),
                    None => return (received, None),
                }
            }
        });
    }
    let ended = tokio::time::timeout(SEND_TIMEOUT + MARGIN, resets.join_all())
        .await
        .expect("every stream ended in time");
    assert_one_byte_then_cancelled(ended, began, SEND_TIMEOUT);
    assert_eq!(
        metric(&running.admin, STALLED_VERIFIER).await,
        STREAMS as f64
    );
}
