//! One token request (docs/service.md §4.1, docs/tokens.md "Token exchange"): sign an assertion, POST it,
//! validate the response, and classify every failure so the refresher can
//! choose how to retry and metrics can say what went wrong.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use arc_swap::{ArcSwap, ArcSwapOption};
use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;

use super::assertion::{AssertionSigner, Clock, SignError};
use crate::collect::CollectError;
use crate::config::credentials::Credentials;
use crate::outbound::{self, Connector, FailureKind};
use crate::secret::Secret;

/// RFC 7523 §2.2.
pub const CLIENT_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// docs/tokens.md "Token exchange": a response without `expires_in` is taken to last this long.
pub const DEFAULT_EXPIRES_IN: Duration = Duration::from_secs(300);
/// A lifetime beyond a day is more likely a unit mistake than intent;
/// renewing at least daily bounds the damage.
pub const MAX_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);
/// A token response is a few hundred bytes.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Longest `error_description` quoted from the token endpoint.
const MAX_DESCRIPTION_CHARS: usize = 200;

/// A token as issued by the token endpoint.
#[derive(Debug)]
pub struct Issued {
    pub access_token: Secret,
    /// Already clamped to [`MAX_TOKEN_LIFETIME`].
    pub lifetime: Duration,
    /// `expires_in` was absent and [`DEFAULT_EXPIRES_IN`] was assumed.
    pub lifetime_assumed: bool,
}

/// Why a token request failed. Messages never carry the assertion or a
/// token; text quoted from the token endpoint is bounded and filtered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExchangeError {
    #[error("cannot connect to the token endpoint: {0}")]
    Connect(String),
    #[error("TLS with the token endpoint failed: {0}")]
    Tls(String),
    #[error("the token endpoint did not answer within {} ms", .0.as_millis())]
    Timeout(Duration),
    #[error("the connection to the token endpoint failed: {0}")]
    Network(String),
    #[error("the token endpoint refused the request: HTTP {status}{}", describe(.error, .description))]
    Rejected {
        status: u16,
        error: Option<String>,
        description: Option<String>,
    },
    #[error("the token endpoint is rate limiting (HTTP 429){}", retry_hint(.retry_after))]
    RateLimited { retry_after: Option<Duration> },
    #[error("the token endpoint failed: HTTP {status}{}", retry_hint(.retry_after))]
    Server {
        status: u16,
        retry_after: Option<Duration>,
    },
    #[error("the token endpoint answered with unexpected HTTP {0}")]
    UnexpectedStatus(u16),
    #[error("the token response is malformed: {0}")]
    Malformed(String),
    #[error("{0}")]
    Sign(#[from] SignError),
}

fn describe(error: &Option<String>, description: &Option<String>) -> String {
    match (error, description) {
        (Some(e), Some(d)) => format!(" ({e}: {d})"),
        (Some(e), None) => format!(" ({e})"),
        (None, Some(d)) => format!(" ({d})"),
        (None, None) => String::new(),
    }
}

fn retry_hint(after: &Option<Duration>) -> String {
    after
        .map(|d| format!(", retry after {} s", d.as_secs()))
        .unwrap_or_default()
}

impl ExchangeError {
    /// The `outcome` label of `lanyard_token_requests_total`.
    pub fn kind(&self) -> &'static str {
        match self {
            ExchangeError::Connect(_) => "connect",
            ExchangeError::Tls(_) => "tls",
            ExchangeError::Timeout(_) => "timeout",
            ExchangeError::Network(_) => "network",
            ExchangeError::Rejected { .. } => "rejected",
            ExchangeError::RateLimited { .. } => "rate_limited",
            ExchangeError::Server { .. } => "server_error",
            ExchangeError::UnexpectedStatus(_) => "unexpected_status",
            ExchangeError::Malformed(_) => "malformed",
            ExchangeError::Sign(_) => "signing",
        }
    }

    /// The delay the token endpoint asked for, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ExchangeError::RateLimited { retry_after }
            | ExchangeError::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The token endpoint refused these credentials: retrying soon will
    /// not help until they change.
    pub fn is_rejection(&self) -> bool {
        matches!(self, ExchangeError::Rejected { .. })
    }
}

/// What signs and sends for one account; swapped whole on reload.
#[derive(Debug)]
struct Account {
    credentials: Arc<Credentials>,
    signer: AssertionSigner,
}

/// Performs token requests for the current credentials.
pub struct Exchanger {
    client: Arc<TokenClient>,
    account: ArcSwap<Account>,
    /// The credentials in use before the last reload: what the verifier's
    /// derived binding key came from until then (docs/verifier.md "Running many").
    previous: ArcSwapOption<Credentials>,
}

/// What every account's token requests share: one HTTP client, and so
/// one connection pool and one TLS configuration for the token endpoint,
/// the settings and the clock. Of many accounts each called once, the
/// process holds one idle connection to the token endpoint, not one per
/// account, and an account's own part is its credentials alone
/// (docs/accounts.md "Memory").
pub struct TokenClient {
    http: Client<Connector, Full<Bytes>>,
    options: ExchangeOptions,
    clock: Arc<dyn Clock>,
}

impl TokenClient {
    pub fn new(options: ExchangeOptions, connector: Connector, clock: Arc<dyn Clock>) -> Self {
        TokenClient {
            http: outbound::client(connector),
            options,
            clock,
        }
    }

    /// The settings every token request is made with.
    pub fn options(&self) -> &ExchangeOptions {
        &self.options
    }
}

/// The parts of [`Exchanger`] that come from settings.
#[derive(Debug, Clone)]
pub struct ExchangeOptions {
    pub assertion_ttl: Duration,
    /// How far `iat` is backdated (`LANYARD_CLOCK_SKEW`).
    pub clock_skew: Duration,
    pub rfc7523_fields: bool,
    pub timeout: Duration,
}

impl Exchanger {
    /// An exchanger with a client of its own: for a process of one
    /// account, or a command that asks for one token.
    pub fn new(
        credentials: Credentials,
        options: ExchangeOptions,
        connector: Connector,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let client = Arc::new(TokenClient::new(options, connector, clock));
        Exchanger::sharing(credentials, client)
    }

    /// An exchanger whose token requests go through `client`, which other
    /// accounts' share.
    pub fn sharing(credentials: Credentials, client: Arc<TokenClient>) -> Self {
        let account = Account::new(Arc::new(credentials), &client.options);
        Exchanger {
            client,
            account: ArcSwap::from_pointee(account),
            previous: ArcSwapOption::empty(),
        }
    }

    /// What its token requests go through.
    pub fn client(&self) -> &Arc<TokenClient> {
        &self.client
    }

    /// The credentials in use.
    pub fn credentials(&self) -> Arc<Credentials> {
        self.account.load().credentials.clone()
    }

    /// The credentials in use before the last [`Exchanger::replace_credentials`].
    pub fn previous_credentials(&self) -> Option<Arc<Credentials>> {
        self.previous.load_full()
    }

    /// Uses new credentials from the next request on.
    pub fn replace_credentials(&self, credentials: Credentials) {
        let new = Arc::new(Account::new(Arc::new(credentials), &self.client.options));
        let old = self.account.swap(new);
        self.previous.store(Some(old.credentials.clone()));
    }

    /// Requests one token.
    pub async fn fetch(&self) -> Result<Issued, ExchangeError> {
        let account = self.account.load_full();
        let (timeout, clock) = (self.client.options.timeout, self.client.clock.as_ref());
        // One limit for the attempt, signing included (a key in an HSM
        // signs first): LANYARD_TOKEN_TIMEOUT bounds one token request.
        let deadline = tokio::time::Instant::now() + timeout;
        let assertion = account.signer.sign_fresh(clock, timeout).await?;
        let creds = &account.credentials;
        // Built in a block: the serializer is not `Send` and must not live
        // across the awaits below.
        let body = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            if self.client.options.rfc7523_fields {
                form.append_pair("grant_type", "client_credentials");
                form.append_pair("client_assertion_type", CLIENT_ASSERTION_TYPE);
            }
            form.append_pair("client_id", &creds.client_id);
            form.append_pair("organization_id", &creds.organization_id);
            form.append_pair("client_assertion", assertion.expose());
            form.finish()
        };

        let mut request = Request::post(creds.token_uri.uri().clone())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .header(header::USER_AGENT, crate::outbound::USER_AGENT)
            .body(Full::new(Bytes::from(body)))
            .map_err(|_| ExchangeError::Malformed("the token endpoint URL is unusable".into()))?;
        crate::otel::spans::propagate_token_request(request.headers_mut());

        let exchange = async {
            let response = self.client.http.request(request).await.map_err(|err| {
                let cause = root_cause(&err);
                match outbound::classify(&err) {
                    FailureKind::Tls => ExchangeError::Tls(cause),
                    FailureKind::Connect => ExchangeError::Connect(cause),
                    FailureKind::Other => ExchangeError::Network(cause),
                }
            })?;
            let (parts, body) = response.into_parts();
            let bytes = crate::collect::collect(body, MAX_RESPONSE_BYTES)
                .await
                .map_err(|err| match err {
                    CollectError::TooLarge { .. } => ExchangeError::Malformed(format!(
                        "the body is larger than {} KiB",
                        MAX_RESPONSE_BYTES / 1024
                    )),
                    CollectError::Read(err) => {
                        ExchangeError::Network(format!("reading the response failed: {err}"))
                    }
                })?;
            Ok::<_, ExchangeError>((parts, bytes))
        };
        let (parts, bytes) = tokio::time::timeout_at(deadline, exchange)
            .await
            .map_err(|_| ExchangeError::Timeout(timeout))??;
        interpret(parts.status, &parts.headers, &bytes, clock.now())
    }
}

impl Account {
    fn new(credentials: Arc<Credentials>, options: &ExchangeOptions) -> Self {
        let signer = AssertionSigner {
            client_id: credentials.client_id.clone(),
            audience: credentials.iam_audience.clone(),
            lifetime: options.assertion_ttl,
            backdate: options.clock_skew,
            key: credentials.key.clone(),
        };
        Account {
            credentials,
            signer,
        }
    }
}

/// The innermost error's message: the useful part ("Connection refused").
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    crate::outbound::causes(err)
        .last()
        .map_or_else(String::new, ToString::to_string)
}

/// Turns a token endpoint answer into a token or a classified error.
pub fn interpret(
    status: StatusCode,
    headers: &http::HeaderMap,
    body: &[u8],
    now: SystemTime,
) -> Result<Issued, ExchangeError> {
    let retry_after = headers
        .get(header::RETRY_AFTER)
        .and_then(|value| parse_retry_after(value, now));
    match status.as_u16() {
        200..=299 => parse_success(body),
        429 => Err(ExchangeError::RateLimited { retry_after }),
        400..=499 => {
            let (error, description) = oauth_error(body);
            Err(ExchangeError::Rejected {
                status: status.as_u16(),
                error,
                description,
            })
        }
        500..=599 => Err(ExchangeError::Server {
            status: status.as_u16(),
            retry_after,
        }),
        other => Err(ExchangeError::UnexpectedStatus(other)),
    }
}

/// `Retry-After` as delay-seconds or an HTTP-date (RFC 9110 §10.2.3).
pub fn parse_retry_after(value: &HeaderValue, now: SystemTime) -> Option<Duration> {
    let text = value.to_str().ok()?.trim();
    let after = match text.parse::<u64>() {
        Ok(seconds) => Duration::from_secs(seconds),
        // More digits than a u64 holds are still a number of seconds.
        Err(_) if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) => MAX_RETRY_AFTER,
        Err(_) => {
            let at = httpdate::parse_http_date(text).ok()?;
            at.duration_since(now).unwrap_or(Duration::ZERO)
        }
    };
    // Capped here, so that what is logged and reported is the wait that
    // is kept, not the number the endpoint sent.
    Some(after.min(MAX_RETRY_AFTER))
}

/// The longest `Retry-After` honoured: a larger value is more likely a
/// mistake than a plan to leave lanyard without a token for hours (docs/tokens.md
/// "Renewal and retries").
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// The RFC 6749 §5.2 `error` and `error_description`, filtered: only a
/// plain error code, and a bounded description that does not look like
/// it echoes a JWT.
fn oauth_error(body: &[u8]) -> (Option<String>, Option<String>) {
    let Ok(serde_json::Value::Object(object)) = serde_json::from_slice(body) else {
        return (None, None);
    };
    let error = object
        .get("error")
        .and_then(|v| v.as_str())
        .filter(|e| {
            !e.is_empty()
                && e.len() <= 64
                && e.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
        })
        .map(str::to_string);
    let description = object
        .get("error_description")
        .and_then(|v| v.as_str())
        .filter(|d| !looks_like_it_echoes_a_secret(d))
        .map(|d| {
            d.chars()
                .filter(|&c| !c.is_control() && !is_invisible(c))
                .take(MAX_DESCRIPTION_CHARS)
                .collect::<String>()
        })
        .filter(|d| !d.is_empty());
    (error, description)
}

/// A character that changes how text around it shows without showing
/// itself: bidirectional overrides and isolates, zero-width characters,
/// the byte-order mark, Unicode tags. In a quoted description they could
/// make a log line or `/readyz` read other than it is (Trojan Source,
/// CVE-2021-42574).
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{061C}'
            | '\u{180E}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2069}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// A JWT, or any long base64url run (a signature, a key fragment, a token),
/// is not quoted: the description reaches logs, `check` and `/readyz`.
fn looks_like_it_echoes_a_secret(text: &str) -> bool {
    const LONGEST_PLAIN_RUN: usize = 40;
    text.contains("eyJ")
        || text
            .split(|c: char| {
                !(c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '+' || c == '/')
            })
            .any(|run| run.len() >= LONGEST_PLAIN_RUN)
}

fn parse_success(body: &[u8]) -> Result<Issued, ExchangeError> {
    let malformed = |why: &str| Err(ExchangeError::Malformed(why.to_string()));
    if body.iter().all(u8::is_ascii_whitespace) {
        return malformed("the body is empty");
    }
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else {
        return malformed("the body is not JSON");
    };
    let serde_json::Value::Object(object) = value else {
        return malformed("the body is not a JSON object");
    };

    let access_token = match object.get("access_token") {
        Some(serde_json::Value::String(t)) if !t.is_empty() => t,
        Some(serde_json::Value::String(_)) => return malformed("`access_token` is empty"),
        Some(_) => return malformed("`access_token` is not a string"),
        None => return malformed("`access_token` is missing"),
    };
    // It goes into a header as `Bearer <token>`; RFC 6750's b64token is
    // visible ASCII without spaces.
    if !access_token.bytes().all(|b| b.is_ascii_graphic()) {
        return malformed("`access_token` has characters not allowed in an HTTP header");
    }

    match object.get("token_type") {
        Some(serde_json::Value::String(t)) if t.eq_ignore_ascii_case("bearer") => {}
        Some(serde_json::Value::String(t)) => {
            // Token type names are short words (Bearer, MAC, DPoP, N_A); a
            // confused endpoint may send the token itself here, so only a
            // value that reads as such a name is quoted.
            let is_name = t.len() <= 16
                && t != access_token
                && t.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if is_name {
                return malformed(&format!("`token_type` is `{t}`, expected Bearer"));
            }
            return malformed("`token_type` is not Bearer");
        }
        Some(_) => return malformed("`token_type` is not a string"),
        None => return malformed("`token_type` is missing"),
    }

    let (lifetime, lifetime_assumed) = match object.get("expires_in") {
        None | Some(serde_json::Value::Null) => (DEFAULT_EXPIRES_IN, true),
        Some(value) => {
            let seconds = match value {
                serde_json::Value::Number(n) => n
                    .as_i64()
                    .or_else(|| n.as_u64().map(|u| i64::try_from(u).unwrap_or(i64::MAX)))
                    .or_else(|| {
                        n.as_f64()
                            .filter(|f| f.fract() == 0.0 && f.is_finite())
                            .map(|f| f.clamp(i64::MIN as f64, i64::MAX as f64) as i64)
                    }),
                serde_json::Value::String(s) => s.trim().parse::<i64>().ok(),
                _ => None,
            };
            match seconds {
                None => return malformed("`expires_in` is not a whole number of seconds"),
                Some(s) if s <= 0 => {
                    return malformed(&format!(
                        "`expires_in` is {s}; a token must live longer than 0 s"
                    ));
                }
                Some(s) => (Duration::from_secs(s as u64).min(MAX_TOKEN_LIFETIME), false),
            }
        }
    };
    Ok(Issued {
        access_token: Secret::new(access_token.clone()),
        lifetime,
        lifetime_assumed,
    })
}

#[cfg(test)]
mod tests;
