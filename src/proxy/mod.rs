//! The forwarding service: every request goes to the upstream base URL with
//! the held token, bodies streamed both ways.
//!
//! The request path loads the token lock-free and never waits for the token
//! endpoint, except after the upstream answered 401: then the token is
//! renewed once for every request that saw it, and each request whose body
//! can be replayed is retried once (an idempotent one also once when the
//! upstream closed a pooled connection under it without answering).
//!
//! - `absolute`: the absolute-form check.
//! - [`body`]: request bodies: whole or streamed, the replay copy and its budget.
//! - [`headers`]: hop-by-hop headers.
//! - `upload`: a streamed body's progress, for the upstream timeout.

mod absolute;
mod body;
mod headers;
mod upload;

pub use body::{MAX_REPLAY_BODY, StreamedBody, UpstreamBody};
pub use headers::strip_hop_by_hop;
use headers::upstream_headers;

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri, Version, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use tokio::sync::oneshot;
use tokio::time::Instant;

use absolute::accepts_target;
use body::{BodyPlan, ReplayBudget, Reservation, plan_body};
use upload::UploadProgress;

use crate::accounts::{Account, Accounts, NoAccount};
use crate::client_body::{ClientBody, ClientBodyError};
use crate::config::ProxyConfig;
use crate::error::{FORBIDDEN_HINT, ProxyError};
use crate::metrics::{METHODS, Metrics, RequestSeries, method_index};
use crate::otel::spans::HttpSpan;
use crate::outbound::{Connector, FailureKind};
use crate::pool::{Pool, PooledBody, SendError, UpstreamLimit};
use crate::server::{self, Abort, Handler, Peer};
use crate::target::{TargetUrl, has_dot_segment};
use crate::throttle::{self, Throttle};
use crate::token::{AfterRejection, Token};

/// After a 401 to a body of unknown length, how long its end may take to
/// arrive for the request to be replayed.
const COPY_WAIT: Duration = Duration::from_secs(1);

/// What the proxy answers with: the upstream's streamed body, or lanyard's
/// own small JSON error.
pub type ProxyBody = Either<UpstreamResponse, Full<Bytes>>;
/// The upstream's response body, giving its connection back when read.
pub type UpstreamResponse = PooledBody<UpstreamBody>;

/// Why the proxy passes no upstream answer on: lanyard answers itself,
/// or the client stalled or left mid-request and the exchange ends with no
/// answer (docs/tokens.md "Failure behaviour", clients of the proxy).
type Refusal = server::Refusal<ProxyError>;

impl From<ProxyError> for Refusal {
    fn from(error: ProxyError) -> Self {
        Refusal::Answer(error)
    }
}

/// The one rule for a client body's failure, found while reading it here
/// or in the error of the upstream request it was being sent with.
impl From<&ClientBodyError> for Refusal {
    fn from(error: &ClientBodyError) -> Self {
        tracing::debug!(error = %error, "the client's request body failed");
        if error.answerable() {
            Refusal::Answer(ProxyError::BadRequest)
        } else {
            Refusal::Abort
        }
    }
}

impl From<ClientBodyError> for Refusal {
    fn from(error: ClientBodyError) -> Self {
        Refusal::from(&error)
    }
}

/// What every proxy thread's [`Proxy`] is built from: built once, and
/// sent to each thread.
#[derive(Clone)]
pub struct ProxySetup {
    connector: Connector,
    upstream_limit: UpstreamLimit,
    shared: Arc<Shared>,
}

/// What every thread's proxy shares, made once: one `Arc`, as the
/// verifier's state is, rather than each field copied into each thread's.
struct Shared {
    listen: Option<SocketAddr>,
    upstream: TargetUrl,
    /// Which account's token a request carries, by its path; each with
    /// its 401 rule, which passes the service's 401 on when no new token
    /// comes.
    accounts: Accounts,
    metrics: Metrics,
    request_series: RequestSeries,
    timeout: Duration,
    body_timeout: Duration,
    replay_budget: ReplayBudget,
    /// The 403 hint, shared by the proxy's threads.
    forbidden_hint: Throttle,
}

impl ProxySetup {
    /// `listen` is the proxy's own TCP address, which absolute-form
    /// requests may name (none on a Unix socket); requests go to
    /// `upstream`.
    pub fn new(
        connector: Connector,
        listen: Option<SocketAddr>,
        config: &ProxyConfig,
        upstream: &TargetUrl,
        accounts: Accounts,
        metrics: &Metrics,
    ) -> ProxySetup {
        ProxySetup {
            connector,
            upstream_limit: UpstreamLimit::new(config.max_upstream_connections),
            shared: Arc::new(Shared {
                listen,
                upstream: upstream.clone(),
                accounts,
                request_series: RequestSeries::new(metrics.clone()),
                metrics: metrics.clone(),
                timeout: config.upstream_timeout,
                body_timeout: config.body_timeout,
                replay_budget: ReplayBudget::new(),
                forbidden_hint: Throttle::new(throttle::EVERY_MINUTE),
            }),
        }
    }
}

/// The forwarding service of one proxy thread, with that thread's own
/// upstream connections.
pub struct Proxy {
    pool: Rc<Pool<UpstreamBody>>,
    shared: Arc<Shared>,
}

impl Proxy {
    /// A proxy for the calling thread: its own upstream connections,
    /// everything else shared.
    pub fn new(setup: &ProxySetup) -> Proxy {
        Proxy {
            pool: Rc::new(Pool::new(
                setup.connector.clone(),
                &setup.shared.upstream,
                setup.upstream_limit.clone(),
            )),
            shared: setup.shared.clone(),
        }
    }

    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn forward(
        &self,
        req: Request<Incoming>,
        trace: &HttpSpan,
    ) -> impl Future<Output = Result<Response<UpstreamResponse>, Refusal>> {
        async move {
            self.admissible(&req)?;
            // The account is chosen by the path exactly as it is
            // forwarded (docs/accounts.md); nothing is sent for a
            // path that has none.
            let account = self
                .shared
                .accounts
                .load()
                .pick(req.uri().path())
                .map_err(ProxyError::from)?
                .clone();
            let token = account
                .tokens()
                .get()
                .await
                .map_err(|_| ProxyError::TokenUnavailable)?;

            let (mut parts, body) = req.into_parts();
            let body = ClientBody::new(body, self.shared.body_timeout);
            // The only way joining fails is a target too long once prefixed.
            parts.uri = self
                .shared
                .upstream
                .path_for(&parts.uri)
                .map_err(|_| ProxyError::UriTooLong)?;
            // The pool picks HTTP/1.1 or HTTP/2 for the upstream by ALPN.
            parts.version = Version::HTTP_11;
            upstream_headers(&mut parts.headers, &token);
            trace.propagate(&mut parts.headers);

            // The cold paths are boxed: a future holds every branch's state, and
            // hyper moves the handler's future into place for each request, so
            // the common one (a small body, an answer other than 401) stays
            // small. Unboxed, it was 11 KiB.
            let (bytes, _reservation) = match plan_body(body, &self.shared.replay_budget).await? {
                BodyPlan::Whole(bytes, reservation) => (bytes, reservation),
                BodyPlan::Streaming(body) => {
                    let upload = body.progress();
                    let request = Request::from_parts(parts, Either::Right(body));
                    let response =
                        Box::pin(self.send(request, Sent::Streamed(&upload), trace)).await?;
                    return Ok(unauthorized_passes(&account, response, token));
                }
                BodyPlan::Copied(body, copied) => {
                    let copied = self.forward_copied(parts, body, copied, (&account, token), trace);
                    return Box::pin(copied).await;
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
                    Sent::Whole(&replay),
                    trace,
                )
                .await?;
            if response.status() != StatusCode::UNAUTHORIZED {
                return Ok(response);
            }
            Box::pin(self.retry_unauthorized(response, (&account, &token), replay, trace)).await
        }
    }

    /// What no request may do, whatever its account: the checks before a
    /// token is chosen.
    fn admissible(&self, req: &Request<Incoming>) -> Result<(), ProxyError> {
        // CONNECT would make lanyard a tunnel; an upstream honouring TRACE
        // would echo the injected token back to the client.
        if req.method() == Method::CONNECT || req.method() == Method::TRACE {
            return Err(ProxyError::MethodNotAllowed);
        }
        // Absolute form is an HTTP/1 notion; an HTTP/2 request always
        // carries `:authority`, and lanyard never forwards to it anyway.
        if req.version() < Version::HTTP_2
            && let Some(target) = req.uri().authority()
            && !accepts_target(&self.shared.upstream, target, self.shared.listen)
        {
            return Err(ProxyError::ForbiddenTarget);
        }
        // The prefix of SERVICE_API_URL is a boundary: a path that an
        // upstream could normalise above it is refused, not forwarded.
        if has_dot_segment(req.uri().path()) {
            return Err(ProxyError::DotSegment);
        }
        Ok(())
    }

    /// A body of unknown length: streamed at once, replayed after a 401 if
    /// its copy arrives whole.
    async fn forward_copied(
        &self,
        parts: http::request::Parts,
        body: StreamedBody,
        copied: oneshot::Receiver<(Bytes, Reservation)>,
        (account, token): (&Account, Arc<Token>),
        trace: &HttpSpan,
    ) -> Result<Response<UpstreamResponse>, Refusal> {
        // Kept for a replay, should the whole body arrive.
        let (method, uri, headers) = (
            parts.method.clone(),
            parts.uri.clone(),
            parts.headers.clone(),
        );
        let upload = body.progress();
        let request = Request::from_parts(parts, Either::Right(body));
        let response = self.send(request, Sent::Streamed(&upload), trace).await?;
        if response.status() != StatusCode::UNAUTHORIZED {
            return Ok(response);
        }
        // The upstream may answer before it has read the whole body; the
        // rest is on its way unless the client is still writing.
        let copy = tokio::time::timeout(COPY_WAIT, copied).await;
        let Ok(Ok((body, _reservation))) = copy else {
            return Ok(unauthorized_passes(account, response, token));
        };
        let replay = Replay {
            method,
            uri,
            headers,
            body,
        };
        self.retry_unauthorized(response, (account, &token), replay, trace)
            .await
    }

    /// After a 401: one shared renewal, then one retry with the new token;
    /// when no new token comes, the 401 goes back to the client.
    async fn retry_unauthorized(
        &self,
        unauthorized: Response<UpstreamResponse>,
        (account, rejected): (&Account, &Arc<Token>),
        mut replay: Replay,
        trace: &HttpSpan,
    ) -> Result<Response<UpstreamResponse>, Refusal> {
        // No new token: `WhenNoNewToken::PassThe401On`, the proxy's answer.
        let AfterRejection::Retry(token) = account.rejections().after_401(rejected).await else {
            return Ok(unauthorized);
        };
        drop(unauthorized);
        replay
            .headers
            .insert(header::AUTHORIZATION, token.authorization().clone());
        trace.resent();
        self.send(replay.request(), Sent::Whole(&replay), trace)
            .await
    }

    #[allow(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    fn send(
        &self,
        request: Request<UpstreamBody>,
        sent: Sent<'_>,
        trace: &HttpSpan,
    ) -> impl Future<Output = Result<Response<UpstreamResponse>, Refusal>> {
        async move {
            // An upstream may close a pooled connection (its idle timeout) just
            // as lanyard sends on it: the request fails with no answer, though
            // nothing is wrong. The pool resends only requests it had not
            // started writing; an idempotent one with a whole body may be sent
            // once more (RFC 9110 §9.2.2), within the same timeout.
            // tests/it/upstream_faults.rs proves the failure this prevents.
            let replay = sent.resendable();
            let deadline = Instant::now() + self.shared.timeout;
            let first = match sent {
                Sent::Streamed(upload) => {
                    let timeout = self.shared.timeout;
                    let sending =
                        upload::answer_within(deadline, timeout, upload, self.pool.send(request));
                    Box::pin(sending).await
                }
                // Built inside its `timeout_at` call and awaited at once: a
                // future bound to a local, or wrapped in another async block,
                // would keep its own copy of the request in this future's space.
                Sent::Whole(_) => tokio::time::timeout_at(deadline, self.pool.send(request)).await,
            };
            let answer = match (first, replay) {
                (Ok(Err(err)), Some(replay)) if err.closed_unanswered() => {
                    tracing::debug!(error = %err, "the upstream closed the connection without answering; sending the request once more");
                    trace.resent();
                    Box::pin(tokio::time::timeout_at(
                        deadline,
                        self.pool.send(replay.request()),
                    ))
                    .await
                }
                (first, _) => first,
            };
            match answer {
                Ok(Ok(response)) => self.answered(response),
                // The client's body broke off or stalled as it was sent: the
                // client's failure, not the upstream's.
                Ok(Err(SendError::Request(ref err)))
                    if let Some(body) = ClientBodyError::find(err) =>
                {
                    Err(body.into())
                }
                Ok(Err(err)) => {
                    let kind = err.kind().label();
                    let error = match err.kind() {
                        FailureKind::Tls => ProxyError::UpstreamTls,
                        FailureKind::Connect | FailureKind::Other => {
                            ProxyError::UpstreamUnreachable
                        }
                    };
                    self.shared
                        .metrics
                        .upstream_errors
                        .with_label_values(&[kind])
                        .inc();
                    tracing::warn!(error = %err, kind, "upstream request failed");
                    Err(error.into())
                }
                Err(_) => {
                    self.shared
                        .metrics
                        .upstream_errors
                        .with_label_values(&["timeout"])
                        .inc();
                    tracing::warn!(
                        timeout_ms = self.shared.timeout.as_millis() as u64,
                        "upstream did not answer in time"
                    );
                    Err(ProxyError::UpstreamTimeout.into())
                }
            }
        }
    }

    /// The upstream's answer, as the client gets it.
    fn answered(
        &self,
        mut response: Response<UpstreamResponse>,
    ) -> Result<Response<UpstreamResponse>, Refusal> {
        match response.status() {
            StatusCode::SWITCHING_PROTOCOLS => {
                // A 502 upstream_unreachable like the others, counted as
                // they are (docs/admin.md, Metrics).
                self.shared
                    .metrics
                    .upstream_errors
                    .with_label_values(&["other"])
                    .inc();
                tracing::warn!(
                    "the upstream answered 101 Switching Protocols; lanyard does not forward upgraded connections, and answers 502"
                );
                return Err(ProxyError::UpstreamSwitchedProtocols.into());
            }
            StatusCode::FORBIDDEN => self.forbidden(),
            _ => {}
        }
        strip_hop_by_hop(response.headers_mut());
        Ok(response)
    }

    fn forbidden(&self) {
        self.shared.metrics.upstream_forbidden.inc();
        if let Some(held_back) = self.shared.forbidden_hint.due(tokio::time::Instant::now()) {
            tracing::warn!(
                held_back,
                "the service answered 403: {FORBIDDEN_HINT}; logged at most once a minute, counted in lanyard_upstream_forbidden_total"
            );
        }
    }
}

/// A 401 to a request that cannot be retried goes back to the client, but
/// the next requests should not carry a token the upstream refuses.
fn unauthorized_passes(
    account: &Account,
    response: Response<UpstreamResponse>,
    token: Arc<Token>,
) -> Response<UpstreamResponse> {
    if response.status() == StatusCode::UNAUTHORIZED {
        account.rejections().renew_in_background(token);
    }
    response
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
        _client: Peer,
    ) -> impl Future<Output = Result<Response<ProxyBody>, Abort>> {
        async move {
            let started = Instant::now();
            let method = method_index(req.method());
            let _in_flight = InFlightGauge::enter(&self.shared.metrics);
            let path =
                tracing::enabled!(tracing::Level::DEBUG).then(|| req.uri().path().to_owned());
            // A disabled span, and nothing more, with tracing off.
            let trace = HttpSpan::proxied(
                req.method(),
                req.uri(),
                req.headers(),
                &self.shared.upstream,
            );

            // An aborted exchange has no status to count.
            let (response, error) = match self.forward(req, &trace).await {
                Ok(response) => (response.map(Either::Left), None),
                Err(Refusal::Answer(error)) => {
                    (error.response().map(Either::Right), Some(error.code()))
                }
                Err(Refusal::Abort) => {
                    trace.failed("aborted");
                    return Err(Abort);
                }
            };

            let elapsed = started.elapsed();
            let status = response.status();
            trace.answered(status, error);
            self.shared.request_series.observe(method, status, elapsed);
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

/// How a request's body goes upstream, which decides whether it may be
/// sent again and how its upstream timeout runs.
#[derive(Clone, Copy)]
enum Sent<'a> {
    /// Whole, from memory, kept to replay.
    Whole(&'a Replay),
    /// Streamed as the client sends it.
    Streamed(&'a UploadProgress),
}

impl<'a> Sent<'a> {
    /// The copy to send once more if a pooled connection closes unanswered:
    /// a whole body's, of an idempotent method (RFC 9110 §9.2.2).
    fn resendable(self) -> Option<&'a Replay> {
        match self {
            Sent::Whole(replay) if replay.method.is_idempotent() => Some(replay),
            _ => None,
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
struct InFlightGauge<'a>(&'a Metrics);

impl<'a> InFlightGauge<'a> {
    fn enter(metrics: &'a Metrics) -> Self {
        metrics.proxy_in_flight.inc();
        InFlightGauge(metrics)
    }
}

impl Drop for InFlightGauge<'_> {
    fn drop(&mut self) {
        self.0.proxy_in_flight.dec();
    }
}

impl From<NoAccount> for ProxyError {
    fn from(no: NoAccount) -> Self {
        match no {
            NoAccount::ForOrganization(organization) => {
                ProxyError::NoAccountForOrganization(organization.into())
            }
            NoAccount::ForPath => ProxyError::NoAccountForPath,
            NoAccount::Unreadable(why, segment) => ProxyError::UnreadableOrganization(why, segment),
        }
    }
}
