//! What the token endpoint and `userinfo` answer: RFC 6749 §5.1's JSON,
//! §5.2's refusals, and RFC 6750 §3's bearer challenges.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Value, json};

use crate::verifier::oidc::Provider;

/// A refusal in RFC 6749 §5.2's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TokenError {
    pub status: StatusCode,
    pub error: &'static str,
    pub description: &'static str,
    /// The `reason` label of `lanyard_oidc_refusals_total`: the error,
    /// or what a generic error stands for.
    pub reason: &'static str,
    /// Seconds, for `Retry-After`.
    pub retry_after: Option<u64>,
}

pub(super) const fn refuse(error: &'static str, description: &'static str) -> TokenError {
    TokenError {
        status: StatusCode::BAD_REQUEST,
        error,
        description,
        reason: error,
        retry_after: None,
    }
}

pub(super) const INVALID_CLIENT: TokenError = TokenError {
    status: StatusCode::UNAUTHORIZED,
    ..refuse(
        "invalid_client",
        "the client is unknown or its credentials are wrong",
    )
};
pub(super) const UNAVAILABLE: TokenError = TokenError {
    status: StatusCode::SERVICE_UNAVAILABLE,
    retry_after: Some(1),
    ..refuse(
        "temporarily_unavailable",
        "the provider is busy; retry shortly",
    )
};
pub(super) const INVALID_GRANT: TokenError = refuse(
    "invalid_grant",
    "the code is invalid, expired, already used, or not this client's",
);
/// A browser page of an origin the client did not register (docs/oidc.md,
/// "Browser apps"): refused before the code is looked at, so it stays
/// good for the client's own page.
pub(super) const FOREIGN_ORIGIN: TokenError = refuse(
    "invalid_request",
    "this origin is not one of the client's redirect URIs' origins",
);

/// Too many failed client authentications (docs/oidc.md, "Client
/// authentication"): 429, and when to try again. The code, if any, was
/// not looked at and stays good.
pub(super) fn throttled(wait: Duration) -> TokenError {
    too_many(
        "client_auth_throttled",
        "too many failed client authentications; retry after the time Retry-After says",
        wait,
    )
}

/// Too many `userinfo` calls with one access token (docs/oidc.md, "The
/// access token"): 429, and when to try again.
pub(super) fn userinfo_throttled(wait: Duration) -> TokenError {
    too_many(
        "userinfo_throttled",
        "too many userinfo requests with this access token; retry after the time Retry-After says",
        wait,
    )
}

/// 429 `temporarily_unavailable`, counted as `reason`, with `Retry-After`
/// in whole seconds, at least one.
fn too_many(reason: &'static str, description: &'static str, wait: Duration) -> TokenError {
    TokenError {
        status: StatusCode::TOO_MANY_REQUESTS,
        reason,
        retry_after: Some(wait.as_secs_f64().ceil().max(1.0) as u64),
        ..refuse("temporarily_unavailable", description)
    }
}

/// A JSON answer that no cache keeps (RFC 6749 §5.1).
pub(super) fn token_answer(body: Value) -> Response<Full<Bytes>> {
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

/// `error`'s answer, counted for the client the request named, if any.
pub(super) fn token_error(
    provider: &Provider,
    error: TokenError,
    basic: bool,
    client_id: Option<&str>,
) -> Response<Full<Bytes>> {
    provider.refused(error.reason, client_id);
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
    if let Some(seconds) = error.retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

/// `userinfo` asked with no access token at all.
pub(super) fn bearer_challenge() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::UNAUTHORIZED;
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// `userinfo`'s refusal (RFC 6750 §3).
pub(super) fn bearer_error(
    error: &'static str,
    description: &'static str,
) -> Response<Full<Bytes>> {
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
