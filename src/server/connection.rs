//! One client connection: HTTP/1.1 or HTTP/2 told apart under the
//! first-request timeout, served until it ends, closed when idle, when
//! its client takes none of its answers, or at shutdown; the server's own
//! answers (a refused HTTP/1.1 head, an HTTP/2 header list over the
//! limit) made here with the listener's headers.

use std::cell::Cell;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, Version, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use tokio::io::AsyncReadExt;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::activity::Activity;
use super::control_frames::ControlFrames;
use super::framing::{Http1Framing, Refused};
use super::io::{Rewind, Writes};
use super::stall::{Answer, ConnectionWatch, StreamExecutor};
use super::{Abort, HEAD_BACKSTOP, Handler, HeadRefusal, Limits, Peer, Stream};

/// What an HTTP/2 client sends first (RFC 9113 §3.4); anything else is
/// HTTP/1.1.
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What each stream of an HTTP/2 connection may have queued in h2 to send
/// (hyper's default is 400 KiB): with answers handed to hyper in frames of
/// at most 16 KiB (`stall::MAX_DATA_FRAME`), a stream holds at most this
/// and one frame beyond it, whatever its client's window (docs/proxy.md "Limits":
/// the memory formula's per-stream term).
const MAX_SEND_BUFFER: usize = 16 * 1024;

/// How much of its request bodies an HTTP/2 client may send before lanyard
/// has passed them on, per stream and per connection: RFC 9113's initial
/// window (§6.9.2), where hyper's default is 1 MiB of each. A body waits
/// here while its request waits for an upstream connection, or while the
/// upstream does not read it, so what a connection's unread bodies hold
/// stays within the memory formula's per-connection term (docs/proxy.md
/// "Limits"), as an HTTP/1.1 connection's read buffer does. The window
/// comes back as the body moves on, one window per round trip.
const RECEIVE_WINDOW: u32 = 65_535;

/// An HTTP/2 connection's settings, from the listener's limits.
struct Http2Settings {
    keep_alive: Duration,
    streams: u32,
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
    max_header_bytes: usize,
    /// An open stream's charge beside its headers (`Limits::stream_state_bytes`).
    stream_state_bytes: u32,
    /// On every answer the server makes itself.
    extra_headers: HeaderMap,
    head_refusal: fn(HeadRefusal) -> Response<Full<Bytes>>,
}

impl Protocols {
    pub(super) fn new(limits: &Limits) -> Self {
        // HTTP/2's header lists over the limit are answered here, with the
        // listener's headers, up to a backstop beyond it (h2 answers those
        // past it itself). HTTP/1.1's heads are judged before hyper reads
        // them (`super::framing`), and reach it within the limit.
        let header_list_limit = match limits.extra_headers.is_empty() {
            true => limits.max_header_bytes,
            false => limits.max_header_bytes.saturating_mul(HEAD_BACKSTOP),
        };
        let mut http1 = http1::Builder::new();
        // The read buffer holds a request head and what follows it; hyper's
        // own ceiling is about 400 KiB, which a thousand clients turn into
        // 400 MB.
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(limits.idle_timeout)
            .max_buf_size(limits.max_header_bytes);
        let http2 = Http2Settings {
            keep_alive: limits.idle_timeout,
            streams: limits.streams_per_connection,
            max_header_list_size: u32::try_from(header_list_limit).unwrap_or(u32::MAX),
        };
        Protocols {
            http1,
            http2,
            first_request_timeout: limits.first_request_timeout,
            idle_timeout: limits.idle_timeout,
            send_timeout: limits.send_timeout,
            evicts: limits.evict_idle,
            max_header_bytes: limits.max_header_bytes,
            stream_state_bytes: limits.stream_state_bytes,
            extra_headers: limits.extra_headers.clone(),
            head_refusal: limits.head_refusal,
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
            .max_concurrent_streams(self.http2.streams)
            .initial_stream_window_size(RECEIVE_WINDOW)
            .initial_connection_window_size(RECEIVE_WINDOW)
            .max_send_buf_size(MAX_SEND_BUFFER)
            .max_header_list_size(self.http2.max_header_list_size);
        http2
    }

    /// What the server answers itself to `req`, if anything: the refusal
    /// of an HTTP/1.1 head the pre-parse refused (`refused`), or 431 for
    /// an HTTP/2 header list over the limit when the listener has headers
    /// for its own answers.
    fn own_answer<B>(
        &self,
        req: &Request<B>,
        refused: Option<HeadRefusal>,
    ) -> Option<Response<Full<Bytes>>> {
        let refused = match refused {
            Some(refused) => refused,
            None if req.version() == Version::HTTP_2
                && !self.extra_headers.is_empty()
                && header_list_size(req) as usize > self.max_header_bytes =>
            {
                HeadRefusal::TooLarge
            }
            None => return None,
        };
        tracing::debug!(reason = refused.reason(), "refusing a request head");
        let mut response = (self.head_refusal)(refused);
        let headers = response.headers_mut();
        headers.extend(self.extra_headers.clone());
        // An HTTP/1.1 head refused is the last the connection reads (its
        // framing cannot be trusted past it); and as hyper does after its
        // own 431, a client that sent one such head is likely to send
        // another.
        if req.version() < Version::HTTP_2 {
            headers.insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        Some(response)
    }
}

/// Why the service gave a stream no answer: the handler's [`Abort`], or a
/// refusal for want of room, which carries the reset's reason for hyper
/// (`REFUSED_STREAM`: the request was not processed, and clients retry).
#[derive(Debug)]
enum Ended {
    Aborted(Abort),
    Refused(h2::Error),
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Aborted(abort) => abort.fmt(f),
            Ended::Refused(_) => f.write_str("stream refused: the listener's budget is spent"),
        }
    }
}

impl std::error::Error for Ended {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Ended::Aborted(_) => None,
            Ended::Refused(reason) => Some(reason),
        }
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
/// ends: HTTP/1.1 through the framing pre-parse, HTTP/2 through the
/// control-frame guard.
pub(super) async fn serve_connection<H: Handler>(
    mut stream: Stream,
    peer: Peer,
    mut serving: Serving<H>,
) {
    let protocols = serving.protocols.clone();
    let first_request = Instant::now() + protocols.first_request_timeout;
    let detected = detect(&mut stream, first_request, &mut serving.stopping).await;
    let Some((start, is_http2)) = detected else {
        return;
    };
    let (io, writes) = Rewind::new(Bytes::from(start), stream);
    let deadlines = Deadlines {
        activity: &serving.activity,
        first_request,
        // hyper's header timer already ends an idle HTTP/1.1 connection.
        idle: is_http2.then_some(protocols.idle_timeout),
        writes: &writes,
        send_timeout: protocols.send_timeout,
        stalled: serving.stalled.as_ref(),
    };
    let stopping = serving.stopping.clone();
    if is_http2 {
        let watch = Rc::new(ConnectionWatch {
            activity: serving.activity.clone(),
            stalled: serving.stalled.clone(),
        });
        // The guard sees the preface, which `io` serves again first.
        let (io, flooded) = ControlFrames::new(io);
        let service = service(&serving, peer, true, Refused::default());
        let connection = protocols.http2(watch);
        let connection = connection.serve_connection(TokioIo::new(io), service);
        drive(connection, stopping, deadlines).await;
        if let (true, Some(counter)) = (flooded.get(), &serving.flooding) {
            counter.inc();
        }
    } else {
        let (io, refused) = Http1Framing::new(io, protocols.max_header_bytes);
        let service = service(&serving, peer, false, refused);
        let connection = protocols.http1.serve_connection(TokioIo::new(io), service);
        drive(connection, stopping, deadlines).await;
    }
}

/// The connection's service: each request counted in its activity, given
/// the server's own answer when it has one, held to the group's budgets
/// on HTTP/2, then handed to the handler; its answer sent as an
/// [`Answer`].
fn service<H: Handler>(
    serving: &Serving<H>,
    peer: Peer,
    is_http2: bool,
    refused: Refused,
) -> impl hyper::service::HttpService<
    Incoming,
    ResBody = Answer<Either<H::Body, Full<Bytes>>>,
    Error = Ended,
> + use<H> {
    let Serving {
        handler,
        protocols,
        header_bytes,
        streams,
        activity,
        ..
    } = serving;
    let (handler, protocols) = (handler.clone(), protocols.clone());
    let (header_bytes, streams, activity) =
        (header_bytes.clone(), streams.clone(), activity.clone());
    let stream_state_bytes = protocols.stream_state_bytes;
    let counts_requests = is_http2 || protocols.evicts;
    let send_timeout = protocols.send_timeout;
    let requests = Cell::new(0u64);
    service_fn(move |req: Request<Incoming>| {
        // Busy from here until the answer's body has been sent; a listener
        // that needs no count (the proxy's HTTP/1.1) spends nothing on it.
        let busy = activity.enter(counts_requests);
        let index = requests.replace(requests.get() + 1);
        let own = protocols.own_answer(&req, refused.of(index));
        // An HTTP/2 stream holds its headers' size and its state's in the
        // group's budget until its answer has a place among the group's
        // answers being sent (past the budget it is refused at once, its
        // headers freed; for a place it waits). (An HTTP/1.1 request's
        // headers live in its connection's read buffer, and its answer is
        // its connection's only one: the connection limit bounds both.)
        let headers = match (is_http2, &own) {
            (true, None) => header_bytes
                .clone()
                .try_acquire_many_owned(header_list_size(&req).saturating_add(stream_state_bytes))
                .map(Some),
            _ => Ok(None),
        };
        let (handler, streams) = (handler.clone(), streams.clone());
        async move {
            if let Some(answer) = own {
                let body = |body| Answer::new(Either::Right(body), (busy, None));
                return Ok(answer.map(body));
            }
            let Ok(headers) = headers else {
                tracing::debug!(
                    "HTTP/2 request headers in flight at their limit; refusing a stream"
                );
                return Err(Ended::Refused(h2::Reason::REFUSED_STREAM.into()));
            };
            let response = handler.handle(req, peer).await.map_err(Ended::Aborted)?;
            let stream = match headers {
                Some(_) => {
                    // Every place held by answers whose clients take
                    // nothing ends within the send timeout.
                    let place = streams.acquire_owned();
                    match tokio::time::timeout(send_timeout, place).await {
                        Ok(Ok(place)) => Some(place),
                        _ => return Err(Ended::Aborted(Abort)),
                    }
                }
                None => None,
            };
            drop(headers);
            Ok(response.map(|body| Answer::new(Either::Left(body), (busy, stream))))
        }
    })
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
    // Made once, not on each turn: it waits on a `Notify` while writes go
    // through, and re-registering that on every wake-up of a busy
    // connection would cost the request path.
    let mut writes_stalled = pin!(writes.stalled_for(send_timeout));
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
            () = writes_stalled.as_mut() => {
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
