//! What a client's request bodies may hold of lanyard's memory while they
//! wait (docs/proxy.md "Limits"): an HTTP/2 body no more than one window;
//! and how long the upstream has once a slow upload has arrived.

use crate::support;

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use support::raw::{RawUpstream, read_head};
use support::sidecar;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// An HTTP/2 client may send at most one window of a request body (RFC
/// 9113's 65,535 bytes) before lanyard passes it on, so a body whose
/// request waits, or whose upstream does not read it, holds no more of
/// lanyard's memory than that (hyper's default window is 1 MiB per stream
/// and per connection); the window comes back as the body moves, and the
/// whole body arrives.
#[tokio::test]
async fn an_http2_request_body_is_taken_one_window_at_a_time_and_arrives_whole() {
    const BODY: usize = 1 << 20;
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let tcp = TcpStream::connect(running.process.proxy_addr.unwrap())
        .await
        .unwrap();
    let (requests, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    // One exchange first: lanyard's SETTINGS and any window update it
    // sends come before its answer, so they apply by the time it is in.
    let warm = Request::get(format!("{}/warm", running.proxy))
        .body(())
        .unwrap();
    let mut requests = requests.ready().await.unwrap();
    let (answer, _) = requests.send_request(warm, true).unwrap();
    assert_eq!(answer.await.unwrap().status(), StatusCode::OK);

    let upload = Request::post(format!("{}/upload", running.proxy))
        .header("content-length", BODY)
        .body(())
        .unwrap();
    let (answer, mut body) = requests.send_request(upload, false).unwrap();
    body.reserve_capacity(BODY);
    let mut sent = 0;
    while sent < BODY {
        let granted = std::future::poll_fn(|cx| body.poll_capacity(cx))
            .await
            .expect("the stream stays open")
            .unwrap();
        if sent == 0 {
            assert!(
                granted <= 65_535,
                "lanyard let the client send {granted} bytes at once"
            );
        }
        let chunk = granted.min(BODY - sent);
        sent += chunk;
        body.send_data(Bytes::from(vec![0u8; chunk]), sent == BODY)
            .unwrap();
    }
    let answer = answer.await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    let mut received = answer.into_body();
    let mut text = Vec::new();
    while let Some(data) = received.data().await {
        text.extend_from_slice(&data.unwrap());
    }
    assert_eq!(text, BODY.to_string().into_bytes());
}

/// A body this long is streamed upstream as it arrives, not read first
/// (`MAX_REPLAY_BODY` is 64 KiB).
const STREAMED: usize = 100_000;

/// Sends a POST of `STREAMED` bytes to lanyard in four pieces `pause`
/// apart, as a client on a slow link would, and returns the connection
/// with the instant its last byte went out.
async fn slow_upload(proxy: &str, pause: Duration) -> (TcpStream, Instant) {
    let mut stream = TcpStream::connect(proxy.trim_start_matches("http://"))
        .await
        .unwrap();
    let head =
        format!("POST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: {STREAMED}\r\n\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    for piece in 0..4 {
        if piece > 0 {
            // The client's own pace is what is under test.
            tokio::time::sleep(pause).await;
        }
        stream.write_all(&[b'x'; STREAMED / 4]).await.unwrap();
    }
    (stream, Instant::now())
}

/// `LANYARD_UPSTREAM_TIMEOUT` is the upstream's time to answer: an upload
/// that takes longer than it, arriving steadily, is not cut off with a
/// 504 that blames the service (docs/proxy.md, "Timeouts").
#[tokio::test]
async fn an_upload_slower_than_the_upstream_timeout_is_answered() {
    let upstream = RawUpstream::start(|mut conn| async move {
        while conn.next_request().await.is_some() {
            if conn.ok().await.is_err() {
                return;
            }
        }
    })
    .await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_UPSTREAM_TIMEOUT", "1s")]).await;
    let (mut stream, _) = slow_upload(&running.proxy, Duration::from_millis(500)).await;
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

/// Once the whole body is the upstream's, it has the upstream timeout to
/// answer, counted from the body's end.
#[tokio::test]
async fn an_upstream_silent_after_a_slow_upload_gets_504_a_timeout_after_its_end() {
    let upstream = RawUpstream::start(|mut conn| async move {
        if conn.next_request().await.is_some() {
            conn.until_closed().await;
        }
    })
    .await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_UPSTREAM_TIMEOUT", "1s")]).await;
    let (mut stream, ended) = slow_upload(&running.proxy, Duration::from_millis(500)).await;
    let head = read_head(&mut stream).await;
    let waited = ended.elapsed();
    assert!(head.starts_with("HTTP/1.1 504"), "{head}");
    assert!(
        waited >= Duration::from_secs(1),
        "504 {waited:?} after the body's end"
    );
}

/// An upstream that takes none of a body's bytes still gets its request
/// given up after the upstream timeout: the body waiting on the upstream
/// is the upstream's time.
#[tokio::test]
async fn an_upstream_that_stops_reading_an_upload_gets_504_after_the_timeout() {
    const LARGE: usize = 64 << 20;
    let upstream = RawUpstream::start(|conn| async move {
        let _held = conn;
        std::future::pending::<()>().await
    })
    .await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_UPSTREAM_TIMEOUT", "1s")]).await;
    let stream = TcpStream::connect(running.proxy.trim_start_matches("http://"))
        .await
        .unwrap();
    let (mut reader, mut writer) = stream.into_split();
    // Written beside the read below: the write blocks once the upstream's
    // and lanyard's buffers are full, and fails once lanyard closes.
    tokio::spawn(async move {
        let head =
            format!("POST /upload HTTP/1.1\r\nhost: lanyard\r\ncontent-length: {LARGE}\r\n\r\n");
        writer.write_all(head.as_bytes()).await?;
        writer.write_all(&vec![b'x'; LARGE]).await
    });
    let mut received = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut chunk = [0u8; 4096];
        while !received.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = reader.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed with no answer");
            received.extend_from_slice(&chunk[..n]);
        }
    })
    .await
    .expect("an answer within the upstream timeout and some");
    assert!(
        received.starts_with(b"HTTP/1.1 504"),
        "{}",
        String::from_utf8_lossy(&received)
    );
}
