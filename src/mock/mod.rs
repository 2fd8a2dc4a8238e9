//! An embedded mock of the service, served on loopback for `lanyard demo`
//! and the test suite.
//!
//! Its token endpoint verifies assertions strictly (RFC 7523 §3) and can be
//! told to fail in every way lanyard classifies. The mock imports nothing
//! from the client side (`token`, `credentials`, ...): what it checks is
//! written out here, so a mistake in the client cannot pass on both sides.
//! Its API (under [`API_PREFIX`]) authenticates the bearer token, enforces
//! the authorization model of docs/service.md §5.4, and serves verification sessions
//! and the issuance operations; a simulated wallet (under
//! [`WALLET_PREFIX`]) completes sessions, as JSON for scripts and as a page
//! a person clicks through for the verifier's demo (`wallet_page`). Payload shapes the seed leaves unspecified are
//! illustrative; `docs/mock-service.md` documents every endpoint.

mod api;
mod issuance;
mod keys;
mod token;
mod verification;
mod wallet_page;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

pub use api::ApiRequestLog;
pub use keys::{GeneratedKey, generate_rsa_key};
pub use token::{TokenEvent, TokenRequestLog};

/// The token endpoint's path on the mock.
pub const TOKEN_PATH: &str = "/oauth2/token";
/// The API's path prefix on the mock: `SERVICE_API_URL` is `{mock}/api`.
pub const API_PREFIX: &str = "/api";
/// The simulated wallet's path prefix on the mock. Outside the API and
/// without a token: a wallet presents straight to the service (docs/service.md §4.2).
pub const WALLET_PREFIX: &str = "/mock/wallet";
/// The role that grants the verification API (docs/service.md §5.4).
pub const VERIFICATIONS_ROLE: &str = "verifications.api";
/// The role that grants the issuance API (docs/service.md §5.4).
pub const CREDENTIALS_ROLE: &str = "credentials.api";
/// Short, so the demo shows renewals happening.
pub const DEFAULT_EXPIRES_IN: i64 = 120;
/// Token events a subscriber may fall behind by before it misses some: a
/// fleet of sidecars recovering from an outage sends about one each.
const TOKEN_EVENTS_BUFFERED: usize = 4096;

/// A service account known to the mock.
#[derive(Debug, Clone)]
pub struct MockAccount {
    pub client_id: String,
    pub organization_id: String,
    /// DER `RSAPublicKey` (PKCS#1) that verifies the account's assertions.
    pub public_key_der: Vec<u8>,
    /// Role identifiers, e.g. `verifications.api`.
    pub roles: Vec<String>,
    /// Projects whose group the account belongs to.
    pub projects: Vec<String>,
}

/// A way for the token endpoint to misbehave, once per queued fault.
#[derive(Debug, Clone)]
pub enum Fault {
    /// No fault: handle the request normally (to let one request through
    /// ahead of queued faults).
    Pass,
    /// Close the connection without answering.
    Disconnect,
    /// Wait, then handle the request normally.
    Delay(Duration),
    /// Answer with this status, body and optional `Retry-After`.
    Respond {
        status: u16,
        body: String,
        retry_after: Option<String>,
    },
}

impl Fault {
    /// 401 `invalid_client`, as an OAuth server answers revoked credentials.
    pub fn invalid_client() -> Fault {
        Fault::Respond {
            status: 401,
            body:
                r#"{"error":"invalid_client","error_description":"client authentication failed"}"#
                    .into(),
            retry_after: None,
        }
    }

    /// 429 with an optional `Retry-After` value.
    pub fn rate_limited(retry_after: Option<&str>) -> Fault {
        Fault::Respond {
            status: 429,
            body: r#"{"error":"rate_limited"}"#.into(),
            retry_after: retry_after.map(str::to_string),
        }
    }

    /// A 5xx answer.
    pub fn server_error(status: u16) -> Fault {
        Fault::Respond {
            status,
            body: "upstream exploded".into(),
            retry_after: None,
        }
    }

    /// 200 with the given body.
    pub fn body(body: &str) -> Fault {
        Fault::Respond {
            status: 200,
            body: body.into(),
            retry_after: None,
        }
    }
}

/// An access token the mock issued.
#[derive(Debug, Clone)]
pub(crate) struct IssuedToken {
    pub client_id: String,
    pub expires_at: SystemTime,
}

#[derive(Default)]
struct Inner {
    accounts: HashMap<String, MockAccount>,
    seen_jti: HashMap<String, u64>,
    tokens: HashMap<String, IssuedToken>,
    faults: VecDeque<Fault>,
    /// The token endpoint answers 503 to everything until switched off.
    token_outage: bool,
    /// `None`: omit `expires_in` from token responses.
    expires_in: Option<i64>,
    /// Tokens are issued but never become known to the API.
    revoke_on_issue: bool,
    last_accepted: Option<TokenRequestLog>,
    refusals: Vec<String>,
    /// Verification rules by (project id, normalised rule id).
    rules: HashMap<(String, String), verification::Rule>,
    /// Verification sessions by transaction id.
    sessions: HashMap<String, verification::Session>,
    /// Credential items by credential id.
    credentials: HashMap<String, issuance::Credential>,
    /// Orders credential listings by creation.
    credential_seq: u64,
    last_api_request: Option<ApiRequestLog>,
}

/// Counters tests can await instead of sleeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockCounters {
    /// Requests that reached the token endpoint, faults included.
    pub token_requests: u64,
    /// Tokens issued.
    pub tokens_issued: u64,
    /// Requests that reached the API (under [`API_PREFIX`]), counted before
    /// authentication, so refused ones count too.
    pub api_requests: u64,
}

pub(crate) struct State {
    inner: Mutex<Inner>,
    counters: watch::Sender<MockCounters>,
    /// Every token request's answer, for subscribers that need each one
    /// (the counters coalesce).
    token_events: broadcast::Sender<TokenEvent>,
    audience: String,
    /// The mock's own base URL, for the links it hands out.
    base_url: String,
}

impl State {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves plain data behind; the mock
        // keeps serving rather than poisoning every later test request.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running mock service. Dropping it stops the server.
pub struct MockService {
    state: Arc<State>,
    addr: SocketAddr,
    _tasks: JoinSet<()>,
}

impl MockService {
    /// Serves plain HTTP on a fresh loopback port.
    pub async fn start() -> std::io::Result<MockService> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        Ok(Self::serve(listener, None))
    }

    /// Serves on the given listener, over TLS when a config is given.
    pub fn serve(listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>) -> MockService {
        let addr = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let scheme = if tls.is_some() { "https" } else { "http" };
        // With TLS the name matches a test certificate.
        let host = if tls.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        let base_url = format!("{scheme}://{host}:{}", addr.port());
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                expires_in: Some(DEFAULT_EXPIRES_IN),
                ..Inner::default()
            }),
            counters: watch::Sender::new(MockCounters::default()),
            token_events: broadcast::channel(TOKEN_EVENTS_BUFFERED).0,
            audience: format!("{base_url}/iam"),
            base_url,
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(
            accept_loop(listener, tls, state.clone())
                .instrument(tracing::info_span!("mock_service")),
        );
        MockService {
            state,
            addr,
            _tasks: tasks,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (or `https://localhost:PORT` with TLS, so the
    /// name matches a test certificate).
    pub fn base_url(&self) -> String {
        self.state.base_url.clone()
    }

    pub fn token_url(&self) -> String {
        format!("{}{TOKEN_PATH}", self.base_url())
    }

    /// The `SERVICE_API_URL` of the mock's API.
    pub fn api_url(&self) -> String {
        format!("{}{API_PREFIX}", self.base_url())
    }

    /// The `aud` the token endpoint requires.
    pub fn audience(&self) -> String {
        self.state.audience.clone()
    }

    pub fn add_account(&self, account: MockAccount) {
        self.state
            .lock()
            .accounts
            .insert(account.client_id.clone(), account);
    }

    /// Queues a fault for the next token request.
    pub fn push_fault(&self, fault: Fault) {
        self.state.lock().faults.push_back(fault);
    }

    /// With `true`, the token endpoint answers every request with 503
    /// until switched off again: an outage, as opposed to the one-shot
    /// [`push_fault`](Self::push_fault). Queued faults wait for it to end.
    /// Tokens already issued stay valid at the API.
    pub fn set_token_outage(&self, on: bool) {
        self.state.lock().token_outage = on;
    }

    /// Sets the `expires_in` of issued tokens; `None` omits the field.
    pub fn set_expires_in(&self, seconds: Option<i64>) {
        self.state.lock().expires_in = seconds;
    }

    /// Makes every token issued so far unknown, as if revoked.
    pub fn revoke_all_tokens(&self) {
        self.state.lock().tokens.clear();
    }

    /// With `true`, every token issued from now on is revoked the moment
    /// it is issued: the token endpoint grants it, the API answers 401 to
    /// it. Together with [`revoke_all_tokens`](Self::revoke_all_tokens),
    /// an API that rejects every token.
    pub fn set_revoke_on_issue(&self, revoke: bool) {
        self.state.lock().revoke_on_issue = revoke;
    }

    /// Makes every token issued so far expired, so the API answers 401
    /// saying so. Tokens issued later live their normal lifetime.
    pub fn expire_all_tokens(&self) {
        let now = SystemTime::now();
        for token in self.state.lock().tokens.values_mut() {
            token.expires_at = token.expires_at.min(now);
        }
    }

    /// Registers a published verification rule in a project, as the
    /// Portal's Generate ID and Publish rule actions do (docs/service.md §3.1). The
    /// rule id should be a UUID; one that parses as a UUID matches its
    /// path segment in any case. Registering an id again publishes it.
    pub fn add_rule(&self, project_id: impl Into<String>, rule_id: impl Into<String>) {
        self.insert_rule(
            project_id.into(),
            rule_id.into(),
            verification::RuleStatus::Published,
        );
    }

    /// Registers a rule that has its id but is not yet published: the API
    /// answers 404 for it, since only a published rule is usable at runtime.
    pub fn add_draft_rule(&self, project_id: impl Into<String>, rule_id: impl Into<String>) {
        self.insert_rule(
            project_id.into(),
            rule_id.into(),
            verification::RuleStatus::Draft,
        );
    }

    fn insert_rule(&self, project_id: String, rule_id: String, status: verification::RuleStatus) {
        let key = (project_id, verification::normalise_rule_id(&rule_id));
        self.state
            .lock()
            .rules
            .insert(key, verification::Rule { rule_id, status });
    }

    /// The mock wallet's base URL: the demo's `WALLET_BASE_URL`, whose
    /// page a person presents or declines on.
    pub fn wallet_url(&self) -> String {
        format!("{}{WALLET_PREFIX}", self.state.base_url)
    }

    /// Where the simulated wallet presents a credential for a session.
    pub fn wallet_present_url(&self, transaction_id: &str) -> String {
        verification::wallet_url(&self.state.base_url, transaction_id, "/present")
    }

    /// The most recent request that reached the API, as it arrived.
    pub fn last_api_request(&self) -> Option<ApiRequestLog> {
        self.state.lock().last_api_request.clone()
    }

    pub fn counters(&self) -> MockCounters {
        *self.state.counters.borrow()
    }

    /// Watch the counters to await an event without sleeping.
    pub fn watch_counters(&self) -> watch::Receiver<MockCounters> {
        self.state.counters.subscribe()
    }

    /// Every token request answered from now on, one event each, in
    /// order. A subscriber more than a few thousand events behind misses
    /// the oldest and is told how many (`RecvError::Lagged`).
    pub fn token_events(&self) -> broadcast::Receiver<TokenEvent> {
        self.state.token_events.subscribe()
    }

    /// The most recent token request that was granted.
    pub fn last_accepted(&self) -> Option<TokenRequestLog> {
        self.state.lock().last_accepted.clone()
    }

    /// Why token requests were refused, oldest first.
    pub fn refusals(&self) -> Vec<String> {
        self.state.lock().refusals.clone()
    }

    /// The client id a live token was issued to, if it is one.
    pub fn token_owner(&self, token: &str) -> Option<String> {
        self.state
            .lock()
            .tokens
            .get(token)
            .filter(|t| t.expires_at > SystemTime::now())
            .map(|t| t.client_id.clone())
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: Arc<State>,
) {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let mut connections = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(err) => {
                // Usually out of file descriptors: pause rather than spin.
                tracing::warn!(error = %err, "mock accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let state = state.clone();
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| {
                let state = state.clone();
                async move { route(&state, req).await }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            let result = match acceptor {
                Some(acceptor) => match acceptor.accept(stream).await {
                    Ok(tls) => builder.serve_connection(TokioIo::new(tls), service).await,
                    Err(_) => return,
                },
                None => {
                    builder
                        .serve_connection(TokioIo::new(stream), service)
                        .await
                }
            };
            if let Err(err) = result {
                tracing::debug!(error = %err, "mock connection ended");
            }
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
}

/// Returned by a handler to drop the connection without an answer.
#[derive(Debug)]
pub(crate) struct Disconnect;

impl std::fmt::Display for Disconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fault injected: disconnect")
    }
}

impl std::error::Error for Disconnect {}

async fn route(state: &State, req: Request<Incoming>) -> Result<Response<Full<Bytes>>, Disconnect> {
    let path = req.uri().path();
    if path == TOKEN_PATH {
        return token::handle(state, req).await;
    }
    if under(path, API_PREFIX) {
        return Ok(api::handle(state, req).await);
    }
    if under(path, WALLET_PREFIX) {
        return Ok(verification::wallet(state, req).await);
    }
    Ok(json(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"error": "not_found", "message": "no such path on the mock service"}),
    ))
}

/// Whether `path` is `prefix` itself or below it (`/api/x`, not `/apix`).
fn under(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

pub(crate) fn json(status: StatusCode, body: &impl serde::Serialize) -> Response<Full<Bytes>> {
    // Values and plain structs always serialize.
    let text = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
