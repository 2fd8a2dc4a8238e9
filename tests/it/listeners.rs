//! The proxy's threads and their one listener: whichever thread accepts a
//! connection, the threads' numbers of connections stay even, and a
//! connection handed from one thread to another is served like any other.

use crate::support;

use std::io::{Read as _, Write as _};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use lanyard::server::{self, Abort, Handler, Limits, Member};
use support::sidecar::{self, get};
use support::upstream::TestUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinSet;

const PROMPTLY: Duration = Duration::from_secs(10);

/// Answers every request with its own name, so a client can tell which
/// accept loop served its connection; never answers `/hold`, and says
/// when one arrives.
struct Named {
    name: &'static str,
    holding: Arc<Notify>,
}

impl Handler for Named {
    type Body = Full<Bytes>;

    async fn handle(
        &self,
        req: Request<Incoming>,
        _client: lanyard::server::Peer,
    ) -> Result<Response<Full<Bytes>>, Abort> {
        if req.uri().path() == "/hold" {
            self.holding.notify_one();
            std::future::pending::<()>().await;
        }
        Ok(Response::new(Full::new(Bytes::from_static(
            self.name.as_bytes(),
        ))))
    }
}

/// Loops a and b of one group, each on a thread of its own as the
/// sidecar runs them. a's listener is the one returned; b's is one nobody
/// connects to, so a accepts every connection and b serves only those
/// handed to it: the worst race for accepting. b stops when `stop_b`
/// completes and then drains for up to a minute; a stops when the
/// returned sender is dropped.
async fn pair(
    stop_b: impl Future<Output = ()> + Send + 'static,
) -> (SocketAddr, Arc<Notify>, oneshot::Sender<()>) {
    let limits = Limits {
        first_request_timeout: Duration::from_secs(30),
        idle_timeout: Duration::from_secs(30),
        send_timeout: Duration::from_secs(30),
        max_connections: 100,
        per_client: None,
        max_header_bytes: 64 * 1024,
        max_streams: 10_000,
        streams_per_connection: 100,
        stream_state_bytes: 4 * 1024,
        head_refusal: |refused| {
            let mut answer = http::Response::new(http_body_util::Full::new(Bytes::from_static(
                refused.reason().as_bytes(),
            )));
            *answer.status_mut() = refused.status();
            answer
        },
        refusal: Bytes::from_static(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        ),
        evict_idle: false,
        extra_headers: http::HeaderMap::new(),
    };
    let accepting = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = accepting.local_addr().unwrap();
    let idle = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let holding = Arc::new(Notify::new());
    let mut members = Member::group(&limits, 2).into_iter();
    let named = |name| Named {
        name,
        holding: holding.clone(),
    };
    let (a, b) = (members.next().unwrap(), members.next().unwrap());
    let (stop_a, stopped_a) = oneshot::channel::<()>();
    let stop_a_when_dropped = async {
        let _ = stopped_a.await;
    };
    serve_on_thread(
        accepting,
        named("a"),
        stop_a_when_dropped,
        limits.clone(),
        a,
    );
    serve_on_thread(idle, named("b"), stop_b, limits, b);
    (addr, holding, stop_a)
}

fn serve_on_thread(
    listener: std::net::TcpListener,
    handler: Named,
    stop: impl Future<Output = ()> + Send + 'static,
    limits: Limits,
    share: Member,
) {
    listener.set_nonblocking(true).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let listener = TcpListener::from_std(listener).unwrap();
            let grace = Duration::from_secs(60);
            server::serve(
                server::Listener::Tcp(listener),
                handler,
                stop,
                grace,
                limits,
                None,
                share,
            )
            .await
        })
    });
}

/// A new connection with one request answered on it.
async fn answered(addr: SocketAddr) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let name = tokio::time::timeout(PROMPTLY, ask(&mut stream))
        .await
        .expect("answered in time");
    (stream, name)
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
    let (addr, _, _loops) = pair(std::future::pending()).await;

    // Held open, each connection lands on the loop serving fewer.
    let mut held = Vec::new();
    let mut served = [0usize; 2];
    for _ in 0..10 {
        let (stream, name) = answered(addr).await;
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
async fn a_loop_that_has_stopped_accepting_is_handed_nothing() {
    let (stop_b, stopped) = oneshot::channel::<()>();
    let (addr, holding, _loops) = pair(async {
        let _ = stopped.await;
    })
    .await;

    // a serves 3 connections; b serves one idle and one whose request never
    // ends, which keeps b draining once it stops.
    let (_first, name) = answered(addr).await;
    assert_eq!(name, "a");
    let (mut idle_on_b, name) = answered(addr).await;
    assert_eq!(name, "b");
    let (_second, name) = answered(addr).await;
    assert_eq!(name, "a");
    let mut held_on_b = TcpStream::connect(addr).await.unwrap();
    held_on_b
        .write_all(b"GET /hold HTTP/1.1\r\nhost: lanyard\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(PROMPTLY, holding.notified())
        .await
        .expect("b took the held request");
    let (_third, name) = answered(addr).await;
    assert_eq!(name, "a");

    // b stops: it closes its idle connection, and drains the held one.
    stop_b.send(()).unwrap();
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PROMPTLY, idle_on_b.read_to_end(&mut rest)).await;
    assert!(matches!(closed, Ok(Ok(_))), "b closed its idle connection");

    // b now serves one connection and a three, but a new connection must
    // stay with a: b takes no more.
    let (_late, name) = answered(addr).await;
    assert_eq!(name, "a");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_handed_between_proxy_threads_are_answered() {
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

#[tokio::test]
async fn probes_are_answered_while_the_starting_thread_is_busy() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let admin = running.process.admin_addr;

    // This test's runtime carries the token refresher, as lanyard's main
    // thread does; it is held busy, as by an RSA signature, until a plain
    // blocking client on another thread has its probe answered.
    let (answer_tx, answer_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut stream = std::net::TcpStream::connect(admin).unwrap();
        stream.set_read_timeout(Some(PROMPTLY)).unwrap();
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        let _ = answer_tx.send(answer);
    });
    let answer = answer_rx
        .recv_timeout(PROMPTLY)
        .expect("the probe was answered while the starting thread was busy");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}
