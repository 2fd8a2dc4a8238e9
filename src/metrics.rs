//! Prometheus metrics (docs/admin.md "Metrics"), registered once into a registry the
//! application owns, never a global one.
//!
//! - `token`: the token series, one set per service account.

mod token;

pub use token::{AccountLabels, AccountSeries, TokenMetrics};

use std::sync::OnceLock;
use std::time::Duration;

use http::{Method, StatusCode};
use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// Proxied requests: from a sub-millisecond loopback call to a slow API.
const PROXY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// Every metric lanyard exports.
#[derive(Debug, Clone)]
pub struct Metrics {
    pub token: TokenMetrics,
    pub proxy_requests: IntCounterVec,
    pub proxy_request_duration: HistogramVec,
    pub proxy_in_flight: IntGauge,
    pub proxy_connections: IntGauge,
    pub proxy_connections_refused: IntCounter,
    pub upstream_errors: IntCounterVec,
    pub upstream_unauthorized_retries: IntCounter,
    pub upstream_forbidden: IntCounter,
    pub credentials_reloads: IntCounterVec,
    pub verifier_sessions: IntCounterVec,
    pub verifier_connections: IntGauge,
    pub verifier_connections_refused: IntCounter,
    pub verifier_connections_evicted: IntCounter,
    pub verifier_handles_unopened: IntCounter,
    pub connections_stalled: IntCounterVec,
    pub connections_flooding: IntCounterVec,
    pub otel_spans_dropped: IntCounter,
    pub build_info: IntGaugeVec,
    pub oidc: OidcMetrics,
}

/// The OpenID Connect provider's series (docs/oidc.md, Metrics), each by
/// `client_id`: a client of the clients file, or [`UNKNOWN_CLIENT`].
#[derive(Debug, Clone)]
pub struct OidcMetrics {
    /// Logins: pages shown (`started`), then how each ended.
    pub authorizations: IntCounterVec,
    /// ID tokens issued.
    pub tokens: IntCounterVec,
    /// Requests refused, by the error they got.
    pub refusals: IntCounterVec,
}

/// How an OpenID Connect login ends: as a verification session does, and
/// `started` when its page is first shown.
pub const OIDC_OUTCOMES: [&str; 5] = VERIFIER_OUTCOMES;
/// The `client_id` of a request that names no registered client: one
/// series for all of them, so that no request makes a series of its own.
pub const UNKNOWN_CLIENT: &str = "unknown";
/// The refusals an attack or a misconfigured client shows as, each made
/// at zero so that a rate of them reads from the start.
const OIDC_ATTACK_REASONS: [&str; 5] = [
    "untrusted_redirect",
    "invalid_client",
    "invalid_grant",
    "client_auth_throttled",
    "userinfo_throttled",
];

impl OidcMetrics {
    fn register(registry: &Registry) -> Result<OidcMetrics, prometheus::Error> {
        let metrics = OidcMetrics {
            authorizations: IntCounterVec::new(
                Opts::new(
                    "lanyard_oidc_authorizations_total",
                    "OpenID Connect logins: pages shown for an authorization request, and how each ended, by outcome and client.",
                ),
                &["outcome", "client_id"],
            )?,
            tokens: IntCounterVec::new(
                Opts::new(
                    "lanyard_oidc_tokens_total",
                    "ID tokens the OpenID Connect provider issued, by client.",
                ),
                &["client_id"],
            )?,
            refusals: IntCounterVec::new(
                Opts::new(
                    "lanyard_oidc_refusals_total",
                    "OpenID Connect requests refused, by the error they got (RFC 6749 and OpenID Connect codes, untrusted_redirect for an unknown client or redirect URI, client_auth_throttled after too many failed client authentications, userinfo_throttled after too many userinfo calls with one access token) and the client they named (unknown: none registered).",
                ),
                &["reason", "client_id"],
            )?,
        };
        registry.register(Box::new(metrics.authorizations.clone()))?;
        registry.register(Box::new(metrics.tokens.clone()))?;
        registry.register(Box::new(metrics.refusals.clone()))?;
        // Every family shows from the first scrape, the provider on or
        // off; the clients' own series come with the provider.
        metrics.register_clients([UNKNOWN_CLIENT].into_iter());
        Ok(metrics)
    }

    /// Makes every client's series at zero: the clients file is known
    /// only once the provider is made.
    pub fn register_clients<'a>(&self, clients: impl Iterator<Item = &'a str>) {
        for client in clients {
            for outcome in OIDC_OUTCOMES {
                self.authorizations.with_label_values(&[outcome, client]);
            }
            self.tokens.with_label_values(&[client]);
            for reason in OIDC_ATTACK_REASONS {
                self.refusals.with_label_values(&[reason, client]);
            }
        }
    }
}

/// One listener's series of the connection metrics shared by every
/// listener.
#[derive(Debug, Clone)]
pub struct ListenerMetrics {
    pub stalled: IntCounter,
    pub flooding: IntCounter,
}

/// `lanyard_otel_spans_dropped_total`, made apart from the others: the
/// span exporter starts with logging, before the process's registry, and
/// counts into it from then on; [`Metrics::register`] registers it.
pub fn spans_dropped_counter() -> IntCounter {
    IntCounter::new(
        "lanyard_otel_spans_dropped_total",
        "OpenTelemetry spans that never reached the collector: the export queue was full, or their export failed.",
    )
    .unwrap_or_else(|_| unreachable!("a valid metric name"))
}

/// Every outcome of a verification session (docs/verifier.md): a
/// session the service started counts `started`, then one of the others
/// once; a start the service refused counts `failed` alone.
pub const VERIFIER_OUTCOMES: [&str; 5] = ["started", "verified", "declined", "expired", "failed"];

impl Metrics {
    /// Creates and registers every metric, `spans_dropped` as made by
    /// [`spans_dropped_counter`].
    pub fn register(
        registry: &Registry,
        spans_dropped: IntCounter,
    ) -> Result<Self, prometheus::Error> {
        let r = Registrar(registry);
        let verifier = VerifierSeries::register(&r)?;
        let metrics = Metrics {
            token: TokenMetrics::register(registry)?,
            proxy_requests: r.counter_vec(
                "lanyard_proxy_requests_total",
                "Requests answered by the proxy, by method and status code.",
                &["method", "code"],
            )?,
            proxy_request_duration: r.histogram_vec(
                "lanyard_proxy_request_duration_seconds",
                "Time from receiving a request to sending response headers.",
                PROXY_BUCKETS,
                &["method"],
            )?,
            proxy_in_flight: r.gauge(
                "lanyard_proxy_in_flight_requests",
                "Requests being proxied right now.",
            )?,
            proxy_connections: r.gauge(
                "lanyard_proxy_connections",
                "Client connections the proxy holds open right now.",
            )?,
            proxy_connections_refused: r.counter(
                "lanyard_proxy_connections_refused_total",
                "Client connections refused because LANYARD_MAX_CONNECTIONS were open.",
            )?,
            upstream_errors: r.counter_vec(
                "lanyard_upstream_errors_total",
                "Requests that got no response from the upstream, by kind.",
                &["kind"],
            )?,
            upstream_unauthorized_retries: r.counter(
                "lanyard_upstream_unauthorized_retries_total",
                "Requests retried with a new token after the upstream answered 401.",
            )?,
            upstream_forbidden: r.counter(
                "lanyard_upstream_forbidden_total",
                "Upstream 403 answers: the account lacks a role or project group membership.",
            )?,
            credentials_reloads: r.counter_vec(
                "lanyard_credentials_reloads_total",
                "Credentials file reloads, by outcome.",
                &["outcome"],
            )?,
            verifier_sessions: verifier.sessions,
            verifier_connections: verifier.connections,
            verifier_connections_refused: verifier.refused,
            verifier_connections_evicted: verifier.evicted,
            verifier_handles_unopened: verifier.handles_unopened,
            connections_stalled: r.counter_vec(
                "lanyard_connections_stalled_total",
                "Connections (and HTTP/2 streams) ended because their client took none of an answer's bytes for LANYARD_SEND_TIMEOUT, by listener.",
                &["listener"],
            )?,
            connections_flooding: r.counter_vec(
                "lanyard_connections_flooding_total",
                "HTTP/2 connections closed for sending control frames (PING, SETTINGS, WINDOW_UPDATE, ...) faster than any client needs, by listener.",
                &["listener"],
            )?,
            otel_spans_dropped: r.registered(spans_dropped)?,
            build_info: r.gauge_vec(
                "lanyard_build_info",
                "Always 1; the version label says which build.",
                &["version"],
            )?,
            oidc: OidcMetrics::register(registry)?,
        };
        metrics.zero_series();
        Ok(metrics)
    }

    /// Sets the build's series, and makes the series dashboards alert on
    /// at zero, so that they read 0 rather than being absent before the
    /// first event.
    fn zero_series(&self) {
        self.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION")])
            .set(1);
        for kind in ["connect", "timeout", "tls", "other"] {
            self.upstream_errors.with_label_values(&[kind]);
        }
        for outcome in ["success", "invalid"] {
            self.credentials_reloads.with_label_values(&[outcome]);
        }
        for outcome in VERIFIER_OUTCOMES {
            self.verifier_sessions.with_label_values(&[outcome]);
        }
    }

    /// Where one listener's accept loop reports, its stall and flood
    /// series made now so that they read 0 rather than being absent.
    pub fn listener(&self, listener: &str) -> ListenerMetrics {
        ListenerMetrics {
            stalled: self.connections_stalled.with_label_values(&[listener]),
            flooding: self.connections_flooding.with_label_values(&[listener]),
        }
    }

    /// A registry with these metrics and the standard `process_*` ones.
    pub fn with_registry(spans_dropped: IntCounter) -> Result<(Self, Registry), prometheus::Error> {
        let registry = Registry::new();
        let metrics = Self::register(&registry, spans_dropped)?;
        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        Ok((metrics, registry))
    }

    /// For tests and tools that need metrics but do not export them.
    #[cfg(feature = "test-support")]
    pub fn unregistered() -> Self {
        // Registering into a fresh registry cannot collide.
        Self::register(&Registry::new(), spans_dropped_counter())
            .unwrap_or_else(|_| unreachable!("fresh registry"))
    }
}

/// The proxy's per-request series, cached: see [`RequestSeries`].
///
/// The `method` label values: a bounded set, since arbitrary methods would
/// grow the series forever.
pub const METHODS: [&str; 10] = [
    "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE", "other",
];
/// Status codes 100..=599, one slot each.
const STATUSES: usize = 500;

pub fn method_index(method: &Method) -> usize {
    match *method {
        Method::GET => 0,
        Method::HEAD => 1,
        Method::POST => 2,
        Method::PUT => 3,
        Method::PATCH => 4,
        Method::DELETE => 5,
        Method::OPTIONS => 6,
        Method::CONNECT => 7,
        Method::TRACE => 8,
        _ => 9,
    }
}

/// The per-request series, resolved once and cached, so the request path
/// neither locks the metric vectors nor hashes label values. Series are
/// created on first use, so the exposition shows only what happened.
pub struct RequestSeries {
    counts: Box<[OnceLock<IntCounter>]>,
    durations: [OnceLock<Histogram>; METHODS.len()],
    metrics: Metrics,
}

impl RequestSeries {
    pub fn new(metrics: Metrics) -> Self {
        RequestSeries {
            counts: (0..METHODS.len() * STATUSES)
                .map(|_| OnceLock::new())
                .collect(),
            durations: Default::default(),
            metrics,
        }
    }

    pub fn observe(&self, method: usize, status: StatusCode, elapsed: Duration) {
        let count = || {
            self.metrics
                .proxy_requests
                .with_label_values(&[METHODS[method], status.as_str()])
        };
        match usize::from(status.as_u16()).checked_sub(100) {
            Some(code) if code < STATUSES => self.counts[method * STATUSES + code]
                .get_or_init(count)
                .inc(),
            // Codes past 599 are legal but odd; they take the slow path.
            _ => count().inc(),
        }
        self.durations[method]
            .get_or_init(|| {
                self.metrics
                    .proxy_request_duration
                    .with_label_values(&[METHODS[method]])
            })
            .observe(elapsed.as_secs_f64());
    }
}

/// The verifier's own series, made apart to keep [`Metrics::register`]
/// short.
struct VerifierSeries {
    sessions: IntCounterVec,
    connections: IntGauge,
    refused: IntCounter,
    evicted: IntCounter,
    handles_unopened: IntCounter,
}

impl VerifierSeries {
    fn register(r: &Registrar) -> Result<VerifierSeries, prometheus::Error> {
        Ok(VerifierSeries {
        sessions: r.counter_vec(
            "lanyard_verifier_sessions_total",
            "Verification sessions started, and how each ended, by outcome.",
            &["outcome"],
        )?,
        connections: r.gauge(
            "lanyard_verifier_connections",
            "Connections the verifier's listener holds open right now.",
        )?,
        refused: r.counter(
            "lanyard_verifier_connections_refused_total",
            "Connections the verifier's listener refused: at LANYARD_MAX_CONNECTIONS with none idle, or over one client's cap.",
        )?,
        evicted: r.counter(
            "lanyard_verifier_connections_evicted_total",
            "Connections with no request in flight that the verifier's listener closed at LANYARD_MAX_CONNECTIONS to take a new one.",
        )?,
        handles_unopened: r.counter(
            "lanyard_verifier_handles_unopened_total",
            "Session handles of the right form that none of the verifier's session keys opened: a forged or rotated-out handle, or replicas holding different LANYARD_VERIFIER_SESSION_KEYs.",
        )?,
        })
    }
}

/// Makes metrics and registers each as it is made, so that no metric is
/// made and left out of the registry.
struct Registrar<'a>(&'a Registry);

impl Registrar<'_> {
    fn registered<M: prometheus::core::Collector + Clone + 'static>(
        &self,
        metric: M,
    ) -> Result<M, prometheus::Error> {
        self.0.register(Box::new(metric.clone()))?;
        Ok(metric)
    }

    fn counter(&self, name: &str, help: &str) -> Result<IntCounter, prometheus::Error> {
        self.registered(IntCounter::new(name, help)?)
    }

    fn gauge(&self, name: &str, help: &str) -> Result<IntGauge, prometheus::Error> {
        self.registered(IntGauge::new(name, help)?)
    }

    fn counter_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntCounterVec, prometheus::Error> {
        self.registered(IntCounterVec::new(Opts::new(name, help), labels)?)
    }

    fn gauge_vec(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
    ) -> Result<IntGaugeVec, prometheus::Error> {
        self.registered(IntGaugeVec::new(Opts::new(name, help), labels)?)
    }

    fn histogram_vec(
        &self,
        name: &str,
        help: &str,
        buckets: &[f64],
        labels: &[&str],
    ) -> Result<HistogramVec, prometheus::Error> {
        let opts = HistogramOpts::new(name, help).buckets(buckets.to_vec());
        self.registered(HistogramVec::new(opts, labels)?)
    }
}
