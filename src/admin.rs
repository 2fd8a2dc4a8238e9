//! The admin listener: `/healthz`, `/readyz`, `/metrics`. It serves health
//! and metrics only, never a token.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use prometheus::{Encoder, Registry, TextEncoder};
use serde_json::json;

use crate::server::{Abort, Handler};
use crate::token::TokenHandle;

/// Ready only while the token has at least this long to go before it is
/// retired (its expiry less the expiry margin), so a request forwarded just
/// after the probe still carries a token lanyard will send. Ready thus
/// means valid for the margin plus these 10 s (README "Token lifetime").
pub const READY_MIN_REMAINING: Duration = Duration::from_secs(10);

/// The admin endpoints.
pub struct Admin {
    tokens: TokenHandle,
    registry: Registry,
    draining: Arc<AtomicBool>,
}

impl Admin {
    /// `draining` turns readiness off during shutdown.
    pub fn new(tokens: TokenHandle, registry: Registry, draining: Arc<AtomicBool>) -> Admin {
        Admin {
            tokens,
            registry,
            draining,
        }
    }

    fn readiness(&self) -> Response<Full<Bytes>> {
        let state = self.tokens.state().borrow().clone();
        let last_error = state.last_error.as_ref().map(ToString::to_string);
        let not_ready = |reason: &str| {
            json_response(
                StatusCode::SERVICE_UNAVAILABLE,
                &json!({
                    "status": "not_ready",
                    "reason": reason,
                    "last_error": last_error,
                    "consecutive_failures": state.consecutive_failures,
                }),
            )
        };
        if self.draining.load(Ordering::Acquire) {
            return not_ready("shutting down");
        }
        let Some(token) = self.tokens.current() else {
            return not_ready(if state.generation == 0 {
                "no token has been obtained yet"
            } else {
                "the token has been retired (its expiry margin reached) and could not be renewed"
            });
        };
        let remaining = token.remaining();
        if remaining < READY_MIN_REMAINING {
            return not_ready(
                "the token has less than 10 s left before it is retired, and has not been renewed",
            );
        }
        // An upstream 401 does not make the pod unready: lanyard still holds
        // a token within its lifetime and sends it, and a client could
        // otherwise take the pod out of service by calling one path that
        // answers 401 (README "Token lifetime"). It is reported, not hidden.
        json_response(
            StatusCode::OK,
            &json!({
                "status": "ready",
                "token_expires_in_s": remaining.as_secs(),
                "upstream_rejected_token": token.is_rejected(),
            }),
        )
    }

    fn metrics(&self) -> Response<Full<Bytes>> {
        let encoder = TextEncoder::new();
        let mut buffer = Vec::with_capacity(8 * 1024);
        if let Err(err) = encoder.encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(error = %err, "encoding metrics failed");
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "encoding metrics failed\n",
            );
        }
        let mut response = Response::new(Full::new(Bytes::from(buffer)));
        if let Ok(value) = HeaderValue::from_str(encoder.format_type()) {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    }
}

impl Handler for Admin {
    type Body = Full<Bytes>;

    async fn handle(
        &self,
        req: Request<Incoming>,
        _client: std::net::SocketAddr,
    ) -> Result<Response<Full<Bytes>>, Abort> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Ok(response);
        }
        Ok(match req.uri().path() {
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" => self.readiness(),
            "/metrics" => self.metrics(),
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: try /healthz, /readyz or /metrics\n",
            ),
        })
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}
