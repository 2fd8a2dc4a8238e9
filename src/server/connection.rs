//! One client connection: HTTP/1.1 or HTTP/2 told apart under the header
//! timeout, served until it ends, closed when idle or at shutdown.

use std::cell::Cell;
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
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;

use super::{Abort, Handler, Limits};

/// What an HTTP/2 client sends first (RFC 9113 §3.4); anything else is
/// HTTP/1.1.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/2 streams one client connection may have open at once, as Envoy
/// allows (nginx: 128). Together with the process-wide budget below, it
/// keeps one connection from holding every stream.
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// The two protocol builders, configured once per listener.
pub(super) struct Protocols {
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
    pub(super) fn new(limits: &Limits) -> Self {
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
pub(super) async fn serve_connection<H: Handler>(
    mut stream: TcpStream,
    peer: SocketAddr,
    handler: Rc<H>,
    protocols: &Protocols,
    header_bytes: Arc<Semaphore>,
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
        // An HTTP/2 stream holds its headers' size in the group's budget
        // for its life; past the budget it is reset at once, its headers
        // freed. (An HTTP/1.1 request's headers live in its connection's
        // read buffer, which the connection limit already bounds.)
        let permit = match &tracked {
            Some(_) => header_bytes
                .clone()
                .try_acquire_many_owned(header_list_size(&req))
                .map(Some),
            None => Ok(None),
        };
        async move {
            let Ok(_permit) = permit else {
                tracing::debug!(
                    "HTTP/2 request headers in flight at their limit; resetting a stream"
                );
                return Err(Abort);
            };
            let response = handler.handle(req, peer).await;
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

/// A request's header list size as HTTP/2 counts it (RFC 9113 §6.5.2:
/// each field's name and value plus 32), with the target's.
fn header_list_size<B>(req: &http::Request<B>) -> u32 {
    let fields: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 32)
        .sum();
    let uri = req.uri();
    let target = uri.path_and_query().map_or(0, |pq| pq.as_str().len())
        + uri.authority().map_or(0, |a| a.as_str().len());
    u32::try_from(fields + target + 32).unwrap_or(u32::MAX)
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
