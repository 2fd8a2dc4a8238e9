//! The token endpoint (RFC 6749 §3.2, §4.1.3; OpenID Connect Core
//! §3.1.3) and `userinfo` (§5.3): a relying party's backend redeems a
//! code for an ID token over the presented claims, which whichever replica
//! it reaches asks of the service again, and reads them again with the
//! access token.

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Body;
use serde_json::{Map, Value, json};

use super::authorize::parameters;
use super::sealed::{self, AccessToken, Code};
use super::signer::SignError;
use super::{Provider, TOKEN_LIFETIME};
use crate::config::oidc::Client;
use crate::verifier::Inner;
use crate::verifier::api::{Refusal, unix_now};
use crate::verifier::assumptions::{Claims, Ending, Progress};
use crate::verifier::errors::VerifierError;
use crate::verifier::polls;
use crate::verifier::service::CallError;

/// A token request's form, at most: a code, a verifier, a redirect URI
/// and a client's credentials.
const MAX_FORM: usize = 16 * 1024;
/// A backend sends its small form with its head.
const FORM_TIMEOUT: Duration = Duration::from_secs(10);
/// Codes redeemed on this replica and not yet expired, at most: a minute
/// of logins at well beyond what a replica completes. Past it, a token
/// request is answered 503 rather than a code forgotten early (which would
/// let it be redeemed twice).
pub const MAX_REDEEMED: usize = 100_000;

/// Codes redeemed here, by id, with their expiry (Unix seconds).
#[derive(Debug, Default)]
pub struct Redeemed(HashMap<String, u64>);

impl Redeemed {
    /// Records `code`'s redemption; `Err(true)` if it was redeemed before,
    /// `Err(false)` if there is no room.
    fn take(&mut self, code: &Code, now: u64) -> Result<(), bool> {
        if self.0.contains_key(&code.id) {
            return Err(true);
        }
        if self.0.len() >= MAX_REDEEMED {
            self.0.retain(|_, expires| *expires > now);
            if self.0.len() >= MAX_REDEEMED {
                return Err(false);
            }
        }
        self.0.insert(code.id.clone(), code.expires_at);
        Ok(())
    }

    /// Forgets a code taken by a redemption that did not spend it.
    fn give_back(&mut self, id: &str) {
        self.0.remove(id);
    }
}

/// A code taken for a redemption under way. Taken before the service is
/// asked, so that two requests with one code cannot both be served here;
/// given back when the redemption ends without spending it, answered
/// `temporarily_unavailable` (which invites the client to send the code
/// again: nothing was issued for it) or abandoned by a client that went
/// away before its answer.
struct Taking<'a> {
    provider: &'a Provider,
    id: Option<String>,
}

impl Taking<'_> {
    /// The code is spent: its answer was given, or it can never be.
    fn spend(mut self) {
        self.id = None;
    }
}

impl Drop for Taking<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.provider
                .redeemed
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .give_back(&id);
        }
    }
}

/// A refusal in RFC 6749 §5.2's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TokenError {
    status: StatusCode,
    error: &'static str,
    description: &'static str,
}

const fn refuse(error: &'static str, description: &'static str) -> TokenError {
    TokenError {
        status: StatusCode::BAD_REQUEST,
        error,
        description,
    }
}

const INVALID_CLIENT: TokenError = TokenError {
    status: StatusCode::UNAUTHORIZED,
    error: "invalid_client",
    description: "the client is unknown or its credentials are wrong",
};
const UNAVAILABLE: TokenError = TokenError {
    status: StatusCode::SERVICE_UNAVAILABLE,
    error: "temporarily_unavailable",
    description: "the provider is busy; retry shortly",
};
const INVALID_GRANT: TokenError = refuse(
    "invalid_grant",
    "the code is invalid, expired, already used, or not this client's",
);

/// A form body, `application/x-www-form-urlencoded`, bounded in bytes and
/// time.
pub(super) async fn read_form<B>(req: Request<B>) -> Result<Vec<u8>, Refusal>
where
    B: Body<Data = Bytes>,
{
    let form_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !form_type {
        return Err(VerifierError::BadRequest(
            "the body must be application/x-www-form-urlencoded",
        )
        .into());
    }
    let read = crate::collect::collect(req.into_body(), MAX_FORM);
    match tokio::time::timeout(FORM_TIMEOUT, read).await {
        Ok(Ok(bytes)) => Ok(bytes.to_vec()),
        Ok(Err(err)) if err.is_too_large() => Err(VerifierError::BodyTooLarge.into()),
        Ok(Err(_)) | Err(_) => Err(Refusal::Abort),
    }
}

impl Inner {
    /// `POST {issuer}/token`.
    pub(super) async fn token<B>(
        &self,
        provider: &Provider,
        req: Request<B>,
    ) -> Response<Full<Bytes>>
    where
        B: Body<Data = Bytes>,
    {
        let basic = req.headers().contains_key(header::AUTHORIZATION);
        let headers = req.headers().clone();
        let form = match read_form(req).await {
            Ok(form) => form,
            Err(Refusal::Answer(VerifierError::BodyTooLarge)) => {
                return token_error(
                    provider,
                    refuse("invalid_request", "the form is too large"),
                    false,
                );
            }
            Err(_) => {
                return token_error(
                    provider,
                    refuse("invalid_request", "the body must be a form"),
                    false,
                );
            }
        };
        match self.redeem(provider, &headers, &form).await {
            Ok(answer) => {
                provider.metrics.tokens.inc();
                token_answer(answer)
            }
            Err(error) => token_error(provider, error, basic),
        }
    }

    async fn redeem(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
        form: &[u8],
    ) -> Result<Value, TokenError> {
        let params = parameters(form)
            .map_err(|_| refuse("invalid_request", "a parameter is given more than once"))?;
        let get = |name: &str| {
            params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
                .filter(|v| !v.is_empty())
        };
        let client = authenticate(provider, headers, get("client_id"), get("client_secret"))?;
        if get("grant_type") != Some("authorization_code") {
            return Err(refuse(
                "unsupported_grant_type",
                "only grant_type=authorization_code is served",
            ));
        }
        let keys = self.keys.ring();
        let code: Code = get("code")
            .and_then(|code| sealed::open(&keys, &provider.issuer, code))
            .ok_or(INVALID_GRANT)?;
        let now = unix_now();
        let authorization = &code.authorization;
        if code.expires_at <= now
            || authorization.client_id != client.id
            || get("redirect_uri") != Some(authorization.redirect_uri.as_str())
        {
            return Err(INVALID_GRANT);
        }
        check_verifier(
            authorization.code_challenge.as_deref(),
            get("code_verifier"),
        )?;
        let taken = provider
            .redeemed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take(&code, now);
        match taken {
            Ok(()) => {}
            Err(true) => {
                tracing::warn!(
                    client_id = client.id,
                    "an authorization code was presented again; refused"
                );
                return Err(INVALID_GRANT);
            }
            Err(false) => return Err(UNAVAILABLE),
        }
        let taking = Taking {
            provider,
            id: Some(code.id.clone()),
        };
        let issued = match self.presented(&code.service_id).await {
            Ok(claims) => self.tokens(provider, &code, &claims, now).await,
            Err(error) => Err(error),
        };
        if !matches!(&issued, Err(error) if *error == UNAVAILABLE) {
            taking.spend();
        }
        issued
    }

    /// The ID token and the access token for a redeemed code.
    async fn tokens(
        &self,
        provider: &Provider,
        code: &Code,
        claims: &Map<String, Value>,
        now: u64,
    ) -> Result<Value, TokenError> {
        let authorization = &code.authorization;
        let named = provider.naming.name(claims);
        let mut id_token = named.id_token;
        id_token.insert("iss".into(), provider.issuer.as_str().into());
        id_token.insert("sub".into(), code.sub.clone().into());
        id_token.insert("aud".into(), authorization.client_id.clone().into());
        id_token.insert("iat".into(), now.into());
        id_token.insert("exp".into(), (now + TOKEN_LIFETIME).into());
        id_token.insert("auth_time".into(), code.auth_time.into());
        if let Some(nonce) = &authorization.nonce {
            id_token.insert("nonce".into(), nonce.clone().into());
        }
        let id_token = provider
            .signer
            .sign(&Value::Object(id_token))
            .await
            .map_err(|err| {
                if let SignError::Failed(why) = &err {
                    tracing::error!(problem = %why, "cannot sign an ID token");
                }
                UNAVAILABLE
            })?;
        let access = AccessToken {
            client_id: authorization.client_id.clone(),
            service_id: code.service_id.clone(),
            sub: code.sub.clone(),
            expires_at: now + TOKEN_LIFETIME,
        };
        let access_token =
            sealed::seal(&self.keys.ring(), &provider.issuer, &access).map_err(|_| UNAVAILABLE)?;
        Ok(json!({
            "access_token": access_token,
            "token_type": "Bearer",
            "expires_in": TOKEN_LIFETIME,
            "id_token": id_token,
            "scope": "openid",
        }))
    }

    /// `GET {issuer}/userinfo` with the access token (RFC 6750 §2.1).
    pub(super) async fn userinfo(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
    ) -> Response<Full<Bytes>> {
        let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| strip_scheme(v, "Bearer"))
        else {
            // No credentials: a challenge with no error (RFC 6750 §3.1).
            provider.refused("invalid_token");
            return bearer_challenge();
        };
        let access: Option<AccessToken> =
            sealed::open(&self.keys.ring(), &provider.issuer, bearer.trim());
        let access = match access {
            Some(access) if access.expires_at > unix_now() => access,
            _ => {
                provider.refused("invalid_token");
                return bearer_error("invalid_token", "the access token is invalid or expired");
            }
        };
        match self.presented(&access.service_id).await {
            Ok(claims) => {
                let mut answer = provider.naming.name(&claims).userinfo;
                answer.insert("sub".into(), access.sub.into());
                token_answer(Value::Object(answer))
            }
            Err(error) if error == UNAVAILABLE => token_error(provider, error, false),
            Err(_) => {
                provider.refused("invalid_token");
                bearer_error("invalid_token", "the presentation is no longer available")
            }
        }
    }

    /// The claims presented in the service's session `id`: as this
    /// replica saw them end, or asked of the service again, for as long as
    /// it holds them (docs/oidc.md, "What lives where"); the code's and
    /// the access token's own lifetimes bound how long that is asked.
    async fn presented(&self, id: &str) -> Result<Map<String, Value>, TokenError> {
        let known = polls::lock(&self.polls).verified(id);
        let claims = match known {
            Some(claims) => claims,
            None => self.ask_claims(id).await?,
        };
        serde_json::from_str(claims.object_text()).map_err(|_| INVALID_GRANT)
    }

    async fn ask_claims(&self, id: &str) -> Result<Claims, TokenError> {
        // The replica's one budget for calls to the service, as the page's
        // polls spend it: a holder of access tokens cannot spend more.
        if !self.budget.take() {
            return Err(UNAVAILABLE);
        }
        let permit = tokio::time::timeout(self.service.timeout(), self.calls.acquire()).await;
        let Ok(Ok(_permit)) = permit else {
            return Err(UNAVAILABLE);
        };
        match self.service.progress(id).await {
            Ok(Progress::Ended(Ending::Verified(claims))) => Ok(claims),
            Ok(_) => Err(INVALID_GRANT),
            // The service no longer knows the session, or its answer can
            // never be used: asking again gives the same.
            Err(CallError::Answered(StatusCode::NOT_FOUND) | CallError::Unusable(_)) => {
                Err(INVALID_GRANT)
            }
            Err(err) => {
                self.log_failure_throttled(
                    "token",
                    &format!(
                        "a token request could not ask the service for the presentation: {err}"
                    ),
                );
                Err(UNAVAILABLE)
            }
        }
    }
}

/// The client, authenticated: `client_secret_basic` (RFC 6749 §2.3.1, the
/// id and secret form-encoded before base64; many libraries send them as
/// they are, which is taken too), `client_secret_post`, or a public
/// client's id alone. One method per request.
fn authenticate<'a>(
    provider: &'a Provider,
    headers: &HeaderMap,
    form_id: Option<&str>,
    form_secret: Option<&str>,
) -> Result<&'a Client, TokenError> {
    let basic = match headers.get(header::AUTHORIZATION) {
        None => None,
        Some(value) => Some(basic_credentials(value).ok_or(INVALID_CLIENT)?),
    };
    let (client, secrets) = match (basic, form_secret) {
        (Some(_), Some(_)) => {
            return Err(refuse(
                "invalid_request",
                "the client authenticates with one method, not two",
            ));
        }
        (Some(basic), None) => {
            let client = [&basic.id, &basic.raw_id]
                .into_iter()
                .find_map(|id| provider.clients.get(id))
                .ok_or(INVALID_CLIENT)?;
            if form_id.is_some_and(|form_id| form_id != client.id) {
                return Err(INVALID_CLIENT);
            }
            (client, vec![basic.secret, basic.raw_secret])
        }
        (None, secret) => {
            let id = form_id.ok_or(refuse("invalid_request", "client_id is missing"))?;
            let client = provider.clients.get(id).ok_or(INVALID_CLIENT)?;
            (client, secret.map(str::to_string).into_iter().collect())
        }
    };
    let authenticated = match &client.secret {
        None => secrets.is_empty(),
        Some(expected) => secrets
            .iter()
            .any(|given| same_secret(expected.expose(), given)),
    };
    match authenticated {
        true => Ok(client),
        false => Err(INVALID_CLIENT),
    }
}

/// The credentials after an authentication scheme, whose name is matched
/// ignoring case (RFC 7235 §2.1).
fn strip_scheme<'a>(value: &'a str, scheme: &str) -> Option<&'a str> {
    let (name, rest) = value.split_once(' ')?;
    name.eq_ignore_ascii_case(scheme).then_some(rest)
}

/// Whether two secrets are equal, in time that tells nothing of either:
/// their SHA-256 digests compared in constant time, so that neither the
/// first difference nor the length shows.
fn same_secret(expected: &str, given: &str) -> bool {
    use aws_lc_rs::digest::{SHA256, digest};
    aws_lc_rs::constant_time::verify_slices_are_equal(
        digest(&SHA256, expected.as_bytes()).as_ref(),
        digest(&SHA256, given.as_bytes()).as_ref(),
    )
    .is_ok()
}

/// What `Authorization: Basic` carries: the id and secret form-decoded,
/// as RFC 6749 §2.3.1 sends them, and as they are.
#[derive(Debug, PartialEq, Eq)]
struct Basic {
    id: String,
    secret: String,
    raw_id: String,
    raw_secret: String,
}

fn basic_credentials(value: &HeaderValue) -> Option<Basic> {
    let encoded = strip_scheme(value.to_str().ok()?, "Basic")?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    let decode = |part: &str| {
        percent_encoding::percent_decode_str(&part.replace('+', " "))
            .decode_utf8()
            .ok()
            .map(|text| text.into_owned())
    };
    Some(Basic {
        id: decode(id)?,
        secret: decode(secret)?,
        raw_id: id.to_string(),
        raw_secret: secret.to_string(),
    })
}

/// PKCE (RFC 7636 §4.6): a code issued with a challenge needs the
/// verifier whose S256 it is; one issued without takes no verifier.
fn check_verifier(challenge: Option<&str>, verifier: Option<&str>) -> Result<(), TokenError> {
    match (challenge, verifier) {
        (None, None) => Ok(()),
        (Some(challenge), Some(verifier))
            if (43..=128).contains(&verifier.len())
                && verifier
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b)) =>
        {
            let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, verifier.as_bytes());
            let computed = URL_SAFE_NO_PAD.encode(digest.as_ref());
            aws_lc_rs::constant_time::verify_slices_are_equal(
                computed.as_bytes(),
                challenge.as_bytes(),
            )
            .map_err(|_| INVALID_GRANT)
        }
        _ => Err(INVALID_GRANT),
    }
}

/// A JSON answer that no cache keeps (RFC 6749 §5.1).
fn token_answer(body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::PRAGMA, HeaderValue::from_static("no-cache"));
    response
}

fn token_error(provider: &Provider, error: TokenError, basic: bool) -> Response<Full<Bytes>> {
    provider.refused(error.error);
    let mut response = token_answer(json!({
        "error": error.error,
        "error_description": error.description,
    }));
    *response.status_mut() = error.status;
    if error.status == StatusCode::UNAUTHORIZED && basic {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Basic realm=\"lanyard\""),
        );
    }
    if error.status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

/// `userinfo` asked with no access token at all.
fn bearer_challenge() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// `userinfo`'s refusal (RFC 6750 §3).
fn bearer_error(error: &'static str, description: &'static str) -> Response<Full<Bytes>> {
    let mut response = token_answer(json!({"error": error, "error_description": description}));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    let challenge = format!("Bearer error=\"{error}\", error_description=\"{description}\"");
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

#[cfg(test)]
mod tests;
