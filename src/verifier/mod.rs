//! `lanyard verifier`: the seed's reference verification application
//! (docs/service.md §4.2), a page and its backend, on lanyard's own token
//! machinery (README "The verifier").
//!
//! The browser talks only to lanyard, which holds every secret: it starts
//! a session with the service for `RULE_ID` (`POST /api/start`), shows the
//! QR code or the wallet button, and polls (`GET /api/status`) until the
//! wallet has presented to the service, then shows the claims.
//!
//! - `assumptions`: what the seed does not show, each assumption once.
//! - `service`: the calls to the service, with the token and its 401 rule.
//! - `sessions`: the sessions started, bound to their browser, bounded.
//! - `limits`: how fast sessions may be started, per client and in all.
//! - `page`: the page's files, its headers, the QR code.
//! - `errors`: the API's error answers.

mod assumptions;
mod errors;
mod limits;
mod page;
mod service;
mod sessions;

pub use assumptions::{Claims, MAX_CLAIMS_BYTES, MAX_REQUEST_URI};
pub use page::CONTENT_SECURITY_POLICY;
pub use sessions::{MAX_PENDING_PER_BROWSER, MAX_SESSIONS, SERVICE_POLL_SPACING};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::json;

use crate::Failure;
use crate::config::{Config, WalletBaseUrl};
use crate::metrics::Metrics;
use crate::outbound::Connector;
use crate::server::{Abort, Handler};
use crate::target::TargetUrl;
use crate::token::TokenHandle;

use assumptions::{Progress, Started};
use errors::VerifierError;
use limits::{Client, Refused, StartLimits};
use service::{CallError, ServiceApi};
use sessions::{Browser, Ending, Lookup, Sessions};

/// The cookie that binds a session to the browser that started it.
pub const COOKIE: &str = "lanyard_verifier";
/// `/api/start` takes no input; a body beyond this is not the page's.
const MAX_START_BODY: usize = 1024;
/// How often sessions past their lifetime are forgotten, claims and all,
/// and idle clients dropped from the rate limiter.
const SWEEP_INTERVAL: Duration = Duration::from_secs(5);

/// What the verifier is configured with, beyond the token machinery.
#[derive(Debug, Clone)]
pub struct VerifierSettings {
    /// `/organizations/{ORG}/projects/{PROJECT}/verifications/{RULE}`.
    pub rule_path: String,
    pub wallet: WalletBaseUrl,
    pub session_ttl: Duration,
}

impl VerifierSettings {
    /// From the settings, the organization falling back to the
    /// credentials' as `SA_ORGANIZATION_ID` falls back to `ORG_ID`.
    pub fn from_config(config: &Config, organization_id: &str) -> Result<Self, Failure> {
        let missing = |what: &str| Failure::Runtime(format!("{what} is not set"));
        let org = config.org_id.as_deref().unwrap_or(organization_id);
        let project = config
            .project_id
            .as_deref()
            .ok_or_else(|| missing("PROJECT_ID"))?;
        let rule = config
            .rule_id
            .as_deref()
            .ok_or_else(|| missing("RULE_ID"))?;
        let wallet = config
            .wallet_base_url
            .clone()
            .ok_or_else(|| missing("WALLET_BASE_URL"))?;
        Ok(VerifierSettings {
            rule_path: format!("/organizations/{org}/projects/{project}/verifications/{rule}"),
            wallet,
            session_ttl: config.verifier_session_ttl,
        })
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
    sessions: Mutex<Sessions>,
    limits: StartLimits,
    metrics: Metrics,
    body_timeout: Duration,
}

impl Verifier {
    pub fn new(
        settings: &VerifierSettings,
        base: &TargetUrl,
        connector: Connector,
        tokens: TokenHandle,
        metrics: Metrics,
        upstream_timeout: Duration,
        body_timeout: Duration,
    ) -> Result<Verifier, Failure> {
        let service = ServiceApi::new(
            connector,
            base,
            &settings.rule_path,
            tokens,
            upstream_timeout,
            metrics.clone(),
        )
        .map_err(Failure::Runtime)?;
        Ok(Verifier {
            inner: Arc::new(Inner {
                service,
                wallet: settings.wallet.clone(),
                sessions: Mutex::new(Sessions::new(settings.session_ttl)),
                limits: StartLimits::new(),
                metrics,
                body_timeout,
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
                let endings = inner.sessions().sweep(Instant::now());
                inner.count_all(&endings);
                inner.limits.forget_idle_clients();
            }
        });
    }
}

impl Inner {
    /// The table; a panic elsewhere while it was held leaves it usable,
    /// since every change to it is one step.
    fn sessions(&self) -> MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn count(&self, outcome: &str) {
        self.metrics
            .verifier_sessions
            .with_label_values(&[outcome])
            .inc();
    }

    fn count_all(&self, endings: &[Ending]) {
        for ending in endings {
            self.count(ending.outcome());
        }
    }

    async fn start(
        &self,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> Result<Response<Full<Bytes>>, Answer> {
        let (parts, body) = req.into_parts();
        let declared = parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > MAX_START_BODY as u64) {
            return Err(VerifierError::BodyTooLarge.into());
        }
        match tokio::time::timeout(
            self.body_timeout,
            Limited::new(body, MAX_START_BODY).collect(),
        )
        .await
        {
            Ok(Ok(_)) => {}
            Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => {
                return Err(VerifierError::BodyTooLarge.into());
            }
            // Gone, or stalled: no one to answer.
            Ok(Err(_)) | Err(_) => return Err(Answer::Abort),
        }
        let cookie = browser_of(&parts.headers);
        let browser = cookie.clone().unwrap_or_else(Browser::random);

        self.limits
            .take(Client::of(client.ip()))
            .map_err(|refused| {
                let (retry_after, who) = match refused {
                    Refused::Client { retry_after } => (retry_after, "this client"),
                    Refused::Everyone { retry_after } => (retry_after, "all clients together"),
                };
                tracing::debug!(%client, who, "verification start refused: rate limit");
                VerifierError::RateLimited { retry_after }
            })?;
        {
            let mut sessions = self.sessions();
            if !sessions.has_room() {
                let endings = sessions.sweep(Instant::now());
                self.count_all(&endings);
            }
            if !sessions.has_room() {
                tracing::warn!(
                    sessions = sessions.len(),
                    "the verifier holds as many sessions as it allows; refusing new ones until some end"
                );
                return Err(VerifierError::Busy.into());
            }
        }

        let Started {
            transaction_id,
            request_uri,
        } = self.service.start().await.map_err(|err| {
            self.log_call_failure("start", &err);
            self.count("failed");
            VerifierError::from_call(&err)
        })?;
        let Some(qr_svg) = page::qr_svg(&request_uri) else {
            // request_uri's bound keeps it within a QR code's capacity.
            tracing::warn!("the service's request_uri does not fit a QR code");
            self.count("failed");
            return Err(VerifierError::ServiceFailed.into());
        };
        let now = Instant::now();
        let inserted = self
            .sessions()
            .insert(transaction_id.clone(), &browser, now);
        let (expires, endings) = inserted.map_err(|_| {
            self.count("failed");
            VerifierError::Busy
        })?;
        self.count("started");
        self.count_all(&endings);
        tracing::info!(transaction_id, "verification session started");

        let body = json!({
            "transaction_id": transaction_id,
            "request_uri": request_uri,
            "wallet_url": assumptions::wallet_url(&self.wallet, &request_uri),
            "qr_svg": qr_svg,
            "expires_in": expires.saturating_duration_since(now).as_secs(),
        });
        let mut response = json_answer(StatusCode::OK, &body);
        if cookie.is_none() {
            let secure = forwarded_https(&parts.headers);
            response
                .headers_mut()
                .insert(header::SET_COOKIE, set_cookie(&browser, secure));
        }
        Ok(response)
    }

    async fn status(&self, req: &Request<Incoming>) -> Result<Response<Full<Bytes>>, Answer> {
        let id = transaction_id_of(req.uri().query())?;
        let browser = browser_of(req.headers()).ok_or(VerifierError::UnknownSession)?;
        let expires = {
            let mut sessions = self.sessions();
            let (lookup, newly) = sessions.lookup(&id, &browser, Instant::now());
            if let Some(ending) = &newly {
                self.count(ending.outcome());
            }
            match lookup {
                Lookup::Unknown => return Err(VerifierError::UnknownSession.into()),
                Lookup::Ended(ending) => return Ok(ended(ending)),
                Lookup::Pending {
                    ask: false,
                    expires,
                } => return Ok(pending(expires)),
                Lookup::Pending { ask: true, expires } => expires,
            }
        };
        let progress = match self.service.progress(&id).await {
            Ok(progress) => progress,
            // The service no longer knows the session: it ended there.
            Err(CallError::Refused(StatusCode::NOT_FOUND)) => Progress::Expired,
            Err(err) => {
                self.log_call_failure("poll", &err);
                let error = VerifierError::from_call(&err);
                // The account or rule refused: polling again cannot help.
                if matches!(
                    error,
                    VerifierError::ServiceRefusedAccount | VerifierError::RuleNotFound
                ) && let Some(ending) = self.sessions().record(&id, Progress::Failed)
                {
                    self.count(ending.outcome());
                }
                return Err(error.into());
            }
        };
        let mut sessions = self.sessions();
        if let Some(ending) = sessions.record(&id, progress) {
            tracing::info!(
                transaction_id = id,
                outcome = ending.outcome(),
                "verification session ended"
            );
            self.count(ending.outcome());
        }
        match sessions.lookup(&id, &browser, Instant::now()).0 {
            Lookup::Ended(ending) => Ok(ended(ending)),
            // Swept meanwhile: it had expired.
            Lookup::Unknown => Ok(ended(&Ending::Expired)),
            Lookup::Pending { .. } => Ok(pending(expires)),
        }
    }

    /// The operator's line: what failed and what to check, never what the
    /// service's body said.
    fn log_call_failure(&self, call: &'static str, err: &CallError) {
        let rule = self.service.rule();
        match err {
            CallError::Refused(StatusCode::UNAUTHORIZED) => tracing::warn!(
                call, %rule,
                "the service answered 401 even to a renewed token: check that the credentials belong to the environment SERVICE_API_URL names"
            ),
            CallError::Refused(StatusCode::FORBIDDEN) => tracing::warn!(
                call, %rule,
                "the service answered 403: the service account likely lacks the role verifications.api or membership of the project's group (seed §5.4, §7)"
            ),
            CallError::Refused(StatusCode::NOT_FOUND) => tracing::warn!(
                call, %rule,
                "the service answered 404 on the rule path: RULE_ID must be the UUID of a published rule of PROJECT_ID (seed §2.5, §3.1)"
            ),
            CallError::Malformed(why) => tracing::warn!(
                call, %rule, problem = %why,
                "the service's answer is not what lanyard assumes (README \"The verifier\", Assumptions)"
            ),
            other => {
                tracing::warn!(call, %rule, error = %other, "a call to the verification service failed")
            }
        }
    }
}

/// What a handler step ends with when it is not a success.
enum Answer {
    Error(VerifierError),
    /// The client is gone or stalled; close without an answer.
    Abort,
}

impl From<VerifierError> for Answer {
    fn from(error: VerifierError) -> Self {
        Answer::Error(error)
    }
}

impl Handler for Verifier {
    type Body = Full<Bytes>;

    async fn handle(
        &self,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> Result<Response<Full<Bytes>>, Abort> {
        let inner = &self.inner;
        let path = req.uri().path();
        let head = req.method() == Method::HEAD;
        let answer = if let Some(api) = path.strip_prefix("/api/") {
            if cross_site(req.headers()) {
                Err(VerifierError::CrossSite.into())
            } else {
                match (api, req.method()) {
                    ("start", &Method::POST) => inner.start(req, client).await,
                    ("start", _) => Err(VerifierError::MethodNotAllowed { allow: "POST" }.into()),
                    ("status", &Method::GET | &Method::HEAD) => inner.status(&req).await,
                    ("status", _) => {
                        Err(VerifierError::MethodNotAllowed { allow: "GET, HEAD" }.into())
                    }
                    _ => Err(VerifierError::NoSuchPath.into()),
                }
            }
        } else if req.method() == Method::GET || head {
            Ok(page::asset(path).map_or_else(|| page::not_found(head), |a| a.response(head)))
        } else {
            Err(VerifierError::MethodNotAllowed { allow: "GET, HEAD" }.into())
        };
        match answer {
            Ok(response) => Ok(response),
            Err(Answer::Error(error)) => Ok(error.response()),
            Err(Answer::Abort) => Err(Abort),
        }
    }
}

/// Another site's page calling this API: its browser says so (Fetch
/// Metadata). Clients that send no such header are not browsers, and a
/// cookie-bound session gives them nothing they could not start themselves.
fn cross_site(headers: &HeaderMap) -> bool {
    headers
        .get("sec-fetch-site")
        .is_some_and(|site| site != "same-origin" && site != "none")
}

/// The `transactionId` query parameter, given once and well-formed.
fn transaction_id_of(query: Option<&str>) -> Result<String, VerifierError> {
    let mut ids = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(name, _)| name == "transactionId")
        .map(|(_, value)| value.into_owned());
    let id = ids.next().ok_or(VerifierError::BadRequest(
        "transactionId is missing: GET /api/status?transactionId=<the id /api/start answered>",
    ))?;
    if ids.next().is_some() {
        return Err(VerifierError::BadRequest(
            "transactionId is given more than once.",
        ));
    }
    if !assumptions::is_transaction_id(&id) {
        return Err(VerifierError::BadRequest(
            "transactionId is malformed: 1 to 128 of A-Z a-z 0-9 - . _ ~",
        ));
    }
    Ok(id)
}

/// The browser the request's cookie names, if it carries one lanyard set.
fn browser_of(headers: &HeaderMap) -> Option<Browser> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .and_then(|(_, value)| Browser::from_cookie(value))
}

/// HttpOnly: the page's script never needs it. SameSite=Strict: another
/// site's page cannot send it. Path=/api: only the API reads it. Secure
/// when a proxy in front says the browser came over https; a browser on
/// plain http (the demo, on loopback) would otherwise drop it.
fn set_cookie(browser: &Browser, secure: bool) -> HeaderValue {
    let value = format!(
        "{COOKIE}={}; Path=/api; HttpOnly; SameSite=Strict{}",
        browser.as_str(),
        if secure { "; Secure" } else { "" }
    );
    // Hex and fixed text only.
    HeaderValue::from_str(&value).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"))
}

fn pending(expires: Instant) -> Response<Full<Bytes>> {
    let left = expires.saturating_duration_since(Instant::now()).as_secs();
    json_answer(
        StatusCode::OK,
        &json!({"status": "pending", "expires_in": left}),
    )
}

fn ended(ending: &Ending) -> Response<Full<Bytes>> {
    let body = match ending {
        Ending::Verified(claims) => json!({"status": "verified", "claims": claims}),
        other => json!({"status": other.outcome()}),
    };
    json_answer(StatusCode::OK, &body)
}

/// An API answer: JSON, never stored by a browser or a proxy, as a
/// verified one carries personal data.
fn json_answer(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    page::secure(headers);
    response
}

/// `lanyard verifier`: the verifier and the admin listener until SIGTERM
/// or SIGINT.
pub async fn run(config: &Config) -> Result<(), Failure> {
    use crate::sidecar::{Listeners, Sidecar, Signals, bind, bind_admin, stop_on_signals};

    let mut signals = Signals::install()?;
    let access = crate::access::ServiceAccess::from_config(config)?;
    let organization = access.exchanger.credentials().organization_id.clone();
    let settings = VerifierSettings::from_config(config, &organization)?;
    let listen = config.verifier_listen();
    let setting = match (config.verifier_listen_given, config.port) {
        (None, Some(_)) => "PORT",
        _ => "LANYARD_VERIFIER_LISTEN",
    };
    let listeners = Listeners {
        admin: bind_admin(config)?,
        proxy: None,
        verifier: Some((bind(listen, setting, config.max_connections)?, settings)),
    };
    let sidecar = Sidecar::start(config, access, listeners)?;
    stop_on_signals(sidecar, &mut signals).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_id_is_required_once_and_well_formed() {
        assert_eq!(
            transaction_id_of(Some("transactionId=abc-1")).unwrap(),
            "abc-1"
        );
        for (query, code) in [
            (None, "transactionId is missing"),
            (Some("transaction_id=abc"), "transactionId is missing"),
            (Some("transactionId=a&transactionId=b"), "more than once"),
            (Some("transactionId="), "malformed"),
            (Some("transactionId=..%2F..%2Fadmin"), "malformed"),
        ] {
            let Err(VerifierError::BadRequest(why)) = transaction_id_of(query) else {
                panic!("{query:?} was taken");
            };
            assert!(why.contains(code), "{query:?}: {why}");
        }
    }

    #[test]
    fn only_lanyard_s_cookie_names_a_browser() {
        let browser = Browser::random();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={}", browser.as_str())).unwrap(),
        );
        assert_eq!(browser_of(&headers), Some(browser));
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("lanyard_verifier=forged"),
        );
        assert_eq!(browser_of(&headers), None);
    }

    #[test]
    fn the_cookie_is_http_only_same_site_and_secure_behind_https() {
        let browser = Browser::random();
        let plain = set_cookie(&browser, false);
        let plain = plain.to_str().unwrap();
        assert!(
            plain.contains("HttpOnly") && plain.contains("SameSite=Strict"),
            "{plain}"
        );
        assert!(!plain.contains("Secure"));
        assert!(
            set_cookie(&browser, true)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }
}
