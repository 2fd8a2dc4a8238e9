//! The cap on upstream connections (`LANYARD_MAX_UPSTREAM_CONNECTIONS`,
//! src/pool/limit.rs), over real sockets: requests beyond it wait for a
//! pooled connection or a freed permit, up to the upstream timeout; the
//! streams of HTTP/2 clients share the capped connections instead of
//! opening one each; an HTTP/2 upstream connection holds a permit too and
//! takes the requests that waited while it opened; permits come back when
//! connections close; and a connection kept on one proxy thread does not
//! starve a request waiting on another.
//!
//! The upstream counts the TCP connections it accepts. While every request
//! it has is held (`/hold`), no connection can close, so that count is
//! the number open at once.

use crate::support;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper::client::conn::http2;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use lanyard::outbound;
use lanyard::pool::{Pool, UpstreamLimit};
use lanyard::target::TargetUrl;
use support::raw::RawUpstream;
use support::sidecar::{self, get};
use support::tls::TestCa;
use support::upstream::TestUpstream;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinSet;

/// Any wait for something that should happen promptly fails the test after
/// this, rather than hanging it.
const PROMPTLY: Duration = Duration::from_secs(10);

/// How long nothing more must happen for a test to take it that nothing
/// will: an absence has no signal to await.
const SETTLE: Duration = Duration::from_millis(200);

async fn lanyard(upstream: &str, extra: &[(&str, &str)]) -> Arc<sidecar::Running> {
    let running = sidecar::ready_for(upstream, extra).await;
    Arc::new(running)
}

/// A sidecar allowed `limit` upstream connections on `threads` proxy
/// threads, with `extra` settings besides.
async fn capped(
    upstream: &str,
    limit: u32,
    threads: u32,
    extra: &[(&str, &str)],
) -> Arc<sidecar::Running> {
    let (limit, threads) = (limit.to_string(), threads.to_string());
    let mut settings = vec![
        ("LANYARD_MAX_UPSTREAM_CONNECTIONS", limit.as_str()),
        ("LANYARD_WORKER_THREADS", threads.as_str()),
    ];
    settings.extend_from_slice(extra);
    lanyard(upstream, &settings).await
}

/// Waits until `done` holds, checking every few milliseconds: for states
/// that announce no change (a gauge, an atomic count).
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    tokio::time::timeout(PROMPTLY, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{what} in time"));
}

/// Waits until the sidecar has `n` requests in hand, then lets a moment
/// pass for any of them to reach the upstream that could.
async fn settle_with_in_flight(running: &sidecar::Running, n: i64) {
    let gauge = running.process.metrics.proxy_in_flight.clone();
    until(&format!("{n} requests in flight"), || gauge.get() >= n).await;
    tokio::time::sleep(SETTLE).await;
}

/// Waits for every request in `requests` and checks each was answered 200.
/// Thousands of streams queued in their clients, a proxy connection's few
/// at a time, take seconds on a busy machine: the ceiling is a hang's.
async fn all_ok(mut requests: JoinSet<StatusCode>) -> usize {
    let mut answered = 0;
    tokio::time::timeout(PROMPTLY * 6, async {
        while let Some(status) = requests.join_next().await {
            assert_eq!(status.expect("the request task ran"), StatusCode::OK);
            answered += 1;
        }
    })
    .await
    .expect("every request answered in time");
    answered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_beyond_the_limit_wait_for_a_pooled_connection() {
    let upstream = TestUpstream::start(None).await;
    // One proxy thread: no connection closes for another thread's sake, so
    // the upstream's count of connections is exact to the end.
    let running = capped(&upstream.url, 4, 1, &[]).await;

    let mut requests = JoinSet::new();
    for _ in 0..20 {
        let url = format!("{}/hold", running.proxy);
        requests.spawn(async move { get(&url).await.status });
    }
    upstream.slow_requests_started(4).await;
    settle_with_in_flight(&running, 20).await;
    assert_eq!(upstream.connections(), 4, "connections at once");
    assert_eq!(upstream.requests(), 4, "the other 16 wait in lanyard");

    upstream.release_held();
    assert_eq!(all_ok(requests).await, 20);
    assert_eq!(
        upstream.connections(),
        4,
        "the waiting requests took the 4 connections in turn"
    );
    assert_eq!(upstream.requests(), 20);
}

/// One HTTP/2 client connection to the proxy (h2c, prior knowledge), once
/// it has read the proxy's SETTINGS: streams it opens beyond the proxy's
/// limit then wait in the client, rather than being refused.
async fn h2_client(proxy: SocketAddr) -> http2::SendRequest<Empty<Bytes>> {
    let tcp = TcpStream::connect(proxy).await.expect("the proxy accepts");
    let (mut sender, connection) = http2::handshake(TokioExecutor::new(), TokioIo::new(tcp))
        .await
        .expect("HTTP/2 handshake with the proxy");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    // lanyard answers TRACE itself (405), after its SETTINGS, and the
    // upstream never sees it.
    let trace = Request::builder()
        .method(http::Method::TRACE)
        .uri(format!("http://{proxy}/"))
        .body(Empty::new())
        .unwrap();
    let answer = sender.send_request(trace).await.expect("the proxy answers");
    assert_eq!(answer.status(), StatusCode::METHOD_NOT_ALLOWED);
    sender
}

/// Sends `streams` concurrent GETs to `url` on the HTTP/2 connection
/// `client`, each answered in a task of `requests`.
fn h2_gets(
    client: &http2::SendRequest<Empty<Bytes>>,
    url: &str,
    streams: usize,
    requests: &mut JoinSet<StatusCode>,
) {
    for _ in 0..streams {
        let mut client = client.clone();
        let request = Request::get(url).body(Empty::new()).unwrap();
        requests.spawn(async move {
            let response = client
                .send_request(request)
                .await
                .expect("the proxy answers the stream");
            let status = response.status();
            response.into_body().collect().await.expect("whole body");
            status
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_of_one_http2_client_share_the_limited_upstream_connections() {
    let upstream = TestUpstream::start(None).await;
    // 64: the connection's share of it is 8 streams at once.
    let running = capped(&upstream.url, 64, 1, &[]).await;

    let client = h2_client(running.process.proxy_addr.unwrap()).await;
    let mut requests = JoinSet::new();
    h2_gets(
        &client,
        &format!("{}/hold", running.proxy),
        200,
        &mut requests,
    );
    upstream.slow_requests_started(8).await;
    // The client keeps the streams beyond the connection's limit of
    // concurrent streams to itself until others end.
    let concurrent = i64::from(lanyard::process::proxy_streams_per_connection(64));
    assert_eq!(concurrent, 8);
    settle_with_in_flight(&running, concurrent).await;
    assert_eq!(upstream.connections(), 8, "connections at once");
    assert_eq!(
        upstream.requests(),
        8,
        "the other streams wait in the client"
    );

    upstream.release_held();
    assert_eq!(all_ok(requests).await, 200);
    assert_eq!(
        upstream.connections(),
        8,
        "200 streams took turns on 8 pooled HTTP/1.1 connections"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_http2_clients_of_200_streams_open_no_more_than_the_limit() {
    // The case: 50 such clients made 10,000 upstream connections.
    let upstream = TestUpstream::start(None).await;
    let running = capped(&upstream.url, 8, 2, &[]).await;

    let mut requests = JoinSet::new();
    let url = format!("{}/hold", running.proxy);
    let mut clients = Vec::new();
    for _ in 0..50 {
        let client = h2_client(running.process.proxy_addr.unwrap()).await;
        h2_gets(&client, &url, 200, &mut requests);
        clients.push(client);
    }
    upstream.slow_requests_started(8).await;
    // Each client holds the streams beyond its connection's limit of
    // concurrent streams.
    let concurrent = i64::from(lanyard::process::proxy_streams_per_connection(8));
    settle_with_in_flight(&running, 50 * concurrent).await;
    // Once released, connections may close and open again as the two
    // proxy threads even out their shares, so the count is taken here,
    // where none can have closed.
    assert_eq!(upstream.connections(), 8, "connections at once");
    assert_eq!(upstream.requests(), 8, "every other stream waits");

    upstream.release_held();
    assert_eq!(all_ok(requests).await, 50 * 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_http2_upstream_connection_holds_a_permit_and_takes_the_waiting_requests() {
    let ca = TestCa::new();
    let upstream = TestUpstream::start(Some(ca.server.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let ca_file = support::write(dir.path(), "ca.pem", &ca.ca_pem);
    // One permit: the requests that come while the first connects wait,
    // and only the HTTP/2 connection it opens can serve them.
    let ca_file = [("LANYARD_CA_FILE", ca_file.to_str().unwrap())];
    let running = capped(&upstream.url, 1, 1, &ca_file).await;

    let mut requests = JoinSet::new();
    for _ in 0..50 {
        let url = format!("{}/hold", running.proxy);
        requests.spawn(async move { get(&url).await.status });
    }
    upstream.slow_requests_started(50).await;
    assert_eq!(upstream.connections(), 1, "all 50 on one HTTP/2 connection");

    upstream.release_held();
    assert_eq!(all_ok(requests).await, 50);
    assert_eq!(upstream.connections(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_queued_past_the_upstream_timeout_get_504_upstream_timeout() {
    let upstream = TestUpstream::start(None).await;
    let running = capped(&upstream.url, 1, 1, &[("LANYARD_UPSTREAM_TIMEOUT", "1")]).await;

    // The one connection stays busy with a body the client does not read:
    // its headers came in time, so only the queued requests can time out,
    // and none of them can get the permit before its deadline.
    let occupying = sidecar::client();
    let download = format!("{}/download?bytes={}", running.proxy, 256 << 20);
    let busy = tokio::time::timeout(
        PROMPTLY,
        occupying.request(
            Request::get(download)
                .body(Full::new(Bytes::new()))
                .unwrap(),
        ),
    )
    .await
    .expect("the download's headers in time")
    .expect("the sidecar answers");
    assert_eq!(busy.status(), StatusCode::OK);

    let mut requests = JoinSet::new();
    for _ in 0..2 {
        let url = format!("{}/queued", running.proxy);
        requests.spawn(async move { get(&url).await });
    }
    let answers = tokio::time::timeout(PROMPTLY, requests.join_all())
        .await
        .expect("the upstream timeout ended every queued request");
    for answer in &answers {
        assert_eq!(answer.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(
            answer.headers.get("lanyard-error").unwrap(),
            "upstream_timeout"
        );
    }
    assert_eq!(
        upstream.requests(),
        1,
        "the queued requests never had a connection"
    );

    // The download abandoned, its connection closes and gives the permit
    // back.
    drop((busy, occupying));
    let answer = tokio::time::timeout(PROMPTLY, get(&format!("{}/after", running.proxy)))
        .await
        .expect("answered in time");
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(upstream.connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_come_back_when_the_upstream_closes_its_connections() {
    // Answers one request per connection, then closes it: with
    // `Connection: close` for `/close`, unannounced (as an upstream's idle
    // timeout does) otherwise.
    let (closed_tx, mut closed) = mpsc::unbounded_channel();
    let upstream = RawUpstream::start(move |mut conn| {
        let closed_tx = closed_tx.clone();
        async move {
            let Some(seen) = conn.next_request().await else {
                return;
            };
            let _ = if seen.target == "/close" {
                conn.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok")
                    .await
            } else {
                conn.ok().await
            };
            drop(conn);
            let _ = closed_tx.send(());
        }
    })
    .await;
    // A permit that never came back would show as a 504 after 5 s.
    let running = capped(&upstream.url, 1, 1, &[("LANYARD_UPSTREAM_TIMEOUT", "5")]).await;

    for (i, path) in ["/close", "/idle", "/close", "/idle", "/idle"]
        .iter()
        .enumerate()
    {
        let answer = tokio::time::timeout(PROMPTLY, get(&format!("{}{path}", running.proxy)))
            .await
            .unwrap_or_else(|_| panic!("request {i} ({path}) answered in time"));
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "request {i} ({path}): {:?}",
            answer.body
        );
        tokio::time::timeout(PROMPTLY, closed.recv())
            .await
            .expect("the upstream closed in time")
            .unwrap();
    }
    assert_eq!(upstream.connections(), 5);
}

/// A GET on `client`, whose connection to the proxy stays open after it:
/// while it does, the next client connection goes to the proxy's other
/// thread, since a thread that accepts a connection while another serves
/// fewer hands it over (src/server.rs).
async fn kept_get(client: &Client<HttpConnector, Full<Bytes>>, url: &str) -> StatusCode {
    let response = client
        .request(Request::get(url).body(Full::new(Bytes::new())).unwrap())
        .await
        .expect("the sidecar answers");
    let status = response.status();
    response.into_body().collect().await.expect("whole body");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_idle_on_one_proxy_thread_serves_a_request_on_the_other() {
    let upstream = TestUpstream::start(None).await;
    // Without the rule, the second request would wait for the first
    // thread's idle connection to time out (50 s), far past PROMPTLY.
    let running = capped(&upstream.url, 1, 2, &[]).await;

    // The first thread's one connection, idle in its pool, and the client
    // connection that keeps the next client on the other thread.
    let first = sidecar::client();
    let status = tokio::time::timeout(PROMPTLY, kept_get(&first, &format!("{}/a", running.proxy)))
        .await
        .expect("answered in time");
    assert_eq!(status, StatusCode::OK);

    let answer = tokio::time::timeout(PROMPTLY, get(&format!("{}/b", running.proxy)))
        .await
        .expect("the other thread's request was not starved");
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(
        upstream.connections(),
        2,
        "the idle connection closed for the other thread, which opened its own"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_given_back_on_one_proxy_thread_goes_to_a_request_waiting_on_the_other() {
    let upstream = TestUpstream::start(None).await;
    let running = capped(&upstream.url, 1, 2, &[]).await;

    let first = sidecar::client();
    let held = {
        let url = format!("{}/hold", running.proxy);
        tokio::spawn(async move { kept_get(&first, &url).await })
    };
    upstream.slow_requests_started(1).await;
    let waiting = {
        let url = format!("{}/b", running.proxy);
        tokio::spawn(async move { get(&url).await.status })
    };
    settle_with_in_flight(&running, 2).await;
    assert_eq!(upstream.requests(), 1, "the second request waits");

    upstream.release_held();
    let (held, waiting) = tokio::time::timeout(PROMPTLY, async {
        (held.await.unwrap(), waiting.await.unwrap())
    })
    .await
    .expect("both answered in time");
    assert_eq!((held, waiting), (StatusCode::OK, StatusCode::OK));
    assert_eq!(upstream.connections(), 2);
}

/// A pool to `upstream` under `limit`, as a proxy thread has one.
fn pool(upstream: SocketAddr, limit: &UpstreamLimit) -> Rc<Pool<Full<Bytes>>> {
    let tls = outbound::tls_config(None).expect("TLS configuration");
    let target = TargetUrl::parse(&format!("http://{upstream}"), false).unwrap();
    Rc::new(Pool::new(outbound::connector(tls), &target, limit.clone()))
}

/// GET `path` through `pool`, body read to its end (which gives the
/// connection back to the pool).
async fn fetch(pool: &Rc<Pool<Full<Bytes>>>, path: &str) -> StatusCode {
    let request = Request::get(path).body(Full::new(Bytes::new())).unwrap();
    let response = pool.send(request).await.expect("the upstream answers");
    let status = response.status();
    response.into_body().collect().await.expect("whole body");
    status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pools_sharing_a_limit_free_idle_permits_for_each_other() {
    let upstream = TestUpstream::start(None).await;
    let limit = UpstreamLimit::new(2);

    // A quiet thread, as a proxy thread is: its own current-thread runtime,
    // running its connections' tasks, with both permits in idle
    // connections.
    let (idle_tx, idle_rx) = oneshot::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let quiet = std::thread::spawn({
        let (limit, target) = (limit.clone(), upstream.addr);
        move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let pool = pool(target, &limit);
                // At once, so each needs a connection of its own.
                let statuses = tokio::join!(fetch(&pool, "/a"), fetch(&pool, "/b"));
                idle_tx.send(statuses).unwrap();
                let _ = stop_rx.await;
            });
        }
    });
    let statuses = tokio::time::timeout(PROMPTLY, idle_rx)
        .await
        .expect("the quiet thread's requests answered in time")
        .unwrap();
    assert_eq!(statuses, (StatusCode::OK, StatusCode::OK));
    assert_eq!(upstream.connections(), 2);
    assert_eq!(limit.available(), 0, "both idle connections hold a permit");

    // Another pool, on this thread: its request waits, the quiet thread's
    // idle connections close, and a permit comes to it.
    let busy = pool(upstream.addr, &limit);
    let status = tokio::time::timeout(PROMPTLY, fetch(&busy, "/c"))
        .await
        .expect("the request was not starved by the other pool's idle connections");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(upstream.connections(), 3);
    assert_eq!(limit.waiting(), 0);

    // The busy pool keeps the connection it won: its next request reuses
    // it, with no new connection. (Whether the quiet thread's second idle
    // connection closed too depends on whether its task ran before the
    // waiter left; either is right, and asserting that both closed made
    // this test fail under load.)
    assert_eq!(fetch(&busy, "/d").await, StatusCode::OK);
    assert_eq!(upstream.connections(), 3);

    stop_tx.send(()).unwrap();
    quiet.join().unwrap();
    drop(busy);
}
