//! An embedded mock of the service (CONTRACT §8), served on loopback for
//! `lanyard demo` and the test suite.
//!
//! Its token endpoint verifies assertions as strictly as the seed specifies
//! and can be told to fail in every way lanyard classifies. Payload shapes
//! the seed leaves unspecified are illustrative.

mod keys;
mod token;

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
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

pub use keys::{GeneratedKey, generate_rsa_key};
pub use token::TokenRequestLog;

/// The token endpoint's path on the mock.
pub const TOKEN_PATH: &str = "/oauth2/token";
/// The API's path prefix on the mock: `SERVICE_API_URL` is `{mock}/api`.
pub const API_PREFIX: &str = "/api";
/// Short, so the demo shows renewals happening.
pub const DEFAULT_EXPIRES_IN: i64 = 120;

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

#[derive(Debug, Default)]
struct Inner {
    accounts: HashMap<String, MockAccount>,
    seen_jti: HashMap<String, u64>,
    tokens: HashMap<String, IssuedToken>,
    faults: VecDeque<Fault>,
    /// `None`: omit `expires_in` from token responses.
    expires_in: Option<i64>,
    last_accepted: Option<TokenRequestLog>,
    refusals: Vec<String>,
}

/// Counters tests can await instead of sleeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockCounters {
    /// Requests that reached the token endpoint, faults included.
    pub token_requests: u64,
    /// Tokens issued.
    pub tokens_issued: u64,
}

pub(crate) struct State {
    inner: Mutex<Inner>,
    counters: watch::Sender<MockCounters>,
    audience: String,
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
    scheme: &'static str,
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
        let host = if tls.is_some() {
            "localhost"
        } else {
            "127.0.0.1"
        };
        let state = Arc::new(State {
            inner: Mutex::new(Inner {
                expires_in: Some(DEFAULT_EXPIRES_IN),
                ..Inner::default()
            }),
            counters: watch::Sender::new(MockCounters::default()),
            audience: format!("{scheme}://{host}:{}/iam", addr.port()),
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(
            accept_loop(listener, tls, state.clone())
                .instrument(tracing::info_span!("mock_service")),
        );
        MockService {
            state,
            addr,
            scheme,
            _tasks: tasks,
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` (or `https://localhost:PORT` with TLS, so the
    /// name matches a test certificate).
    pub fn base_url(&self) -> String {
        let host = if self.scheme == "https" {
            "localhost"
        } else {
            "127.0.0.1"
        };
        format!("{}://{host}:{}", self.scheme, self.addr.port())
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

    /// Sets the `expires_in` of issued tokens; `None` omits the field.
    pub fn set_expires_in(&self, seconds: Option<i64>) {
        self.state.lock().expires_in = seconds;
    }

    /// Makes every token issued so far unknown, as if revoked.
    pub fn revoke_all_tokens(&self) {
        self.state.lock().tokens.clear();
    }

    pub fn counters(&self) -> MockCounters {
        *self.state.counters.borrow()
    }

    /// Watch the counters to await an event without sleeping.
    pub fn watch_counters(&self) -> watch::Receiver<MockCounters> {
        self.state.counters.subscribe()
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
                tracing::warn!(error = %err, "mock accept failed");
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
    if req.uri().path() == TOKEN_PATH {
        return token::handle(state, req).await;
    }
    Ok(json(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"error": "not_found", "message": "no such path on the mock service"}),
    ))
}

pub(crate) fn json(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}
