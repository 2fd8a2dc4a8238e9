//! The accept loop shared by the proxy and the admin listener: HTTP/1.1 and
//! HTTP/2 on a listener the caller bound, until a shutdown future fires,
//! then a bounded drain of the connections in flight.
//!
//! Every connection is bounded in time as well as in number: it must
//! start a request within the header timeout, an HTTP/1.1 connection must
//! send each request's headers within it (hyper's timer, which also ends
//! idle keep-alive connections), and an HTTP/2 connection with no request
//! in flight for that long is closed gracefully.

use std::cell::Cell;
use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc, watch};
use tokio::task::LocalSet;
use tokio::time::Instant;
use tracing::Instrument;

/// What an HTTP/2 client sends first (RFC 9113 §3.4); anything else is
/// HTTP/1.1.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
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

/// HTTP/2 streams one client connection may have open at once, as Envoy
/// allows (nginx: 128). Together with the process-wide budget below, it
/// keeps one connection from holding every stream.
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// What the listener's clients may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time to start a request on a new connection, to send a request's
    /// headers (HTTP/1.1), and to stay idle (both protocols).
    pub header_timeout: Duration,
    /// Connections held at once; more are answered with `refusal` and
    /// closed. Also the number of HTTP/2 streams in flight across all
    /// connections: a stream beyond it is reset at once, so that memory
    /// held by request headers is bounded by connections, not by
    /// connections times streams (README "Limits").
    pub max_connections: usize,
    /// The largest request head (HTTP/1.1) or header list (HTTP/2).
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
/// only (see [`serve_sharing`]), so neither it nor its futures need be
/// `Send`: a proxy thread's upstream connections are shared by its
/// requests without a lock.
pub trait Handler: 'static {
    type Body: hyper::body::Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + 'static;

    fn handle(
        &self,
        req: Request<Incoming>,
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

/// One accept loop's part in a group that serves one listener from
/// several threads: the group shares the connection limit and keeps the
/// threads' numbers of connections even.
///
/// Threads woken together by a new connection race to accept it, and the
/// one with the least to do wins, so the connections of a burst pile up
/// on whichever thread was idle at that instant. In the benchmark one
/// thread held twice the other's connections, and a request cost a fifth
/// more CPU at 256 connections than with them even (bench/run.sh). So a
/// thread that accepts a connection while another serves fewer hands it
/// over.
pub struct Share {
    index: usize,
    group: Arc<Group>,
    inbox: mpsc::UnboundedReceiver<Handed>,
}

struct Group {
    slots: Arc<Semaphore>,
    /// HTTP/2 streams in flight across the group's connections.
    streams: Arc<Semaphore>,
    /// Connections each member serves, counting those handed to it and
    /// not yet picked up.
    open: Box<[AtomicUsize]>,
    inboxes: Box<[mpsc::UnboundedSender<Handed>]>,
}

/// A connection accepted by one member for another to serve.
struct Handed {
    stream: std::net::TcpStream,
    peer: SocketAddr,
    slot: OwnedSemaphorePermit,
    counted: Counted,
}

/// One connection in its member's count, until dropped.
struct Counted {
    group: Arc<Group>,
    index: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.group.open[self.index].fetch_sub(1, Ordering::Relaxed);
    }
}

impl Share {
    /// The shares of a group of `members` accept loops, one for each.
    pub fn group(max_connections: usize, members: usize) -> Vec<Share> {
        let (inboxes, receivers): (Vec<_>, Vec<_>) = (0..members.max(1))
            .map(|_| mpsc::unbounded_channel())
            .unzip();
        let group = Arc::new(Group {
            slots: Arc::new(Semaphore::new(max_connections)),
            streams: Arc::new(Semaphore::new(max_connections)),
            open: inboxes.iter().map(|_| AtomicUsize::new(0)).collect(),
            inboxes: inboxes.into(),
        });
        receivers
            .into_iter()
            .enumerate()
            .map(|(index, inbox)| Share {
                index,
                group: group.clone(),
                inbox,
            })
            .collect()
    }

    /// The share of an accept loop that serves its listener alone.
    pub fn alone(max_connections: usize) -> Share {
        let (inbox, receiver) = mpsc::unbounded_channel();
        Share {
            index: 0,
            group: Arc::new(Group {
                slots: Arc::new(Semaphore::new(max_connections)),
                streams: Arc::new(Semaphore::new(max_connections)),
                open: Box::new([AtomicUsize::new(0)]),
                inboxes: Box::new([inbox]),
            }),
            inbox: receiver,
        }
    }

    fn count(&self, index: usize) -> Counted {
        self.group.open[index].fetch_add(1, Ordering::Relaxed);
        Counted {
            group: self.group.clone(),
            index,
        }
    }

    /// The member serving the fewest connections, if it serves fewer than
    /// this one.
    fn less_busy(&self) -> Option<usize> {
        let open = |index: usize| self.group.open[index].load(Ordering::Relaxed);
        let least = (0..self.group.open.len()).min_by_key(|&index| open(index))?;
        (open(least) < open(self.index)).then_some(least)
    }

    /// Counts a connection accepted here, and hands it to a less busy
    /// member if there is one; gives it back when it stays here.
    fn place(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        slot: OwnedSemaphorePermit,
    ) -> Option<Taken> {
        let Some(other) = self.less_busy() else {
            return Some((stream, peer, self.count(self.index), slot));
        };
        // Leaving this thread's reactor is a system call that cannot fail
        // for an open socket; should it, the connection is lost either way.
        let stream = match stream.into_std() {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!(error = %err, %peer, "cannot hand a connection to another proxy thread");
                return None;
            }
        };
        // Counted at once: the next connection, accepted before the other
        // thread picks this one up, must see it.
        let handed = Handed {
            stream,
            peer,
            slot,
            counted: self.count(other),
        };
        match self.group.inboxes[other].send(handed) {
            Ok(()) => None,
            // That thread has stopped accepting (it closes its inbox as it
            // stops): this one serves the connection itself.
            Err(mpsc::error::SendError(handed)) => {
                let counted = self.count(self.index);
                match TcpStream::from_std(handed.stream) {
                    Ok(stream) => Some((stream, peer, counted, handed.slot)),
                    Err(err) => {
                        tracing::warn!(error = %err, %peer, "cannot take back a connection another proxy thread refused");
                        None
                    }
                }
            }
        }
    }
}

/// A connection to serve, with its place in the counts and the limit.
type Taken = (TcpStream, SocketAddr, Counted, OwnedSemaphorePermit);

/// A connection another thread handed over, registered with this one.
fn take(handed: Handed) -> Option<Taken> {
    match TcpStream::from_std(handed.stream) {
        Ok(stream) => Some((stream, handed.peer, handed.counted, handed.slot)),
        Err(err) => {
            tracing::warn!(error = %err, peer = %handed.peer, "cannot take a connection from another proxy thread");
            None
        }
    }
}

/// Serves `handler` on `listener` until `shutdown` completes, then stops
/// accepting and lets open connections finish for up to `grace`; one of
/// a group of accept loops on the same listener, or alone
/// ([`Share::alone`]).
///
/// Every connection runs as a task local to the calling thread, and the
/// returned future is not `Send`: it runs where it is awaited (a thread's
/// `block_on`). Connections still running when it ends are dropped with
/// it.
pub async fn serve_sharing<H: Handler>(
    listener: TcpListener,
    handler: H,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
    share: Share,
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
    mut share: Share,
) -> Drained {
    let protocols = Rc::new(Protocols::new(&limits));
    let streams = share.group.streams.clone();
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
        let streams = streams.clone();
        async move {
            let _open = metrics.as_ref().map(OpenConnection::new);
            serve_connection(stream, handler, &protocols, streams, &started, stopping).await;
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

/// The two protocol builders, configured once per listener.
struct Protocols {
    http1: http1::Builder,
    http2: http2::Builder<LocalExecutor>,
    header_timeout: Duration,
}

/// Runs an HTTP/2 connection's streams on its own thread, as the
/// connection itself runs: a handler's futures need not be `Send`.
#[derive(Clone, Copy)]
struct LocalExecutor;

impl<F> hyper::rt::Executor<F> for LocalExecutor
where
    F: Future<Output: 'static> + 'static,
{
    fn execute(&self, future: F) {
        tokio::task::spawn_local(future);
    }
}

impl Protocols {
    fn new(limits: &Limits) -> Self {
        let mut http1 = http1::Builder::new();
        // The read buffer holds an unfinished request head; hyper's own
        // ceiling is about 400 KiB, which a thousand slow clients turn into
        // 400 MB. A head that does not fit gets 431.
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.header_timeout)
            .max_buf_size(limits.max_header_bytes);
        let mut http2 = http2::Builder::new(LocalExecutor);
        // Pings find peers that vanished without closing; the idle timer in
        // `drive` ends those that stay but send nothing.
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(limits.header_timeout)
            .keep_alive_timeout(limits.header_timeout)
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Protocols {
            http1,
            http2,
            header_timeout: limits.header_timeout,
        }
    }
}

/// Reads far enough to tell HTTP/2's preface from an HTTP/1.1 request,
/// within the header timeout, then serves the connection until it ends.
async fn serve_connection<H: Handler>(
    mut stream: TcpStream,
    handler: Rc<H>,
    protocols: &Protocols,
    streams: Arc<Semaphore>,
    started: &Rc<Cell<bool>>,
    mut stopping: watch::Receiver<bool>,
) {
    // hyper-util's auto-detection waits for these bytes with no timeout, so
    // a client that sends nothing, or `P` and nothing, would hold its slot
    // for ever; hence reading them here under a deadline.
    let deadline = Instant::now() + protocols.header_timeout;
    let mut start = Vec::with_capacity(H2_PREFACE.len());
    let is_http2 = loop {
        let mut buf = [0u8; H2_PREFACE.len()];
        let wanted = H2_PREFACE.len() - start.len();
        let read = tokio::select! {
            // Bytes already here are served even as the drain begins.
            biased;
            read = tokio::time::timeout_at(deadline, stream.read(&mut buf[..wanted])) => read,
            _ = stopping.wait_for(|stop| *stop) => return,
        };
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Err(_) => {
                tracing::debug!("client did not start a request in time; closing");
                return;
            }
            Ok(Ok(n)) => start.extend_from_slice(&buf[..n]),
        }
        if !H2_PREFACE.starts_with(&start) {
            break false;
        }
        if start.len() == H2_PREFACE.len() {
            break true;
        }
    };
    let io = TokioIo::new(Rewind {
        start: Bytes::from(start),
        stream,
    });
    // Only HTTP/2 needs its requests counted: hyper's header timer already
    // ends an idle HTTP/1.1 connection.
    let activity = is_http2.then(|| Arc::new(Activity::new()));
    let tracked = activity.clone();
    let started = started.clone();
    let service = service_fn(move |req| {
        started.set(true);
        let handler = handler.clone();
        let guard = tracked.as_ref().map(Activity::enter);
        // An HTTP/2 stream takes one of the group's stream permits for its
        // life; past the budget it is reset at once, its headers freed.
        // (An HTTP/1.1 connection has one request at a time: its slot is
        // its budget.)
        let permit = match &tracked {
            Some(_) => streams.clone().try_acquire_owned().map(Some),
            None => Ok(None),
        };
        async move {
            let Ok(_permit) = permit else {
                tracing::debug!("HTTP/2 streams in flight at their limit; resetting a stream");
                return Err(Abort);
            };
            let response = handler.handle(req).await;
            drop(guard);
            response
        }
    });
    if is_http2 {
        let connection = protocols.http2.serve_connection(io, service);
        let idle = activity.as_deref().map(|a| (a, protocols.header_timeout));
        drive(connection, stopping, idle).await;
    } else {
        let connection = protocols.http1.serve_connection(io, service);
        drive(connection, stopping, None).await;
    }
}

/// Runs a connection to its end; on shutdown, or after `idle` with no
/// request in flight, asks it to finish gracefully (HTTP/1.1: after the
/// response in progress; HTTP/2: GOAWAY, open streams complete).
async fn drive<C>(
    connection: C,
    mut stopping: watch::Receiver<bool>,
    idle: Option<(&Activity, Duration)>,
) where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    let mut connection = pin!(connection);
    let mut closing = false;
    loop {
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(err) = ended {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                return;
            }
            _ = stopping.wait_for(|stop| *stop), if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            () = idle_for(idle), if !closing => {
                tracing::debug!("connection idle; closing");
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
        }
    }
}

async fn idle_for(idle: Option<(&Activity, Duration)>) {
    match idle {
        Some((activity, limit)) => activity.idle_for(limit).await,
        None => std::future::pending().await,
    }
}

/// Requests in flight on one connection, and since when there are none.
struct Activity {
    epoch: Instant,
    in_flight: AtomicUsize,
    idle_since_ms: AtomicU64,
    changed: Notify,
}

impl Activity {
    fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    fn enter(self: &Arc<Self>) -> ActivityGuard {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.changed.notify_one();
        }
        ActivityGuard(self.clone())
    }

    /// Completes once no request has been in flight for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            if self.in_flight.load(Ordering::Acquire) > 0 {
                self.changed.notified().await;
                continue;
            }
            let since =
                self.epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire));
            let until = since + limit;
            if Instant::now() >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

/// Marks one request in flight until dropped.
struct ActivityGuard(Arc<Activity>);

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        let now = activity.epoch.elapsed().as_millis() as u64;
        activity.idle_since_ms.store(now, Ordering::Release);
        if activity.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            activity.changed.notify_one();
        }
    }
}

/// A stream whose first bytes were already read, served again first.
struct Rewind {
    start: Bytes,
    stream: TcpStream,
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.start.has_remaining() {
            let n = self.start.len().min(buf.remaining());
            buf.put_slice(&self.start[..n]);
            self.start.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
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
