//! Every span lanyard exports and every attribute on one, declared in this
//! file so that what leaves the process is read in one place: never a
//! token, an assertion, a key, a PIN, a claim or a query string (docs/admin.md
//! "Tracing"). Names follow the HTTP semantic conventions where they have
//! one; lanyard's own are under `lanyard.`.
//!
//! Spans are `tracing` spans with the target [`TARGET`], which only the
//! OpenTelemetry layer takes (`super::layer`): with tracing off, each is
//! `Span::none()` after one cached callsite check, and the propagation
//! work here is skipped, so the request path pays nothing more.

use std::cell::Cell;

use http::uri::Scheme;
use http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header::HeaderName};
use opentelemetry::Context;
use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{SpanContext, TraceContextExt as _, TraceState};
use opentelemetry_http::{HeaderExtractor, HeaderInjector};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use tracing::field::Empty;
use tracing::instrument::{Instrument as _, Instrumented};
use tracing::level_filters::LevelFilter;
use tracing::{Metadata, Span};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::filter::{FilterFn, filter_fn};

use crate::metrics::{METHODS, method_index};
use crate::target::{TargetUrl, default_port};

/// The target of every span lanyard exports, and of nothing else.
pub const TARGET: &str = "lanyard_otel";

/// The log's filter's part: every target but [`TARGET`], whose spans are
/// OpenTelemetry's, so that a log line reads as it does with tracing off.
/// Its hint leaves the log's level as the log's own filter sets it.
pub fn not_exported() -> FilterFn<impl Fn(&Metadata<'_>) -> bool> {
    filter_fn(|meta| meta.target() != TARGET).with_max_level_hint(LevelFilter::TRACE)
}

/// The token request span's name.
const TOKEN_REQUEST: &str = "token request";

const TRACEPARENT: HeaderName = HeaderName::from_static("traceparent");
const TRACESTATE: HeaderName = HeaderName::from_static("tracestate");

/// A client span over HTTP: a proxied request, or one of the verifier's
/// calls to the service.
#[derive(Debug)]
pub struct HttpSpan {
    span: Span,
    /// Times the request was sent again (a 401 and a new token, or a
    /// pooled connection closed unanswered).
    resends: Cell<u8>,
    /// The app's `tracestate`, carried to the upstream as it came but
    /// kept out of lanyard's span, which is exported: it is a header's
    /// value, and no header's value is traced (docs/admin.md "Tracing").
    carried_state: Option<HeaderValue>,
}

/// Which of the verifier's calls a span is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifierCall {
    Start,
    Poll,
}

impl HttpSpan {
    /// A proxied request's span: a child of the app's `traceparent` (its
    /// `tracestate` carried), or the root of a new trace. The path is the
    /// app's, without its query, which may hold personal data.
    pub fn proxied(method: &Method, uri: &Uri, headers: &HeaderMap, upstream: &TargetUrl) -> Self {
        let authority = upstream.authority();
        let span = tracing::info_span!(
            target: TARGET,
            parent: None,
            "proxied",
            otel.name = span_name(method),
            otel.kind = "client",
            otel.status_code = Empty,
            http.request.method = method_name(method),
            http.response.status_code = Empty,
            http.request.resend_count = Empty,
            "error.type" = Empty,
            server.address = authority.host(),
            server.port = port(upstream.scheme(), authority.port_u16()),
            url.scheme = upstream.scheme().as_str(),
            url.path = uri.path(),
        );
        let mut carried_state = None;
        if !span.is_disabled() {
            // From nothing but the headers: the thread's own context is
            // another request's business.
            let parent = TraceContextPropagator::new()
                .extract_with_context(&Context::new(), &HeaderExtractor(headers));
            let remote = parent.span().span_context().clone();
            let parent = match remote.is_valid() {
                true => {
                    carried_state = headers.get(TRACESTATE).cloned();
                    let stateless = SpanContext::new(
                        remote.trace_id(),
                        remote.span_id(),
                        remote.trace_flags(),
                        remote.is_remote(),
                        TraceState::default(),
                    );
                    Context::new().with_remote_span_context(stateless)
                }
                false => Context::new(),
            };
            let _ = span.set_parent(parent);
        }
        HttpSpan {
            carried_state,
            ..HttpSpan::new(span)
        }
    }

    /// A verifier's call to the service: a root, with no path (a poll's
    /// names the session).
    pub fn verifier(call: VerifierCall, method: &Method, service: &Uri) -> Self {
        let scheme = service.scheme_str().unwrap_or("https");
        let span = tracing::info_span!(
            target: TARGET,
            parent: None,
            "verifier call",
            otel.name = match call {
                VerifierCall::Start => "verifier start",
                VerifierCall::Poll => "verifier poll",
            },
            otel.kind = "client",
            otel.status_code = Empty,
            http.request.method = method_name(method),
            http.response.status_code = Empty,
            http.request.resend_count = Empty,
            "error.type" = Empty,
            server.address = service.host().unwrap_or_default(),
            server.port = port(service.scheme().unwrap_or(&Scheme::HTTPS), service.port_u16()),
            url.scheme = scheme,
        );
        HttpSpan::new(span)
    }

    fn new(span: Span) -> Self {
        HttpSpan {
            span,
            resends: Cell::new(0),
            carried_state: None,
        }
    }

    /// Gives the request going out this span's `traceparent` (and the
    /// `tracestate` it carries), in place of the app's; `baggage` is left
    /// as it came. With tracing off, the headers are left as they are.
    pub fn propagate(&self, headers: &mut HeaderMap) {
        if inject(&self.span, headers)
            && let Some(state) = &self.carried_state
        {
            headers.insert(TRACESTATE, state.clone());
        }
    }

    /// The request was sent again.
    pub fn resent(&self) {
        if self.span.is_disabled() {
            return;
        }
        let resends = self.resends.get().saturating_add(1);
        self.resends.set(resends);
        self.span
            .record("http.request.resend_count", i64::from(resends));
    }

    /// The answer's status; a 4xx or 5xx is an error (a client span's
    /// rule), its `error.type` the status, or `error` when lanyard made
    /// the answer itself (its `lanyard-error` code).
    pub fn answered(&self, status: StatusCode, error: Option<&'static str>) {
        if self.span.is_disabled() {
            return;
        }
        self.span
            .record("http.response.status_code", i64::from(status.as_u16()));
        if error.is_some() || status.as_u16() >= 400 {
            self.failed(error.unwrap_or(status.as_str()));
        }
    }

    /// No answer: why, in a word (`timeout`, `connect`, `aborted`...).
    pub fn failed(&self, error: &str) {
        self.span.record("error.type", error);
        self.span.record("otel.status_code", "error");
    }
}

/// A token request's span: a root (one token serves every request), its
/// duration the request's, with the outcome and the generation of the
/// token obtained; the token endpoint gets its `traceparent`.
#[derive(Debug)]
pub struct TokenSpan(Span);

impl TokenSpan {
    /// `forced`: a renewal after an upstream 401 rather than on schedule.
    pub fn start(forced: bool) -> TokenSpan {
        TokenSpan(tracing::info_span!(
            target: TARGET,
            parent: None,
            TOKEN_REQUEST,
            otel.kind = "client",
            otel.status_code = Empty,
            "error.type" = Empty,
            lanyard.token.forced = forced,
            lanyard.token.outcome = Empty,
            lanyard.token.generation = Empty,
        ))
    }

    /// Runs the token request in this span, so that it goes out with the
    /// span's `traceparent` ([`propagate_token_request`]).
    pub fn around<F: std::future::Future>(&self, request: F) -> Instrumented<F> {
        request.instrument(self.0.clone())
    }

    /// `outcome` is the `outcome` label of `lanyard_token_requests_total`;
    /// `generation` the new token's, on success.
    pub fn ended(&self, outcome: &'static str, generation: Option<u64>) {
        let span = &self.0;
        span.record("lanyard.token.outcome", outcome);
        match generation {
            Some(generation) => {
                let generation = i64::try_from(generation).unwrap_or(i64::MAX);
                span.record("lanyard.token.generation", generation);
            }
            None => {
                span.record("error.type", outcome);
                span.record("otel.status_code", "error");
            }
        }
    }
}

/// The token request carries the context of the token request span it
/// runs in ([`TokenSpan::around`]), so the token endpoint's trace continues
/// lanyard's. Only that span's: were the exchange ever awaited inside a
/// proxied request's span, the app's trace must not reach the token
/// endpoint. Nothing with tracing off.
pub fn propagate_token_request(headers: &mut HeaderMap) {
    let span = Span::current();
    let is_token_request = span
        .metadata()
        .is_some_and(|meta| meta.target() == TARGET && meta.name() == TOKEN_REQUEST);
    if is_token_request {
        let _ = inject(&span, headers);
    }
}

/// `span`'s context as `traceparent` (and `tracestate`), replacing any;
/// whether it did.
fn inject(span: &Span, headers: &mut HeaderMap) -> bool {
    if span.is_disabled() {
        return false;
    }
    // Only a context of lanyard's own replaces the app's: a span some
    // other subscriber enabled has none.
    let context = span.context();
    if !context.span().span_context().is_valid() {
        return false;
    }
    headers.remove(TRACEPARENT);
    headers.remove(TRACESTATE);
    TraceContextPropagator::new().inject_context(&context, &mut HeaderInjector(headers));
    // The propagator writes an empty `tracestate` when there is none.
    if headers.get(TRACESTATE).is_some_and(HeaderValue::is_empty) {
        headers.remove(TRACESTATE);
    }
    true
}

/// The semantic conventions' `http.request.method`: a known method, or
/// `_OTHER`, since a method is whatever a client sends.
fn method_name(method: &Method) -> &'static str {
    // The metrics' bounded set, whose catch-all the conventions name
    // `_OTHER`.
    match METHODS[method_index(method)] {
        "other" => "_OTHER",
        known => known,
    }
}

/// An HTTP client span's name: its method, or `HTTP` for another.
fn span_name(method: &Method) -> &'static str {
    match method_name(method) {
        "_OTHER" => "HTTP",
        known => known,
    }
}

/// `server.port`: as given, else the scheme's. Integers go to
/// OpenTelemetry as `i64`: the layer would write other types as text.
fn port(scheme: &Scheme, given: Option<u16>) -> i64 {
    i64::from(given.unwrap_or_else(|| default_port(scheme)))
}

#[cfg(test)]
mod tests;
