//! The mock's token endpoint: verifies the assertion as docs/service.md §5.2 and
//! docs/mock-service.md specify, independently of the code that signs it.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_lc_rs::signature::{RSA_PKCS1_2048_8192_SHA256, UnparsedPublicKey};
use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::{Disconnect, Fault, IssuedToken, MockAccount, State, json};
use crate::token::exchange::CLIENT_ASSERTION_TYPE;

/// The seed's limit on how far ahead `exp` may be.
const MAX_ASSERTION_LIFETIME: u64 = 3600;
/// Tolerance for clocks a little apart, and for `iat` rounding.
const LEEWAY: u64 = 30;
/// Keeps the replay set bounded in a long demo.
const MAX_REMEMBERED_JTI: usize = 100_000;

/// A granted token request, as the mock saw it, for tests to inspect.
#[derive(Clone)]
pub struct TokenRequestLog {
    /// Form fields, by name.
    pub form: BTreeMap<String, String>,
    /// The decoded JOSE header.
    pub header: Value,
    /// The decoded claims.
    pub claims: Value,
}

impl std::fmt::Debug for TokenRequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The form holds the signed assertion.
        let fields: Vec<&str> = self.form.keys().map(String::as_str).collect();
        f.debug_struct("TokenRequestLog")
            .field("form_fields", &fields)
            .field("header", &self.header)
            .field("claims", &self.claims)
            .finish()
    }
}

/// One answered token request, for a subscriber that needs every one
/// ([`MockService::token_events`](super::MockService::token_events)).
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

/// An RFC 6749 §5.2 error answer.
struct Refusal {
    status: StatusCode,
    error: &'static str,
    description: String,
}

fn refuse(status: StatusCode, error: &'static str, description: impl Into<String>) -> Refusal {
    Refusal {
        status,
        error,
        description: description.into(),
    }
}

fn invalid_client(description: impl Into<String>) -> Refusal {
    refuse(StatusCode::UNAUTHORIZED, "invalid_client", description)
}

fn invalid_request(description: impl Into<String>) -> Refusal {
    refuse(StatusCode::BAD_REQUEST, "invalid_request", description)
}

pub(super) async fn handle(
    state: &State,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Disconnect> {
    state.counters.send_modify(|c| c.token_requests += 1);
    let (answer, issued_to) = answer(state, req).await;
    // No subscriber is the usual case (tests), and not an error.
    let _ = state.token_events.send(TokenEvent {
        at: SystemTime::now(),
        status: answer.as_ref().ok().map(|r| r.status().as_u16()),
        issued_to,
    });
    answer
}

/// The answer to a token request, and the account a token went to.
async fn answer(
    state: &State,
    req: Request<Incoming>,
) -> (Result<Response<Full<Bytes>>, Disconnect>, Option<String>) {
    let fault = {
        let mut inner = state.lock();
        if inner.token_outage {
            // No Retry-After: an outage tests the client's own backoff.
            let body = json!({
                "error": "temporarily_unavailable",
                "error_description": "the token endpoint is in a simulated outage",
            });
            return (Ok(json(StatusCode::SERVICE_UNAVAILABLE, &body)), None);
        }
        inner.faults.pop_front()
    };
    match fault {
        Some(Fault::Disconnect) => return (Err(Disconnect), None),
        Some(Fault::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Fault::Pass) | None => {}
        Some(Fault::Respond {
            status,
            body,
            retry_after,
        }) => {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() =
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            if let Some(value) = retry_after.and_then(|v| http::HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            return (Ok(response), None);
        }
    }

    match grant(state, req).await {
        Ok((body, client_id)) => (Ok(json(StatusCode::OK, &body)), Some(client_id)),
        Err(refusal) => {
            state.lock().refusals.push(refusal.description.clone());
            let body = json!({"error": refusal.error, "error_description": refusal.description});
            (Ok(json(refusal.status, &body)), None)
        }
    }
}

/// Grants a token: the response body, and the account it went to.
async fn grant(state: &State, req: Request<Incoming>) -> Result<(Value, String), Refusal> {
    if req.method() != Method::POST {
        return Err(refuse(
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
    let body = Limited::new(req.into_body(), 64 * 1024)
        .collect()
        .await
        .map_err(|_| invalid_request("the body is unreadable or too large"))?
        .to_bytes();

    let mut form = BTreeMap::new();
    for (name, value) in form_urlencoded::parse(&body) {
        if form.insert(name.to_string(), value.to_string()).is_some() {
            return Err(invalid_request(format!("parameter `{name}` is repeated")));
        }
    }
    let field = |name: &str| {
        form.get(name)
            .map(String::as_str)
            .ok_or_else(|| invalid_request(format!("parameter `{name}` is missing")))
    };
    if let Some(grant) = form.get("grant_type")
        && grant != "client_credentials"
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "unsupported_grant_type",
            "only client_credentials is supported",
        ));
    }
    if let Some(kind) = form.get("client_assertion_type")
        && kind != CLIENT_ASSERTION_TYPE
    {
        return Err(invalid_request(
            "client_assertion_type must be the RFC 7523 jwt-bearer type",
        ));
    }
    let client_id = field("client_id")?;
    let organization_id = field("organization_id")?;
    let assertion = field("client_assertion")?;

    let (header, claims, account) = verify_assertion(state, assertion)?;
    if client_id != account.client_id {
        return Err(invalid_client(
            "client_id does not match the assertion's issuer",
        ));
    }
    if organization_id != account.organization_id {
        return Err(invalid_client(
            "organization_id is not the account's organization",
        ));
    }
    // Last, so a request refused for another reason does not burn its jti.
    consume_jti(state, &claims)?;

    let access_token = format!("mock-{}", uuid::Uuid::new_v4().simple());
    let mut inner = state.lock();
    let expires_in = inner.expires_in;
    let lifetime = Duration::from_secs(expires_in.unwrap_or(300).max(0) as u64);
    if !inner.revoke_on_issue {
        inner.tokens.insert(
            access_token.clone(),
            IssuedToken {
                client_id: account.client_id.clone(),
                expires_at: SystemTime::now() + lifetime,
            },
        );
    }
    inner.last_accepted = Some(TokenRequestLog {
        form: form.clone(),
        header,
        claims,
    });
    drop(inner);
    state.counters.send_modify(|c| c.tokens_issued += 1);

    let mut body = json!({"access_token": access_token, "token_type": "Bearer"});
    if let Some(seconds) = expires_in {
        body["expires_in"] = json!(seconds);
    }
    Ok((body, account.client_id))
}

fn verify_assertion(
    state: &State,
    assertion: &str,
) -> Result<(Value, Value, MockAccount), Refusal> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = assertion.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid_client("client_assertion is not a compact JWS"));
    };
    let decode_json = |part: &str, what: &str| -> Result<Value, Refusal> {
        let bytes = b64
            .decode(part)
            .map_err(|_| invalid_client(format!("the assertion's {what} is not base64url")))?;
        serde_json::from_slice(&bytes)
            .map_err(|_| invalid_client(format!("the assertion's {what} is not JSON")))
    };
    let header = decode_json(h, "header")?;
    let claims = decode_json(c, "claims")?;
    let signature = b64
        .decode(s)
        .map_err(|_| invalid_client("the assertion's signature is not base64url"))?;

    if header["alg"] != "RS256" {
        return Err(invalid_client("the assertion's alg must be RS256"));
    }
    if header["typ"] != "JWT" {
        return Err(invalid_client("the assertion's typ must be JWT"));
    }
    let text = |name: &str| {
        claims[name]
            .as_str()
            .ok_or_else(|| invalid_client(format!("claim `{name}` is missing or not a string")))
    };
    let number = |name: &str| {
        claims[name]
            .as_u64()
            .ok_or_else(|| invalid_client(format!("claim `{name}` is missing or not a number")))
    };
    let iss = text("iss")?;
    if text("sub")? != iss {
        return Err(invalid_client(
            "claims `iss` and `sub` must both be the client id",
        ));
    }
    let account = state
        .lock()
        .accounts
        .get(iss)
        .cloned()
        .ok_or_else(|| invalid_client("unknown client"))?;

    let signing_input = &assertion[..h.len() + 1 + c.len()];
    UnparsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &account.public_key_der)
        .verify(signing_input.as_bytes(), &signature)
        .map_err(|_| {
            invalid_client("the assertion's signature does not verify with the account's key")
        })?;

    let audience_ok = match &claims["aud"] {
        Value::String(aud) => *aud == state.audience,
        Value::Array(auds) => auds
            .iter()
            .any(|a| a.as_str() == Some(state.audience.as_str())),
        _ => false,
    };
    if !audience_ok {
        return Err(invalid_client(
            "claim `aud` is not this service's IAM audience",
        ));
    }

    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let iat = number("iat")?;
    let exp = number("exp")?;
    if iat > now + LEEWAY {
        return Err(invalid_client("claim `iat` is in the future"));
    }
    if exp <= now {
        return Err(invalid_client("the assertion has expired"));
    }
    // No leeway here: the seed allows an hour at most, and a client with
    // a clock ahead can backdate (LANYARD_CLOCK_SKEW) both claims.
    if exp > now + MAX_ASSERTION_LIFETIME {
        return Err(invalid_client("claim `exp` is more than an hour ahead"));
    }

    let jti = text("jti")?;
    let is_v4 = uuid::Uuid::parse_str(jti).is_ok_and(|u| u.get_version_num() == 4);
    if !is_v4 {
        return Err(invalid_client("claim `jti` must be a UUID v4"));
    }
    Ok((header, claims, account))
}

/// Records the assertion's `jti`, refusing one seen before.
fn consume_jti(state: &State, claims: &Value) -> Result<(), Refusal> {
    let jti = claims["jti"].as_str().unwrap_or_default();
    let exp = claims["exp"].as_u64().unwrap_or_default();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let mut inner = state.lock();
    if inner.seen_jti.len() >= MAX_REMEMBERED_JTI {
        // An expired assertion cannot be replayed anyway.
        inner.seen_jti.retain(|_, exp| *exp > now);
    }
    if inner.seen_jti.insert(jti.to_string(), exp).is_some() {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "invalid_grant",
            "claim `jti` was already used",
        ));
    }
    Ok(())
}
