//! One client connection: HTTP/1.1 or HTTP/2 told apart under the
//! first-request timeout, served until it ends, closed when idle or at
//! shutdown; a request head over the limit answered here when the
//! listener has headers for the server's own answers.

use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, Version, header};
use http_body_util::{Either, Full};
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::AsyncReadExt;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::time::Instant;

use super::control_frames::ControlFrames;
use super::io::{Rewind, Writes};
use super::stall::{Answer, ConnectionWatch, StreamExecutor};
use super::{Abort, HEAD_BACKSTOP, Handler, Limits, Peer, Stream};

/// What an HTTP/2 client sends first (RFC 9113 §3.4); anything else is
/// HTTP/1.1.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// HTTP/2 streams one client connection may have open at once, as Envoy
/// allows (nginx: 128). Together with the process-wide budget below, it
/// keeps one connection from holding every stream.
pub const MAX_CONCURRENT_STREAMS: u32 = 100;

/// What each stream of an HTTP/2 connection may have queued in h2 to send
/// (hyper's default is 400 KiB): with answers handed to hyper in frames of
/// at most 16 KiB (`stall::MAX_DATA_FRAME`), a stream holds at most this
/// and one frame beyond it, whatever its client's window (README "Limits":
/// the memory formula's per-stream term).
const MAX_SEND_BUFFER: usize = 16 * 1024;

/// An HTTP/2 connection's settings, from the listener's limits.
struct Http2Settings {
    keep_alive: Duration,
    max_header_list_size: u32,
}

/// The two protocol builders, configured once per listener, and the
/// listener's rules for a connection's time and request heads.
pub(super) struct Protocols {
    http1: http1::Builder,
    /// HTTP/2's settings; its builder is made per connection, as each
    /// connection's streams report to that connection ([`StreamExecutor`]).
    http2: Http2Settings,
    first_request_timeout: Duration,
    idle_timeout: Duration,
    send_timeout: Duration,
    /// Whether eviction needs each connection's requests in flight
    /// (HTTP/2's idle timer always does).
    evicts: bool,
    /// When the server answers oversized heads itself.
    oversized: Option<Oversized>,
}

/// The server's own 431: for a head over `max_header_bytes`, with the
/// listener's headers.
struct Oversized {
    max_header_bytes: usize,
    headers: HeaderMap,
}

impl Protocols {
    pub(super) fn new(limits: &Limits) -> Self {
        let oversized = (!limits.extra_headers.is_empty()).then(|| Oversized {
            max_header_bytes: limits.max_header_bytes,
            headers: limits.extra_headers.clone(),
        });
        // hyper's own limit: the listener's, or a backstop beyond it when
        // heads over the limit are answered here (`Limits::extra_headers`).
        let head_limit = match oversized {
            Some(_) => limits.max_header_bytes.saturating_mul(HEAD_BACKSTOP),
            None => limits.max_header_bytes,
        };
        let mut http1 = http1::Builder::new();
        // The read buffer holds an unfinished request head; hyper's own
        // ceiling is about 400 KiB, which a thousand slow clients turn into
        // 400 MB. A head that does not fit gets hyper's 431.
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.idle_timeout)
            .max_buf_size(head_limit);
        let http2 = Http2Settings {
            keep_alive: limits.idle_timeout,
            max_header_list_size: u32::try_from(head_limit).unwrap_or(u32::MAX),
        };
        Protocols {
            http1,
            http2,
            first_request_timeout: limits.first_request_timeout,
            idle_timeout: limits.idle_timeout,
            send_timeout: limits.send_timeout,
            evicts: limits.evict_idle,
            oversized,
        }
    }

    /// An HTTP/2 connection's server, its streams reporting to `watch`.
    fn http2(&self, watch: Rc<ConnectionWatch>) -> http2::Builder<StreamExecutor> {
        let mut http2 = http2::Builder::new(StreamExecutor {
            send_timeout: self.send_timeout,
            connection: watch,
        });
        // Pings find peers that vanished without closing; the idle timer in
        // `drive` ends those that stay but send nothing.
        http2
            .timer(TokioTimer::new())
            .keep_alive_interval(self.http2.keep_alive)
            .keep_alive_timeout(self.http2.keep_alive)
            .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
            .max_send_buf_size(MAX_SEND_BUFFER)
            .max_header_list_size(self.http2.max_header_list_size);
        http2
    }

    /// The server's 431, when it answers oversized heads and `req`'s is.
    fn too_large<B>(&self, req: &Request<B>) -> Option<Response<Full<Bytes>>> {
        let oversized = self.oversized.as_ref()?;
        if head_size(req) <= oversized.max_header_bytes {
            return None;
        }
        tracing::debug!("request head over the limit; answering 431");
        let body = Bytes::from_static(b"request header fields too large\n");
        let mut response = Response::new(Full::new(body));
        *response.status_mut() = StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.extend(oversized.headers.clone());
        // As hyper does after its own 431: a client that sent one such
        // head is likely to send another.
        if req.version() < Version::HTTP_2 {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Some(response)
    }
}

/// What serving one connection takes from its listener.
pub(super) struct Serving<H> {
    pub(super) handler: Rc<H>,
    pub(super) protocols: Rc<Protocols>,
    /// The group's budget for HTTP/2 request headers in flight.
    pub(super) header_bytes: Arc<Semaphore>,
    /// The group's budget for HTTP/2 streams in flight.
    pub(super) streams: Arc<Semaphore>,
    pub(super) activity: Arc<Activity>,
    pub(super) stopping: watch::Receiver<bool>,
    /// Where connections and streams ended for taking no bytes are counted.
    pub(super) stalled: Option<prometheus::IntCounter>,
    /// Where connections closed for flooding control frames are counted.
    pub(super) flooding: Option<prometheus::IntCounter>,
}

/// Reads far enough to tell HTTP/2's preface from an HTTP/1.1 request,
/// within the first-request timeout, then serves the connection until it
/// ends.
pub(super) async fn serve_connection<H: Handler>(
    mut stream: Stream,
    peer: Peer,
    serving: Serving<H>,
) {
    let Serving {
        handler,
        protocols,
        header_bytes,
        streams,
        activity,
        mut stopping,
        stalled,
        flooding,
    } = serving;
    let first_request = Instant::now() + protocols.first_request_timeout;
    let Some((start, is_http2)) = detect(&mut stream, first_request, &mut stopping).await else {
        return;
    };
    let (io, writes) = Rewind::new(Bytes::from(start), stream);
    let tracked = activity.clone();
    let rules = protocols.clone();
    let counts_requests = is_http2 || protocols.evicts;
    let service = service_fn(move |req| {
        // Busy from here until the answer's body has been sent; a listener
        // that needs no count (the proxy's HTTP/1.1) spends nothing on it.
        let busy = tracked.enter(counts_requests);
        let handler = handler.clone();
        let too_large = rules.too_large(&req);
        // An HTTP/2 stream holds a place in the group's streams until its
        // answer is sent, and its headers' size in the group's budget while
        // it is handled; past either budget it is reset at once, its
        // headers freed. (An HTTP/1.1 request's headers live in its
        // connection's read buffer, and its answer is its connection's
        // only one: the connection limit bounds both.)
        let permits = match (is_http2, &too_large) {
            (true, None) => streams.clone().try_acquire_owned().ok().and_then(|stream| {
                let headers = header_bytes.clone();
                let headers = headers
                    .try_acquire_many_owned(header_list_size(&req))
                    .ok()?;
                Some(Some((stream, headers)))
            }),
            _ => Some(None),
        };
        async move {
            if let Some(answer) = too_large {
                let body = |body| Answer::new(Either::Right(body), (busy, None));
                return Ok(answer.map(body));
            }
            let Some(permits) = permits else {
                tracing::debug!(
                    "HTTP/2 streams or their request headers in flight at their limit; resetting a stream"
                );
                return Err(Abort);
            };
            let (stream, _headers) = permits.unzip();
            let response = handler.handle(req, peer).await?;
            Ok(response.map(|body| Answer::new(Either::Left(body), (busy, stream))))
        }
    });
    let deadlines = Deadlines {
        activity: &activity,
        first_request,
        // hyper's header timer already ends an idle HTTP/1.1 connection.
        idle: is_http2.then_some(protocols.idle_timeout),
        writes: &writes,
        send_timeout: protocols.send_timeout,
        stalled: stalled.as_ref(),
    };
    if is_http2 {
        let watch = Rc::new(ConnectionWatch {
            activity: activity.clone(),
            stalled: stalled.clone(),
        });
        // The guard sees the preface, which `io` serves again first.
        let (io, flooded) = ControlFrames::new(io);
        let connection = protocols
            .http2(watch)
            .serve_connection(TokioIo::new(io), service);
        drive(connection, stopping, deadlines).await;
        if flooded.get()
            && let Some(counter) = &flooding
        {
            counter.inc();
        }
    } else {
        let connection = protocols.http1.serve_connection(TokioIo::new(io), service);
        drive(connection, stopping, deadlines).await;
    }
}

/// The connection's first bytes, and whether they are HTTP/2's preface;
/// `None` when the client closed, sent nothing by `deadline`, or the
/// listener is stopping.
///
/// hyper-util's auto-detection waits for these bytes with no timeout, so
/// a client that sends nothing, or `P` and nothing, would hold its slot
/// for ever; hence reading them here under a deadline.
async fn detect(
    stream: &mut Stream,
    deadline: Instant,
    stopping: &mut watch::Receiver<bool>,
) -> Option<(Vec<u8>, bool)> {
    let mut start = Vec::with_capacity(H2_PREFACE.len());
    loop {
        let mut buf = [0u8; H2_PREFACE.len()];
        let wanted = H2_PREFACE.len() - start.len();
        let read = tokio::select! {
            // Bytes already here are served even as the drain begins.
            biased;
            read = tokio::time::timeout_at(deadline, stream.read(&mut buf[..wanted])) => read,
            _ = stopping.wait_for(|stop| *stop) => return None,
        };
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return None,
            Err(_) => {
                tracing::debug!("client did not start a request in time; closing");
                return None;
            }
            Ok(Ok(n)) => start.extend_from_slice(&buf[..n]),
        }
        if !H2_PREFACE.starts_with(&start) {
            return Some((start, false));
        }
        if start.len() == H2_PREFACE.len() {
            return Some((start, true));
        }
    }
}

/// A request head's size as its protocol counts it: HTTP/2's header list
/// size, or the bytes of an HTTP/1.1 head (request line, each field as
/// `name: value` and its line end, the blank line; optional whitespace
/// around values, which hyper drops, aside).
fn head_size<B>(req: &Request<B>) -> usize {
    if req.version() == Version::HTTP_2 {
        return header_list_size(req) as usize;
    }
    let fields: usize = req
        .headers()
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    let line = req.method().as_str().len() + target_len(req.uri()) + " HTTP/1.1\r\n".len() + 1;
    line + fields + 2
}

/// The request target as the client wrote it: origin, absolute or
/// authority form.
fn target_len(uri: &Uri) -> usize {
    uri.scheme_str().map_or(0, |scheme| scheme.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |pq| pq.as_str().len())
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

/// When a connection is closed for want of requests, or for taking none
/// of its answers.
struct Deadlines<'a> {
    activity: &'a Activity,
    /// Its first whole request head is due by then, or it is closed.
    first_request: Instant,
    /// Closed gracefully after this long with no request in flight.
    idle: Option<Duration>,
    /// The connection's writes, closed once they have waited
    /// `send_timeout` for the client to take a byte.
    writes: &'a Writes,
    send_timeout: Duration,
    stalled: Option<&'a prometheus::IntCounter>,
}

/// Runs a connection to its end. One that has sent no whole request by
/// its first-request deadline is dropped, as is one whose client has
/// taken no byte for the send timeout; on shutdown, or after `idle` with
/// no request in flight, it is asked to finish gracefully (HTTP/1.1:
/// after the response in progress; HTTP/2: GOAWAY, open streams
/// complete). Asked for idleness, it gets the send timeout to finish, as
/// an answer queued behind a window its client never opens would keep it
/// for ever (the drain's grace bounds a shutdown).
async fn drive<C>(connection: C, mut stopping: watch::Receiver<bool>, deadlines: Deadlines<'_>)
where
    C: GracefulConnection,
    C::Error: std::fmt::Display,
{
    let Deadlines {
        activity,
        first_request,
        idle,
        writes,
        send_timeout,
        stalled,
    } = deadlines;
    let mut connection = pin!(connection);
    let mut closing = false;
    let mut closed_idle_by: Option<Instant> = None;
    loop {
        tokio::select! {
            ended = connection.as_mut() => {
                if let Err(err) = ended {
                    tracing::debug!(error = %err, "connection ended with an error");
                }
                return;
            }
            () = tokio::time::sleep_until(first_request), if !activity.started() => {
                // The request may have arrived as the timer fired.
                if !activity.started() {
                    tracing::debug!("client did not send a whole request in time; closing");
                    return;
                }
            }
            _ = stopping.wait_for(|stop| *stop), if !closing => {
                connection.as_mut().graceful_shutdown();
                closing = true;
            }
            () = idle_for(activity, idle), if !closing => {
                tracing::debug!("connection idle; closing");
                connection.as_mut().graceful_shutdown();
                closing = true;
                closed_idle_by = Some(Instant::now() + send_timeout);
            }
            () = writes.stalled_for(send_timeout) => {
                tracing::debug!("client took no byte for the send timeout; closing");
                if let Some(counter) = stalled {
                    counter.inc();
                }
                return;
            }
            () = sleep_until_some(closed_idle_by) => {
                tracing::debug!("idle connection did not finish within the send timeout; closing");
                if let Some(counter) = stalled {
                    counter.inc();
                }
                return;
            }
        }
    }
}

async fn sleep_until_some(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn idle_for(activity: &Activity, idle: Option<Duration>) {
    match idle {
        Some(limit) => activity.idle_for(limit).await,
        None => std::future::pending().await,
    }
}

/// Whether a connection has sent a whole request yet, its requests in
/// flight (until each answer's body is sent), and since when there are
/// none: what the idle rule and eviction go by.
pub(super) struct Activity {
    epoch: Instant,
    started: AtomicBool,
    in_flight: AtomicUsize,
    /// Of those in flight, HTTP/2 streams waiting for their client to
    /// take bytes (`super::stall`): a connection whose every request is
    /// so counts as idle.
    stalled: AtomicUsize,
    idle_since_ms: AtomicU64,
    changed: Notify,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            started: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            stalled: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    /// A request has arrived; counted in flight, if `count`, until the
    /// guard is dropped.
    pub(super) fn enter(self: &Arc<Self>, count: bool) -> Option<ActivityGuard> {
        self.started.store(true, Ordering::Release);
        if !count {
            return None;
        }
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.changed.notify_one();
        }
        Some(ActivityGuard(self.clone()))
    }

    /// Whether a whole request has arrived on the connection.
    pub(super) fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Since when no request has been in flight but for those waiting for
    /// their client; `None` while one is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > self.stalled.load(Ordering::Acquire) {
            return None;
        }
        Some(self.epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire)))
    }

    /// One of the requests in flight now waits for its client to take
    /// bytes.
    pub(super) fn stall(&self) {
        let stalled = self.stalled.fetch_add(1, Ordering::AcqRel) + 1;
        if stalled >= self.in_flight.load(Ordering::Acquire) {
            self.mark_idle();
        }
    }

    /// A request counted by [`Activity::stall`] is moving again, or over.
    pub(super) fn unstall(&self) {
        self.stalled.fetch_sub(1, Ordering::AcqRel);
        self.changed.notify_one();
    }

    fn mark_idle(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.idle_since_ms.store(now, Ordering::Release);
        self.changed.notify_one();
    }

    /// Completes once no request has been in flight for `limit`.
    async fn idle_for(&self, limit: Duration) {
        loop {
            let Some(since) = self.idle_since() else {
                self.changed.notified().await;
                continue;
            };
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
pub(super) struct ActivityGuard(Arc<Activity>);

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_http1_head_is_measured_as_it_was_sent() {
        let sent = "GET /page?q=1 HTTP/1.1\r\nhost: verifier\r\nx-big: abc\r\n\r\n";
        let req = Request::get("/page?q=1")
            .header("host", "verifier")
            .header("x-big", "abc")
            .body(())
            .unwrap();
        assert_eq!(head_size(&req), sent.len());
        let absolute = "GET http://verifier/x HTTP/1.1\r\nhost: verifier\r\n\r\n";
        let req = Request::get("http://verifier/x")
            .header("host", "verifier")
            .body(())
            .unwrap();
        assert_eq!(head_size(&req), absolute.len());
    }
}
