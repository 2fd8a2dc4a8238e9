//! OpenTelemetry tracing through the binary, as a platform runs it: the
//! standard `OTEL_*` variables, an OTLP/HTTP collector in the test
//! decoding what lanyard exports with the `opentelemetry-proto` types, the
//! embedded mock and an upstream that echoes what it received.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::support::child::Process;
use crate::support::flood::{metric, until_metric};
use crate::support::sidecar::{Answer, get, send};
use crate::support::tls::TestCa;
use crate::support::upstream::TestUpstream;
use crate::support::{self, mock};

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const APP_SPAN_ID: &str = "00f067aa0ba902b7";
/// In the query the app sent: personal data that no span may carry.
const QUERY_SECRET: &str = "someone%40example.com";

/// One POST to `/v1/traces`: its headers, its bytes as sent, decoded.
struct Export {
    headers: HeaderMap,
    raw: Bytes,
    request: ExportTraceServiceRequest,
}

/// An OTLP/HTTP receiver on a loopback port, handing each export over.
struct Collector {
    url: String,
    exports: mpsc::UnboundedReceiver<Export>,
    /// Every byte received so far.
    raw: Vec<u8>,
    _tasks: JoinSet<()>,
}

impl Collector {
    async fn start(tls: Option<Arc<rustls::ServerConfig>>) -> Collector {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let url = match tls {
            Some(_) => format!("https://localhost:{port}"),
            None => format!("http://127.0.0.1:{port}"),
        };
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let (sender, exports) = mpsc::unbounded_channel();
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let sender = sender.clone();
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| receive(req, sender.clone()));
                    let _ = lanyard::mock::serve_connection(stream, acceptor, service).await;
                });
            }
        });
        Collector {
            url,
            exports,
            raw: Vec::new(),
            _tasks: tasks,
        }
    }

    /// Every export that has arrived and not been read, into `raw`: once
    /// lanyard has exited, all it ever sent, its exit's flush included.
    fn take_the_rest(&mut self) {
        while let Ok(export) = self.exports.try_recv() {
            self.raw.extend_from_slice(&export.raw);
        }
    }

    /// Spans as they arrive, until `done` holds for those seen so far.
    async fn spans_until(&mut self, done: impl Fn(&[Span]) -> bool) -> (Vec<Span>, Vec<Export>) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        let (mut spans, mut exports) = (Vec::new(), Vec::new());
        while !done(&spans) {
            let export = tokio::time::timeout_at(deadline, self.exports.recv())
                .await
                .unwrap_or_else(|_| panic!("not all spans arrived; so far: {spans:#?}"))
                .expect("the collector runs");
            self.raw.extend_from_slice(&export.raw);
            for resource in &export.request.resource_spans {
                for scope in &resource.scope_spans {
                    spans.extend(scope.spans.iter().cloned());
                }
            }
            exports.push(export);
        }
        (spans, exports)
    }
}

async fn receive(
    req: Request<Incoming>,
    exports: mpsc::UnboundedSender<Export>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let raw = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let status = match (parts.method == Method::POST, parts.uri.path()) {
        (true, "/v1/traces") => match ExportTraceServiceRequest::decode(raw.clone()) {
            Ok(request) => {
                let _ = exports.send(Export {
                    headers: parts.headers,
                    raw,
                    request,
                });
                StatusCode::OK
            }
            Err(_) => StatusCode::BAD_REQUEST,
        },
        _ => StatusCode::NOT_FOUND,
    };
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = status;
    response.headers_mut().insert(
        "content-type",
        http::HeaderValue::from_static("application/x-protobuf"),
    );
    Ok(response)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn attribute<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn text(value: &str) -> Value {
    Value::StringValue(value.to_string())
}

/// A `lanyard run` in front of the echoing upstream, its spans sent to
/// `collector` (a URL) with `extra` variables, its first token held.
struct Traced {
    process: Process,
    upstream: TestUpstream,
    mock: lanyard::mock::MockService,
    _dir: tempfile::TempDir,
}

async fn traced(collector: &str, extra: &[(&str, &str)]) -> Traced {
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = support::settings(&mock, dir.path(), extra);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    vars.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector.into());
    // Batches go out at once rather than every 5 s.
    vars.entry("OTEL_BSP_SCHEDULE_DELAY".into())
        .or_insert_with(|| "20".into());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;
    Traced {
        process,
        upstream,
        mock,
        _dir: dir,
    }
}

/// The echo of what the upstream received, for a GET with the app's
/// trace context.
async fn get_in_the_apps_trace(proxy: &str) -> (serde_json::Value, String) {
    let traceparent = format!("00-{TRACE_ID}-{APP_SPAN_ID}-01");
    let answer = send(
        Method::GET,
        &format!("{proxy}/v1/things?email={QUERY_SECRET}"),
        &[
            ("traceparent", &traceparent),
            ("tracestate", "vendor=abc"),
            ("baggage", "user.tier=gold"),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::OK);
    let echo = answer.json();
    let token = echo["headers"]["authorization"][0]
        .as_str()
        .unwrap()
        .trim_start_matches("Bearer ")
        .to_string();
    (echo["headers"].clone(), token)
}

/// The first token request's span: its outcome and generation, and a
/// trace the token endpoint continued.
fn assert_token_request_span(spans: &[Span], mock: &lanyard::mock::MockService) {
    let token_request = spans.iter().find(|s| s.name == "token request").unwrap();
    assert_eq!(
        attribute(&token_request.attributes, "lanyard.token.outcome"),
        Some(&text("success"))
    );
    assert_eq!(
        attribute(&token_request.attributes, "lanyard.token.generation"),
        Some(&Value::IntValue(1))
    );
    assert!(token_request.end_time_unix_nano > token_request.start_time_unix_nano);
    // The token endpoint's trace continues a token request's span (the
    // latest granted: one, unless a renewal came meanwhile).
    let sent = mock.last_accepted().unwrap().traceparent.unwrap();
    let parts: Vec<&str> = sent.split('-').collect();
    let continued = spans.iter().any(|s| {
        s.name == "token request"
            && (hex(&s.trace_id), hex(&s.span_id)) == (parts[1].into(), parts[2].into())
    });
    assert!(continued, "{sent} continues no token request span");
}

/// Not a byte of a secret in anything `collector` was sent, up to the
/// exit's flush: the token, an assertion (a JWT), the key, the query.
fn assert_nothing_secret_exported(collector: &mut Collector, token: &str) {
    collector.take_the_rest();
    let raw = String::from_utf8_lossy(&collector.raw).into_owned();
    let key = support::fixture("rsa2048.pkcs8.pem");
    let key_lines = key.lines().filter(|line| !line.starts_with("-----"));
    for secret in [
        token,
        "eyJ",
        "PRIVATE KEY",
        QUERY_SECRET,
        "email",
        "someone",
    ]
    .into_iter()
    .chain(key_lines)
    {
        assert!(!raw.contains(secret), "exported: {secret}");
    }
}

#[tokio::test]
async fn the_proxied_request_continues_the_apps_trace_and_the_upstream_gets_lanyards_span() {
    let mut collector = Collector::start(None).await;
    let collector_url = collector.url.clone();
    let lanyard = traced(
        &collector_url,
        &[
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20collector-key",
            ),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment.name=test",
            ),
        ],
    )
    .await;
    let (upstream_saw, token) = get_in_the_apps_trace(&lanyard.process.proxy).await;

    let (spans, exports) = collector
        .spans_until(|spans| {
            spans.iter().any(|s| s.name == "GET") && spans.iter().any(|s| s.name == "token request")
        })
        .await;
    let proxied = spans.iter().find(|s| s.name == "GET").unwrap();
    assert_eq!(hex(&proxied.trace_id), TRACE_ID);
    assert_eq!(hex(&proxied.parent_span_id), APP_SPAN_ID);
    let expected = [
        ("http.request.method", text("GET")),
        ("http.response.status_code", Value::IntValue(200)),
        ("server.address", text("127.0.0.1")),
        (
            "server.port",
            Value::IntValue(i64::from(lanyard.upstream.addr.port())),
        ),
        ("url.path", text("/v1/things")),
    ];
    for (key, value) in &expected {
        assert_eq!(attribute(&proxied.attributes, key), Some(value), "{key}");
    }

    // The upstream's parent is lanyard's span, in the app's trace; the
    // app's `tracestate` goes on, and its baggage untouched.
    let traceparent = upstream_saw["traceparent"].as_array().unwrap();
    assert_eq!(traceparent.len(), 1, "{upstream_saw}");
    let parts: Vec<&str> = traceparent[0].as_str().unwrap().split('-').collect();
    assert_eq!(parts[1], TRACE_ID);
    assert_eq!(parts[2], hex(&proxied.span_id));
    assert_eq!(upstream_saw["tracestate"][0], "vendor=abc");
    assert_eq!(upstream_saw["baggage"][0], "user.tier=gold");

    assert_token_request_span(&spans, &lanyard.mock);

    let resource = exports[0].request.resource_spans[0]
        .resource
        .as_ref()
        .unwrap();
    assert_eq!(
        attribute(&resource.attributes, "service.name"),
        Some(&text("lanyard"))
    );
    assert_eq!(
        attribute(&resource.attributes, "deployment.environment.name"),
        Some(&text("test"))
    );
    assert_eq!(exports[0].headers["authorization"], "Bearer collector-key");

    lanyard.process.terminate();
    let (code, log) = lanyard.process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("OpenTelemetry tracing on"), "{log}");
    assert!(
        !log.contains("collector-key"),
        "the collector's key, logged"
    );
    assert_nothing_secret_exported(&mut collector, &token);
}

#[tokio::test]
async fn a_request_without_a_traceparent_starts_a_trace_the_upstream_continues() {
    let mut collector = Collector::start(None).await;
    let collector_url = collector.url.clone();
    let lanyard = traced(&collector_url, &[]).await;
    let answer = get(&format!("{}/plain", lanyard.process.proxy)).await;
    let upstream_saw = answer.json()["headers"].clone();
    let (spans, _) = collector
        .spans_until(|spans| spans.iter().any(|s| s.name == "GET"))
        .await;
    let proxied = spans.iter().find(|s| s.name == "GET").unwrap();
    assert!(proxied.parent_span_id.is_empty(), "a root: {proxied:?}");
    let traceparent = upstream_saw["traceparent"][0].as_str().unwrap();
    let expected = format!("00-{}-{}-01", hex(&proxied.trace_id), hex(&proxied.span_id));
    assert_eq!(traceparent, expected);
    assert!(upstream_saw.get("tracestate").is_none(), "{upstream_saw}");
}

/// A collector behind a private CA, trusted through
/// `OTEL_EXPORTER_OTLP_CERTIFICATE`.
#[tokio::test]
async fn spans_reach_a_collector_behind_a_private_ca() {
    let ca = TestCa::new();
    let mut collector = Collector::start(Some(ca.server.clone())).await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = support::write(dir.path(), "collector-ca.pem", &ca.ca_pem);
    let collector_url = collector.url.clone();
    let lanyard = traced(
        &collector_url,
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", bundle.to_str().unwrap())],
    )
    .await;
    get(&format!("{}/over-tls", lanyard.process.proxy)).await;
    collector
        .spans_until(|spans| spans.iter().any(|s| s.name == "GET"))
        .await;
}

#[tokio::test]
async fn the_verifiers_calls_to_the_service_are_spans() {
    let mut collector = Collector::start(None).await;
    let vars = support::env(&[
        ("DEMO_MOCK", "true"),
        ("OTEL_EXPORTER_OTLP_ENDPOINT", &collector.url),
        ("OTEL_BSP_SCHEDULE_DELAY", "20"),
    ]);
    let mut process = Process::launch(&["verifier"], vars, "json", false);
    let started = process.wait_for_log("lanyard started").await;
    let verifier = format!("http://{}", started["fields"]["verifier"].as_str().unwrap());
    process.wait_for_log("token obtained").await;
    let json = [("content-type", "application/json")];
    let start = send(
        Method::POST,
        &format!("{verifier}/api/start"),
        &json,
        Bytes::new(),
    )
    .await;
    assert_eq!(start.status, StatusCode::OK);
    let cookie = start.headers["set-cookie"].to_str().unwrap();
    let cookie = cookie.split(';').next().unwrap().to_string();
    let tx = start.json()["transaction_id"].as_str().unwrap().to_string();
    let status: Answer = send(
        Method::GET,
        &format!("{verifier}/api/status?transactionId={tx}"),
        &[("cookie", &cookie)],
        Bytes::new(),
    )
    .await;
    assert_eq!(status.status, StatusCode::OK);

    let (spans, _) = collector
        .spans_until(|spans| {
            spans.iter().any(|s| s.name == "verifier start")
                && spans.iter().any(|s| s.name == "verifier poll")
        })
        .await;
    // The mock answers a start 201 (docs/mock-service.md), a poll 200.
    for (name, status) in [("verifier start", 201), ("verifier poll", 200)] {
        let span = spans.iter().find(|s| s.name == name).unwrap();
        assert_eq!(
            attribute(&span.attributes, "http.response.status_code"),
            Some(&Value::IntValue(status)),
            "{name}"
        );
    }
    // The page's handle and the service's session id are in no span.
    let raw = String::from_utf8_lossy(&collector.raw).into_owned();
    assert!(!raw.contains(&tx), "the page's handle was exported");
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
}

/// A collector that is down: requests are answered as ever, and the spans
/// that cannot be exported are counted.
#[tokio::test]
async fn with_the_collector_down_requests_succeed_and_dropped_spans_are_counted() {
    let down = format!("http://{}", support::closed_port());
    let lanyard = traced(&down, &[("OTEL_EXPORTER_OTLP_TIMEOUT", "300")]).await;
    for _ in 0..3 {
        let answer = get(&format!("{}/v1/things", lanyard.process.proxy)).await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    until_metric(
        &lanyard.process.admin,
        "lanyard_otel_spans_dropped_total",
        |v| v > 0.0,
    )
    .await;
    lanyard.process.terminate();
    let (code, log) = lanyard.process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("spans could not be exported"), "{log}");
}

/// A collector that accepts connections and never answers holds the
/// export for its whole timeout: spans beyond the queue are dropped at
/// once, counted, and neither the requests nor the exit wait for it.
#[tokio::test]
async fn a_collector_that_never_answers_costs_requests_nothing_and_never_holds_the_exit() {
    let silent = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut streams = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            streams.push(stream);
        }
    });
    let lanyard = traced(
        &url,
        &[
            ("OTEL_BSP_MAX_QUEUE_SIZE", "1"),
            ("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_BSP_EXPORT_TIMEOUT", "60000"),
        ],
    )
    .await;
    // The token request's span is with the exporter (or in the queue);
    // of five requests' spans, one more fits in the queue at most.
    for _ in 0..5 {
        let answer = get(&format!("{}/v1/things", lanyard.process.proxy)).await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    let dropped = metric(&lanyard.process.admin, "lanyard_otel_spans_dropped_total").await;
    assert!(dropped >= 3.0, "{dropped} dropped");

    let stopping = tokio::time::Instant::now();
    lanyard.process.terminate();
    let (code, log) = lanyard.process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    let took = stopping.elapsed();
    // The drain (nothing in flight) and the exit's bound on the flush.
    let bound = lanyard::otel::EXIT_FLUSH + Duration::from_secs(3);
    assert!(took < bound, "the exit took {took:?}");
    held.abort();
}

#[tokio::test]
async fn a_bad_otel_variable_is_a_warning_and_lanyard_runs_untraced() {
    let collector = Collector::start(None).await;
    let lanyard = traced(
        &collector.url,
        &[
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=s3cr3t-value%ZZ"),
        ],
    )
    .await;
    // Untraced, lanyard passes the app's trace context on as it came.
    let (upstream_saw, _) = get_in_the_apps_trace(&lanyard.process.proxy).await;
    let apps = format!("00-{TRACE_ID}-{APP_SPAN_ID}-01");
    assert_eq!(
        upstream_saw["traceparent"][0],
        apps.as_str(),
        "{upstream_saw}"
    );
    lanyard.process.terminate();
    let (code, log) = lanyard.process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    for variable in ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS"] {
        let warned = log.lines().any(|line| {
            line.contains("\"WARN\"") && line.contains(variable) && line.contains("tracing is off")
        });
        assert!(warned, "no warning naming {variable}:\n{log}");
    }
    assert!(!log.contains("s3cr3t-value"), "{log}");
    assert!(!log.contains("OpenTelemetry tracing on"), "{log}");
}
