//! The accept loop shared by the proxy, admin and verifier listeners:
//! HTTP/1.1 and HTTP/2 on a listener the caller bound, until a shutdown
//! future fires, then a bounded drain of the connections in flight. It
//! knows nothing of what it serves: each listener's owner hands it its
//! policy ([`Limits`]).
//!
//! Every connection is bounded in time as well as in number: it must send
//! its first whole request head within the first-request timeout; then an
//! HTTP/1.1 connection must send each later request's head within the
//! idle timeout (hyper's timer, which also ends idle keep-alive
//! connections), and an HTTP/2 connection with no request in flight for
//! that long is closed gracefully. An answer whose client takes none of
//! its bytes for the send timeout ends its HTTP/2 stream, or its HTTP/1.1
//! connection.
//!
//! - `accept`: the loop itself: admission under the connection limit and
//!   the per-client cap, eviction, refusals, the drain.
//! - `activity`: a connection's requests in flight, and since when it has
//!   had none: what the idle rule and eviction go by.
//! - [`balance`]: the threads serving one listener, kept even.
//! - `clients`: the connections each client holds.
//! - `connection`: one connection: protocol detection, HTTP/1.1 or HTTP/2,
//!   the first-request, idle and send-timeout rules, the server's own
//!   answers.
//! - `control_frames`: HTTP/2 control frames (PING, SETTINGS,
//!   WINDOW_UPDATE, ...) counted against what the connection's work
//!   allows; a flooding connection is closed.
//! - `framing`: HTTP/1.1 request heads judged before hyper reads them:
//!   ambiguous framing (request smuggling's way in), oversized or
//!   malformed heads refused with the server's own answer.
//! - `io`: the connection's socket as hyper sees it: its first bytes
//!   served again, and writes its client does not take timed.
//! - `stall`: HTTP/2 streams whose client takes none of their answer,
//!   each timed and reset; answers handed to hyper in bounded frames.
//! - `socket`: TCP and Unix listeners, their connections and peers.

mod accept;
mod activity;
pub mod balance;
mod clients;
mod connection;
mod control_frames;
mod framing;
mod io;
mod socket;
mod stall;

pub use balance::Member;
pub use clients::Client;
pub use framing::HeadRefusal;
pub use socket::{Listener, Peer, StdListener, Stream};

use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use hyper::body::Incoming;
use tokio::task::LocalSet;

/// What the listener's clients may hold.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Time from accepting a connection to its first whole request head.
    pub first_request_timeout: Duration,
    /// Time a connection may go with no request in flight before it is
    /// closed; an HTTP/1.1 connection must also send each later request's
    /// head within it (hyper's header timer starts as the connection goes
    /// idle, so it bounds both).
    pub idle_timeout: Duration,
    /// How long a client may take none of an answer's bytes
    /// (`LANYARD_SEND_TIMEOUT`): then its HTTP/2 stream is reset, its
    /// HTTP/1.1 connection closed. Waiting for the handler's answer (a
    /// slow upstream) does not count.
    pub send_timeout: Duration,
    /// Connections held at once; more are answered with `refusal` and
    /// closed (or, with `evict_idle`, take an idle one's place).
    pub max_connections: usize,
    /// Connections one client may hold, when the listener's peers are its
    /// clients themselves; `None` when they are not (a proxy in front
    /// carries every client's connections).
    pub per_client: Option<ClientCap>,
    /// The largest request head (HTTP/1.1) or header list (HTTP/2). The
    /// HTTP/2 streams open across all connections may hold
    /// `max_connections` times this in headers and state; a stream beyond
    /// it is refused at once, so that their memory is bounded by
    /// connections, not by connections times streams (docs/proxy.md "Limits").
    pub max_header_bytes: usize,
    /// HTTP/2 answers being sent at once across all connections, each
    /// from the handler's answer to its last byte: what bounds the answers
    /// queued in h2 by a number, not by connections times streams. An
    /// answer beyond it waits for one to end (first come, first served),
    /// its body unread; requests still being handled are not counted.
    pub max_streams: usize,
    /// HTTP/2 streams one connection may have open at once (its
    /// `SETTINGS_MAX_CONCURRENT_STREAMS`): each costs its state however
    /// little it is answered, so this times `max_connections` bounds it.
    pub streams_per_connection: u32,
    /// What an open HTTP/2 stream costs beside its headers, charged with
    /// them against `max_header_bytes` × `max_connections`: h2's record of
    /// it, hyper's task and the handler's future, as measured for the
    /// listener's handler (`bench/slow_readers.sh`).
    pub stream_state_bytes: u32,
    /// What a connection over the limit is told, as raw HTTP/1.1 with
    /// `connection: close`: the listener's owner names its own setting.
    pub refusal: Bytes,
    /// At the limit, a new connection takes the place of one with no
    /// request in flight, rather than being refused: the oldest that has
    /// not yet sent a whole request, else the one idle longest. For a
    /// listener whose clients send their request as they connect (probes
    /// and scrapes, browsers): a flood of half-open connections then only
    /// ever evicts itself, and idle keep-alive connections give way to new
    /// clients, as nginx reuses its idle connections when it runs out.
    pub evict_idle: bool,
    /// Headers added to every answer the server makes itself: its
    /// refusals, and those to request heads it refused (400, 414, 431).
    ///
    /// HTTP/1.1 heads are judged before hyper reads them, so every such
    /// answer carries these. When there are any, HTTP/2 header lists over
    /// `max_header_bytes` are answered by the server too, up to
    /// [`HEAD_BACKSTOP`] times it; a list beyond that gets h2's own answer,
    /// without them.
    pub extra_headers: HeaderMap,
    /// The answer to a request head the server refused (before
    /// `extra_headers` and, on HTTP/1.1, `connection: close` are added):
    /// the listener's owner words it.
    pub head_refusal: fn(HeadRefusal) -> Response<http_body_util::Full<Bytes>>,
}

/// How many connections one client ([`Client`]) may hold, and what a
/// connection over that is told (raw HTTP/1.1, as [`Limits::refusal`]).
#[derive(Debug, Clone)]
pub struct ClientCap {
    pub max_connections: usize,
    pub refusal: Bytes,
    /// A client at its cap displaces its own connection with no request
    /// in flight (with `Limits::evict_idle`) rather than being refused: for
    /// a listener where one address may carry a client that must get in
    /// (the kubelet's probes) beside others that hold connections idle.
    pub displaces_own: bool,
}

/// h2's own limit on a request's header list, as a multiple of
/// [`Limits::max_header_bytes`], when the server answers oversized lists
/// itself: far enough beyond the limit that a list just over it (a
/// browser's cookies grown too large) is answered by the server, with the
/// listener's headers. Each HTTP/2 connection may then hold this many
/// times `max_header_bytes` of a header block being read (docs/proxy.md
/// "Limits").
pub const HEAD_BACKSTOP: usize = 2;

/// Where the accept loop reports connections, when the caller exports it.
#[derive(Debug, Clone)]
pub struct ConnectionMetrics {
    /// Connections being served now.
    pub open: Option<prometheus::IntGauge>,
    /// Connections refused, at the limit or over a client's cap.
    pub refused: Option<prometheus::IntCounter>,
    /// Connections closed to make room for a new one (`evict_idle`).
    pub evicted: Option<prometheus::IntCounter>,
    /// Connections and HTTP/2 streams ended for taking no bytes of their
    /// answer (`Limits::send_timeout`).
    pub stalled: Option<prometheus::IntCounter>,
    /// Connections closed for flooding HTTP/2 control frames.
    pub flooding: Option<prometheus::IntCounter>,
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
        client: Peer,
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

/// Why a handler passes on no answer it was given: it answers itself
/// with an error of its own (`E`, docs/proxy.md "Errors made by lanyard itself"),
/// or the exchange ends with none ([`Abort`]).
#[derive(Debug)]
pub enum Refusal<E> {
    Answer(E),
    Abort,
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
/// accepting and lets open connections finish for up to `grace`; what
/// `shutdown` gives is held until the listener is closed, so a guard in it
/// tells its owner when no connection can come any more. One of
/// a group of accept loops on the same listener, or alone
/// ([`Member::alone`]).
///
/// Every connection runs as a task local to the calling thread, and the
/// returned future is not `Send`: it runs where it is awaited (a thread's
/// `block_on`). Connections still running when it ends are dropped with
/// it.
pub async fn serve<H: Handler, S>(
    listener: Listener,
    handler: H,
    shutdown: impl Future<Output = S>,
    grace: Duration,
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
    share: Member,
) -> Drained {
    let local = LocalSet::new();
    let accepting = accept::accept_loop(
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
