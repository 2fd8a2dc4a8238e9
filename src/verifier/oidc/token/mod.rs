//! The token endpoint (RFC 6749 §3.2, §4.1.3; OpenID Connect Core
//! §3.1.3) and `userinfo` (§5.3): a relying party's backend redeems a
//! code for an ID token over the presented claims, which whichever replica
//! it reaches asks of the service again, and reads them again with the
//! access token, which carries them sealed: `userinfo` asks the service
//! nothing, so no holder of access tokens spends a replica's calls to it.

mod answer;
mod client_auth;
mod redeemed;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Body;
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::authorize::parameters;
use super::sealed::{self, AccessToken, Code};
use super::signer::SignError;
use super::{Provider, TOKEN_LIFETIME, cors};
use crate::config::oidc::Client;
use crate::config::oidc::rules::Rule;
use crate::verifier::Inner;
use crate::verifier::assumptions::{Claims, Ending, Progress};
use crate::verifier::clock::unix_now;
use crate::verifier::errors::Refusal;
use crate::verifier::errors::VerifierError;
use crate::verifier::limits::Client as Address;
use crate::verifier::polls;
use crate::verifier::service::CallError;

use answer::{
    FOREIGN_ORIGIN, INVALID_CLIENT, INVALID_GRANT, TokenError, UNAVAILABLE, bearer_challenge,
    bearer_error, refuse, throttled, token_answer, token_error, userinfo_throttled,
};
use client_auth::strip_scheme;
pub use redeemed::Redeemed;
use redeemed::Taking;

/// A token request's form, at most: a code, a verifier, a redirect URI
/// and a client's credentials.
const MAX_FORM: usize = 16 * 1024;
/// A backend sends its small form with its head.
const FORM_TIMEOUT: Duration = Duration::from_secs(10);
/// A parameter given, and not empty.
fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.is_empty())
}

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

/// The registered client a token request names.
#[derive(Default)]
struct Named<'p> {
    /// As soon as the request is read.
    claimed: Option<&'p Client>,
    /// Once the request passed the throttle, for CORS.
    for_cors: Option<&'p Client>,
}

impl Inner {
    /// `POST {issuer}/token`, from `address` (the client's, as the
    /// throttle of failed authentications counts it).
    pub(super) async fn token<B>(
        &self,
        provider: &Provider,
        req: Request<B>,
        address: Address,
    ) -> Response<Full<Bytes>>
    where
        B: Body<Data = Bytes>,
    {
        let basic = req.headers().contains_key(header::AUTHORIZATION);
        let headers = req.headers().clone();
        let form = match read_form(req).await {
            Ok(form) => form,
            Err(Refusal::Answer(VerifierError::BodyTooLarge)) => {
                let too_large = refuse("invalid_request", "the form is too large");
                return token_error(provider, too_large, false, None);
            }
            Err(_) => {
                let not_a_form = refuse("invalid_request", "the body must be a form");
                return token_error(provider, not_a_form, false, None);
            }
        };
        let mut named = Named::default();
        let answer = self
            .token_request(provider, &headers, &form, address, &mut named)
            .await;
        // The client the request names, authenticated or not, in the
        // metrics: a throttled guesser shows against the client guessed.
        let claimed = named.claimed.map(|c| c.id.as_str());
        let mut response = match answer {
            Ok(answer) => {
                let client = provider.client_label(claimed);
                provider.metrics.tokens.with_label_values(&[client]).inc();
                token_answer(answer)
            }
            Err(error) => token_error(provider, error, basic, claimed),
        };
        let named = named.for_cors;
        cors::vary(response.headers_mut());
        if let (Some(client), Some(origin)) = (named, headers.get(header::ORIGIN))
            && cors::allows(client, origin)
        {
            cors::grant(response.headers_mut(), origin);
        }
        response
    }

    /// A token request: its client named, throttled, its origin checked,
    /// authenticated, then its code redeemed. `named` is the client the
    /// request named, for the metrics and, once not throttled, CORS.
    async fn token_request<'p>(
        &self,
        provider: &'p Provider,
        headers: &HeaderMap,
        form: &[u8],
        address: Address,
        named: &mut Named<'p>,
    ) -> Result<Value, TokenError> {
        let params = parameters(form)
            .map_err(|_| refuse("invalid_request", "a parameter is given more than once"))?;
        let get = |name: &str| param(&params, name);
        let claimed = client_auth::claimed(
            &provider.clients,
            headers,
            get("client_id"),
            get("client_secret"),
        );
        let now = Instant::now();
        named.claimed = claimed.as_ref().ok().map(|c| c.client);
        let client_id = claimed.as_ref().ok().map(|c| c.client.id.as_str());
        provider
            .throttle
            .check(client_id, address, now)
            .map_err(|wait| {
                tracing::debug!(client = ?address, "a token request refused: too many failed client authentications");
                throttled(wait)
            })?;
        let claimed = claimed.inspect_err(|error| {
            if *error == INVALID_CLIENT {
                provider.throttle.failed(None, address, now);
            }
        })?;
        named.for_cors = Some(claimed.client);
        // A page of another origin may not spend the client's code.
        if let Some(origin) = headers.get(header::ORIGIN)
            && !cors::allows(claimed.client, origin)
        {
            return Err(FOREIGN_ORIGIN);
        }
        let id = claimed.client.id.as_str();
        let client = claimed
            .authenticate()
            .inspect_err(|_| provider.throttle.failed(Some(id), address, now))?;
        self.redeem(provider, client, &params).await
    }

    /// The code of an authenticated client's request, redeemed.
    async fn redeem(
        &self,
        provider: &Provider,
        client: &Client,
        params: &[(String, String)],
    ) -> Result<Value, TokenError> {
        let get = |name: &str| param(params, name);
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
        let taken = provider.redeemed().take(&code, now);
        match taken {
            Ok(()) => {}
            Err(true) => {
                tracing::warn!(
                    client_id = client.id,
                    "an authorization code was presented again; refused, and the access tokens issued for it here are revoked"
                );
                return Err(INVALID_GRANT);
            }
            Err(false) => return Err(UNAVAILABLE),
        }
        let taking = Taking {
            provider,
            id: Some(code.id.clone()),
        };
        let rule = authorization.rule.as_ref();
        let issued = match self.presented(rule, &code.service_id).await {
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
        let mut id_token = named.id_token.clone();
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
        let expires_at = now + TOKEN_LIFETIME;
        let mut access =
            AccessToken::new(&authorization.client_id, &code.sub, expires_at, &code.id);
        let left_out = access.fill(&named);
        if left_out > 0
            && let Some(held_back) = provider.left_out.due(Instant::now())
        {
            // How many, never which: a claim's name can say what a
            // credential holds.
            tracing::warn!(
                left_out,
                held_back,
                "presented claims too large for the access token are left out of userinfo (docs/oidc.md, \"The access token\"); logged at most once a minute"
            );
        }
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

    /// `GET {issuer}/userinfo` with the access token (RFC 6750 §2.1),
    /// readable by a page of the token's client's origins (and its
    /// refusals by a page of any client's).
    pub(super) fn userinfo(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
    ) -> Response<Full<Bytes>> {
        let (mut response, client) = self.userinfo_answer(provider, headers);
        cors::vary(response.headers_mut());
        if let Some(origin) = headers.get(header::ORIGIN) {
            let allowed = match client.and_then(|id| provider.clients.get(&id)) {
                Some(client) => cors::allows(client, origin),
                None => origin.to_str().is_ok_and(|o| provider.origins.contains(o)),
            };
            if allowed {
                cors::grant(response.headers_mut(), origin);
            }
        }
        response
    }

    /// `userinfo`'s answer, from the access token alone, and the token's
    /// client when it opened.
    fn userinfo_answer(
        &self,
        provider: &Provider,
        headers: &HeaderMap,
    ) -> (Response<Full<Bytes>>, Option<String>) {
        let Some(bearer) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| strip_scheme(v, "Bearer"))
        else {
            // No credentials: a challenge with no error (RFC 6750 §3.1).
            provider.refused("invalid_token", None);
            return (bearer_challenge(), None);
        };
        let access: Option<AccessToken> =
            sealed::open(&self.keys.ring(), &provider.issuer, bearer.trim());
        let access = match access {
            Some(access)
                if access.expires_at > unix_now()
                    && !provider.redeemed().is_revoked(&access.grant) =>
            {
                access
            }
            _ => {
                provider.refused("invalid_token", None);
                let refused =
                    bearer_error("invalid_token", "the access token is invalid or expired");
                return (refused, None);
            }
        };
        if let Err(wait) = provider.userinfo_limit.take(bearer.trim(), Instant::now()) {
            let client = Some(access.client_id.as_str());
            let throttled = token_error(provider, userinfo_throttled(wait), false, client);
            return (throttled, Some(access.client_id));
        }
        let mut answer = access.claims;
        answer.insert("sub".into(), access.sub.into());
        (token_answer(Value::Object(answer)), Some(access.client_id))
    }

    /// The claims presented in the service's session `id`: as this
    /// replica saw them end, or asked of the service again, for as long as
    /// it holds them (docs/oidc.md, "What lives where"); the code's own
    /// lifetime bounds how long that is asked.
    async fn presented(
        &self,
        rule: Option<&Rule>,
        id: &str,
    ) -> Result<Map<String, Value>, TokenError> {
        let known = polls::lock(&self.polls).verified(id);
        let claims = match known {
            Some(claims) => claims,
            None => self.ask_claims(rule, id).await?,
        };
        serde_json::from_str(claims.object_text()).map_err(|_| INVALID_GRANT)
    }

    /// The claims of session `id` on `rule` (the login's: the
    /// deployment's when `None`), asked of the service.
    async fn ask_claims(&self, rule: Option<&Rule>, id: &str) -> Result<Claims, TokenError> {
        let rule = self.service.rule(rule);
        // The replica's one budget for calls to the service, as the page's
        // polls spend it: a code is redeemed once on each replica, so its
        // holder cannot spend more.
        if !self.budget.take() {
            return Err(UNAVAILABLE);
        }
        let permit = tokio::time::timeout(self.service.timeout(), self.calls.acquire()).await;
        let Ok(Ok(_permit)) = permit else {
            return Err(UNAVAILABLE);
        };
        let asked = match &rule {
            Ok(rule) => self.service.progress(rule, id).await,
            Err(err) => Err(err.clone()),
        };
        match asked {
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
                    rule.as_ref().ok(),
                );
                Err(UNAVAILABLE)
            }
        }
    }
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

#[cfg(test)]
mod tests;
