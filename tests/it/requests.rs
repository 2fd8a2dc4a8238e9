//! What lanyard does to the requests it forwards beyond the header rules:
//! bodies of unknown length stream at once, `TE: trailers` survives,
//! `TRACE` is refused, and a target too long to join to the base path is
//! answered 414.

use crate::support;

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use support::sidecar::{self, send};
use support::upstream::TestUpstream;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

/// Long enough for a loaded machine; a hang fails the test instead.
const WITHIN: Duration = Duration::from_secs(10);

/// An upstream that answers as soon as the first body chunk arrives, with
/// that chunk's length, and then reads nothing more.
async fn first_chunk_upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|req: Request<Incoming>| async move {
                    let mut body = req.into_body();
                    let first = match body.frame().await {
                        Some(Ok(frame)) => frame.into_data().map_or(0, |d| d.len()),
                        _ => 0,
                    };
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(first.to_string()))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    url
}

#[tokio::test]
async fn a_body_of_unknown_length_reaches_the_upstream_before_it_ends() {
    let upstream = first_chunk_upstream().await;
    let running = sidecar::start(mock().await, &upstream, &[]).await;
    running.ready().await;

    let (chunks, rx) = mpsc::channel(4);
    let request = Request::post(format!("{}/stream", running.proxy))
        .body(ChannelBody(rx))
        .unwrap();
    chunks.send(Bytes::from_static(b"hello")).await.unwrap();
    // The body is still open: the answer can only come if lanyard sent the
    // first chunk on without waiting for more.
    let response = tokio::time::timeout(WITHIN, sidecar::client_for().request(request))
        .await
        .expect("lanyard held the chunk back")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let answer = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&answer[..], b"5");
    drop(chunks);
}

/// A request body fed chunk by chunk by the test; it ends when the sender
/// is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl hyper::body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0
            .poll_recv(cx)
            .map(|chunk| chunk.map(|c| Ok(Frame::data(c))))
    }
}

#[tokio::test]
async fn te_trailers_is_forwarded_and_other_te_values_are_not() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    for (te, forwarded) in [
        ("trailers", Some("trailers")),
        ("gzip", None),
        ("Trailers", Some("trailers")),
    ] {
        let answer = send(
            Method::GET,
            &format!("{}/echo", running.proxy),
            &[("te", te)],
            Bytes::new(),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK);
        let seen = answer.json()["headers"]["te"].clone();
        match forwarded {
            Some(value) => assert_eq!(seen, serde_json::json!([value]), "TE: {te}"),
            None => assert!(seen.is_null(), "TE: {te} was forwarded: {seen}"),
        }
    }
}

#[tokio::test]
async fn trace_is_refused_and_never_forwarded() {
    let (upstream, running) = sidecar::echoing(&[]).await;
    let answer = send(
        Method::TRACE,
        &format!("{}/echo", running.proxy),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(answer.headers["lanyard-error"], "method_not_allowed");
    assert_eq!(answer.json()["error"], "method_not_allowed");
    assert_eq!(upstream.requests(), 0);
}

#[tokio::test]
async fn a_target_too_long_for_the_base_path_gets_414_and_is_not_forwarded() {
    let upstream = TestUpstream::start(None).await;
    let base = format!("{}/a-long-base-path", upstream.url);
    // The default 64 KiB head limit answers such a target 431 before the
    // proxy sees it; with room for it, the join is what fails.
    let running = sidecar::start(
        mock().await,
        &base,
        &[("LANYARD_MAX_HEADER_BYTES", "128KiB")],
    )
    .await;
    running.ready().await;
    // Within what a URI may be (65,534 bytes), but not once prefixed; sent
    // by hand, as a client library would refuse to build the URL.
    let path = format!("/{}", "x".repeat(65_525));
    let mut stream = tokio::net::TcpStream::connect(running.proxy.trim_start_matches("http://"))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(WITHIN, stream.read_to_string(&mut answer))
        .await
        .expect("no answer")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 414 "), "{answer}");
    assert!(answer.contains("lanyard-error: uri_too_long"), "{answer}");
    assert_eq!(upstream.requests(), 0);
}
