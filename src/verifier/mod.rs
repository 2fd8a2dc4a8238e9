//! `lanyard verifier`: the service's reference verification application
//! (docs/service.md §4.2), a page and its backend, on lanyard's own token
//! machinery (docs/verifier.md).
//!
//! The browser talks only to lanyard, which holds every secret: it starts
//! a session with the service for `RULE_ID` (`POST /api/start`), shows the
//! QR code or the wallet button, and polls (`GET /api/status`) until the
//! wallet has presented to the service, then shows the claims.
//!
//! No session lives in a replica: any replica with the same settings
//! answers any session, through restarts (docs/verifier.md "Running many").
//!
//! - `api`: the two calls, `/api/start` and `/api/status`.
//! - `assumptions`: what docs/service.md does not show, each assumption once.
//! - `service`: the calls to the service, with the token and its 401 rule.
//! - `binding`: the sealed handle and the signed cookie that bind a
//!   session to its page and browser, and the keys they are made with.
//! - `clock`: the time the API reads, which tests may put ahead.
//! - `polls`: what one replica remembers to spare the service: the poll
//!   spacing, the call in flight, the ending; bounded.
//! - `limits`: how fast sessions may be started, per client and in all.
//! - `page`: the page's files, its headers, the QR code, and lanyard's
//!   own pages (a refused login, a path with no page).
//! - `i18n`: the page's languages, the one a request gets, and the forms
//!   of the messages the page's script picks by a count or a code.
//! - `errors`: the API's error answers, and every code the page can be
//!   given.
//! - `logs`: the operator's lines about failed calls to the service.
//! - `oidc`: the OpenID Connect provider, when `LANYARD_OIDC_ISSUER` is
//!   set (docs/oidc.md).

mod api;
mod assumptions;
mod binding;
mod clock;
mod errors;
mod i18n;
mod limits;
mod logs;
mod oidc;
mod page;
mod polls;
mod service;

pub use assumptions::{Claims, MAX_CLAIMS_BYTES, MAX_REQUEST_URI};
pub use binding::MAX_HANDLE;
pub use clock::Clock;
pub use oidc::{MAX_ACCESS_TOKEN, USERINFO_PER_MINUTE};
pub use page::{CONTENT_SECURITY_POLICY, PERMISSIONS_POLICY, security_headers};
pub use polls::{MAX_SESSIONS, SERVICE_POLL_SPACING};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use tokio::sync::Semaphore;

use crate::access::ServiceAccess;
use crate::config::{RulePath, VerifierConfig, VerifierSetup, WalletBaseUrl};
use crate::failure::Failure;
use crate::metrics::Metrics;
use crate::server::{Abort, Handler, Peer};
use crate::target::TargetUrl;
use crate::throttle::{self, Throttle};
use crate::token::TokenHandle;

use assumptions::Ending;
use binding::KeySource;
use errors::Refusal;
use errors::VerifierError;
use i18n::Asked;
use limits::{ServiceBudget, StartLimits};
use polls::Polls;
use service::ServiceApi;

/// The cookie that binds a session to the browser that started it, over
/// plain http (the demo, or a proxy that does not say https).
pub const COOKIE: &str = "lanyard_verifier";
/// The same over https, as a trusted proxy reports it: the `__Host-`
/// prefix makes the browser refuse one set by a sibling subdomain or over
/// plain http (RFC 6265bis §4.1.3.2).
pub const SECURE_COOKIE: &str = "__Host-lanyard_verifier";
/// Calls to the service in flight at once, starts and polls together;
/// beyond it a start waits for a slot and a poll answers what is known.
/// Each is a connection and a file descriptor while the service is slow.
pub const MAX_SERVICE_CALLS: usize = 64;
/// How often sessions past their lifetime are forgotten, claims and all,
/// and idle clients dropped from the rate limiter.
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// What one verifier serves: its configuration, the service it calls,
/// the deployment's rule and wallet, and the clock its API reads. For
/// `lanyard verifier` these are the settings' ([`Serving::of_setup`]);
/// the demo's are its mock's.
#[derive(Debug, Clone)]
pub struct Serving {
    pub config: VerifierConfig,
    /// The service's API base URL (`SERVICE_API_URL`).
    pub service: TargetUrl,
    pub rule_path: RulePath,
    pub wallet: WalletBaseUrl,
    pub clock: Clock,
}

impl Serving {
    /// `lanyard verifier`'s.
    pub fn of_setup(setup: &VerifierSetup) -> Serving {
        Serving::new(
            setup.verifier.clone(),
            setup.upstream.clone(),
            setup.rule_path.clone(),
            setup.wallet.clone(),
        )
    }

    /// A verifier of `rule_path` at `service`, on tokio's clock.
    pub fn new(
        config: VerifierConfig,
        service: TargetUrl,
        rule_path: RulePath,
        wallet: WalletBaseUrl,
    ) -> Serving {
        Serving {
            config,
            service,
            rule_path,
            wallet,
            clock: Clock::default(),
        }
    }
}

/// The page and its API. Cheap to clone; every clone shares the sessions.
#[derive(Clone)]
pub struct Verifier {
    inner: Arc<Inner>,
}

struct Inner {
    service: ServiceApi,
    wallet: WalletBaseUrl,
    session_ttl: Duration,
    keys: KeySource,
    polls: Mutex<Polls>,
    limits: StartLimits,
    /// Calls to the service, starts and polls together.
    budget: ServiceBudget,
    /// Trusted proxies in front, for the client's address.
    forwarded_hops: usize,
    /// Slots for calls to the service ([`MAX_SERVICE_CALLS`]).
    calls: Semaphore,
    metrics: Metrics,
    /// Failures that repeat for every session, logged once a minute.
    repeating: Throttle,
    /// Handles no session key opened, said once a minute.
    unopened: Throttle,
    oidc: Option<oidc::Provider>,
    /// The page, in every language.
    pages: page::Pages,
    brand: Option<Arc<crate::config::brand::Brand>>,
    /// The clients' own brands, for their logins' pages.
    client_brands: page::ClientBrands,
    clock: Clock,
}

impl Verifier {
    pub fn new(
        serving: &Serving,
        access: &ServiceAccess,
        tokens: TokenHandle,
        metrics: Metrics,
    ) -> Result<Verifier, Failure> {
        let settings = &serving.config;
        let service = ServiceApi::new(
            access.connector.clone(),
            &serving.service,
            &serving.rule_path,
            tokens,
            settings.service_timeout,
            metrics.clone(),
        )
        .map_err(Failure::Runtime)?;
        let oidc = match &settings.oidc {
            None => None,
            Some(config) => Some(
                oidc::Provider::new(config, settings.signing_timeout, metrics.oidc.clone())
                    .map_err(Failure::Runtime)?,
            ),
        };
        let languages = i18n::Languages::load().map_err(Failure::Runtime)?;
        Ok(Verifier {
            inner: Arc::new(Inner {
                pages: page::Pages::render(languages, settings.brand.as_deref()),
                brand: settings.brand.clone(),
                client_brands: page::ClientBrands::new(
                    settings.oidc.as_ref().map(|oidc| &*oidc.clients),
                ),
                service,
                wallet: serving.wallet.clone(),
                session_ttl: settings.session_ttl,
                keys: match &settings.session_key {
                    Some(given) => KeySource::given(given),
                    None => KeySource::derived(access.exchanger.clone()),
                },
                polls: Mutex::new(Polls::default()),
                limits: StartLimits::new(&settings.rates),
                budget: ServiceBudget::new(settings.rates.service_calls),
                forwarded_hops: settings.forwarded_hops,
                calls: Semaphore::new(MAX_SERVICE_CALLS),
                metrics,
                repeating: Throttle::new(throttle::EVERY_MINUTE),
                unopened: Throttle::new(throttle::EVERY_MINUTE),
                oidc,
                clock: serving.clock.clone(),
            }),
        })
    }

    /// Forgets ended sessions and idle clients every few seconds, for as
    /// long as the verifier is in use; call within its runtime.
    pub fn spawn_sweeper(&self) {
        let inner = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(SWEEP_INTERVAL);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(inner) = inner.upgrade() else { return };
                polls::lock(&inner.polls).sweep(inner.clock.now());
                inner.limits.forget_idle_clients();
                if let Some(provider) = &inner.oidc {
                    provider.sweep();
                }
            }
        });
    }
}

impl Inner {
    fn count(&self, outcome: &str) {
        self.metrics
            .verifier_sessions
            .with_label_values(&[outcome])
            .inc();
    }

    /// An ending this replica saw first (docs/verifier.md "Running many"
    /// says how that sums over replicas).
    fn count_ending(&self, ending: Option<&Ending>) {
        if let Some(ending) = ending {
            self.count(ending.outcome());
        }
    }
}

impl Handler for Verifier {
    type Body = Full<Bytes>;

    async fn handle(
        &self,
        req: Request<Incoming>,
        client: Peer,
    ) -> Result<Response<Full<Bytes>>, Abort> {
        self.serve(req, client).await
    }
}

impl Verifier {
    /// One request, whatever its body: the server's handler, and what the
    /// unit tests call without a socket (`tests.rs`).
    pub async fn serve<B>(
        &self,
        req: Request<B>,
        client: Peer,
    ) -> Result<Response<Full<Bytes>>, Abort>
    where
        B: hyper::body::Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let inner = &self.inner;
        let provider = inner.oidc.as_ref();
        let (base, path) = split_base(req.uri().path(), provider.map(oidc::Provider::path));
        let (base, path) = (base.to_string(), path.to_string());
        let head = req.method() == Method::HEAD;
        let https = api::forwarded_https(req.headers(), inner.forwarded_hops);
        let endpoint =
            provider.and_then(|p| (base == p.path()).then(|| oidc::Endpoint::of(&path))?);
        let answer = if let (Some(provider), Some(endpoint)) = (provider, endpoint) {
            inner.oidc(provider, endpoint, req, client.ip()).await
        } else if let Some(api) = path.strip_prefix("/api/") {
            if cross_site(req.headers()) {
                Err(VerifierError::CrossSite.into())
            } else {
                match (api, req.method()) {
                    ("start", &Method::POST) => inner.start(req, client, &base).await,
                    ("start", _) => Err(VerifierError::MethodNotAllowed { allow: "POST" }.into()),
                    ("status", &Method::GET | &Method::HEAD) => inner.status(&req).await,
                    ("status", _) => {
                        Err(VerifierError::MethodNotAllowed { allow: "GET, HEAD" }.into())
                    }
                    _ => Err(VerifierError::NoSuchPath.into()),
                }
            }
        } else if req.method() == Method::GET || head {
            // Under the issuer's path, only the page's files: its page is
            // the authorization endpoint's.
            let lang = lang_of(req.uri().query());
            let asked = Asked {
                lang: lang.as_deref(),
                ui_locales: None,
                accept_language: accept_language(req.headers()),
            };
            if path == "/" && base.is_empty() {
                Ok(page::page(inner.pages.choose(asked), head))
            } else if let Some(branded) = inner
                .brand
                .as_deref()
                .and_then(|brand| page::brand_asset(brand, &path, head))
                .or_else(|| inner.client_brands.file(&path, head))
            {
                Ok(branded)
            } else {
                Ok(page::asset(&path).map_or_else(
                    || page::not_found(&inner.pages, asked, &base, head),
                    |a| a.response(head),
                ))
            }
        } else {
            Err(VerifierError::MethodNotAllowed { allow: "GET, HEAD" }.into())
        };
        let mut response = match answer {
            Ok(response) => response,
            Err(Refusal::Answer(error)) => error.response(),
            Err(Refusal::Abort) => return Err(Abort),
        };
        page::secure(response.headers_mut(), https);
        Ok(response)
    }
}

/// The language a page's switch asked for: `?lang=`.
fn lang_of(query: Option<&str>) -> Option<String> {
    form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "lang")
        .map(|(_, value)| value.into_owned())
}

fn accept_language(headers: &http::HeaderMap) -> Option<&str> {
    headers
        .get(http::header::ACCEPT_LANGUAGE)
        .and_then(|value| value.to_str().ok())
}

/// The issuer's path (`/wallet`) and the rest, when `path` is under it,
/// where the provider's endpoints and the page's files and API are; else
/// `""` and the path.
fn split_base<'a>(path: &'a str, issuer_path: Option<&'a str>) -> (&'a str, &'a str) {
    match issuer_path {
        Some(prefix) if !prefix.is_empty() => match path.strip_prefix(prefix) {
            Some(rest) if rest.starts_with('/') => (prefix, rest),
            _ => ("", path),
        },
        _ => ("", path),
    }
}

/// Another site's page calling this API: its browser says so (Fetch
/// Metadata). Clients that send no such header are not browsers, and a
/// cookie-bound session gives them nothing they could not start themselves.
fn cross_site(headers: &http::HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|site| site != "same-origin" && site != "none")
}

#[cfg(test)]
mod tests;

impl Inner {
    /// A handle of the right form that no session key opened: a forged
    /// one, one sealed under a key rotated out, or, every poll, one sealed
    /// by a replica whose `LANYARD_VERIFIER_SESSION_KEY` differs from this
    /// one's. Counted, and said once a minute, since the last fails every
    /// session the load balancer sends elsewhere, and nothing else would
    /// say why (docs/verifier.md "Running many").
    pub(super) fn unopened_handle(&self) {
        self.metrics.verifier_handles_unopened.inc();
        if let Some(held_back) = self.unopened.due(tokio::time::Instant::now()) {
            tracing::warn!(
                held_back,
                "a session handle none of this replica's session keys opened; if replicas share sessions behind one load balancer, give them all the same LANYARD_VERIFIER_SESSION_KEY. Counted in lanyard_verifier_handles_unopened_total, said at most once a minute"
            );
        }
    }
}
