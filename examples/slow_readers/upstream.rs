//! The proxy's upstream: an HTTP/1.1 server on loopback whose answers
//! are large, with a length (`/large`) or chunked (`/chunked`: no
//! `Content-Length`, so hyper sends `Transfer-Encoding: chunked`), and
//! small elsewhere (a neighbour's `/small`); `/sink` reads none of its
//! request's body and never answers. Every answer is a slice of one
//! shared buffer, so the upstream costs the same whatever is held.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{Either, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// A chunked answer's chunk: one DATA frame's worth.
const CHUNK: usize = 16 * 1024;

/// Starts the upstream on 127.0.0.1; every `/large` and `/chunked`
/// answer is `answer`.
pub async fn start(answer: Bytes) -> Result<SocketAddr, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| format!("the upstream's listener: {e}"))?;
    let addr = listener
        .local_addr()
        .map_err(|e| format!("the upstream's address: {e}"))?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let answer = answer.clone();
            let service = service_fn(move |request: Request<Incoming>| {
                let sink = request.uri().path() == "/sink";
                let body = match request.uri().path() {
                    "/large" => Either::Left(Full::new(answer.clone())),
                    "/chunked" => Either::Right(Chunked {
                        body: answer.clone(),
                        at: 0,
                    }),
                    _ => Either::Left(Full::new(Bytes::from_static(b"ok"))),
                };
                async move {
                    if sink {
                        // Holds the request, and with it the body unread,
                        // until lanyard gives up on it.
                        std::future::pending::<()>().await;
                    }
                    Ok::<_, Infallible>(Response::new(body))
                }
            });
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// `body` in chunks of [`CHUNK`], its length unknown to hyper.
struct Chunked {
    body: Bytes,
    at: usize,
}

impl Body for Chunked {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = self.get_mut();
        if this.at == this.body.len() {
            return Poll::Ready(None);
        }
        let end = (this.at + CHUNK).min(this.body.len());
        let chunk = this.body.slice(this.at..end);
        this.at = end;
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }
}
