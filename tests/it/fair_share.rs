//! One app's slow reading leaves the pod's other apps their upstream
//! connections (docs/proxy.md "Limits"): an HTTP/2 connection whose client
//! takes none of its large answers holds at most its share of
//! `LANYARD_MAX_UPSTREAM_CONNECTIONS`, so that while three such hold,
//! another app's GETs are answered, none with 504.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper::client::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use support::sidecar;
use support::upstream::TestUpstream;
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

const PROMPTLY: Duration = Duration::from_secs(10);
/// Upstream connections in these tests: each client connection's share is
/// an eighth, 8.
const UPSTREAM_CONNECTIONS: usize = 64;
/// Each slow reader asks for more than its share, and together for more
/// than all the upstream connections.
const STREAMS_PER_READER: usize = 32;
/// Larger than what the sockets between the upstream and the client take
/// without being read, so that an answer's upstream connection stays busy.
const LARGE: u64 = 64 << 20;

/// An HTTP/2 connection to `proxy` granting every stream a zero window:
/// its answers' heads arrive, never their bodies.
async fn slow_reader(proxy: std::net::SocketAddr) -> http2::SendRequest<Empty<Bytes>> {
    let tcp = TcpStream::connect(proxy).await.expect("the proxy accepts");
    let (sender, connection) = http2::Builder::new(TokioExecutor::new())
        .initial_stream_window_size(0)
        .handshake(TokioIo::new(tcp))
        .await
        .expect("HTTP/2 handshake with the proxy");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_readers_leave_the_other_apps_their_upstream_connections() {
    let upstream = TestUpstream::start(None).await;
    let limit = UPSTREAM_CONNECTIONS.to_string();
    let running = sidecar::start(
        support::mock().await,
        &upstream.url,
        &[
            ("LANYARD_MAX_UPSTREAM_CONNECTIONS", limit.as_str()),
            ("LANYARD_UPSTREAM_TIMEOUT", "3"),
        ],
    )
    .await;
    running.ready().await;
    let proxy = running.process.proxy_addr.unwrap();
    let share = lanyard::process::proxy_streams_per_connection(UPSTREAM_CONNECTIONS) as usize;
    assert_eq!(share, 8);

    // Each answer's head is reported, and its body kept unread.
    let (heads, mut headed) = mpsc::unbounded_channel();
    let mut readers = Vec::new();
    for _ in 0..3 {
        let reader = slow_reader(proxy).await;
        for _ in 0..STREAMS_PER_READER {
            let mut reader = reader.clone();
            let heads = heads.clone();
            let url = format!("{}/download?bytes={LARGE}", running.proxy);
            tokio::spawn(async move {
                let request = Request::get(url).body(Empty::new()).unwrap();
                if let Ok(answer) = reader.send_request(request).await {
                    let _ = heads.send(answer);
                }
            });
        }
        readers.push(reader);
    }
    let mut held = Vec::new();
    while held.len() < 3 * share {
        let answer = tokio::time::timeout(PROMPTLY, headed.recv())
            .await
            .expect("the slow readers' first answers in time")
            .expect("a reader's answer");
        assert_eq!(answer.status(), StatusCode::OK);
        held.push(answer);
    }

    let mut neighbours = JoinSet::new();
    for n in 0..10 {
        let url = format!("{}/neighbour/{n}", running.proxy);
        neighbours.spawn(async move { sidecar::get(&url).await.status });
    }
    let statuses = tokio::time::timeout(PROMPTLY, neighbours.join_all())
        .await
        .expect("every neighbour answered");
    assert_eq!(
        statuses,
        vec![StatusCode::OK; 10],
        "no 504 for the neighbour"
    );
    assert!(
        headed.try_recv().is_err(),
        "no slow reader had more than its share of answers"
    );
    drop((held, readers));
}
