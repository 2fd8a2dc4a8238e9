//! The mock's token endpoint: verifies the client assertion (RFC 7523 §3,
//! with the header and claims the README's "Token exchange" section lists)
//! independently of the code that signs it. It imports nothing from the
//! client side, so a mistake there cannot pass on both sides at once.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};

use super::{Disconnect, Fault, IssuedToken, MockAccount, State, json};

/// RFC 7523 §2.2: the `client_assertion_type` of a JWT client assertion.
const JWT_BEARER_ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// RFC 6749 §4.4.2: the grant a client authenticating as itself asks for.
const CLIENT_CREDENTIALS_GRANT: &str = "client_credentials";
/// How far ahead `exp` may be: the service suggests an hour's lifetime and
/// lanyard caps `LANYARD_ASSERTION_TTL` there (README, settings).
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
        && grant != CLIENT_CREDENTIALS_GRANT
    {
        return Err(refuse(
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

/// Verifies the assertion and finds its account: the decoded header, the
/// verified claims and the account.
///
/// jsonwebtoken checks the shape, the signature with the account's key, and
/// `iss`, `sub`, `aud` and `exp`; the checks it does not make (`typ`, `iat`,
/// the hour's limit on `exp`, `jti`) follow. Each refusal names what is
/// wrong, in the words the tests pin.
fn verify_assertion(
    state: &State,
    assertion: &str,
) -> Result<(Value, Value, MockAccount), Refusal> {
    // jsonwebtoken splits from the right, so `a.b.c.d` would reach it as a
    // header `a.b` that is not base64url: say what is really wrong.
    if assertion.split('.').count() != 3 {
        return Err(invalid_client("client_assertion is not a compact JWS"));
    }
    let header = jsonwebtoken::decode_header(assertion).map_err(|err| match err.kind() {
        ErrorKind::Base64(_) => invalid_client("the assertion's header is not base64url"),
        ErrorKind::Json(json) if json.is_data() => untyped_header(assertion),
        _ => invalid_client("the assertion's header is not JSON"),
    })?;
    // Unverified: read only for `iss`, to find whose key verifies the rest.
    let unverified: Value =
        jsonwebtoken::dangerous::insecure_decode_claims(assertion).map_err(|err| {
            match err.kind() {
                ErrorKind::Base64(_) => invalid_client("the assertion's claims is not base64url"),
                _ => invalid_client("the assertion's claims is not JSON"),
            }
        })?;

    if header.alg != Algorithm::RS256 {
        return Err(invalid_client("the assertion's alg must be RS256"));
    }
    if header.typ.as_deref() != Some("JWT") {
        return Err(invalid_client("the assertion's typ must be JWT"));
    }
    let iss = unverified["iss"]
        .as_str()
        .ok_or_else(|| invalid_client("claim `iss` is missing or not a string"))?;
    let account = state
        .lock()
        .accounts
        .get(iss)
        .cloned()
        .ok_or_else(|| invalid_client("unknown client"))?;

    let mut validation = Validation::new(Algorithm::RS256);
    validation.set_required_spec_claims(&["iss", "sub", "aud", "exp"]);
    validation.set_issuer(&[&account.client_id]);
    validation.sub = Some(account.client_id.clone());
    validation.set_audience(&[&state.audience]);
    // No leeway for `exp`: a client with a clock ahead can backdate
    // (LANYARD_CLOCK_SKEW, README "Troubleshooting").
    validation.leeway = 0;
    let verified = jsonwebtoken::decode::<Value>(
        assertion,
        &DecodingKey::from_rsa_der(&account.public_key_der),
        &validation,
    )
    .map_err(|err| refusal_for(err.kind()))?;
    let claims = verified.claims;

    let text = |name: &str| {
        claims[name]
            .as_str()
            .ok_or_else(|| invalid_client(format!("claim `{name}` is missing or not a string")))
    };
    // Whole seconds only: jsonwebtoken rounds a fractional `exp`.
    let number = |name: &str| {
        claims[name]
            .as_u64()
            .ok_or_else(|| invalid_client(format!("claim `{name}` is missing or not a number")))
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let iat = number("iat")?;
    let exp = number("exp")?;
    if iat > now + LEEWAY {
        return Err(invalid_client("claim `iat` is in the future"));
    }
    // RFC 7519 §4.1.4: now must be before `exp`; jsonwebtoken still accepts
    // `exp` equal to now.
    if exp <= now {
        return Err(invalid_client("the assertion has expired"));
    }
    // No leeway here either: an hour at most, and a client with a clock
    // ahead can backdate both claims.
    if exp > now + MAX_ASSERTION_LIFETIME {
        return Err(invalid_client("claim `exp` is more than an hour ahead"));
    }

    let jti = text("jti")?;
    let is_v4 = uuid::Uuid::parse_str(jti).is_ok_and(|u| u.get_version_num() == 4);
    if !is_v4 {
        return Err(invalid_client("claim `jti` must be a UUID v4"));
    }
    // A header that decoded serializes again; the log shows what was sent.
    let header = serde_json::to_value(&verified.header).unwrap_or_default();
    Ok((header, claims, account))
}

/// The refusal for what `jsonwebtoken::decode` found wrong. Shape, header
/// and `iss` were checked before, so only the signature and the claims it
/// validates remain.
fn refusal_for(kind: &ErrorKind) -> Refusal {
    match kind {
        ErrorKind::InvalidToken => invalid_client("client_assertion is not a compact JWS"),
        ErrorKind::InvalidAlgorithm => invalid_client("the assertion's alg must be RS256"),
        // The header and claims decoded already: this is the signature.
        ErrorKind::Base64(_) => invalid_client("the assertion's signature is not base64url"),
        ErrorKind::InvalidSignature => {
            invalid_client("the assertion's signature does not verify with the account's key")
        }
        // Required, but absent or of the wrong type: jsonwebtoken does not
        // tell those apart.
        ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
            match claim.as_str() {
                "aud" => invalid_client("claim `aud` is not this service's IAM audience"),
                "exp" => invalid_client("claim `exp` is missing or not a number"),
                other => invalid_client(format!("claim `{other}` is missing or not a string")),
            }
        }
        ErrorKind::ExpiredSignature => invalid_client("the assertion has expired"),
        ErrorKind::InvalidIssuer | ErrorKind::InvalidSubject => {
            invalid_client("claims `iss` and `sub` must both be the client id")
        }
        ErrorKind::InvalidAudience => {
            invalid_client("claim `aud` is not this service's IAM audience")
        }
        // Not reached after the checks above; a refusal all the same.
        _ => invalid_client("the assertion does not verify"),
    }
}

/// Says which of `alg` and `typ` is wrong in a header that is JSON but not
/// one jsonwebtoken's typed `Header` takes (`"alg":"none"`, no `alg`, a
/// `typ` that is not a string), as the checks after decoding would.
fn untyped_header(assertion: &str) -> Refusal {
    let encoded = assertion.split('.').next().unwrap_or_default();
    let header: Value = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|json| serde_json::from_slice(&json).ok())
        .unwrap_or_default();
    if header["alg"] != "RS256" {
        invalid_client("the assertion's alg must be RS256")
    } else if header["typ"] != "JWT" {
        invalid_client("the assertion's typ must be JWT")
    } else {
        invalid_client("the assertion's header has a member of the wrong type")
    }
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
