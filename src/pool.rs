//! The proxy's connections to the upstream, pooled by lanyard itself over
//! hyper's connection API.
//!
//! hyper-util's pooled client costs every request a checkout future, a
//! hash of the pool key under a lock, and (for HTTP/1) a spawned task to
//! put the connection back; on the benchmark that was about 2 µs of CPU a
//! request, a third of lanyard's own. Here an HTTP/1 connection is taken
//! from a stack and put back when its response body ends, and one HTTP/2
//! connection, when ALPN picks it, is shared by every request.
//!
//! A pool belongs to one proxy thread, and is used by that thread's
//! connections only: it is taken and given back with no lock.
//!
//! Every pool draws on one [`UpstreamLimit`] (`LANYARD_MAX_UPSTREAM_CONNECTIONS`):
//! each open connection, HTTP/1 or the shared HTTP/2 one, holds a permit
//! until its task ends. A request that finds no idle connection and no
//! free permit waits for whichever comes first: a connection given back
//! to its own pool, or a permit; the caller's upstream timeout bounds the
//! wait. So the streams of an HTTP/2 client, all served by one thread,
//! take turns on that thread's connections instead of opening one each.
//! Reusing an idle connection needs no permit, and costs no more than
//! before: a flag marks a connection idle so that, should requests wait on
//! another thread, the connection can close and pass its permit on (the
//! rule is in `src/pool/limit.rs`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::pin::{Pin, pin};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri, header};
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::{http1, http2};
use hyper_util::client::legacy::connect::Connection as _;
use hyper_util::rt::TokioExecutor;
use tokio::sync::Notify;
use tokio::time::Instant;
use tower_service::Service as _;

use crate::outbound::{self, Connector, FailureKind};
use crate::target::TargetUrl;

mod limit;

pub use limit::UpstreamLimit;
use limit::{Permit, PoolCount};

/// The most an HTTP/1 upstream connection reads at once, and queues to
/// write: its read buffer grows as reads fill it, up to hyper's default of
/// about 400 KiB, which every connection of
/// `LANYARD_MAX_UPSTREAM_CONNECTIONS` could reach on a large answer read
/// quickly (docs/proxy.md "Limits": the formula's upstream term). A
/// response head that does not arrive within it is refused (502).
const UPSTREAM_BUFFER: usize = 64 * 1024;

/// What a pool sends upstream: any body hyper's client connections take.
/// The pool is generic over it, so that it knows nothing of the proxy that
/// uses it (docs/architecture.md).
pub trait SendBody:
    Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>> + Send + Unpin + 'static
{
}

impl<T> SendBody for T where
    T: Body<Data = Bytes, Error: Into<Box<dyn std::error::Error + Send + Sync>>>
        + Send
        + Unpin
        + 'static
{
}

/// Connections to one upstream.
pub struct Pool<B> {
    connector: Connector,
    /// What the connector dials (its scheme and authority), and what an
    /// HTTP/2 request's URI is made absolute with.
    target: TargetUrl,
    /// The `Host` of every HTTP/1 request, built once.
    host: HeaderValue,
    /// HTTP/1 connections with no exchange in progress, most recently used
    /// last.
    idle: RefCell<VecDeque<Idle<B>>>,
    /// The HTTP/2 connection, once ALPN has chosen HTTP/2.
    http2: RefCell<Option<http2::SendRequest<B>>>,
    http2_builder: http2::Builder<TokioExecutor>,
    idle_timeout: Duration,
    /// This pool's part in the process-wide connection limit.
    count: PoolCount,
    /// Wakes this pool's waiting requests, one for each connection given
    /// back to `idle`, or all once an HTTP/2 connection can take them.
    released: Notify,
}

/// An HTTP/1 connection's handle.
struct Http1<B> {
    sender: http1::SendRequest<B>,
    /// Set while the connection sits in `idle`, where its task may close
    /// it for a request waiting on another thread; see `limit`.
    idle: Arc<AtomicBool>,
}

struct Idle<B> {
    conn: Http1<B>,
    since: Instant,
}

/// A connection ready for one request.
enum Checkout<B> {
    Http1 {
        conn: Http1<B>,
        reused: bool,
    },
    Http2 {
        sender: http2::SendRequest<B>,
        reused: bool,
    },
}

/// Why a request got no response.
#[derive(Debug)]
pub enum SendError {
    /// No connection: refused, unreachable, timed out, or TLS failed.
    Connect(Box<dyn std::error::Error + Send + Sync>),
    /// A new connection's HTTP/2 handshake failed.
    Handshake(hyper::Error),
    /// The request was sent, or started, and no response came.
    Request(hyper::Error),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Connect(err) => {
                write!(f, "cannot connect: {}", outbound::describe(err.as_ref()))
            }
            SendError::Handshake(err) => {
                write!(f, "HTTP/2 handshake failed: {}", outbound::describe(err))
            }
            SendError::Request(err) => write!(f, "{}", outbound::describe(err)),
        }
    }
}

impl SendError {
    /// Where it failed, for metrics and the error response.
    pub fn kind(&self) -> FailureKind {
        match self {
            SendError::Connect(err) if outbound::chain_has_rustls_error(err.as_ref()) => {
                FailureKind::Tls
            }
            SendError::Connect(_) => FailureKind::Connect,
            SendError::Handshake(_) | SendError::Request(_) => FailureKind::Other,
        }
    }

    /// Whether the upstream closed or reset the connection after the
    /// request was sent and before any response: what a pooled connection
    /// the upstream dropped as idle at that moment looks like.
    pub fn closed_unanswered(&self) -> bool {
        match self {
            SendError::Request(err) => outbound::hyper_closed_unanswered(err),
            SendError::Connect(_) | SendError::Handshake(_) => false,
        }
    }
}

impl<B: SendBody> Pool<B> {
    pub fn new(connector: Connector, target: &TargetUrl, limit: UpstreamLimit) -> Pool<B> {
        Pool {
            connector,
            // An authority always makes a valid header value.
            host: HeaderValue::from_str(target.host_header())
                .unwrap_or_else(|_| HeaderValue::from_static("")),
            target: target.clone(),
            idle: RefCell::new(VecDeque::new()),
            http2: RefCell::new(None),
            http2_builder: http2::Builder::new(TokioExecutor::new()),
            idle_timeout: outbound::IDLE_TIMEOUT,
            count: limit.join(),
            released: Notify::new(),
        }
    }

    /// Sends `request`, whose URI is in origin form (`/path?query`), on a
    /// pooled connection or a new one. A request that a reused connection
    /// could not take because it had closed is sent on another; one that
    /// was written is never sent twice here. (Not an `async fn`, which
    /// would hold the request twice: see `Proxy::handle`.)
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    pub fn send(
        self: &Rc<Self>,
        mut request: Request<B>,
    ) -> impl Future<Output = Result<Response<PooledBody<B>>, SendError>> {
        async move {
            loop {
                let attempt = match self.checkout().await? {
                    Checkout::Http1 { mut conn, reused } => {
                        request
                            .headers_mut()
                            .entry(header::HOST)
                            .or_insert_with(|| self.host.clone());
                        match conn.sender.try_send_request(request).await {
                            Ok(response) => {
                                let release = Release {
                                    conn,
                                    pool: self.clone(),
                                };
                                return Ok(
                                    response.map(|body| PooledBody::new(body, Some(release)))
                                );
                            }
                            Err(err) => (err, reused),
                        }
                    }
                    Checkout::Http2 { mut sender, reused } => {
                        if request.uri().scheme().is_none() {
                            *request.uri_mut() = self.absolute(request.uri());
                        }
                        match sender.try_send_request(request).await {
                            Ok(response) => {
                                return Ok(response.map(|body| PooledBody::new(body, None)));
                            }
                            Err(err) => (err, reused),
                        }
                    }
                };
                let (mut err, reused) = attempt;
                match err.take_message() {
                    // Never written: the connection had closed since its last
                    // use. A new connection failing this way is not retried,
                    // so the loop ends.
                    Some(unsent) if reused => {
                        tracing::debug!(error = %err.error(), "a pooled upstream connection had closed; using another");
                        request = unsent;
                    }
                    _ => return Err(SendError::Request(err.into_error())),
                }
            }
        }
    }

    fn absolute(&self, origin: &Uri) -> Uri {
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.target.scheme().clone());
        parts.authority = Some(self.target.authority().clone());
        parts.path_and_query = origin.path_and_query().cloned();
        Uri::from_parts(parts).unwrap_or_else(|_| self.target.uri().clone())
    }

    async fn checkout(self: &Rc<Self>) -> Result<Checkout<B>, SendError> {
        if let Some(sender) = self.shared_http2() {
            return Ok(Checkout::Http2 {
                sender,
                reused: true,
            });
        }
        // While requests of this thread wait, a new one queues behind them:
        // a connection given back now was given for the first of them.
        if !self.count.has_waiters() {
            if let Some(conn) = self.reuse_idle().await {
                return Ok(Checkout::Http1 { conn, reused: true });
            }
            if let Some(permit) = self.count.try_acquire() {
                // Boxed: connecting and the handshakes would make every
                // request's future larger for the rare one that needs them.
                return Box::pin(self.connect(permit)).await;
            }
        }
        Box::pin(self.wait()).await
    }

    /// Waits for a connection given back to this pool, in turn with this
    /// thread's other waiting requests, or for a permit to open one,
    /// whichever comes first. Unbounded here: the caller's upstream timeout
    /// ends the wait by dropping it.
    async fn wait(self: &Rc<Self>) -> Result<Checkout<B>, SendError> {
        let mut queued = Queued::new(self);
        // Created once, so the request keeps its place in the semaphore's
        // queue across wake-ups.
        let mut permit = pin!(self.count.acquire());
        let mut woken = false;
        loop {
            // Registered before looking, so a connection given back after
            // the look still wakes this request.
            let mut released = pin!(self.released.notified());
            released.as_mut().enable();
            if let Some(sender) = self.shared_http2() {
                return Ok(Checkout::Http2 {
                    sender,
                    reused: true,
                });
            }
            // A request that has just queued leaves what is idle to those
            // woken for it before.
            if woken && let Some(conn) = self.reuse_idle().await {
                return Ok(Checkout::Http1 { conn, reused: true });
            }
            tokio::select! {
                biased;
                () = &mut released => woken = true,
                permit = &mut permit => {
                    let permit = permit.map_err(|err| SendError::Connect(err.into()))?;
                    // No longer waiting while it connects, so no other
                    // thread gives up a connection for it.
                    queued.leave();
                    return self.connect(permit).await;
                }
            }
        }
    }

    fn shared_http2(&self) -> Option<http2::SendRequest<B>> {
        let mut shared = self.http2.borrow_mut();
        match shared.as_ref() {
            Some(sender) if !sender.is_closed() => Some(sender.clone()),
            Some(_) => {
                *shared = None;
                None
            }
            None => None,
        }
    }

    /// An idle connection ready for a request, if there is one.
    async fn reuse_idle(&self) -> Option<Http1<B>> {
        while let Some(Idle { mut conn, .. }) = self.pop_idle() {
            if conn.sender.is_ready() {
                return Some(conn);
            }
            // Only connections whose response has ended are pooled, so this
            // waits for hyper to finish that exchange, or to close the
            // connection because it cannot be kept.
            if conn.sender.ready().await.is_ok() {
                return Some(conn);
            }
        }
        None
    }

    /// The most recently used idle connection still open and fresh;
    /// stale ones met on the way are closed.
    fn pop_idle(&self) -> Option<Idle<B>> {
        let mut idle = self.idle.borrow_mut();
        while let Some(entry) = idle.pop_back() {
            if !entry.conn.sender.is_closed() && entry.since.elapsed() < self.idle_timeout {
                // Should its task have just closed it for another thread,
                // the request comes back unsent and goes on another.
                entry.conn.idle.store(false, Ordering::Relaxed);
                return Some(entry);
            }
        }
        None
    }

    fn release(&self, conn: Http1<B>) {
        if conn.sender.is_closed() {
            return;
        }
        // Marked before looking for waiters: a request that starts waiting
        // on another thread after this look wakes the connection's task,
        // which then sees the mark and closes it. SeqCst on both sides
        // (`UpstreamLimit::waiting`) keeps one of the two from missing the
        // other.
        conn.idle.store(true, Ordering::SeqCst);
        if self.count.wanted_elsewhere() {
            // Dropping the handle ends the connection, and its task gives
            // the permit to the request waiting longest.
            return;
        }
        let now = Instant::now();
        let mut idle = self.idle.borrow_mut();
        // The oldest are at the front: close those idle too long, so an
        // upstream's own idle timeout rarely closes one under a request.
        while idle
            .front()
            .is_some_and(|entry| now.duration_since(entry.since) >= self.idle_timeout)
        {
            idle.pop_front();
        }
        idle.push_back(Idle { conn, since: now });
        drop(idle);
        if self.count.has_waiters() {
            self.released.notify_one();
        }
    }

    /// Closes every idle connection, freeing their permits.
    fn close_idle(&self) {
        self.idle.borrow_mut().clear();
    }

    /// Opens a connection that holds `permit` for as long as it is open.
    async fn connect(self: &Rc<Self>, permit: Permit) -> Result<Checkout<B>, SendError> {
        let mut connector = self.connector.clone();
        std::future::poll_fn(|cx| connector.poll_ready(cx))
            .await
            .map_err(SendError::Connect)?;
        let io = connector
            .call(self.target.uri().clone())
            .await
            .map_err(SendError::Connect)?;
        if io.connected().is_negotiated_h2() {
            let (sender, connection) = self
                .http2_builder
                .handshake(io)
                .await
                .map_err(SendError::Handshake)?;
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!(error = %err, "upstream HTTP/2 connection ended with an error");
                }
                drop(permit);
            });
            // Should several connect at once, the last one is kept; the
            // others serve their first request and close.
            *self.http2.borrow_mut() = Some(sender.clone());
            // It can take every request waiting here.
            self.released.notify_waiters();
            return Ok(Checkout::Http2 {
                sender,
                reused: false,
            });
        }
        let (sender, connection) = http1::Builder::new()
            .max_buf_size(UPSTREAM_BUFFER)
            .handshake(io)
            .await
            .map_err(SendError::Handshake)?;
        let idle = Arc::new(AtomicBool::new(false));
        let marked = idle.clone();
        let limit = self.count.limit().clone();
        tokio::spawn(async move {
            tokio::select! {
                // The connection first: the other branch is one atomic load
                // until a request waits elsewhere.
                biased;
                ended = connection => {
                    if let Err(err) = ended {
                        tracing::debug!(error = %err, "upstream connection ended with an error");
                    }
                }
                () = limit.until_wanted_elsewhere(permit.counts(), marked) => {
                    tracing::debug!("closing an idle upstream connection for a request waiting on another proxy thread");
                }
            }
            drop(permit);
        });
        Ok(Checkout::Http1 {
            conn: Http1 { sender, idle },
            reused: false,
        })
    }
}

/// A request counted as waiting for a connection, until it leaves.
struct Queued<'a, B: SendBody> {
    pool: &'a Pool<B>,
    waiting: Option<limit::Waiting<'a>>,
}

impl<'a, B: SendBody> Queued<'a, B> {
    fn new(pool: &'a Pool<B>) -> Queued<'a, B> {
        Queued {
            pool,
            waiting: Some(pool.count.wait()),
        }
    }

    fn leave(&mut self) {
        let Some(waiting) = self.waiting.take() else {
            return;
        };
        drop(waiting);
        // With this request gone, what is idle here may be what a request
        // on another thread waits for: the last waiter of a pool takes one
        // connection and can leave others idle.
        if self.pool.count.wanted_elsewhere() {
            self.pool.close_idle();
        }
    }
}

impl<B: SendBody> Drop for Queued<'_, B> {
    fn drop(&mut self) {
        self.leave();
    }
}

struct Release<B: SendBody> {
    conn: Http1<B>,
    pool: Rc<Pool<B>>,
}

/// An upstream response body that gives its HTTP/1 connection back to the
/// pool once it has been read to the end. A body dropped before its end
/// leaves the connection to close: the rest of the response is still on
/// the wire.
pub struct PooledBody<B: SendBody> {
    inner: Incoming,
    release: Option<Release<B>>,
}

impl<B: SendBody> PooledBody<B> {
    fn new(inner: Incoming, release: Option<Release<B>>) -> Self {
        PooledBody { inner, release }
    }

    fn release(&mut self) {
        if let Some(Release { conn, pool }) = self.release.take() {
            pool.release(conn);
        }
    }
}

impl<B: SendBody> Body for PooledBody<B> {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            None => self.release(),
            Some(Err(_)) => self.release = None,
            Some(Ok(_)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B: SendBody> Drop for PooledBody<B> {
    fn drop(&mut self) {
        // hyper's server does not poll a body that says it has ended (an
        // empty one, or the last bytes of a sized one), so the end is also
        // recognised here.
        if self.inner.is_end_stream() {
            self.release();
        }
    }
}
