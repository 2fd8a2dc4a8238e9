//! The proxy at the edges of HTTP/1.1, over raw sockets so nothing a client
//! library adds or refuses gets in the way: hop-by-hop headers on the way
//! back, `OPTIONS *`, `Expect: 100-continue`, upgrade requests, and the 403
//! hint's once-a-minute log.

use crate::support;

use std::time::Duration;

use http::StatusCode;
use support::logs::Logs;
use support::sidecar::{self, get};
use support::upstream::TestUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How long any one read may wait before the test fails instead of hanging.
const READ_LIMIT: Duration = Duration::from_secs(10);

/// One HTTP/1.1 message as read off the wire.
#[derive(Debug)]
struct Message {
    /// The request or status line.
    start: String,
    /// Names lower-cased, in arrival order.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Message {
    fn status(&self) -> u16 {
        self.start
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not a status line: {}", self.start))
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }
}

/// A TCP connection read message by message.
struct Wire {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Wire {
    async fn connect(url: &str) -> Wire {
        let addr = url.trim_start_matches("http://");
        Wire {
            stream: TcpStream::connect(addr).await.unwrap(),
            buf: Vec::new(),
        }
    }

    async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Reads more bytes; false at end of stream.
    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 8192];
        let n = tokio::time::timeout(READ_LIMIT, self.stream.read(&mut chunk))
            .await
            .expect("the peer sends or closes in time")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    /// One line without its CRLF; `None` at end of stream.
    async fn line(&mut self) -> Option<String> {
        loop {
            if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = String::from_utf8_lossy(&self.buf[..at]).into_owned();
                self.buf.drain(..at + 2);
                return Some(line);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    async fn take(&mut self, n: usize) -> Vec<u8> {
        while self.buf.len() < n {
            assert!(self.fill().await, "the stream ended inside a body");
        }
        self.buf.drain(..n).collect()
    }

    /// Reads one message; `None` when the stream ends before one starts.
    /// A request without Content-Length or chunked encoding has no body; a
    /// response without either runs to the end of the stream.
    async fn message(&mut self, request: bool) -> Option<Message> {
        let start = self.line().await?;
        let mut headers = Vec::new();
        loop {
            let line = self.line().await.expect("a whole head");
            if line.is_empty() {
                break;
            }
            let (name, value) = line.split_once(':').expect("a header line");
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
        let mut message = Message {
            start,
            headers,
            body: Vec::new(),
        };
        let bodiless = !request && matches!(message.status(), 100..=199 | 204 | 304);
        if bodiless {
            return Some(message);
        }
        if message
            .header("transfer-encoding")
            .is_some_and(|te| te.eq_ignore_ascii_case("chunked"))
        {
            loop {
                let size = self.line().await.expect("a chunk size");
                let size = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16)
                    .expect("a hex chunk size");
                if size == 0 {
                    while !self.line().await.expect("trailers end").is_empty() {}
                    break;
                }
                let chunk = self.take(size).await;
                message.body.extend_from_slice(&chunk);
                self.take(2).await;
            }
        } else if let Some(len) = message.header("content-length") {
            message.body = self.take(len.parse().unwrap()).await;
        } else if !request {
            while self.fill().await {}
            message.body = std::mem::take(&mut self.buf);
        }
        Some(message)
    }

    async fn response(&mut self) -> Message {
        self.message(false)
            .await
            .expect("a response before the connection closed")
    }
}

/// An upstream written by hand: it reports each request it reads and
/// answers every one with the same bytes, so a test controls exactly what
/// comes back, hop-by-hop headers included.
struct RawUpstream {
    url: String,
    seen: mpsc::UnboundedReceiver<Message>,
    _task: tokio::task::JoinHandle<()>,
}

impl RawUpstream {
    async fn start(answer: &'static str) -> RawUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, seen) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let tx = tx.clone();
                tokio::spawn(async move {
                    let mut wire = Wire {
                        stream,
                        buf: Vec::new(),
                    };
                    while let Some(request) = wire.message(true).await {
                        let _ = tx.send(request);
                        wire.send(answer.as_bytes()).await;
                    }
                });
            }
        });
        RawUpstream {
            url,
            seen,
            _task: task,
        }
    }

    async fn next_request(&mut self) -> Message {
        tokio::time::timeout(READ_LIMIT, self.seen.recv())
            .await
            .expect("a request reached the upstream")
            .unwrap()
    }
}

fn echoed(echo: &serde_json::Value, name: &str) -> Vec<String> {
    echo["headers"][name]
        .as_array()
        .map(|v| v.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn hop_by_hop_headers_of_the_upstreams_answer_do_not_reach_the_client() {
    let mut upstream = RawUpstream::start(
        "HTTP/1.1 200 OK\r\n\
         Connection: x-secret-hop\r\n\
         X-Secret-Hop: 1\r\n\
         Keep-Alive: timeout=5\r\n\
         Proxy-Authenticate: Basic realm=\"upstream\"\r\n\
         Upgrade: foo\r\n\
         X-Ordinary: yes\r\n\
         Content-Length: 2\r\n\
         \r\n\
         ok",
    )
    .await;
    let running = sidecar::ready_for(&upstream.url, &[]).await;

    let mut client = Wire::connect(&running.proxy).await;
    client
        .send(b"GET /answer HTTP/1.1\r\nHost: app.internal\r\n\r\n")
        .await;
    let answer = client.response().await;
    assert_eq!(upstream.next_request().await.start, "GET /answer HTTP/1.1");
    assert_eq!(answer.status(), 200, "{answer:?}");
    for gone in [
        "connection",
        "x-secret-hop",
        "keep-alive",
        "proxy-authenticate",
        "upgrade",
    ] {
        assert_eq!(answer.header(gone), None, "{gone} passed back: {answer:?}");
    }
    assert_eq!(answer.header("x-ordinary"), Some("yes"), "{answer:?}");
    assert_eq!(answer.body, b"ok");
}

#[tokio::test]
async fn options_asterisk_is_forwarded_to_the_base_path_itself() {
    let upstream = TestUpstream::start(None).await;
    for (base, want) in [
        (upstream.url.clone(), "/"),
        (format!("{}/base/v1/", upstream.url), "/base/v1/"),
    ] {
        let running = sidecar::ready_for(&base, &[]).await;
        let mut client = Wire::connect(&running.proxy).await;
        client
            .send(b"OPTIONS * HTTP/1.1\r\nHost: app.internal\r\n\r\n")
            .await;
        let answer = client.response().await;
        assert_eq!(answer.status(), 200, "{answer:?}");
        let echo = answer.json();
        assert_eq!(echo["method"], "OPTIONS", "{echo}");
        assert_eq!(echo["path"], want, "base {base}: {echo}");
        assert_eq!(echoed(&echo, "authorization").len(), 1, "{echo}");
    }
}

#[tokio::test]
async fn expect_100_continue_gets_the_interim_answer_and_the_body_arrives_whole() {
    let mut upstream =
        RawUpstream::start("HTTP/1.1 201 Created\r\nContent-Length: 4\r\n\r\ndone").await;
    let running = sidecar::ready_for(&upstream.url, &[]).await;

    let mut client = Wire::connect(&running.proxy).await;
    client
        .send(
            b"POST /items HTTP/1.1\r\n\
              Host: app.internal\r\n\
              Content-Type: application/json\r\n\
              Content-Length: 20\r\n\
              Expect: 100-continue\r\n\
              \r\n",
        )
        .await;
    // The client holds the body back until told to go on.
    let interim = client.response().await;
    assert_eq!(interim.start, "HTTP/1.1 100 Continue");
    client.send(br#"{"given_name":"Ada"}"#).await;
    let answer = client.response().await;
    assert_eq!(answer.status(), 201, "{answer:?}");
    assert_eq!(answer.body, b"done");

    let seen = upstream.next_request().await;
    assert_eq!(seen.start, "POST /items HTTP/1.1");
    assert_eq!(seen.body, br#"{"given_name":"Ada"}"#);
    assert_eq!(seen.header("content-length"), Some("20"), "{seen:?}");
    assert!(
        seen.header("authorization")
            .is_some_and(|a| a.starts_with("Bearer mock-")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn a_websocket_upgrade_is_not_tunnelled_but_answered_as_plain_http() {
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[]).await;

    let mut client = Wire::connect(&running.proxy).await;
    client
        .send(
            b"GET /chat HTTP/1.1\r\n\
              Host: app.internal\r\n\
              Connection: Upgrade\r\n\
              Upgrade: websocket\r\n\
              Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
              Sec-WebSocket-Version: 13\r\n\
              \r\n",
        )
        .await;
    let answer = client.response().await;
    assert_eq!(answer.status(), 200, "{answer:?}");
    assert_eq!(answer.header("upgrade"), None, "{answer:?}");
    let echo = answer.json();
    assert_eq!(echo["path"], "/chat");
    assert!(echoed(&echo, "upgrade").is_empty(), "{echo}");
    assert!(echoed(&echo, "connection").is_empty(), "{echo}");

    // No tunnel was opened: the same connection carries the next request
    // as HTTP.
    client
        .send(b"GET /after HTTP/1.1\r\nHost: app.internal\r\n\r\n")
        .await;
    let next = client.response().await;
    assert_eq!(next.status(), 200, "{next:?}");
    assert_eq!(next.json()["path"], "/after");
    assert_eq!(upstream.requests(), 2);
}

const HINT: &str = "the service answered 403";

/// The interval itself is checked by a unit test in src/proxy.rs: the
/// proxy runs on threads of its own, whose clock a test cannot move.
#[tokio::test]
async fn the_403_hint_is_logged_once_for_a_burst_while_every_403_is_counted() {
    let (logs, _guard) = Logs::capture();
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[]).await;
    let forbidden = format!("{}/status/403", running.proxy);
    let forbidden_total = || running.process.metrics.upstream_forbidden.get();

    // New connections each time, so both proxy threads answer some.
    for _ in 0..6 {
        assert_eq!(get(&forbidden).await.status, StatusCode::FORBIDDEN);
    }
    assert_eq!(logs.count(HINT), 1);
    assert_eq!(forbidden_total(), 6);
    // Other answers never log the hint.
    assert_eq!(
        get(&format!("{}/ok", running.proxy)).await.status,
        StatusCode::OK
    );
    assert_eq!(logs.count(HINT), 1);
}
