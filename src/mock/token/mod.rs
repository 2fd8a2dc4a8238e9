//! The mock's token endpoint: checks the client assertion independently
//! of the code that signs it (`assertion`), and can be told to fail in
//! every way lanyard classifies ([`Fault`], an outage, tokens revoked on
//! issue). It imports nothing from the client side, so a mistake there
//! cannot pass on both sides at once.
//!
//! - this file: the [`Endpoint`] and its state, the form read, the grant.
//! - `assertion`: the client assertion's header, signature and claims.

mod assertion;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::MutexGuard;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::accounts::{Accounts, IssuedToken};
use super::surface::{Disconnect, Reply, json};
use super::table::Table;

/// RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion.
const JWT_BEARER_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// RFC 6749 §4.4.2: the grant a client authenticating as itself asks for.
const CLIENT_CREDENTIALS_GRANT: &str = "client_credentials";
/// Keeps the replay set bounded in a long demo.
const MAX_REMEMBERED_JTI: usize = 100_000;
/// Larger than any token request's form.
const MAX_FORM_BYTES: usize = 64 * 1024;
/// Short, so the demo shows renewals happening.
pub const DEFAULT_EXPIRES_IN: i64 = 120;
/// Token events a subscriber may fall behind by before it misses some: a
/// fleet of sidecars recovering from an outage sends about one each.
const TOKEN_EVENTS_BUFFERED: usize = 4096;

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

/// A granted token request, as the mock saw it, for tests to inspect.
#[derive(Clone)]
pub struct TokenRequestLog {
    /// Form fields, by name.
    pub form: BTreeMap<String, String>,
    /// The decoded JOSE header.
    pub header: Value,
    /// The decoded claims.
    pub claims: Value,
    /// The W3C `traceparent` it came with, if any (docs/admin.md "Tracing").
    pub traceparent: Option<String>,
}

impl std::fmt::Debug for TokenRequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The form holds the signed assertion.
        let fields: Vec<&str> = self.form.keys().map(String::as_str).collect();
        f.debug_struct("TokenRequestLog")
            .field("form_fields", &fields)
            .field("header", &self.header)
            .field("claims", &self.claims)
            .field("traceparent", &self.traceparent)
            .finish()
    }
}

/// One answered token request, for a subscriber that needs every one
/// (`MockService::token_events`, with the `test-support` feature).
/// Holds nothing secret: no assertion, no token.
#[derive(Debug, Clone)]
pub struct TokenEvent {
    /// When the answer was decided.
    pub at: SystemTime,
    /// The status answered; `None` when a fault dropped the connection.
    pub status: Option<u16>,
    /// The account a token was issued to, when one was.
    pub issued_to: Option<String>,
}

/// The token endpoint: the `aud` it requires, its switches and queued
/// faults, the assertions it has seen, and what it answered.
pub(super) struct Endpoint {
    audience: String,
    table: Table<EndpointState>,
    /// Every answer, for subscribers that need each one (the counters
    /// coalesce).
    events: broadcast::Sender<TokenEvent>,
}

struct EndpointState {
    faults: VecDeque<Fault>,
    /// Answer 503 to everything until switched off.
    outage: bool,
    /// `None`: omit `expires_in` from token responses.
    expires_in: Option<i64>,
    /// Tokens are issued but never become known to the API.
    revoke_on_issue: bool,
    /// Assertions' `jti`, with their `exp`.
    seen_jti: HashMap<String, u64>,
    last_accepted: Option<TokenRequestLog>,
}

impl Endpoint {
    pub(super) fn new(audience: String) -> Endpoint {
        Endpoint {
            audience,
            table: Table::new(EndpointState {
                faults: VecDeque::new(),
                outage: false,
                expires_in: Some(DEFAULT_EXPIRES_IN),
                revoke_on_issue: false,
                seen_jti: HashMap::new(),
                last_accepted: None,
            }),
            events: broadcast::channel(TOKEN_EVENTS_BUFFERED).0,
        }
    }

    fn lock(&self) -> MutexGuard<'_, EndpointState> {
        self.table.lock()
    }

    pub(super) fn audience(&self) -> &str {
        &self.audience
    }

    #[cfg(feature = "test-support")]
    pub(super) fn push_fault(&self, fault: Fault) {
        self.lock().faults.push_back(fault);
    }

    #[cfg(feature = "test-support")]
    pub(super) fn set_outage(&self, on: bool) {
        self.lock().outage = on;
    }

    #[cfg(feature = "test-support")]
    pub(super) fn set_expires_in(&self, seconds: Option<i64>) {
        self.lock().expires_in = seconds;
    }

    #[cfg(feature = "test-support")]
    pub(super) fn set_revoke_on_issue(&self, revoke: bool) {
        self.lock().revoke_on_issue = revoke;
    }

    #[cfg(feature = "test-support")]
    pub(super) fn events(&self) -> broadcast::Receiver<TokenEvent> {
        self.events.subscribe()
    }

    #[cfg(feature = "test-support")]
    pub(super) fn last_accepted(&self) -> Option<TokenRequestLog> {
        self.lock().last_accepted.clone()
    }

    /// Answers a token request, telling every subscriber.
    pub(super) async fn handle(
        &self,
        accounts: &Accounts,
        req: Request<Incoming>,
    ) -> Result<Reply, Disconnect> {
        accounts.count(|c| c.token_requests += 1);
        let (answer, issued_to) = self.answer(accounts, req).await;
        // No subscriber is the usual case (tests), and not an error.
        let _ = self.events.send(TokenEvent {
            at: SystemTime::now(),
            status: answer.as_ref().ok().map(|r| r.status().as_u16()),
            issued_to,
        });
        answer
    }

    /// The answer to a token request, and the account a token went to.
    async fn answer(
        &self,
        accounts: &Accounts,
        req: Request<Incoming>,
    ) -> (Result<Reply, Disconnect>, Option<String>) {
        let fault = {
            let mut state = self.lock();
            if state.outage {
                // No Retry-After: an outage tests the client's own backoff.
                let body = json!({
                    "error": "temporarily_unavailable",
                    "error_description": "the token endpoint is in a simulated outage",
                });
                return (Ok(json(StatusCode::SERVICE_UNAVAILABLE, &body)), None);
            }
            state.faults.pop_front()
        };
        match fault {
            Some(Fault::Disconnect) => return (Err(Disconnect), None),
            Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
            Some(Fault::Pass) | None => {}
            Some(Fault::Respond {
                status,
                body,
                retry_after,
            }) => return (Ok(fault_response(status, body, retry_after)), None),
        }
        match self.grant(accounts, req).await {
            Ok((body, client_id)) => (Ok(json(StatusCode::OK, &body)), Some(client_id)),
            Err(refusal) => {
                accounts.count(|c| c.token_refusals += 1);
                let body =
                    json!({"error": refusal.error, "error_description": refusal.description});
                (Ok(json(refusal.status, &body)), None)
            }
        }
    }

    /// Grants a token: the response body, and the account it went to.
    async fn grant(
        &self,
        accounts: &Accounts,
        req: Request<Incoming>,
    ) -> Result<(Value, String), OAuthError> {
        let traceparent = req
            .headers()
            .get("traceparent")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
        let form = read_form(req).await?;
        let field = |name: &str| {
            form.get(name)
                .map(String::as_str)
                .ok_or_else(|| invalid_request(format!("parameter `{name}` is missing")))
        };
        if let Some(grant) = form.get("grant_type")
            && grant != CLIENT_CREDENTIALS_GRANT
        {
            return Err(OAuthError::new(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "only client_credentials is supported",
            ));
        }
        if let Some(kind) = form.get("client_assertion_type")
            && kind != JWT_BEARER_ASSERTION_TYPE
        {
            return Err(invalid_request(
                "client_assertion_type must be the RFC 7523 jwt-bearer type",
            ));
        }
        let client_id = field("client_id")?;
        let organization_id = field("organization_id")?;
        let assertion = field("client_assertion")?;

        let verified =
            assertion::verify(assertion, &self.audience, accounts).map_err(invalid_client)?;
        if client_id != verified.account.client_id {
            return Err(invalid_client(
                "client_id does not match the assertion's issuer",
            ));
        }
        if organization_id != verified.account.organization_id {
            return Err(invalid_client(
                "organization_id is not the account's organization",
            ));
        }
        // Last, so a request refused for another reason does not burn its jti.
        self.consume_jti(&verified.claims)?;
        let client_id = verified.account.client_id.clone();
        let body = self.issue(
            accounts,
            &client_id,
            TokenRequestLog {
                form,
                header: verified.header,
                claims: verified.claims,
                traceparent,
            },
        );
        Ok((body, client_id))
    }

    /// Issues a token to `client_id` (known to the API unless tokens are
    /// revoked on issue), and logs the request it answers.
    fn issue(&self, accounts: &Accounts, client_id: &str, log: TokenRequestLog) -> Value {
        let access_token = format!("mock-{}", uuid::Uuid::new_v4().simple());
        let (expires_in, revoke_on_issue) = {
            let state = self.lock();
            (state.expires_in, state.revoke_on_issue)
        };
        if !revoke_on_issue {
            let lifetime = Duration::from_secs(expires_in.unwrap_or(300).max(0) as u64);
            accounts.lock().tokens.insert(
                access_token.clone(),
                IssuedToken {
                    client_id: client_id.to_string(),
                    expires_at: SystemTime::now() + lifetime,
                },
            );
        }
        self.lock().last_accepted = Some(log);
        // Last: a test that awaits the counter finds the token and the log.
        accounts.count(|c| c.tokens_issued += 1);

        let mut body = json!({"access_token": access_token, "token_type": "Bearer"});
        if let Some(seconds) = expires_in {
            body["expires_in"] = json!(seconds);
        }
        body
    }

    /// Records the assertion's `jti`, refusing one seen before.
    fn consume_jti(&self, claims: &Value) -> Result<(), OAuthError> {
        let jti = claims["jti"].as_str().unwrap_or_default();
        let exp = claims["exp"].as_u64().unwrap_or_default();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        let mut inner = self.lock();
        if inner.seen_jti.len() >= MAX_REMEMBERED_JTI {
            // An expired assertion cannot be replayed anyway.
            inner.seen_jti.retain(|_, exp| *exp > now);
        }
        if inner.seen_jti.insert(jti.to_string(), exp).is_some() {
            return Err(OAuthError::new(
                StatusCode::BAD_REQUEST,
                "invalid_grant",
                "claim `jti` was already used",
            ));
        }
        Ok(())
    }
}

/// The answer a [`Fault::Respond`] asks for.
fn fault_response(status: u16, body: String, retry_after: Option<String>) -> Reply {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() =
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    if let Some(value) = retry_after.and_then(|v| http::HeaderValue::from_str(&v).ok()) {
        response.headers_mut().insert(header::RETRY_AFTER, value);
    }
    response
}

/// The request's form fields: a POST of a form, each field once.
async fn read_form(req: Request<Incoming>) -> Result<BTreeMap<String, String>, OAuthError> {
    if req.method() != Method::POST {
        return Err(OAuthError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request",
            "the token endpoint takes POST",
        ));
    }
    let form_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/x-www-form-urlencoded"));
    if !form_type {
        return Err(invalid_request(
            "the body must be application/x-www-form-urlencoded",
        ));
    }
    let body = crate::collect::collect(req.into_body(), MAX_FORM_BYTES)
        .await
        .map_err(|_| invalid_request("the body is unreadable or too large"))?;
    let mut form = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(&body) {
        if form.insert(name.to_string(), value.to_string()).is_some() {
            return Err(invalid_request(format!("parameter `{name}` is repeated")));
        }
    }
    Ok(form)
}

/// An RFC 6749 §5.2 error answer.
struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
}

impl OAuthError {
    fn new(status: StatusCode, error: &'static str, description: impl Into<String>) -> OAuthError {
        OAuthError {
            status,
            error,
            description: description.into(),
        }
    }
}

fn invalid_client(description: impl Into<String>) -> OAuthError {
    OAuthError::new(StatusCode::UNAUTHORIZED, "invalid_client", description)
}

fn invalid_request(description: impl Into<String>) -> OAuthError {
    OAuthError::new(StatusCode::BAD_REQUEST, "invalid_request", description)
}
