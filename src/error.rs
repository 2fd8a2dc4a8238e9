//! Errors lanyard answers itself (docs/proxy.md "Errors made by lanyard itself"), and the one function that
//! turns them into responses.

use std::borrow::Cow;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

/// Why lanyard answered instead of the upstream.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProxyError {
    /// No valid token is held.
    TokenUnavailable,
    /// The upstream could not be reached.
    UpstreamUnreachable,
    /// The TLS handshake with the upstream failed.
    UpstreamTls,
    /// The upstream answered 101 Switching Protocols: lanyard forwards
    /// requests, never an upgraded connection, and a 101 passed on without
    /// its connection would leave the client waiting on a protocol that
    /// never comes. Answered as `upstream_unreachable`.
    UpstreamSwitchedProtocols,
    /// The upstream sent no response headers in time.
    UpstreamTimeout,
    /// The request named another authority: the token never goes there.
    ForbiddenTarget,
    /// `CONNECT`: lanyard is not a tunnel; `TRACE`: the upstream would
    /// echo the token back.
    MethodNotAllowed,
    /// The target, joined to the base URL's path, is longer than a URI
    /// may be (`uri_too_long`, 414).
    UriTooLong,
    /// The client's request body could not be read (the client went away
    /// or broke the framing).
    BadRequest,
    /// The path has a `.` or `..` segment, which an upstream normalising
    /// it would resolve above the base URL's prefix. Answered as
    /// `bad_request`, with its own sentence.
    DotSegment,
    /// The path names an organization that no account serves
    /// (docs/accounts.md): nothing is forwarded.
    NoAccountForOrganization(Box<str>),
    /// The path names no organization, and no account serves such paths.
    NoAccountForPath,
    /// The path's organization cannot be read plainly (empty, encoded),
    /// or an upstream could read one lanyard does not; why, and the
    /// segment that makes it so, shown escaped and bounded
    /// (`accounts::organization::Unreadable::shown_segment`). Answered as
    /// `bad_request`.
    UnreadableOrganization(&'static str, Option<Box<str>>),
    /// The listener holds `LANYARD_MAX_CONNECTIONS` connections already.
    TooManyConnections,
}

impl ProxyError {
    /// The `error` field and `lanyard-error` header value.
    pub fn code(&self) -> &'static str {
        match self {
            ProxyError::TokenUnavailable => "token_unavailable",
            ProxyError::UpstreamUnreachable | ProxyError::UpstreamSwitchedProtocols => {
                "upstream_unreachable"
            }
            ProxyError::UpstreamTls => "upstream_tls",
            ProxyError::UpstreamTimeout => "upstream_timeout",
            ProxyError::ForbiddenTarget => "forbidden_target",
            ProxyError::MethodNotAllowed => "method_not_allowed",
            ProxyError::UriTooLong => "uri_too_long",
            ProxyError::BadRequest
            | ProxyError::DotSegment
            | ProxyError::UnreadableOrganization(..) => "bad_request",
            ProxyError::NoAccountForOrganization(_) => "no_account_for_organization",
            ProxyError::NoAccountForPath => "no_account_for_path",
            ProxyError::TooManyConnections => "too_many_connections",
        }
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::TokenUnavailable | ProxyError::TooManyConnections => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ProxyError::UpstreamUnreachable
            | ProxyError::UpstreamTls
            | ProxyError::UpstreamSwitchedProtocols => StatusCode::BAD_GATEWAY,
            ProxyError::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::ForbiddenTarget
            | ProxyError::BadRequest
            | ProxyError::DotSegment
            | ProxyError::UnreadableOrganization(..) => StatusCode::BAD_REQUEST,
            ProxyError::NoAccountForOrganization(_) | ProxyError::NoAccountForPath => {
                StatusCode::FORBIDDEN
            }
            ProxyError::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ProxyError::UriTooLong => StatusCode::URI_TOO_LONG,
        }
    }

    /// A fixed sentence: never an inner error's text, which can leak
    /// internals (addresses, certificate names, library messages). The
    /// values a sentence names come from the request's own path: an
    /// organization id, which holds only the characters an id has, or a
    /// refused segment, at most 64 characters with every one but
    /// printable ASCII escaped (`accounts::organization`).
    pub fn message(&self) -> Cow<'static, str> {
        let fixed = match self {
            ProxyError::TokenUnavailable => {
                "lanyard holds no valid token for the service; see its logs and /readyz"
            }
            ProxyError::UpstreamUnreachable => "lanyard could not reach the service",
            ProxyError::UpstreamTls => "the TLS handshake with the service failed",
            ProxyError::UpstreamSwitchedProtocols => {
                "the service answered 101 Switching Protocols; lanyard forwards requests, not upgraded connections"
            }
            ProxyError::UpstreamTimeout => "the service did not answer in time",
            ProxyError::ForbiddenTarget => {
                "lanyard forwards only to the service it is configured for; send requests in origin form (GET /path)"
            }
            ProxyError::MethodNotAllowed => {
                "lanyard does not forward CONNECT (a tunnel) or TRACE (it would echo the token)"
            }
            ProxyError::UriTooLong => {
                "the request target is too long to forward once joined to the service's base path"
            }
            ProxyError::BadRequest => "the request body could not be read",
            ProxyError::DotSegment => {
                "the request path has a . or .. segment (perhaps percent-encoded), which could leave the service's base path; lanyard does not forward it"
            }
            ProxyError::TooManyConnections => {
                "lanyard holds as many connections as it allows (LANYARD_MAX_CONNECTIONS); reuse connections or retry"
            }
            ProxyError::NoAccountForOrganization(organization) => {
                return Cow::Owned(format!(
                    "lanyard holds no service account for organization `{organization}`: no credentials file of SA_CREDENTIALS_DIR names it; nothing was forwarded"
                ));
            }
            ProxyError::NoAccountForPath => {
                "the path names no organization (/organizations/{ORG_ID}/...), and lanyard has no account for such paths (SA_CREDENTIALS_FILE is not set); nothing was forwarded"
            }
            ProxyError::UnreadableOrganization(why, None) => why,
            ProxyError::UnreadableOrganization(why, Some(segment)) => {
                return Cow::Owned(format!("{why} (the segment `{segment}`)"));
            }
        };
        Cow::Borrowed(fixed)
    }

    /// The response: status, `content-type: application/json`,
    /// `lanyard-error: <code>`, body `{"error":"<code>","message":"..."}`.
    pub fn response(&self) -> Response<Full<Bytes>> {
        let mut response = json_error(self.status(), self.code(), &self.message());
        if *self == ProxyError::MethodNotAllowed {
            let headers = response.headers_mut();
            headers.insert(
                header::ALLOW,
                HeaderValue::from_static("GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),
            );
        }
        response
    }

    fn body(&self) -> String {
        error_body(self.code(), &self.message())
    }

    /// The same answer as raw HTTP/1.1 bytes with `connection: close`, for
    /// a connection refused before any HTTP machinery is spent on it.
    pub fn http1_bytes(&self) -> Vec<u8> {
        raw_http1(self.status(), Some(self.code()), &self.body())
    }
}

/// A whole HTTP/1.1 answer as bytes, `connection: close`, its length
/// counted here: what a listener writes to a connection it refuses before
/// any HTTP machinery is spent on it. With a `code`, the body is lanyard's
/// JSON error and carries the `lanyard-error` header; without, plain text.
pub fn raw_http1(status: StatusCode, code: Option<&str>, body: &str) -> Vec<u8> {
    let kind = match code {
        Some(code) => format!("content-type: application/json\r\nlanyard-error: {code}"),
        None => "content-type: text/plain; charset=utf-8".to_string(),
    };
    format!(
        "HTTP/1.1 {} {}\r\n{kind}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes()
}

/// What a 403 from the service most likely means, for every log line and
/// report that meets one: the proxy's hint, the verifier's warning, `lanyard
/// check`. The service names no cause (docs/service.md §7).
pub const FORBIDDEN_HINT: &str = "the service account likely lacks the role for this API \
     (verifications.api or credentials.api) or membership of the project's group \
     (docs/service.md §5.4, §7; docs/troubleshooting.md)";

/// One of lanyard's own errors, the proxy's or the verifier's: `status`,
/// `content-type: application/json`, `lanyard-error: <code>`, body
/// `{"error":"<code>","message":"<message>"}`.
pub fn json_error(status: StatusCode, code: &'static str, message: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(error_body(code, message))));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("lanyard-error", HeaderValue::from_static(code));
    response
}

fn error_body(code: &str, message: &str) -> String {
    serde_json::json!({"error": code, "message": message}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn every_error_has_the_contract_shape() {
        let all = [
            (ProxyError::TokenUnavailable, 503),
            (ProxyError::UpstreamUnreachable, 502),
            (ProxyError::UpstreamTls, 502),
            (ProxyError::UpstreamSwitchedProtocols, 502),
            (ProxyError::UpstreamTimeout, 504),
            (ProxyError::ForbiddenTarget, 400),
            (ProxyError::MethodNotAllowed, 405),
            (ProxyError::UriTooLong, 414),
            (ProxyError::BadRequest, 400),
            (ProxyError::DotSegment, 400),
            (ProxyError::TooManyConnections, 503),
            (ProxyError::NoAccountForOrganization("org-B".into()), 403),
            (ProxyError::NoAccountForPath, 403),
            (ProxyError::UnreadableOrganization("why", None), 400),
            (
                ProxyError::UnreadableOrganization("why", Some("%20".into())),
                400,
            ),
        ];
        for (error, status) in all {
            let response = error.response();
            assert_eq!(response.status().as_u16(), status);
            assert_eq!(response.headers()["content-type"], "application/json");
            assert_eq!(response.headers()["lanyard-error"], error.code());
            let body = response.into_body().collect().await.unwrap().to_bytes();
            let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
            assert_eq!(json["error"], error.code());
            assert_eq!(json["message"], error.message().as_ref());
            assert_eq!(json.as_object().unwrap().len(), 2);
        }
    }
}
