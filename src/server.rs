//! The accept loop shared by the proxy and the admin listener: HTTP/1.1 and
//! HTTP/2 on a listener the caller bound, until a shutdown future fires,
//! then a bounded drain of the connections in flight.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tracing::Instrument;

/// A client that has not sent its request headers by now is dropped, so
/// slow or idle connections cannot pile up unbounded.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A failing `accept` (usually out of file descriptors) is retried after
/// this pause rather than in a busy loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);

/// Something that answers requests.
pub trait Handler: Send + Sync + 'static {
    type Body: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + 'static;

    fn handle(&self, req: Request<Incoming>) -> impl Future<Output = Response<Self::Body>> + Send;
}

/// How the drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished within the grace period.
    Completely,
    /// The grace period ran out; remaining connections were dropped.
    GraceExpired,
}

/// Serves `handler` on `listener` until `shutdown` completes, then stops
/// accepting and lets open connections finish for up to `grace`.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: Arc<H>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) -> Drained {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder.http2().timer(TokioTimer::new());
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    // Owned here so connections still open when the grace runs out are
    // aborted, not left running detached.
    let mut connections = tokio::task::JoinSet::new();

    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Requests are small and latency-bound; Nagle only adds delay.
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let service = service_fn(move |req| {
            let handler = handler.clone();
            async move { Ok::<_, std::convert::Infallible>(handler.handle(req).await) }
        });
        let connection = builder
            .serve_connection(TokioIo::new(stream), service)
            .into_owned();
        let connection = graceful.watch(connection);
        while connections.try_join_next().is_some() {}
        connections.spawn(
            async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
            }
            .instrument(tracing::debug_span!("connection", %peer)),
        );
    }
    drop(listener);

    match tokio::time::timeout(grace, graceful.shutdown()).await {
        Ok(()) => Drained::Completely,
        Err(_) => {
            connections.abort_all();
            Drained::GraceExpired
        }
    }
}
