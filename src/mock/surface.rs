//! The HTTP conventions the mock's surfaces share: where each surface
//! lives, JSON replies, the error answer (`error` and `message`) and its
//! shorthands, bounded JSON body reading, the organization and project a
//! path names, the fault that drops a connection unanswered, and the frame
//! of the pages a browser sees (the wallet's and the shop's).
//!
//! The lowest module of the mock: the token endpoint, the API and its
//! handlers, and the wallet all import it, and it imports none of them.
//! (Not `http.rs`: that name is the `http` crate's, which every surface
//! imports too.)

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{HeaderValue, Method, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// The token endpoint's path on the mock.
pub const TOKEN_PATH: &str = "/oauth2/token";
/// The API's path prefix on the mock: `SERVICE_API_URL` is `{mock}/api`.
pub const API_PREFIX: &str = "/api";
/// The simulated wallet's path prefix on the mock. Outside the API and
/// without a token: a wallet presents straight to the service
/// (docs/service.md §4.2).
pub const WALLET_PREFIX: &str = "/mock/wallet";
/// The demo's relying party on the mock: a page that logs a person in
/// with OpenID Connect. Outside the API, without a token: a browser's.
pub const SHOP_PREFIX: &str = "/shop";

/// Largest request body the API and the wallet read; anything bigger is a
/// 413.
pub(super) const MAX_BODY: usize = 1024 * 1024;

/// A reply of the mock's.
pub(super) type Reply = Response<Full<Bytes>>;

/// A handler's answer: the reply, or the error answer that replaces it.
pub(super) type Answer = Result<Reply, Refusal>;

/// An error answer: a status and a JSON body with at least `error` and
/// `message`. Small, so handlers can return it through `?`.
#[derive(Debug)]
pub(super) struct Refusal {
    status: StatusCode,
    body: Value,
    /// The `Allow` header of a 405.
    allow: Option<String>,
}

impl Refusal {
    /// A refusal with a body of the caller's shape.
    pub(super) fn with_body(status: StatusCode, body: Value) -> Refusal {
        Refusal {
            status,
            body,
            allow: None,
        }
    }
}

impl From<Refusal> for Reply {
    fn from(refusal: Refusal) -> Reply {
        let mut reply = json(refusal.status, &refusal.body);
        let headers = reply.headers_mut();
        // RFC 6750 §3: every 401 names the scheme the client should use.
        if refusal.status == StatusCode::UNAUTHORIZED {
            headers.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"mock\""),
            );
        }
        if let Some(value) = refusal.allow.and_then(|a| HeaderValue::from_str(&a).ok()) {
            headers.insert(header::ALLOW, value);
        }
        reply
    }
}

/// An error answer with an `error` code and a human `message`.
pub(super) fn error(status: StatusCode, code: &str, message: impl Into<String>) -> Refusal {
    Refusal::with_body(status, json!({"error": code, "message": message.into()}))
}

pub(super) fn not_found(message: impl Into<String>) -> Refusal {
    error(StatusCode::NOT_FOUND, "not_found", message)
}

pub(super) fn conflict(message: impl Into<String>) -> Refusal {
    error(StatusCode::CONFLICT, "conflict", message)
}

/// 405 with the `Allow` header RFC 9110 asks for.
pub(super) fn method_not_allowed(allowed: &[Method]) -> Refusal {
    let names: Vec<&str> = allowed.iter().map(Method::as_str).collect();
    let list = names.join(", ");
    Refusal {
        status: StatusCode::METHOD_NOT_ALLOWED,
        body: json!({
            "error": "method_not_allowed",
            "allowed": names,
            "message": format!("this path takes {list}"),
        }),
        allow: Some(list),
    }
}

/// Seconds since the Unix epoch, the mock's (illustrative) timestamp form.
pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs()
}

/// Reads a JSON body of at most [`MAX_BODY`] bytes. An empty body is
/// `None`; anything but a JSON object is a 400. The content type is not
/// checked, so `curl -d` without a header works in a demo.
pub(super) async fn read_json_object(
    body: Incoming,
) -> Result<Option<Map<String, Value>>, Refusal> {
    let Some(raw) = read_json(body).await? else {
        return Ok(None);
    };
    match serde_json::from_str::<Value>(raw.get()) {
        Ok(Value::Object(object)) => Ok(Some(object)),
        _ => Err(error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the body must be a JSON object",
        )),
    }
}

/// Reads a JSON body of at most [`MAX_BODY`] bytes, any JSON value, as
/// the text it came as. An empty body is `None`; what is not JSON is a 400.
pub(super) async fn read_json(body: Incoming) -> Result<Option<Box<RawValue>>, Refusal> {
    let too_large = || {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("the body is larger than {MAX_BODY} bytes"),
        )
    };
    let bytes = match crate::collect::collect(body, MAX_BODY).await {
        Ok(bytes) => bytes,
        Err(err) if err.is_too_large() => return Err(too_large()),
        Err(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "the body could not be read",
            ));
        }
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    serde_json::from_slice::<Box<RawValue>>(&bytes)
        .map(Some)
        .map_err(|err| {
            error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!(
                    "the body is not valid JSON (line {}, column {})",
                    err.line(),
                    err.column()
                ),
            )
        })
}

/// The organization and project a path names.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scope<'a> {
    pub organization_id: &'a str,
    pub project_id: &'a str,
}

/// Returned by a handler to drop the connection without an answer.
#[derive(Debug)]
pub(super) struct Disconnect;

impl std::fmt::Display for Disconnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("fault injected: disconnect")
    }
}

impl std::error::Error for Disconnect {}

/// A JSON reply.
pub(super) fn json(status: StatusCode, body: &impl serde::Serialize) -> Reply {
    // Values and plain structs always serialize.
    let text = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// What a page of the mock's says it is: its name (title and heading), a
/// sentence on what it stands for, its stylesheet, and its policy.
pub(super) struct Frame {
    pub name: &'static str,
    pub lead: &'static str,
    pub stylesheet: Option<&'static str>,
    pub policy: &'static str,
}

/// An HTML page of `frame` around `body`. Never cached, and no page hands
/// its URL to another site: a wallet's URL names a transaction, the shop's
/// callback carries a code and a state.
pub(super) fn html_page(status: StatusCode, frame: &Frame, body: &str) -> Reply {
    let Frame {
        name, lead, policy, ..
    } = frame;
    let stylesheet = frame
        .stylesheet
        .map(|href| format!("<link rel=\"stylesheet\" href=\"{href}\">\n"))
        .unwrap_or_default();
    let html = format!(
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{name}</title>\n{stylesheet}</head>\n<body>\n<main>\n\
         <h1>{name}</h1>\n<p>{lead}</p>\n{body}\n</main>\n</body>\n</html>\n"
    );
    let mut response = Response::new(Full::new(Bytes::from(html)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(policy),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}
