//! The accept loop shared by the proxy and the admin listener: HTTP/1.1 and
//! HTTP/2 on a listener the caller bound, until a shutdown future fires,
//! then a bounded drain of the connections in flight.
//!
//! Every connection is bounded in time as well as in number: it must
//! start a request within the header timeout, an HTTP/1.1 connection must
//! send each request's headers within it (hyper's timer, which also ends
//! idle keep-alive connections), and an HTTP/2 connection with no request
//! in flight for that long is closed gracefully.
//!
//! - [`balance`]: the threads serving one listener, kept even.
//! - `connection`: one connection: protocol detection, HTTP/1.1 or HTTP/2,
//!   the idle rule.

pub mod balance;
mod connection;

pub use balance::Member;
pub use connection::MAX_CONCURRENT_STREAMS;

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use hyper::body::Incoming;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::LocalSet;
use tokio::time::Instant;
use tracing::Instrument;

use balance::{Taken, take};
use connection::{Protocols, serve_connection};

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

/// What the listener's clients may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time to start a request on a new connection, to send a request's
    /// headers (HTTP/1.1), and to stay idle (both protocols).
    pub header_timeout: Duration,
    /// Connections held at once; more are answered with `refusal` and
    /// closed.
    pub max_connections: usize,
    /// The largest request head (HTTP/1.1) or header list (HTTP/2). The
    /// HTTP/2 requests in flight across all connections may hold
    /// `max_connections` times this in headers; a stream beyond it is reset
    /// at once, so that header memory is bounded by connections, not by
    /// connections times streams (README "Limits").
    pub max_header_bytes: usize,
    /// What a connection over the limit is told, as raw HTTP/1.1 with
    /// `connection: close`: the listener's owner names its own setting.
    pub refusal: Bytes,
    /// At the limit, a new connection takes the place of the oldest one
    /// that has not yet sent a whole request, rather than being refused.
    /// For a listener whose few clients send their request at once (the
    /// admin listener's probes and scrapes): a flood of half-open
    /// connections then only ever evicts itself.
    pub evict_waiting: bool,
}

/// Where the accept loop reports connections, when the caller exports it.
#[derive(Debug, Clone)]
pub struct ConnectionMetrics {
    pub open: prometheus::IntGauge,
    pub refused: prometheus::IntCounter,
}

/// Something that answers requests.
///
/// A handler serves its accept loop's connections on that loop's thread
/// only (see [`serve`]), so neither it nor its futures need be
/// `Send`: a proxy thread's upstream connections are shared by its
/// requests without a lock.
pub trait Handler: 'static {
    type Body: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + 'static;

    /// `client` is the connection's peer: what a handler that limits or
    /// logs per client keys on.
    fn handle(
        &self,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> impl Future<Output = Result<Response<Self::Body>, Abort>>;
}

/// Ends an exchange without an answer: the HTTP/1.1 connection is closed,
/// the HTTP/2 stream reset. For a client that stalled or left mid-request,
/// when no answer could reach it or none should be waited for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Abort;

impl std::fmt::Display for Abort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("exchange ended without an answer")
    }
}

impl std::error::Error for Abort {}

/// How the drain ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drained {
    /// Every connection finished within the grace period.
    Completely,
    /// The grace period ran out; remaining connections were dropped.
    GraceExpired,
}

/// Serves `handler` on `listener` until `shutdown` completes, then stops
/// accepting and lets open connections finish for up to `grace`; one of
/// a group of accept loops on the same listener, or alone
/// ([`Member::alone`]).
///
/// Every connection runs as a task local to the calling thread, and the
/// returned future is not `Send`: it runs where it is awaited (a thread's
/// `block_on`). Connections still running when it ends are dropped with
/// it.
pub async fn serve<H: Handler>(
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
    share: Member,
) -> Drained {
    let local = LocalSet::new();
    let accepting = accept_loop(
        listener,
        Rc::new(handler),
        shutdown,
        grace,
        limits,
        metrics,
        share,
    );
    local.run_until(accepting).await
}

async fn accept_loop<H: Handler>(
    listener: TcpListener,
    handler: Rc<H>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
    mut share: Member,
) -> Drained {
    let protocols = Rc::new(Protocols::new(&limits));
    let header_bytes = share.group.header_bytes.clone();
    let mut shutdown = pin!(shutdown);
    // Owned here so connections still open when the grace runs out are
    // aborted, not left running detached.
    let mut connections = tokio::task::JoinSet::new();
    let slots = share.group.slots.clone();
    let refusals = Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT));
    let mut last_refusal_log: Option<Instant> = None;
    // Asks every connection to finish what it is doing and close.
    let (stopping_tx, stopping) = watch::channel(false);
    // Connections that have not yet sent a whole request, oldest first,
    // when the listener evicts them at its limit.
    let mut waiting: VecDeque<Waiting> = VecDeque::new();
    let served = |(stream, peer, counted, slot): Taken, started: Rc<Cell<bool>>| {
        // Requests are small and latency-bound; Nagle only adds delay.
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let protocols = protocols.clone();
        let stopping = stopping.clone();
        let metrics = metrics.clone();
        let header_bytes = header_bytes.clone();
        async move {
            let _open = metrics.as_ref().map(OpenConnection::new);
            serve_connection(
                stream,
                peer,
                handler,
                &protocols,
                header_bytes,
                &started,
                stopping,
            )
            .await;
            drop((slot, counted));
        }
        .instrument(tracing::debug_span!("connection", %peer))
    };

    loop {
        let taken = tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        tracing::warn!(error = %err, "accept failed");
                        tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                        continue;
                    }
                };
                while connections.try_join_next().is_some() {}
                let mut slot = slots.clone().try_acquire_owned();
                if slot.is_err() && limits.evict_waiting && evict_oldest(&mut waiting) {
                    // The evicted task gives its slot back once it is
                    // dropped, which happens as this thread runs its tasks.
                    for _ in 0..EVICTION_TURNS {
                        tokio::task::yield_now().await;
                        slot = slots.clone().try_acquire_owned();
                        if slot.is_ok() {
                            break;
                        }
                    }
                }
                let Ok(slot) = slot else {
                    if let Some(metrics) = &metrics {
                        metrics.refused.inc();
                    }
                    if last_refusal_log.is_none_or(|at| at.elapsed() >= REFUSAL_LOG_INTERVAL) {
                        last_refusal_log = Some(Instant::now());
                        tracing::warn!(
                            max_connections = limits.max_connections,
                            %peer,
                            "connection limit reached: refusing new connections (logged at most once a minute)"
                        );
                    }
                    if let Ok(permit) = refusals.clone().try_acquire_owned() {
                        let refusal = limits.refusal.clone();
                        connections.spawn_local(async move {
                            refuse(stream, &refusal).await;
                            drop(permit);
                        });
                    }
                    continue;
                };
                match share.place(stream, peer, slot) {
                    Some(taken) => taken,
                    None => continue,
                }
            }
            Some(handed) = share.inbox.recv() => {
                while connections.try_join_next().is_some() {}
                match take(handed) {
                    Some(taken) => taken,
                    None => continue,
                }
            }
            () = &mut shutdown => break,
        };
        let started = Rc::new(Cell::new(false));
        let task = connections.spawn_local(served(taken, started.clone()));
        if limits.evict_waiting {
            waiting.retain(|w| !w.started.get() && !w.task.is_finished());
            waiting.push_back(Waiting { task, started });
        }
    }
    drop(listener);
    // Connections handed over before this thread stopped are served as
    // those accepted here were; once the inbox is closed, a thread still
    // accepting keeps its connections.
    share.inbox.close();
    while let Ok(handed) = share.inbox.try_recv() {
        if let Some(taken) = take(handed) {
            connections.spawn_local(served(taken, Rc::new(Cell::new(false))));
        }
    }
    let _ = stopping_tx.send(true);

    let drain = async { while connections.join_next().await.is_some() {} };
    match tokio::time::timeout(grace, drain).await {
        Ok(()) => Drained::Completely,
        Err(_) => {
            connections.abort_all();
            Drained::GraceExpired
        }
    }
}

/// Turns of the thread's tasks an eviction waits for the evicted
/// connection's slot: one is normally enough.
const EVICTION_TURNS: usize = 4;

/// A connection that may be evicted until it has sent a whole request.
struct Waiting {
    task: tokio::task::AbortHandle,
    started: Rc<Cell<bool>>,
}

/// Ends the oldest connection still waiting for its first request; false
/// when every connection has started one.
fn evict_oldest(waiting: &mut VecDeque<Waiting>) -> bool {
    while let Some(oldest) = waiting.pop_front() {
        if !oldest.started.get() && !oldest.task.is_finished() {
            oldest.task.abort();
            tracing::debug!(
                "at the connection limit: closing the oldest connection that has sent no request"
            );
            return true;
        }
    }
    false
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

/// Answers a connection over the limit with the listener's refusal, best
/// effort, then closes it.
async fn refuse(mut stream: TcpStream, refusal: &[u8]) {
    let answer = async {
        stream.write_all(refusal).await?;
        stream.shutdown().await?;
        // Read (and discard) until the client closes: closing with its
        // request unread would reset the connection and lose the answer.
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, answer).await;
}
