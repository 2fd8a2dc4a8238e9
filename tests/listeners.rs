//! The proxy's threads and their one listener: whichever thread accepts a
//! connection, the threads' numbers of connections stay even, and a
//! connection handed from one thread to another is served like any other.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use lanyard::server::{self, Handler, Limits, Share};
use support::sidecar::{self, get};
use support::upstream::TestUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

const PROMPTLY: Duration = Duration::from_secs(10);

/// Answers every request with its own name, so a client can tell which
/// accept loop served its connection.
struct Named(&'static str);

impl Handler for Named {
    type Body = Full<Bytes>;

    async fn handle(&self, _req: Request<Incoming>) -> Response<Full<Bytes>> {
        Response::new(Full::new(Bytes::from_static(self.0.as_bytes())))
    }
}

/// Sends one request on `stream` and returns the answer's body, one byte.
async fn ask(stream: &mut TcpStream) -> String {
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: lanyard\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 512];
    loop {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "closed before answering");
        answer.extend_from_slice(&buf[..n]);
        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n")
            && answer.len() > end + 4
        {
            return String::from_utf8_lossy(&answer[end + 4..]).into_owned();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_stay_even_whichever_loop_accepts_them() {
    let limits = Limits {
        header_timeout: Duration::from_secs(30),
        max_connections: 100,
    };
    // The worst race: a accepts every connection, b none (its listener is
    // one nobody connects to). Only handing over gives b its share.
    let accepting = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = accepting.local_addr().unwrap();
    let idle = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut loops = JoinSet::new();
    for ((share, name), listener) in Share::group(limits.max_connections, 2)
        .into_iter()
        .zip(["a", "b"])
        .zip([accepting, idle])
    {
        loops.spawn(server::serve_sharing(
            listener,
            Arc::new(Named(name)),
            std::future::pending(),
            Duration::from_secs(1),
            limits,
            None,
            share,
        ));
    }

    // Held open, each connection lands on the loop serving fewer.
    let mut held = Vec::new();
    let mut served = [0usize; 2];
    for _ in 0..10 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let name = tokio::time::timeout(PROMPTLY, ask(&mut stream))
            .await
            .expect("answered in time");
        served[usize::from(name == "b")] += 1;
        held.push(stream);
    }
    assert_eq!(served, [5, 5], "connections served by a and by b");

    // A connection handed over keeps working for later requests.
    let mut again = [0usize; 2];
    for stream in &mut held {
        let name = tokio::time::timeout(PROMPTLY, ask(stream)).await.unwrap();
        again[usize::from(name == "b")] += 1;
    }
    assert_eq!(again, [5, 5], "second requests served by a and by b");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_proxy_thread_serves_connections() {
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::start(
        support::mock().await,
        &upstream.url,
        &[("LANYARD_WORKER_THREADS", "4")],
    )
    .await;
    running.ready().await;

    // Connections opened at once: most are handed from the thread that
    // accepted them to another, and every one must be answered.
    let mut clients = JoinSet::new();
    for n in 0..64 {
        let url = format!("{}/listeners/{n}", running.proxy);
        clients.spawn(async move { tokio::time::timeout(PROMPTLY, get(&url)).await });
    }
    let mut answered = 0;
    while let Some(outcome) = clients.join_next().await {
        let answer = outcome.unwrap().expect("every connection is answered");
        assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
        answered += 1;
    }
    assert_eq!(answered, 64);
    assert_eq!(upstream.requests(), 64);
}
