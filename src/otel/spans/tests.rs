//! The spans as OpenTelemetry receives them, through the real layer and
//! SDK, without a socket: parents, what goes to the upstream, attributes,
//! and nothing done with tracing off.

use std::sync::{Arc, Mutex, PoisonError};

use opentelemetry::trace::{SpanId, SpanKind, Status, TraceId};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{SdkTracerProvider, Span as SdkSpan, SpanData, SpanProcessor};
use tracing::Subscriber as _;
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const APP_SPAN: &str = "00f067aa0ba902b7";

/// Every span that ends, kept.
#[derive(Debug, Clone, Default)]
struct Collected(Arc<Mutex<Vec<SpanData>>>);

impl SpanProcessor for Collected {
    fn on_start(&self, _span: &mut SdkSpan, _cx: &Context) {}
    fn on_end(&self, span: SpanData) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(span);
    }
    fn force_flush(&self) -> OTelSdkResult {
        Ok(())
    }
    fn shutdown_with_timeout(&self, _timeout: std::time::Duration) -> OTelSdkResult {
        Ok(())
    }
}

/// Runs `f` with tracing on, and returns the spans it ended.
fn traced(f: impl FnOnce()) -> Vec<SpanData> {
    let collected = Collected::default();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(collected.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(crate::otel::layer(Some(&provider)));
    tracing::subscriber::with_default(subscriber, f);
    let spans = collected.0.lock().unwrap_or_else(PoisonError::into_inner);
    spans.clone()
}

fn upstream() -> TargetUrl {
    TargetUrl::parse("https://api.example.com/v1", false).unwrap()
}

fn app_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    let traceparent = format!("00-{TRACE}-{APP_SPAN}-01");
    headers.insert(TRACEPARENT, traceparent.parse().unwrap());
    headers.insert(TRACESTATE, "vendor=abc".parse().unwrap());
    headers.insert("baggage", "user=42".parse().unwrap());
    headers
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

/// `traceparent`'s trace id and parent id.
fn ids(headers: &HeaderMap) -> (String, String) {
    let value = headers[TRACEPARENT].to_str().unwrap();
    let parts: Vec<&str> = value.split('-').collect();
    assert_eq!(parts.len(), 4, "{value}");
    (parts[1].to_string(), parts[2].to_string())
}

#[test]
fn a_proxied_request_continues_the_apps_trace_and_the_upstream_gets_its_span() {
    let mut outgoing = HeaderMap::new();
    let spans = traced(|| {
        let uri: Uri = "/v1/things?email=someone%40example.com".parse().unwrap();
        let span = HttpSpan::proxied(&Method::GET, &uri, &app_headers(), &upstream());
        outgoing = app_headers();
        span.propagate(&mut outgoing);
        span.resent();
        span.answered(StatusCode::OK, None);
    });
    assert_eq!(spans.len(), 1);
    let span = &spans[0];
    assert_eq!(
        span.span_context.trace_id(),
        TraceId::from_hex(TRACE).unwrap()
    );
    assert_eq!(span.parent_span_id, SpanId::from_hex(APP_SPAN).unwrap());
    assert!(span.parent_span_is_remote);
    assert_eq!(span.name, "GET");
    assert_eq!(span.span_kind, SpanKind::Client);
    assert_eq!(span.status, Status::Unset);
    // The upstream's parent is lanyard's span, in the app's trace.
    let (trace, parent) = ids(&outgoing);
    assert_eq!(trace, TRACE);
    assert_eq!(parent, span.span_context.span_id().to_string());
    assert_eq!(outgoing[TRACESTATE], "vendor=abc");
    assert_eq!(outgoing["baggage"], "user=42");
    assert_eq!(outgoing.get_all(TRACEPARENT).iter().count(), 1);

    let expected: &[(&str, Value)] = &[
        ("http.request.method", "GET".into()),
        ("http.response.status_code", 200_i64.into()),
        ("http.request.resend_count", 1_i64.into()),
        ("server.address", "api.example.com".into()),
        ("server.port", 443_i64.into()),
        ("url.scheme", "https".into()),
        ("url.path", "/v1/things".into()),
    ];
    for (key, value) in expected {
        assert_eq!(attribute(span, key), Some(value), "{key}");
    }
    let everything = format!("{span:?}");
    assert!(!everything.contains("email"), "{everything}");
    assert!(!everything.contains("baggage"), "{everything}");
    // The app's `tracestate` goes on to the upstream, not into the span
    // that is exported.
    assert_eq!(span.span_context.trace_state().header(), "");
    assert!(!everything.contains("vendor=abc"), "{everything}");
}

#[test]
fn without_a_traceparent_the_span_starts_a_trace() {
    let mut outgoing = HeaderMap::new();
    let spans = traced(|| {
        let uri: Uri = "/".parse().unwrap();
        let span = HttpSpan::proxied(&Method::POST, &uri, &HeaderMap::new(), &upstream());
        span.propagate(&mut outgoing);
    });
    let span = &spans[0];
    assert_eq!(span.parent_span_id, SpanId::INVALID);
    let (trace, parent) = ids(&outgoing);
    assert_eq!(trace, span.span_context.trace_id().to_string());
    assert_eq!(parent, span.span_context.span_id().to_string());
    // No empty `tracestate` is invented.
    assert!(outgoing.get(TRACESTATE).is_none());
}

/// The subscriber `main` sets up with tracing off: the log, and the
/// OpenTelemetry layer taking nothing.
fn untraced() -> impl tracing::Subscriber + Send + Sync {
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(not_exported());
    tracing_subscriber::registry()
        .with(log)
        .with(crate::otel::layer(None))
}

#[test]
fn with_tracing_off_a_span_is_never_enabled() {
    // The callsite's metadata, from a span that was enabled.
    let mut metadata = None;
    traced(|| {
        let uri: Uri = "/".parse().unwrap();
        let span = HttpSpan::proxied(&Method::GET, &uri, &HeaderMap::new(), &upstream());
        metadata = span.span.metadata();
    });
    let metadata = metadata.expect("enabled with tracing on");
    // Asked directly rather than through a span, whose interest `tracing`
    // caches across every test thread's subscriber: never, so the span
    // macro costs one cached check and builds nothing.
    assert!(untraced().register_callsite(metadata).is_never());
}

#[test]
fn with_tracing_off_nothing_is_done_to_the_headers() {
    tracing::subscriber::with_default(untraced(), || {
        let uri: Uri = "/".parse().unwrap();
        let span = HttpSpan::proxied(&Method::GET, &uri, &app_headers(), &upstream());
        let mut outgoing = app_headers();
        span.propagate(&mut outgoing);
        span.resent();
        span.answered(StatusCode::BAD_GATEWAY, Some("upstream_unreachable"));
        assert_eq!(outgoing, app_headers());
    });
}

#[test]
fn error_answers_mark_the_span_with_their_type() {
    let table = [
        (
            StatusCode::BAD_GATEWAY,
            Some("upstream_unreachable"),
            "upstream_unreachable",
        ),
        (StatusCode::NOT_FOUND, None, "404"),
        (StatusCode::SERVICE_UNAVAILABLE, None, "503"),
    ];
    for (status, error, expected) in table {
        let spans = traced(|| {
            let uri: Uri = "/".parse().unwrap();
            let span = HttpSpan::proxied(&Method::DELETE, &uri, &HeaderMap::new(), &upstream());
            span.answered(status, error);
        });
        let span = &spans[0];
        assert_eq!(span.status, Status::error(""), "{status}");
        assert_eq!(attribute(span, "error.type"), Some(&expected.into()));
    }
}

#[test]
fn unknown_methods_are_other() {
    let spans = traced(|| {
        let uri: Uri = "/".parse().unwrap();
        let method = Method::from_bytes(b"PROPFIND").unwrap();
        drop(HttpSpan::proxied(
            &method,
            &uri,
            &HeaderMap::new(),
            &upstream(),
        ));
    });
    assert_eq!(spans[0].name, "HTTP");
    assert_eq!(
        attribute(&spans[0], "http.request.method"),
        Some(&"_OTHER".into())
    );
}

#[test]
fn a_verifier_call_is_a_root_with_no_path() {
    let mut outgoing = HeaderMap::new();
    let spans = traced(|| {
        let uri: Uri = "http://127.0.0.1:9000/organizations/o/projects/p/verifications/r/tx-123"
            .parse()
            .unwrap();
        let span = HttpSpan::verifier(VerifierCall::Poll, &Method::GET, &uri);
        span.propagate(&mut outgoing);
        span.answered(StatusCode::OK, None);
    });
    let span = &spans[0];
    assert_eq!(span.name, "verifier poll");
    assert_eq!(span.parent_span_id, SpanId::INVALID);
    assert_eq!(attribute(span, "server.port"), Some(&9000_i64.into()));
    assert!(attribute(span, "url.path").is_none());
    assert!(!format!("{span:?}").contains("tx-123"));
    assert_eq!(ids(&outgoing).1, span.span_context.span_id().to_string());
}

/// The token endpoint's trace continues lanyard's token request span,
/// and no other: not outside it, not inside a proxied request's.
#[test]
fn a_token_request_goes_out_with_its_span_as_parent() {
    let mut outgoing = HeaderMap::new();
    let spans = traced(|| {
        let span = TokenSpan::start(false);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        outgoing = runtime.block_on(span.around(async {
            let mut headers = HeaderMap::new();
            propagate_token_request(&mut headers);
            headers
        }));
        span.ended("success", Some(1));
        let mut outside = HeaderMap::new();
        propagate_token_request(&mut outside);
        assert!(outside.is_empty(), "{outside:?}");
        let proxied = HttpSpan::proxied(
            &Method::GET,
            &"/v1/things".parse().unwrap(),
            &app_headers(),
            &upstream(),
        );
        proxied
            .span
            .in_scope(|| propagate_token_request(&mut outside));
        assert!(outside.is_empty(), "in a proxied request: {outside:?}");
    });
    let token = spans.iter().find(|s| s.name == TOKEN_REQUEST).unwrap();
    let (trace, parent) = ids(&outgoing);
    assert_eq!(trace, token.span_context.trace_id().to_string());
    assert_eq!(parent, token.span_context.span_id().to_string());
    assert!(outgoing.get(TRACESTATE).is_none());
}

#[test]
fn a_token_request_records_its_outcome_and_generation() {
    let spans = traced(|| {
        TokenSpan::start(false).ended("success", Some(3));
        TokenSpan::start(true).ended("rate_limited", None);
    });
    assert_eq!(spans.len(), 2);
    assert_eq!(spans[0].name, "token request");
    assert_eq!(
        attribute(&spans[0], "lanyard.token.generation"),
        Some(&3_i64.into())
    );
    assert_eq!(
        attribute(&spans[0], "lanyard.token.outcome"),
        Some(&"success".into())
    );
    assert_eq!(spans[0].status, Status::Unset);
    assert_eq!(
        attribute(&spans[1], "lanyard.token.forced"),
        Some(&true.into())
    );
    assert_eq!(
        attribute(&spans[1], "error.type"),
        Some(&"rate_limited".into())
    );
    assert_eq!(spans[1].status, Status::error(""));
}
