//! The verifier's own error answers: the shape of docs/proxy.md "Errors made by
//! lanyard itself", with sentences written for the person at the page,
//! who reads them there. The operator's detail goes to the log instead
//! (`api::log_call_failure`), so an answer never tells a visitor about the
//! deployment.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use super::service::CallError;
use crate::error::{ProxyError, json_error};

/// What a call ends with when it is not a success: the verifier's own
/// error answer, or none (the client is gone or stalled).
pub(super) type Refusal = crate::server::Refusal<VerifierError>;

impl From<VerifierError> for Refusal {
    fn from(error: VerifierError) -> Self {
        Refusal::Answer(error)
    }
}

/// Every kind is enumerable (`VerifierError::iter()`, its fields at their
/// defaults), so that [`page_codes`] cannot miss one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::EnumIter)]
pub enum VerifierError {
    /// A request the API does not take; the sentence says what is wrong.
    BadRequest(&'static str),
    /// No session by that id for this browser.
    UnknownSession,
    /// Not a path of the API.
    NoSuchPath,
    MethodNotAllowed {
        allow: &'static str,
    },
    BodyTooLarge,
    /// `/api/start` without `Content-Type: application/json`.
    NotJson,
    /// A request made by another site's page.
    CrossSite,
    /// This client, or everyone together, started too many sessions.
    RateLimited {
        retry_after: Duration,
    },
    /// Every slot for calls to the service stayed busy.
    Busy,
    TokenUnavailable,
    /// The service refused the service account: 401 even with a new
    /// token, or 403.
    ServiceRefusedAccount,
    /// The service knows no such rule, or it is a draft.
    RuleNotFound,
    /// The service failed or answered something unusable.
    ServiceFailed,
    ServiceUnreachable,
    ServiceTimeout,
}

/// Every error code the page can be given, each once, sorted: the API's
/// own, and those of the refusals the verifier's listener makes before a
/// request reaches it (`process::limits`). The page has a message for
/// each in every language (docs/translations.md), which a test checks.
pub fn page_codes() -> Vec<&'static str> {
    use strum::IntoEnumIterator;
    let listener = [
        ProxyError::TooManyConnections,
        ProxyError::UriTooLong,
        ProxyError::BadRequest,
    ];
    let mut codes: Vec<&'static str> = VerifierError::iter()
        .map(VerifierError::code)
        .chain(listener.iter().map(ProxyError::code))
        .collect();
    codes.sort_unstable();
    codes.dedup();
    codes
}

impl VerifierError {
    pub fn code(self) -> &'static str {
        match self {
            VerifierError::BadRequest(_) => "bad_request",
            VerifierError::UnknownSession | VerifierError::NoSuchPath => "not_found",
            VerifierError::MethodNotAllowed { .. } => "method_not_allowed",
            VerifierError::BodyTooLarge => "payload_too_large",
            VerifierError::NotJson => "unsupported_media_type",
            VerifierError::CrossSite => "cross_site_request",
            VerifierError::RateLimited { .. } => "rate_limited",
            VerifierError::Busy => "too_many_sessions",
            VerifierError::TokenUnavailable => "token_unavailable",
            VerifierError::ServiceRefusedAccount => "service_refused",
            VerifierError::RuleNotFound => "rule_not_found",
            VerifierError::ServiceFailed => "service_error",
            VerifierError::ServiceUnreachable => "upstream_unreachable",
            VerifierError::ServiceTimeout => "upstream_timeout",
        }
    }

    pub fn status(self) -> StatusCode {
        match self {
            VerifierError::BadRequest(_) => StatusCode::BAD_REQUEST,
            VerifierError::UnknownSession | VerifierError::NoSuchPath => StatusCode::NOT_FOUND,
            VerifierError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            VerifierError::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            VerifierError::NotJson => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            VerifierError::CrossSite => StatusCode::FORBIDDEN,
            VerifierError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            VerifierError::Busy | VerifierError::TokenUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            VerifierError::ServiceRefusedAccount
            | VerifierError::RuleNotFound
            | VerifierError::ServiceFailed
            | VerifierError::ServiceUnreachable => StatusCode::BAD_GATEWAY,
            VerifierError::ServiceTimeout => StatusCode::GATEWAY_TIMEOUT,
        }
    }

    pub fn message(self) -> &'static str {
        match self {
            VerifierError::BadRequest(why) => why,
            VerifierError::UnknownSession => {
                "No verification session with that transactionId was started by this browser."
            }
            VerifierError::NoSuchPath => {
                "Not a path of this API: POST /api/start, GET /api/status?transactionId=..."
            }
            VerifierError::MethodNotAllowed { .. } => "That method is not allowed on this path.",
            VerifierError::BodyTooLarge => "The request body is too large; /api/start takes none.",
            VerifierError::NotJson => {
                "POST /api/start with Content-Type: application/json (the body may be {} or empty)."
            }
            VerifierError::CrossSite => "Requests from other sites' pages are not accepted.",
            VerifierError::RateLimited { .. } => {
                "Too many verifications were started from here just now. Please wait a moment and start again."
            }
            VerifierError::Busy => {
                "This site is handling too many verifications right now. Please try again in a few minutes."
            }
            VerifierError::TokenUnavailable => {
                "This site cannot reach the verification service right now (it holds no access token). Please try again later."
            }
            VerifierError::ServiceRefusedAccount => {
                "The verification service refused this site's service account. The site's operator has been told in its logs."
            }
            VerifierError::RuleNotFound => {
                "The verification service does not know this site's verification rule, or it is not published. The site's operator has been told in its logs."
            }
            VerifierError::ServiceFailed => {
                "The verification service had a problem. Please try again in a moment."
            }
            VerifierError::ServiceUnreachable => {
                "This site could not reach the verification service. Please try again in a moment."
            }
            VerifierError::ServiceTimeout => {
                "The verification service did not answer in time. Please try again in a moment."
            }
        }
    }

    pub fn response(self) -> Response<Full<Bytes>> {
        let mut response = json_error(self.status(), self.code(), self.message());
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        match self {
            VerifierError::MethodNotAllowed { allow } => {
                headers.insert(header::ALLOW, HeaderValue::from_static(allow));
            }
            VerifierError::RateLimited { retry_after } => {
                // Whole seconds, rounded up: a client that waits exactly
                // this long gets through.
                let seconds = retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0);
                headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
            }
            _ => {}
        }
        response
    }

    /// What the page is told when a call to the service failed.
    pub fn from_call(err: &CallError) -> VerifierError {
        match err {
            CallError::TokenUnavailable => VerifierError::TokenUnavailable,
            CallError::Answered(status)
                if *status == StatusCode::UNAUTHORIZED || *status == StatusCode::FORBIDDEN =>
            {
                VerifierError::ServiceRefusedAccount
            }
            CallError::Answered(status) if *status == StatusCode::NOT_FOUND => {
                VerifierError::RuleNotFound
            }
            CallError::Answered(_)
            | CallError::Malformed(_)
            | CallError::Unusable(_)
            | CallError::TooLarge
            | CallError::CutOff
            | CallError::RulePath => VerifierError::ServiceFailed,
            CallError::Unreachable(_) => VerifierError::ServiceUnreachable,
            CallError::Timeout(_) => VerifierError::ServiceTimeout,
        }
    }
}
