//! An embedded mock of the service, served on loopback for `lanyard demo`
//! and the test suite.
//!
//! Its token endpoint verifies assertions strictly (RFC 7523 §3) and can be
//! told to fail in every way lanyard classifies. The mock imports nothing
//! from the client side (`token`, `credentials`, ...): what it checks is
//! written out here, so a mistake in the client cannot pass on both sides.
//! Its API (under [`API_PREFIX`]) authenticates the bearer token, enforces
//! the authorization model of docs/service.md §5.4, and serves verification
//! sessions and the issuance operations; a simulated wallet (under
//! [`WALLET_PREFIX`]) completes sessions, as JSON for scripts and as a page
//! a person clicks through for the verifier's demo. "The shop" (under
//! [`SHOP_PREFIX`]) is the demo's relying party: a page that logs a person
//! in with the verifier's OpenID Connect provider. Payload shapes
//! docs/service.md leaves unspecified are illustrative; `docs/mock-service.md` documents
//! every endpoint.
//!
//! - this file: [`MockService`], the handle tests and the demo hold, the
//!   accept loop, and the routing to the four surfaces.
//! - `token`: the token endpoint, its faults and its assertion checks.
//! - `api`: the API's authentication, authorization and routing, and the
//!   tables of the surfaces it dispatches to:
//!   - `verification`: rules and sessions on the rule path, and the
//!     simulated wallet that completes them (`wallet_page`: its page);
//!   - `issuance`: the credential items and their state moves.
//! - `shop/`: the relying party, which shares nothing with the rest: it
//!   talks to its provider over HTTP like any other site.
//! - `accounts`: the accounts the mock knows and the tokens it issued
//!   them, which the token endpoint and the API share, and the counters.
//! - `surface`: the HTTP conventions every surface shares: paths, JSON
//!   replies, error answers, body reading, the path's scope, and the
//!   frame of the pages a browser sees (the wallet's, the shop's).
//! - `table`: the lock the tables sit behind.
//! - `keys`: key pairs for the demo's account.
//!
//! Imports run down this list and never back up: each surface owns its
//! state and is handed what it shares; `surface` and `table` import nothing
//! of the mock.

mod accounts;
mod api;
mod issuance;
mod keys;
mod shop;
mod surface;
mod table;
mod token;
mod verification;
mod wallet_page;

use std::net::SocketAddr;
use std::sync::Arc;
#[cfg(feature = "test-support")]
use std::time::SystemTime;

use http::{Request, StatusCode};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
#[cfg(feature = "test-support")]
use tokio::sync::{broadcast, watch};
use tokio::task::JoinSet;
use tracing::Instrument;

pub use accounts::{MockAccount, MockCounters};
pub use api::{ApiRequestLog, CREDENTIALS_ROLE, VERIFICATIONS_ROLE};
pub use keys::{GeneratedKey, generate_rsa_key};
pub use shop::{AGE_SCOPE as SHOP_AGE_SCOPE, ShopClient};
pub use surface::{API_PREFIX, SHOP_PREFIX, TOKEN_PATH, WALLET_PREFIX};
pub use token::{DEFAULT_EXPIRES_IN, Fault, TokenEvent, TokenRequestLog};

use accounts::Accounts;
use api::Api;
use shop::Shop;
use surface::{Disconnect, Reply, json};
use token::Endpoint;

/// What the mock serves from, each part owned by the module that serves it.
struct Mock {
    accounts: Accounts,
    token: Endpoint,
    api: Api,
    shop: Shop,
    /// The mock's own base URL, for the links it hands out.
    base_url: String,
}

/// A running mock service. Dropping it stops the server.
pub struct MockService {
    mock: Arc<Mock>,
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
        let mock = Arc::new(Mock {
            accounts: Accounts::new(),
            token: Endpoint::new(format!("{base_url}/iam")),
            api: Api::new(base_url.clone()),
            shop: Shop::new(base_url.clone()),
            base_url,
        });
        let mut tasks = JoinSet::new();
        tasks.spawn(
            accept_loop(listener, tls, mock.clone())
                .instrument(tracing::info_span!("mock_service")),
        );
        MockService {
            mock,
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
        self.mock.base_url.clone()
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
        self.mock.token.audience().to_string()
    }

    pub fn add_account(&self, account: MockAccount) {
        self.mock
            .accounts
            .lock()
            .accounts
            .insert(account.client_id.clone(), account);
    }

    /// Queues a fault for the next token request.
    #[cfg(feature = "test-support")]
    pub fn push_fault(&self, fault: Fault) {
        self.mock.token.push_fault(fault);
    }

    /// With `true`, the token endpoint answers every request with 503
    /// until switched off again: an outage, as opposed to the one-shot
    /// [`push_fault`](Self::push_fault). Queued faults wait for it to end.
    /// Tokens already issued stay valid at the API.
    #[cfg(feature = "test-support")]
    pub fn set_token_outage(&self, on: bool) {
        self.mock.token.set_outage(on);
    }

    /// Sets the `expires_in` of issued tokens; `None` omits the field.
    #[cfg(feature = "test-support")]
    pub fn set_expires_in(&self, seconds: Option<i64>) {
        self.mock.token.set_expires_in(seconds);
    }

    /// Makes every token issued so far unknown, as if revoked.
    #[cfg(feature = "test-support")]
    pub fn revoke_all_tokens(&self) {
        self.mock.accounts.lock().tokens.clear();
    }

    /// With `true`, every token issued from now on is revoked the moment
    /// it is issued: the token endpoint grants it, the API answers 401 to
    /// it. Together with [`revoke_all_tokens`](Self::revoke_all_tokens),
    /// an API that rejects every token.
    #[cfg(feature = "test-support")]
    pub fn set_revoke_on_issue(&self, revoke: bool) {
        self.mock.token.set_revoke_on_issue(revoke);
    }

    /// Makes every token issued so far expired, so the API answers 401
    /// saying so. Tokens issued later live their normal lifetime.
    #[cfg(feature = "test-support")]
    pub fn expire_all_tokens(&self) {
        let now = SystemTime::now();
        for token in self.mock.accounts.lock().tokens.values_mut() {
            token.expires_at = token.expires_at.min(now);
        }
    }

    /// Registers a published verification rule in a project, as the
    /// Portal's Generate ID and Publish rule actions do (docs/service.md §3.1). The
    /// rule id should be a UUID; one that parses as a UUID matches its
    /// path segment in any case. Registering an id again publishes it.
    pub fn add_rule(&self, project_id: impl Into<String>, rule_id: impl Into<String>) {
        let verifications = self.mock.api.verifications();
        verifications.add_rule(project_id.into(), rule_id.into(), true, None);
    }

    /// Registers a published rule whose sessions' wallet presents
    /// `claims` (a JSON object) when told none: several rules, each
    /// asking for its own credential (docs/mock-service.md).
    pub fn add_rule_presenting(
        &self,
        project_id: impl Into<String>,
        rule_id: impl Into<String>,
        claims: serde_json::Map<String, serde_json::Value>,
    ) {
        let verifications = self.mock.api.verifications();
        verifications.add_rule(project_id.into(), rule_id.into(), true, Some(claims));
    }

    /// The rule paths the latest sessions were started on (at most 256),
    /// oldest first: `/organizations/{org}/projects/{project}/verifications/{rule}`.
    #[cfg(feature = "test-support")]
    pub fn sessions_started_on(&self) -> Vec<String> {
        self.mock.api.verifications().started_on()
    }

    /// Registers a rule that has its id but is not yet published: the API
    /// answers 404 for it, since only a published rule is usable at runtime.
    #[cfg(feature = "test-support")]
    pub fn add_draft_rule(&self, project_id: impl Into<String>, rule_id: impl Into<String>) {
        let verifications = self.mock.api.verifications();
        verifications.add_rule(project_id.into(), rule_id.into(), false, None);
    }

    /// The mock wallet's base URL: the demo's `WALLET_BASE_URL`, whose
    /// page a person presents or declines on.
    pub fn wallet_url(&self) -> String {
        format!("{}{WALLET_PREFIX}", self.mock.base_url)
    }

    /// Makes "the shop" a client of an OpenID Connect provider, replacing
    /// any before: the provider must know `shop.client_id` with
    /// `shop.client_secret` and [`shop_redirect_uri`](Self::shop_redirect_uri).
    /// Until then the shop's pages say it is not set up.
    pub fn set_shop(&self, shop: ShopClient) {
        self.mock.shop.set_client(shop);
    }

    /// Whether [`set_shop`](Self::set_shop) made the shop a client.
    pub fn shop_configured(&self) -> bool {
        self.mock.shop.configured()
    }

    /// The shop's page, `{base}/shop/`, where a person logs in.
    pub fn shop_url(&self) -> String {
        self.mock.shop.url()
    }

    /// The redirect URI to register for the shop: `{base}/shop/callback`.
    pub fn shop_redirect_uri(&self) -> String {
        self.mock.shop.redirect_uri()
    }

    /// Where the simulated wallet presents a credential for a session.
    #[cfg(feature = "test-support")]
    pub fn wallet_present_url(&self, transaction_id: &str) -> String {
        self.mock
            .api
            .verifications()
            .wallet_url(transaction_id, "/present")
    }

    /// The most recent request that reached the API, as it arrived.
    #[cfg(feature = "test-support")]
    pub fn last_api_request(&self) -> Option<ApiRequestLog> {
        self.mock.api.last_request()
    }

    #[cfg(feature = "test-support")]
    pub fn counters(&self) -> MockCounters {
        self.mock.accounts.counters()
    }

    /// Watch the counters to await an event without sleeping.
    #[cfg(feature = "test-support")]
    pub fn watch_counters(&self) -> watch::Receiver<MockCounters> {
        self.mock.accounts.watch_counters()
    }

    /// Every token request answered from now on, one event each, in
    /// order. A subscriber more than a few thousand events behind misses
    /// the oldest and is told how many (`RecvError::Lagged`).
    #[cfg(feature = "test-support")]
    pub fn token_events(&self) -> broadcast::Receiver<TokenEvent> {
        self.mock.token.events()
    }

    /// The most recent token request that was granted.
    #[cfg(feature = "test-support")]
    pub fn last_accepted(&self) -> Option<TokenRequestLog> {
        self.mock.token.last_accepted()
    }

    /// The client id a live token was issued to, if it is one.
    #[cfg(feature = "test-support")]
    pub fn token_owner(&self, token: &str) -> Option<String> {
        self.mock
            .accounts
            .lock()
            .tokens
            .get(token)
            .filter(|t| t.expires_at > SystemTime::now())
            .map(|t| t.client_id.clone())
    }
}

/// A connection's failure, as the server saw it.
pub type ConnectionError = Box<dyn std::error::Error + Send + Sync>;

/// Serves one accepted connection, HTTP/1.1 or HTTP/2, in plain text or
/// behind `acceptor`'s TLS: the mock's, and the test servers' (the
/// integration tests' upstream and OTLP collector).
pub async fn serve_connection<S, B>(
    stream: tokio::net::TcpStream,
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    service: S,
) -> Result<(), ConnectionError>
where
    S: hyper::service::Service<Request<Incoming>, Response = http::Response<B>> + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<ConnectionError>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<ConnectionError>,
{
    let builder = auto::Builder::new(TokioExecutor::new());
    match acceptor {
        Some(acceptor) => {
            let tls = acceptor.accept(stream).await?;
            builder.serve_connection(TokioIo::new(tls), service).await
        }
        None => {
            builder
                .serve_connection(TokioIo::new(stream), service)
                .await
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<Arc<rustls::ServerConfig>>,
    mock: Arc<Mock>,
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
        let mock = mock.clone();
        let acceptor = acceptor.clone();
        connections.spawn(async move {
            let service = service_fn(move |req| {
                let mock = mock.clone();
                async move { route(&mock, req).await }
            });
            if let Err(err) = serve_connection(stream, acceptor, service).await {
                tracing::debug!(error = %err, "mock connection ended");
            }
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
}

async fn route(mock: &Mock, req: Request<Incoming>) -> Result<Reply, Disconnect> {
    let path = req.uri().path();
    if path == TOKEN_PATH {
        return mock.token.handle(&mock.accounts, req).await;
    }
    if under(path, API_PREFIX) {
        return Ok(mock.api.handle(&mock.accounts, req).await);
    }
    if under(path, WALLET_PREFIX) {
        return Ok(verification::wallet(mock.api.verifications(), req).await);
    }
    if under(path, SHOP_PREFIX) {
        return Ok(mock.shop.handle(req).await);
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
