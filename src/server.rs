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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tracing::Instrument;

use crate::error::ProxyError;

/// A failing `accept` (usually out of file descriptors) is retried after
/// this pause rather than in a busy loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// A refused connection gets this long to take its 503 before it is
/// closed; reading the client's request meanwhile keeps the close from
/// turning into a reset that would discard the answer.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);
/// Refusals being answered at once; beyond this, a flood is closed
/// without an answer rather than spending tasks on it.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;
/// "Connection limit reached" is logged at most this often.
const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What one client may hold.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Time to send a request's headers, counted from the connection's
    /// start or from the end of the previous response; also bounds idle
    /// keep-alive connections.
    pub header_timeout: Duration,
    /// Connections held at once; more are answered 503 and closed.
    pub max_connections: usize,
}

/// Where the accept loop reports connections, when the caller exports it.
#[derive(Debug, Clone)]
pub struct ConnectionMetrics {
    pub open: prometheus::IntGauge,
    pub refused: prometheus::IntCounter,
}

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
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
) -> Drained {
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    builder.http2().timer(TokioTimer::new());
    let builder = Arc::new(builder);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    // Owned here so connections still open when the grace runs out are
    // aborted, not left running detached.
    let mut connections = tokio::task::JoinSet::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let mut last_refusal_log: Option<tokio::time::Instant> = None;
    // Tells connections still waiting for their first byte to give up, so
    // they do not hold the drain open.
    let (stopping_tx, stopping) = watch::channel(false);

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
        while connections.try_join_next().is_some() {}
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if let Some(metrics) = &metrics {
                metrics.refused.inc();
            }
            if last_refusal_log.is_none_or(|at| at.elapsed() >= REFUSAL_LOG_INTERVAL) {
                last_refusal_log = Some(tokio::time::Instant::now());
                tracing::warn!(
                    max_connections = limits.max_connections,
                    %peer,
                    "connection limit reached: refusing new connections (logged at most once a minute)"
                );
            }
            if let Ok(permit) = refusals.clone().try_acquire_owned() {
                connections.spawn(async move {
                    refuse(stream).await;
                    drop(permit);
                });
            }
            continue;
        };
        // Requests are small and latency-bound; Nagle only adds delay.
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let mut stopping = stopping.clone();
        let metrics = metrics.clone();
        connections.spawn(
            async move {
                let _open = metrics.as_ref().map(OpenConnection::new);
                // hyper's header timeout starts only once it knows the
                // protocol, which takes a first byte: a client that sends
                // nothing would hold its slot forever.
                let mut first = [0u8; 1];
                tokio::select! {
                    spoke = tokio::time::timeout(limits.header_timeout, stream.peek(&mut first)) => {
                        if !matches!(spoke, Ok(Ok(1..))) {
                            tracing::debug!("client sent nothing in time; closing");
                            return;
                        }
                    }
                    _ = stopping.wait_for(|stop| *stop) => return,
                }
                let service = service_fn(move |req| {
                    let handler = handler.clone();
                    async move { Ok::<_, std::convert::Infallible>(handler.handle(req).await) }
                });
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                if let Err(err) = watcher.watch(connection).await {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                drop(slot);
            }
            .instrument(tracing::debug_span!("connection", %peer)),
        );
    }
    drop(listener);
    let _ = stopping_tx.send(true);

    match tokio::time::timeout(grace, graceful.shutdown()).await {
        Ok(()) => Drained::Completely,
        Err(_) => {
            connections.abort_all();
            Drained::GraceExpired
        }
    }
}

/// Counts a connection in the open gauge for as long as it lives.
struct OpenConnection(prometheus::IntGauge);

impl OpenConnection {
    fn new(metrics: &ConnectionMetrics) -> Self {
        metrics.open.inc();
        OpenConnection(metrics.open.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Answers a connection over the limit with 503 `too_many_connections`,
/// best effort, then closes it.
async fn refuse(mut stream: TcpStream) {
    let answer = async {
        stream
            .write_all(&ProxyError::TooManyConnections.http1_bytes())
            .await?;
        stream.shutdown().await?;
        // Read (and discard) until the client closes: closing with its
        // request unread would reset the connection and lose the answer.
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, answer).await;
}
