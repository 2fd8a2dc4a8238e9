//! The forwarding service: every request goes to the upstream base URL with
//! the held token, bodies streamed both ways.
//!
//! The request path loads the token lock-free and never waits for the token
//! endpoint, except after the upstream answered 401: then the token is
//! renewed once for every request that saw it, and each request whose body
//! can be replayed is retried once. A replayable idempotent request is also
//! sent again once when the upstream closed a pooled connection under it
//! without answering.

use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{
    HeaderMap, HeaderName, HeaderValue, Method, Request, Response, StatusCode, Uri, Version, header,
};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use prometheus::{Histogram, IntCounter};
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::client_body::{ClientBody, ClientBodyError};
use crate::config::{TargetUrl, is_loopback_host};
use crate::error::ProxyError;
use crate::http_client::{Connector, FailureKind};
use crate::metrics::Metrics;
use crate::pool::{Pool, PooledBody, SendError, UpstreamLimit};
use crate::server::{Abort, Handler};
use crate::token::{Token, TokenHandle};

/// A body up to this size can be replayed after a 401 (CONTRACT §4) or a
/// connection closed unanswered; larger bodies are not retried.
pub const MAX_REPLAY_BODY: u64 = 64 * 1024;
/// After a 401 to a body of unknown length, how long its end may take to
/// arrive for the request to be replayed.
const COPY_WAIT: Duration = Duration::from_secs(1);
/// Bytes all requests together may hold for replays.
const REPLAY_BUDGET: u64 = 32 * 1024 * 1024;
/// The 403 hint is logged at most this often: a misconfigured account
/// would otherwise log on every request.
const FORBIDDEN_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What the proxy answers with: the upstream's streamed body, or lanyard's
/// own small JSON error.
pub type ProxyBody = Either<PooledBody, Full<Bytes>>;
/// What the proxy sends upstream: a buffered, replayable body, or the
/// client's body streamed through.
pub type UpstreamBody = Either<Full<Bytes>, StreamedBody>;

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// plus `Proxy-Authorization`, which is for lanyard if for anyone.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// The upstream base URL, split once for joining paths onto it.
#[derive(Debug, Clone)]
pub struct Upstream {
    scheme: Scheme,
    authority: Authority,
    /// Path prefix without a trailing slash; empty for the root.
    prefix: String,
}

impl Upstream {
    pub fn new(url: &TargetUrl) -> Upstream {
        let uri = url.uri();
        Upstream {
            scheme: uri.scheme().cloned().unwrap_or(Scheme::HTTPS),
            authority: uri
                .authority()
                .cloned()
                .unwrap_or_else(|| Authority::from_static("localhost")),
            prefix: url.path_prefix().to_string(),
        }
    }

    /// The base URL's prefix joined with the request's path and query,
    /// with exactly one slash between them.
    pub fn uri_for(&self, request: &Uri) -> Result<Uri, http::Error> {
        let path = self.path_for(request)?;
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path.path_and_query().map_or("/", PathAndQuery::as_str))
            .build()
    }

    /// [`Self::uri_for`] in origin form (`/path?query`), as an upstream
    /// request carries it; the common case, no prefix and an origin-form
    /// target, costs nothing.
    pub fn path_for(&self, request: &Uri) -> Result<Uri, http::Error> {
        let target = request.path_and_query().map_or("", PathAndQuery::as_str);
        // `OPTIONS *` and other non-path targets address the base itself;
        // an absolute-form target with no path (`http://host?q`) keeps its
        // query.
        let (slash, pq) = match target.as_bytes().first() {
            Some(b'/') => ("", target),
            Some(b'?') => ("/", target),
            _ => ("/", ""),
        };
        if self.prefix.is_empty() {
            if request.scheme().is_none() && slash.is_empty() {
                return Ok(request.clone());
            }
            return Ok(Uri::from_maybe_shared(Bytes::from(format!("{slash}{pq}")))?);
        }
        Ok(Uri::from_maybe_shared(Bytes::from(format!(
            "{}{slash}{pq}",
            self.prefix
        )))?)
    }

    /// Whether an HTTP/1 absolute-form target may be served: it names the
    /// upstream itself, or lanyard's own listener.
    fn accepts_target(&self, target: &Authority, listen: SocketAddr) -> bool {
        let default_port = if self.scheme == Scheme::HTTP { 80 } else { 443 };
        let names_upstream = target.host().eq_ignore_ascii_case(self.authority.host())
            && target.port_u16().unwrap_or(default_port)
                == self.authority.port_u16().unwrap_or(default_port);
        let names_lanyard = target.port_u16() == Some(listen.port())
            && (is_loopback_host(target.host())
                || target
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip == listen.ip()));
        names_upstream || names_lanyard
    }
}

/// A client body forwarded as it arrives. When its length is unknown, the
/// first [`MAX_REPLAY_BODY`] bytes are also kept, so that a request whose
/// body turns out to fit can still be replayed after a 401 without the
/// upload waiting for 64 KiB first (a streaming or interactive client
/// would stall).
pub struct StreamedBody {
    /// Read already, sent first.
    prefix: Option<Bytes>,
    inner: ClientBody,
    copy: Option<BodyCopy>,
}

/// The kept copy, handed over once the body has ended within the limit.
struct BodyCopy {
    chunks: Vec<Bytes>,
    len: u64,
    reservation: Reservation,
    done: oneshot::Sender<(Bytes, Reservation)>,
}

impl StreamedBody {
    /// A client body passed through as it arrives, never replayed.
    pub fn streaming(inner: ClientBody) -> Self {
        Self::after(None, inner)
    }

    fn after(prefix: Option<Bytes>, inner: ClientBody) -> Self {
        StreamedBody {
            prefix,
            inner,
            copy: None,
        }
    }

    /// A body whose copy arrives on the returned channel if it ends within
    /// the limit and the replay budget; the channel closes otherwise.
    fn copied(
        inner: ClientBody,
        budget: &ReplayBudget,
    ) -> (Self, oneshot::Receiver<(Bytes, Reservation)>) {
        let (done, copied) = oneshot::channel();
        let copy = BodyCopy {
            chunks: Vec::new(),
            len: 0,
            reservation: budget.empty(),
            done,
        };
        let body = StreamedBody {
            prefix: None,
            inner,
            copy: Some(copy),
        };
        (body, copied)
    }

    fn keep(&mut self, data: &Bytes) {
        let Some(copy) = &mut self.copy else { return };
        let len = copy.len + data.len() as u64;
        // A closed channel: the answer was not a 401, or came too long ago.
        if len > MAX_REPLAY_BODY
            || copy.done.is_closed()
            || !copy.reservation.grow(data.len() as u64)
        {
            self.copy = None;
            return;
        }
        copy.len = len;
        copy.chunks.push(data.clone());
    }

    fn finish(&mut self) {
        if let Some(copy) = self.copy.take() {
            let _ = copy
                .done
                .send((concat(copy.chunks, copy.len), copy.reservation));
        }
    }
}

impl hyper::body::Body for StreamedBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        let frame = std::task::ready!(Pin::new(&mut self.inner).poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => match frame.data_ref() {
                Some(data) => self.keep(data),
                // Trailers cannot be replayed faithfully.
                None => self.copy = None,
            },
            Some(Err(_)) => self.copy = None,
            None => self.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        // While a copy is kept, the end is only believed once the body says
        // so by ending: an HTTP/2 stream reset also reads as "ended".
        self.prefix.is_none() && self.copy.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let rest = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + prefix);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + prefix);
        }
        hint
    }
}

fn concat(mut chunks: Vec<Bytes>, len: u64) -> Bytes {
    match chunks.len() {
        0 => Bytes::new(),
        1 => chunks.pop().unwrap_or_default(),
        _ => {
            let mut whole = BytesMut::with_capacity(len as usize);
            chunks
                .iter()
                .for_each(|chunk| whole.extend_from_slice(chunk));
            whole.freeze()
        }
    }
}

/// Bytes held for replays across all requests. Each replayable body is
/// small, but thousands of connections (and HTTP/2 streams) at once could
/// hold a lot; past the budget, bodies stream without a replay copy.
#[derive(Clone)]
struct ReplayBudget(Arc<AtomicU64>);

impl ReplayBudget {
    fn new() -> Self {
        ReplayBudget(Arc::new(AtomicU64::new(0)))
    }

    fn empty(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

/// Bytes of the replay budget held until dropped.
struct Reservation {
    budget: ReplayBudget,
    bytes: u64,
}

impl Reservation {
    fn grow(&mut self, bytes: u64) -> bool {
        let held = self.budget.0.fetch_add(bytes, Ordering::Relaxed);
        if held + bytes > REPLAY_BUDGET {
            self.budget.0.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        self.bytes += bytes;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.0.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// A request body, sorted by whether and when it can be sent twice.
enum BodyPlan {
    /// Whole, at most [`MAX_REPLAY_BODY`] bytes, read before sending.
    Whole(Bytes, Option<Reservation>),
    /// Of unknown length: streamed, with a copy that arrives if it fits.
    Copied(StreamedBody, oneshot::Receiver<(Bytes, Reservation)>),
    /// Known to be larger than the limit, or past the replay budget:
    /// streamed, never replayed.
    Streaming(StreamedBody),
}

/// Reads a body of known small length whole; streams any other body at
/// once, keeping a replay copy of one of unknown length.
async fn plan_body(mut body: ClientBody, budget: &ReplayBudget) -> Result<BodyPlan, Refusal> {
    let Some(len) = body.size_hint().exact() else {
        let (body, copied) = StreamedBody::copied(body, budget);
        return Ok(BodyPlan::Copied(body, copied));
    };
    if len == 0 && body.is_end_stream() {
        return Ok(BodyPlan::Whole(Bytes::new(), None));
    }
    if len > MAX_REPLAY_BODY {
        return Ok(BodyPlan::Streaming(StreamedBody::streaming(body)));
    }
    // The budget is taken as bytes arrive, not as declared, so a client
    // that announces a body and sends nothing holds none of it.
    let mut reservation = budget.empty();
    let mut chunks = Vec::new();
    let mut read = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        // Request trailers have no place in a replayable body; dropped.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        read += data.len() as u64;
        let fits = reservation.grow(data.len() as u64);
        chunks.push(data);
        if !fits {
            // Past the budget: send what was read, then stream the rest.
            let prefix = concat(chunks, read);
            return Ok(BodyPlan::Streaming(StreamedBody::after(Some(prefix), body)));
        }
    }
    // hyper holds the client to its Content-Length, so `read` is `len`.
    Ok(BodyPlan::Whole(concat(chunks, read), Some(reservation)))
}

/// The proxy's own limits, from the settings.
#[derive(Debug, Clone, Copy)]
pub struct ProxyLimits {
    /// Time to the upstream's response headers (`LANYARD_UPSTREAM_TIMEOUT`).
    pub upstream_timeout: Duration,
    /// Longest silence within a request body (`LANYARD_BODY_TIMEOUT`).
    pub body_timeout: Duration,
    /// Upstream connections across all threads
    /// (`LANYARD_MAX_UPSTREAM_CONNECTIONS`).
    pub max_upstream_connections: usize,
}

/// Why the proxy passes no upstream answer on.
enum Refusal {
    /// lanyard answers itself (CONTRACT §7).
    Answer(ProxyError),
    /// The client stalled or left mid-request: the exchange ends with no
    /// answer (README "Failure behaviour", clients of the proxy).
    Abort,
}

impl From<ProxyError> for Refusal {
    fn from(error: ProxyError) -> Self {
        Refusal::Answer(error)
    }
}

impl From<ClientBodyError> for Refusal {
    fn from(error: ClientBodyError) -> Self {
        tracing::debug!(error = %error, "the client's request body failed");
        if error.answerable() {
            Refusal::Answer(ProxyError::BadRequest)
        } else {
            Refusal::Abort
        }
    }
}

/// What every proxy thread's [`Proxy`] is built from: built once, and
/// sent to each thread.
#[derive(Clone)]
pub struct Shared {
    connector: Connector,
    listen: SocketAddr,
    upstream: Upstream,
    tokens: TokenHandle,
    metrics: Metrics,
    timeout: Duration,
    body_timeout: Duration,
    upstream_limit: UpstreamLimit,
    replay_budget: ReplayBudget,
    started: Instant,
    forbidden_logged_at: Arc<AtomicU64>,
}

impl Shared {
    /// `listen` is the proxy's own address, which absolute-form requests
    /// may name.
    pub fn new(
        connector: Connector,
        listen: SocketAddr,
        upstream: Upstream,
        tokens: TokenHandle,
        metrics: Metrics,
        limits: ProxyLimits,
    ) -> Shared {
        Shared {
            connector,
            listen,
            upstream,
            tokens,
            metrics,
            timeout: limits.upstream_timeout,
            body_timeout: limits.body_timeout,
            upstream_limit: UpstreamLimit::new(limits.max_upstream_connections),
            replay_budget: ReplayBudget::new(),
            started: Instant::now(),
            forbidden_logged_at: Arc::new(AtomicU64::new(0)),
        }
    }
}

/// The forwarding service of one proxy thread, with that thread's own
/// upstream connections.
pub struct Proxy {
    pool: Rc<Pool>,
    listen: SocketAddr,
    upstream: Upstream,
    tokens: TokenHandle,
    metrics: Metrics,
    request_metrics: RequestMetrics,
    timeout: Duration,
    body_timeout: Duration,
    replay_budget: ReplayBudget,
    started: Instant,
    /// Seconds since `started` (plus one) of the last 403 hint; 0: never.
    forbidden_logged_at: Arc<AtomicU64>,
}

impl Proxy {
    /// A proxy for the calling thread: its own upstream connections,
    /// everything else shared.
    pub fn new(shared: &Shared) -> Proxy {
        let upstream = &shared.upstream;
        Proxy {
            pool: Rc::new(Pool::new(
                shared.connector.clone(),
                upstream.scheme.clone(),
                upstream.authority.clone(),
                shared.upstream_limit.clone(),
            )),
            listen: shared.listen,
            upstream: upstream.clone(),
            tokens: shared.tokens.clone(),
            request_metrics: RequestMetrics::new(shared.metrics.clone()),
            metrics: shared.metrics.clone(),
            timeout: shared.timeout,
            body_timeout: shared.body_timeout,
            replay_budget: shared.replay_budget.clone(),
            started: shared.started,
            forbidden_logged_at: shared.forbidden_logged_at.clone(),
        }
    }

    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn forward(
        &self,
        req: Request<Incoming>,
    ) -> impl Future<Output = Result<Response<PooledBody>, Refusal>> {
        async move {
            // CONNECT would make lanyard a tunnel; an upstream honouring TRACE
            // would echo the injected token back to the client.
            if req.method() == Method::CONNECT || req.method() == Method::TRACE {
                return Err(ProxyError::MethodNotAllowed.into());
            }
            // Absolute form is an HTTP/1 notion; an HTTP/2 request always
            // carries `:authority`, and lanyard never forwards to it anyway.
            if req.version() < Version::HTTP_2
                && let Some(target) = req.uri().authority()
                && !self.upstream.accepts_target(target, self.listen)
            {
                return Err(ProxyError::ForbiddenTarget.into());
            }
            // The prefix of SERVICE_API_URL is a boundary: a path that an
            // upstream could normalise above it is refused, not forwarded.
            if has_dot_segment(req.uri().path()) {
                return Err(ProxyError::DotSegment.into());
            }
            let token = self
                .tokens
                .get()
                .await
                .map_err(|_| ProxyError::TokenUnavailable)?;

            let (mut parts, body) = req.into_parts();
            let body = ClientBody::new(body, self.body_timeout);
            // The only way joining fails is a target too long once prefixed.
            parts.uri = self
                .upstream
                .path_for(&parts.uri)
                .map_err(|_| ProxyError::UriTooLong)?;
            // The pool picks HTTP/1.1 or HTTP/2 for the upstream by ALPN.
            parts.version = Version::HTTP_11;
            // `TE: trailers` is hop-by-hop but says the client takes trailers,
            // which gRPC servers require; HTTP/2 allows just that value.
            let trailers = parts
                .headers
                .get(header::TE)
                .is_some_and(|te| te.as_bytes().eq_ignore_ascii_case(b"trailers"));
            strip_hop_by_hop(&mut parts.headers);
            if trailers {
                parts
                    .headers
                    .insert(header::TE, HeaderValue::from_static("trailers"));
            }
            // Host is the upstream's: the pool sets it for HTTP/1.1.
            parts.headers.remove(header::HOST);
            parts
                .headers
                .insert(header::AUTHORIZATION, token.authorization().clone());

            // The cold paths are boxed: a future holds every branch's state, and
            // hyper moves the handler's future into place for each request, so
            // the common one (a small body, an answer other than 401) stays
            // small. Unboxed, it was 11 KiB.
            let (bytes, _reservation) = match plan_body(body, &self.replay_budget).await? {
                BodyPlan::Whole(bytes, reservation) => (bytes, reservation),
                BodyPlan::Streaming(body) => {
                    let request = Request::from_parts(parts, Either::Right(body));
                    let response = Box::pin(self.send(request, None)).await?;
                    return Ok(self.unauthorized_passes(response, token));
                }
                BodyPlan::Copied(body, copied) => {
                    return Box::pin(self.forward_copied(parts, body, copied, token)).await;
                }
            };
            // The one copy a replayable request costs: kept for a retry after
            // a 401 or a connection the upstream closed unanswered.
            let replay = Replay {
                method: parts.method.clone(),
                uri: parts.uri.clone(),
                headers: parts.headers.clone(),
                body: bytes.clone(),
            };
            let response = self
                .send(
                    Request::from_parts(parts, Either::Left(Full::new(bytes))),
                    Some(&replay),
                )
                .await?;
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            Box::pin(self.retry_unauthorized(response, &token, replay)).await
        }
    }

    /// A body of unknown length: streamed at once, replayed after a 401 if
    /// its copy arrives whole.
    async fn forward_copied(
        &self,
        parts: http::request::Parts,
        body: StreamedBody,
        copied: oneshot::Receiver<(Bytes, Reservation)>,
        token: Arc<Token>,
    ) -> Result<Response<PooledBody>, Refusal> {
        // Kept for a replay, should the whole body arrive.
        let (method, uri, headers) = (
            parts.method.clone(),
            parts.uri.clone(),
            parts.headers.clone(),
        );
        let request = Request::from_parts(parts, Either::Right(body));
        let response = self.send(request, None).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        // The upstream may answer before it has read the whole body; the
        // rest is on its way unless the client is still writing.
        let copy = tokio::time::timeout(COPY_WAIT, copied).await;
        let Ok(Ok((body, _reservation))) = copy else {
            return Ok(self.unauthorized_passes(response, token));
        };
        let replay = Replay {
            method,
            uri,
            headers,
            body,
        };
        self.retry_unauthorized(response, &token, replay).await
    }

    /// A 401 to a request that cannot be retried goes back to the client,
    /// but the next requests should not carry a token the upstream refuses.
    fn unauthorized_passes(
        &self,
        response: Response<PooledBody>,
        token: Arc<Token>,
    ) -> Response<PooledBody> {
        if response.status() == StatusCode::UNAUTHORIZED {
            let tokens = self.tokens.clone();
            tokio::spawn(async move {
                let _ = tokens.renew_after_rejection(&token).await;
            });
        }
        response
    }

    /// After a 401: one shared renewal, then one retry with the new token;
    /// when no new token comes, the 401 goes back to the client.
    async fn retry_unauthorized(
        &self,
        unauthorized: Response<PooledBody>,
        rejected: &Arc<Token>,
        mut replay: Replay,
    ) -> Result<Response<PooledBody>, Refusal> {
        let renewed =
            tokio::time::timeout(self.timeout, self.tokens.renew_after_rejection(rejected)).await;
        let Ok(Ok(token)) = renewed else {
            return Ok(unauthorized);
        };
        drop(unauthorized);
        self.metrics.upstream_unauthorized_retries.inc();
        replay
            .headers
            .insert(header::AUTHORIZATION, token.authorization().clone());
        self.send(replay.request(), Some(&replay)).await
    }

    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn send(
        &self,
        request: Request<UpstreamBody>,
        replay: Option<&Replay>,
    ) -> impl Future<Output = Result<Response<PooledBody>, Refusal>> {
        async move {
            // An upstream may close a pooled connection (its idle timeout) just
            // as lanyard sends on it: the request fails with no answer, though
            // nothing is wrong. The pool resends only requests it had not
            // started writing; an idempotent one with a whole body may be sent
            // once more (RFC 9110 §9.2.2), within the same timeout.
            // tests/upstream_faults.rs proves the failure this prevents.
            let replay = replay.filter(|r| r.method.is_idempotent());
            // Each future is built inside its `timeout_at` call and awaited at
            // once: one bound to a local, or wrapped in another async block,
            // would keep its own copy of the request in this future's space.
            let deadline = Instant::now() + self.timeout;
            let first = tokio::time::timeout_at(deadline, self.pool.send(request)).await;
            let answer = match (first, replay) {
                (Ok(Err(err)), Some(replay)) if err.closed_unanswered() => {
                    tracing::debug!(error = %err, "the upstream closed the connection without answering; sending the request once more");
                    Box::pin(tokio::time::timeout_at(
                        deadline,
                        self.pool.send(replay.request()),
                    ))
                    .await
                }
                (first, _) => first,
            };
            match answer {
                Ok(Ok(mut response)) => {
                    strip_hop_by_hop(response.headers_mut());
                    if response.status() == StatusCode::FORBIDDEN {
                        self.forbidden();
                    }
                    Ok(response)
                }
                // The client's body broke off or stalled as it was sent: the
                // client's failure, not the upstream's.
                Ok(Err(SendError::Request(ref err)))
                    if let Some(body) = ClientBodyError::find(err) =>
                {
                    Err(match body.answerable() {
                        true => Refusal::Answer(ProxyError::BadRequest),
                        false => Refusal::Abort,
                    })
                }
                Ok(Err(err)) => {
                    let (kind, error) = match err.kind() {
                        FailureKind::Tls => ("tls", ProxyError::UpstreamTls),
                        FailureKind::Connect => ("connect", ProxyError::UpstreamUnreachable),
                        FailureKind::Other => ("other", ProxyError::UpstreamUnreachable),
                    };
                    self.metrics
                        .upstream_errors
                        .with_label_values(&[kind])
                        .inc();
                    tracing::warn!(error = %err, kind, "upstream request failed");
                    Err(error.into())
                }
                Err(_) => {
                    self.metrics
                        .upstream_errors
                        .with_label_values(&["timeout"])
                        .inc();
                    tracing::warn!(
                        timeout_ms = self.timeout.as_millis() as u64,
                        "upstream did not answer in time"
                    );
                    Err(ProxyError::UpstreamTimeout.into())
                }
            }
        }
    }

    fn forbidden(&self) {
        self.metrics.upstream_forbidden.inc();
        let now = self.started.elapsed().as_secs() + 1;
        if hint_due(&self.forbidden_logged_at, now) {
            tracing::warn!(
                "the service answered 403: the service account likely lacks the role for this API \
                 (verifications.api or credentials.api) or membership of the project's group \
                 (seed §5.4, §7); logged at most once a minute, counted in lanyard_upstream_forbidden_total"
            );
        }
    }
}

/// Whether a hint last logged at `last` (seconds, 0 for never) is due
/// again at `now`; claims it if so, so concurrent requests log it once.
fn hint_due(last: &AtomicU64, now: u64) -> bool {
    let then = last.load(Ordering::Relaxed);
    let due = then == 0 || now.saturating_sub(then) >= FORBIDDEN_LOG_INTERVAL.as_secs();
    due && last
        .compare_exchange(then, now, Ordering::Relaxed, Ordering::Relaxed)
        .is_ok()
}

impl Handler for Proxy {
    type Body = ProxyBody;

    // The request path is written as functions returning `async` blocks,
    // not as `async fn`s: an `async fn` keeps a second copy of its
    // arguments in its future (rust-lang/rust#62958), so each layer held
    // the request twice, and hyper moves this future into place for every
    // request.
    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn handle(
        &self,
        req: Request<Incoming>,
    ) -> impl Future<Output = Result<Response<ProxyBody>, Abort>> {
        async move {
            let started = Instant::now();
            let method = method_index(req.method());
            let _in_flight = InFlight::enter(&self.metrics);
            let path =
                tracing::enabled!(tracing::Level::DEBUG).then(|| req.uri().path().to_owned());

            // An aborted exchange has no status to count.
            let response = match self.forward(req).await {
                Ok(response) => response.map(Either::Left),
                Err(Refusal::Answer(error)) => error.response().map(Either::Right),
                Err(Refusal::Abort) => return Err(Abort),
            };

            let elapsed = started.elapsed();
            let status = response.status();
            self.request_metrics.observe(method, status, elapsed);
            if let Some(path) = path {
                tracing::debug!(
                    method = METHODS[method],
                    path,
                    status = status.as_u16(),
                    latency_ms = elapsed.as_secs_f64() * 1000.0,
                    "proxied"
                );
            }
            Ok(response)
        }
    }
}

/// What it takes to send a replayable request again.
struct Replay {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
}

impl Replay {
    fn request(&self) -> Request<UpstreamBody> {
        let mut request = Request::new(Either::Left(Full::new(self.body.clone())));
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = Version::HTTP_11;
        *request.headers_mut() = self.headers.clone();
        request
    }
}

/// Keeps `lanyard_proxy_in_flight_requests` right even when a handler is
/// dropped mid-request (client gone).
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn enter(metrics: &'a Metrics) -> Self {
        metrics.proxy_in_flight.inc();
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.proxy_in_flight.dec();
    }
}

/// The `method` label values: a bounded set, since arbitrary methods would
/// grow the series forever.
const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other",
];
/// Status codes 100..=599, one slot each.
const STATUSES: usize = 500;

fn method_index(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::PATCH => 4,
        Method::DELETE => 5,
        Method::OPTIONS => 6,
        Method::CONNECT => 7,
        Method::TRACE => 8,
        _ => 9,
    }
}

/// The per-request series, resolved once and cached, so the request path
/// neither locks the metric vectors nor hashes label values. Series are
/// created on first use, so the exposition shows only what happened.
struct RequestMetrics {
    counts: Box<[OnceLock<IntCounter>]>,
    durations: [OnceLock<Histogram>; METHODS.len()],
    metrics: Metrics,
}

impl RequestMetrics {
    fn new(metrics: Metrics) -> Self {
        RequestMetrics {
            counts: (0..METHODS.len() * STATUSES)
                .map(|_| OnceLock::new())
                .collect(),
            durations: Default::default(),
            metrics,
        }
    }

    fn observe(&self, method: usize, status: StatusCode, elapsed: Duration) {
        let count = || {
            self.metrics
                .proxy_requests
                .with_label_values(&[METHODS[method], status.as_str()])
        };
        match usize::from(status.as_u16()).checked_sub(100) {
            Some(code) if code < STATUSES => self.counts[method * STATUSES + code]
                .get_or_init(count)
                .inc(),
            // Codes past 599 are legal but odd; they take the slow path.
            _ => count().inc(),
        }
        self.durations[method]
            .get_or_init(|| {
                self.metrics
                    .proxy_request_duration
                    .with_label_values(&[METHODS[method]])
            })
            .observe(elapsed.as_secs_f64());
    }
}

/// Whether a path has a `.` or `..` segment (RFC 3986 §3.3), counting
/// `%2e` as a dot and `%2f`, `%5c` and `\\` as separators, as an upstream
/// that decodes before it normalises (RFC 3986 §5.2.4) would: such a path
/// could resolve above the base URL's prefix. Scans in place, since most
/// paths have no dot or percent sign at all.
fn has_dot_segment(path: &str) -> bool {
    let bytes = path.as_bytes();
    if !bytes.iter().any(|&b| b == b'.' || b == b'%') {
        return false;
    }
    let (mut dots, mut other) = (0usize, false);
    let mut i = 0;
    loop {
        // What the byte (or the %XX escape) at `i` stands for.
        let (token, width) = match bytes.get(i) {
            None => (None, 0),
            Some(b'%') if i + 3 <= bytes.len() => {
                match [
                    bytes[i + 1].to_ascii_lowercase(),
                    bytes[i + 2].to_ascii_lowercase(),
                ] {
                    [b'2', b'e'] => (Some(b'.'), 3),
                    [b'2', b'f'] | [b'5', b'c'] => (Some(b'/'), 3),
                    _ => (Some(b'%'), 1),
                }
            }
            Some(b'\\') => (Some(b'/'), 1),
            Some(&b) => (Some(b), 1),
        };
        match token {
            None | Some(b'/') => {
                if !other && (dots == 1 || dots == 2) {
                    return true;
                }
                if token.is_none() {
                    return false;
                }
                (dots, other) = (0, false);
            }
            Some(b'.') => dots += 1,
            Some(_) => other = true,
        }
        i += width;
    }
}

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass over the few names present finds
    // that out, where removing each of nine names would hash every one.
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    // Names listed in `Connection` are compared as they are, not parsed
    // into new header names: parsing allocates, and a name that is not
    // present needs no removing.
    let mut named = Vec::new();
    for value in headers.get_all(header::CONNECTION) {
        let Ok(value) = value.to_str() else { continue };
        for token in value.split(',').map(str::trim) {
            if let Some(name) = headers
                .keys()
                .find(|name| name.as_str().eq_ignore_ascii_case(token))
            {
                named.push(name.clone());
            }
        }
    }
    for name in named {
        headers.remove(name);
    }
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    // `Upgrade` is hop-by-hop too; lanyard does not tunnel upgrades.
    HOP_BY_HOP.contains(name) || name == header::UPGRADE
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(url: &str) -> Upstream {
        Upstream::new(&TargetUrl::parse(url, false).unwrap())
    }

    #[test]
    fn prefix_and_path_are_joined_with_one_slash() {
        let cases = [
            (
                "https://api.example.com",
                "/v1/x?a=1",
                "https://api.example.com/v1/x?a=1",
            ),
            (
                "https://api.example.com/",
                "/x",
                "https://api.example.com/x",
            ),
            (
                "https://api.example.com/base",
                "/x?q",
                "https://api.example.com/base/x?q",
            ),
            (
                "https://api.example.com/base/",
                "/",
                "https://api.example.com/base/",
            ),
            (
                "https://api.example.com:8443/a/b",
                "/c",
                "https://api.example.com:8443/a/b/c",
            ),
        ];
        for (base, path, want) in cases {
            let got = upstream(base).uri_for(&path.parse().unwrap()).unwrap();
            assert_eq!(got.to_string(), want, "{base} + {path}");
        }
    }

    #[test]
    fn dot_segments_are_found_literal_encoded_and_behind_encoded_slashes() {
        for path in [
            "/..",
            "/../other",
            "/a/./b",
            "/a/..",
            "/..//x",
            "/%2e%2e/x",
            "/%2E%2e/x",
            "/.%2e/x",
            "/%2e/x",
            "/a%2f..%2fb",
            "/a%2F%2e%2e",
            "/a\\..\\b",
            "/a%5c..",
        ] {
            assert!(has_dot_segment(path), "{path}");
        }
        for path in [
            "/",
            "/v1/things",
            "/file.json",
            "/...",
            "/a/.../b",
            "/.well-known/x",
            "/a..b",
            "/%2e%2e%2e",
            "/100%25",
            "/%",
            "/%2",
            "/x%2",
        ] {
            assert!(!has_dot_segment(path), "{path}");
        }
    }

    #[test]
    fn the_403_hint_is_due_at_most_once_a_minute() {
        let last = AtomicU64::new(0);
        assert!(hint_due(&last, 1));
        assert!(!hint_due(&last, 1), "claimed once");
        assert!(!hint_due(&last, 31));
        assert!(!hint_due(&last, 60));
        assert!(hint_due(&last, 61));
        assert!(!hint_due(&last, 62));
        assert!(hint_due(&last, 200));
    }

    #[test]
    fn upstream_targets_are_in_origin_form() {
        let cases = [
            ("http://127.0.0.1:9000", "/v1/x?a=1", "/v1/x?a=1"),
            ("http://127.0.0.1:9000", "/", "/"),
            ("http://127.0.0.1:9000", "*", "/"),
            ("http://127.0.0.1:9000", "http://127.0.0.1:9000/y?b", "/y?b"),
            (
                "http://127.0.0.1:9000",
                "http://127.0.0.1:9000?q=1",
                "/?q=1",
            ),
            (
                "http://127.0.0.1:9000/base",
                "http://127.0.0.1:9000?q",
                "/base/?q",
            ),
            ("http://127.0.0.1:9000/base", "/x?q", "/base/x?q"),
            ("http://127.0.0.1:9000/base", "*", "/base/"),
        ];
        for (base, target, want) in cases {
            let got = upstream(base).path_for(&target.parse().unwrap()).unwrap();
            assert_eq!(got.to_string(), want, "{base} + {target}");
            assert!(got.scheme().is_none() && got.authority().is_none());
        }
    }

    #[test]
    fn absolute_form_targets_are_checked_against_the_upstream() {
        let up = upstream("https://api.example.com/v1");
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let ok = [
            "api.example.com",
            "API.example.com:443",
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
        ];
        for target in ok {
            assert!(
                up.accepts_target(&target.parse().unwrap(), listen),
                "{target}"
            );
        }
        let refused = [
            "evil.example.com",
            "api.example.com:8443",
            "api.example.com.evil.com",
            "127.0.0.1:5432",
            "localhost",
        ];
        for target in refused {
            assert!(
                !up.accepts_target(&target.parse().unwrap(), listen),
                "{target}"
            );
        }
    }

    #[test]
    fn the_replay_budget_is_shared_and_given_back() {
        let budget = ReplayBudget::new();
        let mut big = budget.empty();
        assert!(big.grow(REPLAY_BUDGET - 10));
        assert!(!budget.empty().grow(11));
        let mut small = budget.empty();
        assert!(small.grow(10));
        assert!(!small.grow(1));
        drop(big);
        assert!(small.grow(1));
        drop(small);
        assert_eq!(budget.0.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn hop_by_hop_headers_and_those_named_in_connection_are_dropped() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, X-Private,x-also ,x-absent"),
            ("x-private", "1"),
            ("x-also", "2"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic Zm9v"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-kept", "yes"),
        ] {
            headers.insert(HeaderName::from_static(name), value.parse().unwrap());
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-kept"]);
    }

    #[test]
    fn a_message_without_hop_by_hop_headers_is_left_alone() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.append("x-many", HeaderValue::from_static("1"));
        headers.append("x-many", HeaderValue::from_static("2"));
        let before = headers.clone();
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers, before);
    }
}
