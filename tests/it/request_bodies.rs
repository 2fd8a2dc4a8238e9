//! What a client's request bodies may hold of lanyard's memory while they
//! wait (docs/proxy.md "Limits"): an HTTP/2 body no more than one window.

use crate::support;

use bytes::Bytes;
use http::{Request, StatusCode};
use support::sidecar;
use tokio::net::TcpStream;

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
