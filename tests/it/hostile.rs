//! Hostile or broken clients on the proxy listener: oversized and malformed
//! requests, smuggling attempts, slow and silent clients, connection
//! floods. Each is refused or bounded, nothing bad is forwarded, and other
//! clients keep being served.

use crate::support;

use std::time::Duration;

use support::sidecar::{self, get};
use support::upstream::TestUpstream;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Long enough for a loaded CI machine to notice a close; short enough that
/// a hang fails the test rather than the suite.
const CLOSE_WITHIN: Duration = Duration::from_secs(10);

async fn connect(running: &sidecar::Running) -> TcpStream {
    TcpStream::connect(running.proxy.trim_start_matches("http://"))
        .await
        .unwrap()
}

/// Everything the server sends until it closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(CLOSE_WITHIN, async {
        let mut buf = [0u8; 8192];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the connection was not closed in time");
    String::from_utf8_lossy(&answer).into_owned()
}

/// Sends `request` on a fresh connection and returns all that comes back.
async fn exchange(running: &sidecar::Running, request: &[u8]) -> String {
    let mut stream = connect(running).await;
    // The server may answer and close before all of an oversized request is
    // written; the answer is what matters.
    let _ = stream.write_all(request).await;
    read_to_close(&mut stream).await
}

/// One request on an open keep-alive connection; returns the status code.
async fn request_on(stream: &mut TcpStream, path: &str) -> u16 {
    let request = format!("GET {path} HTTP/1.1\r\nhost: lanyard\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let mut body_left: Option<usize> = None;
    loop {
        let n = tokio::time::timeout(CLOSE_WITHIN, stream.read(&mut buf))
            .await
            .expect("an answer in time")
            .unwrap();
        assert!(n > 0, "the connection closed before the answer");
        head.extend_from_slice(&buf[..n]);
        if body_left.is_none()
            && let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n")
        {
            let text = String::from_utf8_lossy(&head[..end]).to_ascii_lowercase();
            let length = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .expect("a content-length");
            body_left = Some(end + 4 + length);
        }
        if body_left.is_some_and(|total| head.len() >= total) {
            break;
        }
    }
    String::from_utf8_lossy(&head[9..12]).parse().unwrap()
}

/// The sum of every series of a counter, 0 when none has been created.
async fn metric_sum(running: &sidecar::Running, name: &str) -> f64 {
    let scrape = get(&format!("{}/metrics", running.admin)).await;
    String::from_utf8_lossy(&scrape.body)
        .lines()
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with(['{', ' ']))
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

async fn metric(running: &sidecar::Running, name: &str) -> f64 {
    let scrape = get(&format!("{}/metrics", running.admin)).await;
    String::from_utf8_lossy(&scrape.body)
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in the scrape"))
}

#[tokio::test]
async fn oversized_request_headers_get_431_and_are_not_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;

    let huge_value = "a".repeat(1024 * 1024);
    let request = format!("GET /x HTTP/1.1\r\nhost: lanyard\r\nx-big: {huge_value}\r\n\r\n");
    let answer = exchange(&running, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "got: {answer:.80}");

    let many: String = (0..500).map(|i| format!("x-h{i}: v\r\n")).collect();
    let request = format!("GET /x HTTP/1.1\r\nhost: lanyard\r\n{many}\r\n");
    let answer = exchange(&running, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 431"), "got: {answer:.80}");

    assert_eq!(upstream.requests(), 0, "nothing was forwarded");
    assert_eq!(get(&format!("{}/ok", running.proxy)).await.status, 200);
}

#[tokio::test]
async fn malformed_request_lines_get_400_and_are_not_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let malformed: [&[u8]; 5] = [
        b"GARBAGE\r\n\r\n",
        b"GET /x HTTP/9.9\r\nhost: lanyard\r\n\r\n",
        b"GET /x\x00y HTTP/1.1\r\nhost: lanyard\r\n\r\n",
        b"GET /x HTTP/1.1\r\nbad header\r\n\r\n",
        b"GET /x HTTP/1.1\r\nhost: lanyard\r\nx: a\rb\r\n\r\n",
    ];
    for request in malformed {
        let answer = exchange(&running, request).await;
        assert!(
            answer.starts_with("HTTP/1.1 400") || answer.is_empty(),
            "{:?} got: {answer:.80}",
            String::from_utf8_lossy(request)
        );
    }
    assert_eq!(upstream.requests(), 0, "nothing was forwarded");
    assert_eq!(get(&format!("{}/ok", running.proxy)).await.status, 200);
}

#[tokio::test]
async fn ambiguous_body_framing_is_refused_before_anything_is_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let ambiguous: [&[u8]; 9] = [
        // The classic CL.TE attempt: a front end that trusted
        // Content-Length would forward the trailing request as part of
        // this one's body, and a back end that trusted Transfer-Encoding
        // would then run it.
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: 40\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked, chunked\r\ncontent-length: 5\r\n\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked, identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello",
        b"POST /upload HTTP/1.0\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    ];
    for request in ambiguous {
        let answer = exchange(&running, request).await;
        let shown = String::from_utf8_lossy(request);
        assert!(
            answer.starts_with("HTTP/1.1 400"),
            "{shown:?} got: {answer}"
        );
        assert!(
            answer.contains("connection: close"),
            "{shown:?} got: {answer}"
        );
        assert!(
            answer.contains("lanyard-error: bad_request"),
            "{shown:?} got: {answer}"
        );
        assert_eq!(
            answer.matches("HTTP/1.1").count(),
            1,
            "one answer: {answer}"
        );
    }
    // Behind good requests on the same connection: they are served, the
    // ambiguous one is refused, and nothing after it is read.
    let pipelined = b"GET /first HTTP/1.1\r\nhost: lanyard\r\n\r\nPOST /second HTTP/1.1\r\nhost: lanyard\r\ncontent-length: 5\r\n\r\nhelloPOST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n";
    let answer = exchange(&running, pipelined).await;
    assert_eq!(answer.matches("HTTP/1.1 200").count(), 2, "got: {answer}");
    assert_eq!(answer.matches("HTTP/1.1 400").count(), 1, "got: {answer}");
    assert_eq!(
        upstream.requests(),
        2,
        "only the two good requests were forwarded"
    );

    // A well-framed chunked body is forwarded as one request with its body.
    let chunked = b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    let answer = exchange(&running, chunked).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "got: {answer:.80}");
    assert!(
        answer.ends_with("\r\n\r\n5"),
        "the upstream saw 5 bytes: {answer}"
    );
    assert_eq!(upstream.requests(), 3);
}

#[tokio::test]
async fn slow_headers_are_cut_off_at_the_header_timeout() {
    let (upstream, running) = sidecar::echoing(&[("LANYARD_HEADER_TIMEOUT", "1s")]).await;

    // Slowloris: a request head trickled a byte at a time never completes.
    let mut slow = connect(&running).await;
    slow.write_all(b"GET /x HTTP/1.1\r\nhost: lanyard\r\n")
        .await
        .unwrap();
    let trickle = async {
        let mut interval = tokio::time::interval(Duration::from_millis(100));
        loop {
            interval.tick().await;
            if slow.write_all(b"x").await.is_err() {
                break;
            }
        }
    };
    tokio::time::timeout(CLOSE_WITHIN, trickle)
        .await
        .expect("the trickling client was disconnected");

    // A client that connects and says nothing at all.
    let mut silent = connect(&running).await;
    read_to_close(&mut silent).await;

    // A keep-alive connection left idle after a request.
    let mut idle = connect(&running).await;
    assert_eq!(request_on(&mut idle, "/ok").await, 200);
    read_to_close(&mut idle).await;

    assert_eq!(
        upstream.requests(),
        1,
        "only the complete request was forwarded"
    );
}

#[tokio::test]
async fn partial_and_idle_http2_prefaces_are_cut_off_at_the_header_timeout() {
    let (upstream, running) = sidecar::echoing(&[("LANYARD_HEADER_TIMEOUT", "1s")]).await;

    // HTTP/2 with prior knowledge is served.
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let response = client
        .get(format!("{}/h2", running.proxy).parse().unwrap())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.version(), http::Version::HTTP_2);

    // `P` could start either protocol; nothing follows.
    let mut partial = connect(&running).await;
    partial.write_all(b"P").await.unwrap();
    read_to_close(&mut partial).await;

    // The whole preface and an empty SETTINGS frame, then silence: an
    // HTTP/2 connection that never sends a request, nor answers a ping.
    let mut idle = connect(&running).await;
    idle.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    read_to_close(&mut idle).await;

    assert_eq!(
        upstream.requests(),
        1,
        "only the HTTP/2 request was forwarded"
    );
}

#[tokio::test]
async fn a_flood_of_idle_connections_is_bounded_and_other_clients_are_served() {
    const LIMIT: usize = 1000;
    const FLOOD: usize = 2500;
    let (_upstream, running) = sidecar::echoing(&[
        ("LANYARD_MAX_CONNECTIONS", &LIMIT.to_string()),
        ("LANYARD_HEADER_TIMEOUT", "5s"),
    ])
    .await;

    // A client with a connection already open, as an app's pool has.
    let mut app = connect(&running).await;
    assert_eq!(request_on(&mut app, "/before").await, 200);

    let mut flood = Vec::with_capacity(FLOOD);
    for _ in 0..FLOOD {
        flood.push(connect(&running).await);
    }

    // The app's connection is still served while the flood holds the rest.
    assert_eq!(request_on(&mut app, "/during").await, 200);

    // Every connection beyond the limit is closed at once, with a 503 where
    // the refusal could still be answered; the rest are cut off by the
    // header timeout. None stays open.
    let mut refused_with_503 = 0;
    for mut stream in flood {
        let answer = read_to_close(&mut stream).await;
        if answer.starts_with("HTTP/1.1 503") {
            assert!(answer.contains("lanyard-error: too_many_connections"));
            assert!(answer.contains(r#""error":"too_many_connections""#));
            refused_with_503 += 1;
        }
    }
    assert!(refused_with_503 > 0, "some refusals were answered with 503");
    let refused = metric(&running, "lanyard_proxy_connections_refused_total").await;
    assert!(
        refused >= (FLOOD + 1 - LIMIT) as f64,
        "{refused} connections counted as refused"
    );

    // The app's connection outlived the flood's; its idle time restarted
    // with each request. A new client is served once the flood is gone.
    assert_eq!(get(&format!("{}/after", running.proxy)).await.status, 200);
    let open = metric(&running, "lanyard_proxy_connections").await;
    assert!(open <= 2.0, "{open} connections still open");
}

/// A request head announcing a body that never comes.
const STALLED_BODY: &[u8] = b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: 10\r\n\r\n";

/// A sidecar's `limit` slots held by requests whose bodies stall, and one
/// more connection's answer, taken while they held: `None` when the machine
/// took over `body_timeout` to get that far, so they may have let go.
async fn slots_held_by_stalled_bodies(
    limit: usize,
    body_timeout: Duration,
) -> Option<(TestUpstream, sidecar::Running, Vec<TcpStream>, String)> {
    let (limit_setting, timeout) = (limit.to_string(), format!("{}s", body_timeout.as_secs()));
    let (upstream, running) = sidecar::echoing(&[
        ("LANYARD_MAX_CONNECTIONS", &limit_setting),
        ("LANYARD_BODY_TIMEOUT", &timeout),
    ])
    .await;
    // Each body's timer starts after this.
    let started = tokio::time::Instant::now();
    let mut stalled = Vec::new();
    for _ in 0..limit {
        let mut stream = connect(&running).await;
        stream.write_all(STALLED_BODY).await.unwrap();
        stalled.push(stream);
    }
    let next = exchange(
        &running,
        b"GET /x HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n",
    )
    .await;
    (started.elapsed() < body_timeout).then_some((upstream, running, stalled, next))
}

#[tokio::test]
async fn stalled_bodies_free_their_connection_slots_within_the_body_timeout() {
    const LIMIT: usize = 20;
    // A loaded machine may take longer than a short timeout to open the
    // 21st connection; the set-up is then tried again with a longer one.
    let mut held = None;
    for seconds in [3, 6, 12] {
        held = slots_held_by_stalled_bodies(LIMIT, Duration::from_secs(seconds)).await;
        if held.is_some() {
            break;
        }
    }
    let (upstream, running, stalled, refused) =
        held.expect("21 connections opened within 12 s, on any machine");
    // While they hold every slot, the next client is refused...
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    // ...until the body timeout closes each of them, unanswered.
    for mut stream in stalled {
        let answer = read_to_close(&mut stream).await;
        assert_eq!(answer, "", "a stalled request got an answer");
    }
    assert_eq!(get(&format!("{}/after", running.proxy)).await.status, 200);
    // A streamed body that stops halfway is cut off the same way.
    let mut halfway = connect(&running).await;
    halfway
        .write_all(b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n")
        .await
        .unwrap();
    read_to_close(&mut halfway).await;
    assert_eq!(
        metric_sum(&running, "lanyard_upstream_errors_total").await,
        0.0
    );
    assert!(upstream.requests() >= 1);
}

/// A body that never yields a frame.
struct Stall;

impl hyper::body::Body for Stall {
    type Data = bytes::Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<bytes::Bytes>, Self::Error>>> {
        std::task::Poll::Pending
    }
}

#[tokio::test]
async fn a_stalled_http2_stream_is_reset_and_the_connection_goes_idle() {
    let (_upstream, running) = sidecar::echoing(&[
        ("LANYARD_BODY_TIMEOUT", "1s"),
        ("LANYARD_HEADER_TIMEOUT", "1s"),
    ])
    .await;
    let io = hyper_util::rt::TokioIo::new(connect(&running).await);
    let (mut sender, connection) =
        hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .unwrap();
    let connection = tokio::spawn(connection);
    let request = http::Request::post(format!("{}/upload", running.proxy))
        .body(Stall)
        .unwrap();
    let answer = tokio::time::timeout(CLOSE_WITHIN, sender.send_request(request))
        .await
        .expect("the stream ended in time");
    assert!(answer.is_err(), "the stalled stream was answered");
    // With its only stream gone, the connection is idle, and closed.
    tokio::time::timeout(CLOSE_WITHIN, connection)
        .await
        .expect("the idle connection was closed")
        .unwrap()
        .ok();
}

#[tokio::test]
async fn a_malformed_chunk_is_the_clients_400_not_an_upstream_error() {
    let (logs, _guard) = support::logs::Logs::capture();
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let answer = exchange(
        &running,
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\n\r\n10000000000000005\r\nhello\r\n0\r\n\r\n",
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("lanyard-error: bad_request"), "{answer}");
    // A client that hangs up mid-body is simply closed.
    let mut gone = connect(&running).await;
    gone.write_all(
        b"POST /upload HTTP/1.1\r\nhost: lanyard\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
    )
    .await
    .unwrap();
    drop(gone);
    // Once the proxy has let go of every connection, the hang-up has been
    // dealt with; then nothing may have been blamed on the upstream.
    tokio::time::timeout(CLOSE_WITHIN, async {
        while metric(&running, "lanyard_proxy_connections").await > 0.0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the proxy closed the connections");
    assert_eq!(get(&format!("{}/after", running.proxy)).await.status, 200);
    assert_eq!(
        metric_sum(&running, "lanyard_upstream_errors_total").await,
        0.0
    );
    assert!(
        !logs
            .events()
            .iter()
            .any(|e| e["fields"]["message"] == "upstream request failed"),
        "{:?}",
        logs.events()
    );
}

#[tokio::test]
async fn a_client_looping_on_a_path_that_answers_401_cannot_make_the_pod_unready() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let readyz = format!("{}/readyz", running.admin);
    for _ in 0..30 {
        assert_eq!(
            get(&format!("{}/status/401", running.proxy)).await.status,
            401
        );
        assert_eq!(get(&readyz).await.status, 200);
    }
    // The rest of the API still gets the token.
    assert_eq!(
        get(&format!("{}/elsewhere", running.proxy)).await.status,
        200
    );
}

#[tokio::test]
async fn paths_that_could_leave_the_base_prefix_are_refused() {
    let upstream = TestUpstream::start(None).await;
    let base = format!("{}/prefix", upstream.url);
    let running = sidecar::ready_for(&base, &[]).await;
    for path in [
        "/../other",
        "/%2e%2e/other",
        "/..//x",
        "/a/%2E%2E%2F..%2Fother",
        "/a/./b",
    ] {
        let request = format!("GET {path} HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n");
        let answer = exchange(&running, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("lanyard-error: bad_request"), "{path}");
    }
    assert_eq!(upstream.requests(), 0, "a request escaped the prefix");
    // Dots inside a segment are ordinary.
    let answer = get(&format!("{}/v1/file.json", running.proxy)).await;
    assert_eq!(answer.json()["path"], "/prefix/v1/file.json");
}

/// Dot-segments as a lenient upstream reads them, with one account and no
/// directory: one that trims whitespace and control characters (IIS,
/// older Spring MVC), decodes twice, decodes IIS's `%u` escapes or
/// overlong UTF-8, or normalises compatibility forms (NFKC) could resolve
/// these above the base URL's prefix.
#[tokio::test]
async fn dot_segments_hidden_from_a_strict_reading_are_refused_with_one_account() {
    let upstream = TestUpstream::start(None).await;
    let base = format!("{}/prefix", upstream.url);
    let running = sidecar::ready_for(&base, &[]).await;
    for path in [
        "/a/..%20/other",
        "/a/%20../other",
        "/a/..%09/other",
        "/a/..%0d%0a/other",
        "/a/..%C2%A0/other",
        "/a/%EF%BC%8E%EF%BC%8E/other",
        "/a/%E2%80%A5/other",
        "/a/%u002e%u002e/other",
        "/a/%C0%AE%C0%AE/other",
        "/a/%252e%252e/other",
        "/a/..%E2%80%8B/other",
    ] {
        let request = format!("GET {path} HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n");
        let answer = exchange(&running, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("lanyard-error: bad_request"), "{path}");
        // The message names the segment, as sent.
        let segment = path.split('/').nth(2).unwrap();
        assert!(answer.contains(segment), "{path}: {answer}");
    }
    assert_eq!(upstream.requests(), 0, "a request escaped the prefix");
    // Encoded slashes and text that is not ASCII are still forwarded with
    // one account: APIs name things with them.
    for (path, forwarded) in [
        ("/v1/group%2Fproject", "/prefix/v1/group%2Fproject"),
        ("/v1/caf%C3%A9", "/prefix/v1/caf%C3%A9"),
        ("/v1/a..b/%20x", "/prefix/v1/a..b/%20x"),
    ] {
        let answer = get(&format!("{}{path}", running.proxy)).await;
        assert_eq!(answer.json()["path"], forwarded, "{path}");
    }
}

#[tokio::test]
async fn an_absolute_form_target_with_no_path_keeps_its_query() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let upstream = running.process.proxy_addr.unwrap();
    let request = format!(
        "GET http://{upstream}?q=1 HTTP/1.1\r\nhost: {upstream}\r\nconnection: close\r\n\r\n"
    );
    let answer = exchange(&running, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains(r#""path":"/?q=1""#), "{answer}");
}

#[tokio::test]
async fn probes_answer_while_500_half_open_sockets_from_another_address_sit_on_the_admin_port() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let admin = running.process.admin_addr;
    let mut flood = Vec::new();
    for _ in 0..500 {
        let mut stream = flood::connect_from(flood::ATTACKER, admin).await;
        // Refused at once past the client's cap, which is fine: the write
        // lands in the socket's buffer either way.
        let _ = stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            .await;
        flood.push(stream);
    }
    for path in ["/healthz", "/readyz"].repeat(5) {
        let mut probe = flood::connect_from(flood::NEIGHBOUR, admin).await;
        let request = format!("GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
        let answer = flood::exchange(&mut probe, request.as_bytes()).await;
        assert_eq!(answer.status, 200, "{path}");
    }
    drop(flood);
}
