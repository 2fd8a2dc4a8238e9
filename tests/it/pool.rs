//! The proxy's own pool of upstream connections (src/pool.rs), over real
//! sockets: the sidecar on `127.0.0.1:0` in front of a hand-written
//! HTTP/1.1 upstream that counts the connections it accepts and records
//! which connection each request arrived on. An HTTP/1 connection goes
//! back to the pool once its response has ended, bodiless responses
//! included; one whose body was abandoned is closed instead; one the
//! upstream closes is never used again.
//!
//! The tests run on a multi-threaded runtime, so the test's clients race
//! the sidecar's proxy thread and its upstream connections as production
//! traffic would.

use crate::support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use support::raw::{RawUpstream, Served, read_head};
use support::sidecar::{self, get, send};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{Barrier, mpsc};
use tokio::task::JoinSet;

/// Any wait for something that should happen promptly fails the test after
/// this, rather than hanging it.
const PROMPTLY: Duration = Duration::from_secs(10);

/// Answers every request with a small 200, keeping the connection open;
/// chunked when the target asks for it, else with a Content-Length.
async fn keep_alive_upstream() -> RawUpstream {
    RawUpstream::start(|mut conn| async move {
        while let Some(seen) = conn.next_request().await {
            let sent = if seen.target.ends_with("chunked") {
                conn.write(
                    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
                )
                .await
            } else {
                conn.ok().await
            };
            if sent.is_err() {
                return;
            }
        }
    })
    .await
}

async fn lanyard(upstream: &RawUpstream) -> sidecar::Running {
    // Each proxy thread pools its own upstream connections; with one, the
    // counts below do not depend on which thread accepted a client.
    let running = sidecar::start(
        support::mock().await,
        &upstream.url,
        &[("LANYARD_WORKER_THREADS", "1")],
    )
    .await;
    running.ready().await;
    running
}

/// A GET on a client connection of its own: `sidecar::get` builds a new
/// client for every call, so no client connection is ever reused.
async fn get_ok(running: &sidecar::Running, path: &str) {
    let answer = tokio::time::timeout(PROMPTLY, get(&format!("{}{path}", running.proxy)))
        .await
        .unwrap_or_else(|_| panic!("GET {path} answered in time"));
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "GET {path}: {:?}",
        answer.body
    );
    assert_eq!(answer.body, "ok", "GET {path}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_requests_on_new_client_connections_share_one_upstream_connection() {
    let upstream = keep_alive_upstream().await;
    let running = lanyard(&upstream).await;

    // Both ways a body ends: a sized one is dropped by the sidecar's server
    // once it says it has ended, a chunked one is read to its last frame.
    let targets: Vec<String> = (0..5)
        .map(|i| match i % 2 {
            0 => format!("/r/{i}?length"),
            _ => format!("/r/{i}?chunked"),
        })
        .collect();
    for target in &targets {
        get_ok(&running, target).await;
    }

    assert_eq!(upstream.connections(), 1, "{:?}", upstream.served());
    let expected: Vec<Served> = targets
        .iter()
        .map(|target| Served {
            connection: 0,
            method: "GET".into(),
            target: target.clone(),
        })
        .collect();
    assert_eq!(upstream.served(), expected);
}

/// Two requests in turn whose answers have no body (HEAD, or a 204): both
/// are served, on one upstream connection.
async fn bodiless_answers_share_one_connection(method: Method, path: &str, status: StatusCode) {
    let upstream = RawUpstream::start(|mut conn| async move {
        while let Some(seen) = conn.next_request().await {
            // A HEAD answer announces the length a GET's body would have
            // and sends none.
            let answer: &[u8] = if seen.method == "HEAD" {
                b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: text/plain\r\n\r\n"
            } else if seen.target == "/no-content" {
                b"HTTP/1.1 204 No Content\r\n\r\n"
            } else {
                b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
            };
            if conn.write(answer).await.is_err() {
                return;
            }
        }
    })
    .await;
    let running = lanyard(&upstream).await;

    for i in 0..2 {
        let url = format!("{}{path}", running.proxy);
        let answer = tokio::time::timeout(PROMPTLY, send(method.clone(), &url, &[], Bytes::new()))
            .await
            .unwrap_or_else(|_| panic!("{method} {path} #{i} answered in time"));
        assert_eq!(answer.status, status, "{method} {path} #{i}");
        assert!(
            answer.body.is_empty(),
            "{method} {path} #{i}: {:?}",
            answer.body
        );
    }

    assert_eq!(upstream.connections(), 1, "{:?}", upstream.served());
    assert_eq!(upstream.connections_used(), [0, 0]);
    assert!(
        upstream
            .served()
            .iter()
            .all(|s| s.method == method.as_str() && s.target == path),
        "{:?}",
        upstream.served()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_answers_return_their_upstream_connection_to_the_pool() {
    bodiless_answers_share_one_connection(Method::HEAD, "/thing", StatusCode::OK).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_content_answers_return_their_upstream_connection_to_the_pool() {
    bodiless_answers_share_one_connection(Method::GET, "/no-content", StatusCode::NO_CONTENT).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_body_the_client_abandoned_is_closed_not_reused() {
    const LARGE: usize = 1024 * 1024;
    const PART: usize = 64 * 1024;
    // `/large` announces 1 MiB and sends 64 KiB of it; the rest is held
    // back so the body cannot end however much the sockets buffer. The
    // upstream then reports whether lanyard closed that connection (true)
    // or sent something more on it (false).
    let (outcome_tx, mut outcome) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let outcome_tx = outcome_tx.clone();
        async move {
            while let Some(seen) = conn.next_request().await {
                if seen.target != "/large" {
                    if conn.ok().await.is_err() {
                        return;
                    }
                    continue;
                }
                let mut response =
                    format!("HTTP/1.1 200 OK\r\ncontent-length: {LARGE}\r\n\r\n").into_bytes();
                response.extend(std::iter::repeat_n(b'x', PART));
                if conn.write(&response).await.is_err() {
                    let _ = outcome_tx.send(true);
                    return;
                }
                let _ = outcome_tx.send(conn.closed_by_lanyard().await);
                return;
            }
        }
    })
    .await;
    let running = lanyard(&upstream).await;

    // A client that reads the head and hangs up.
    let proxy: SocketAddr = running.process.proxy_addr.unwrap();
    let mut client = TcpStream::connect(proxy).await.unwrap();
    client
        .write_all(b"GET /large HTTP/1.1\r\nhost: app.internal\r\n\r\n")
        .await
        .unwrap();
    let head = read_head(&mut client).await;
    assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains(&format!("content-length: {LARGE}")),
        "{head}"
    );
    drop(client);

    // lanyard drops the unfinished body and, with it, the connection: the
    // rest of that response is still on the wire, so it cannot be reused.
    let closed = tokio::time::timeout(PROMPTLY, outcome.recv())
        .await
        .expect("lanyard closed the abandoned upstream connection in time")
        .unwrap();
    assert!(
        closed,
        "lanyard sent more on a connection whose response had not ended"
    );

    get_ok(&running, "/after").await;
    assert_eq!(upstream.connections(), 2, "{:?}", upstream.served());
    assert_eq!(upstream.connections_used(), [0, 1]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_answering_connection_close_leaves_no_dead_connection_for_the_next_request() {
    // Answers one request with `Connection: close`, closes, and says so.
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let closed_tx = closed_tx.clone();
        async move {
            if conn.next_request().await.is_none() {
                return;
            }
            let _ = conn
                .write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
                .await;
            drop(conn);
            let _ = closed_tx.send(());
        }
    })
    .await;
    let running = lanyard(&upstream).await;

    // The POST matters: lanyard never sends one twice, so it is answered
    // only if it was not sent on the connection the upstream closed.
    let requests = [
        (Method::GET, Bytes::new()),
        (Method::POST, Bytes::from_static(b"{\"a\":1}")),
        (Method::DELETE, Bytes::new()),
        (Method::GET, Bytes::new()),
    ];
    for (i, (method, body)) in requests.iter().enumerate() {
        let url = format!("{}/r/{i}", running.proxy);
        let answer = tokio::time::timeout(PROMPTLY, send(method.clone(), &url, &[], body.clone()))
            .await
            .unwrap_or_else(|_| panic!("request {i} ({method}) answered in time"));
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "request {i} ({method}): {:?}",
            answer.body
        );
        assert_eq!(answer.body, "ok", "request {i} ({method})");
        // The next request comes only once the upstream has closed this
        // connection.
        tokio::time::timeout(PROMPTLY, closed.recv())
            .await
            .expect("the upstream closed in time")
            .unwrap();
    }

    assert_eq!(
        upstream.connections(),
        requests.len(),
        "{:?}",
        upstream.served()
    );
    assert_eq!(upstream.connections_used(), [0, 1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_get_a_connection_each_and_later_requests_reuse_them() {
    const N: usize = 8;
    // `/together` is answered only once N of them are in at once; any
    // other path at once.
    let together = Arc::new(Barrier::new(N));
    let upstream = RawUpstream::start(move |mut conn| {
        let together = together.clone();
        async move {
            while let Some(seen) = conn.next_request().await {
                if seen.target.starts_with("/together") {
                    together.wait().await;
                }
                if conn.ok().await.is_err() {
                    return;
                }
            }
        }
    })
    .await;
    let running = Arc::new(lanyard(&upstream).await);

    let mut held = JoinSet::new();
    for i in 0..N {
        let running = running.clone();
        held.spawn(async move { get_ok(&running, &format!("/together/{i}")).await });
    }
    tokio::time::timeout(PROMPTLY, async {
        while let Some(done) = held.join_next().await {
            done.expect("the request succeeded");
        }
    })
    .await
    .expect("the upstream held all requests at once, so they were answered");
    assert_eq!(upstream.connections(), N, "{:?}", upstream.served());
    let mut used = upstream.connections_used();
    used.sort_unstable();
    assert_eq!(
        used,
        (0..N).collect::<Vec<_>>(),
        "one request per connection"
    );

    for i in 0..N {
        get_ok(&running, &format!("/after/{i}")).await;
    }
    assert_eq!(upstream.connections(), N, "{:?}", upstream.served());
    assert_eq!(upstream.served().len(), 2 * N);
}
