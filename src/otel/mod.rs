//! OpenTelemetry tracing (docs/admin.md "Tracing"): configured by the standard
//! `OTEL_*` variables and off unless an OTLP endpoint is set; spans made
//! as `tracing` spans and handed to OpenTelemetry by
//! `tracing-opentelemetry`'s layer, exported by OTLP/HTTP in batches off
//! the request path, with lanyard's own HTTP client, and the ones that
//! never reach the collector counted. The pipeline is as process-wide as
//! the `tracing` subscriber it hangs on: `main` builds it with logging
//! and shuts it down at exit.
//!
//! - [`settings`]: the `OTEL_*` variables read, in one pure function.
//! - [`spans`]: every span and attribute lanyard exports, and the W3C
//!   trace context taken from the app and given to the upstream.
//! - `export`: the bounded queue and the export thread; the drop count.
//! - `client`: the exporter's HTTP client over lanyard's connector.

mod client;
mod export;
pub mod settings;
pub mod spans;

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::{InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Compression, Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::resource::TelemetryResourceDetector;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanExporter as _};
use prometheus::IntCounter;
use tracing::Subscriber;
use tracing::level_filters::LevelFilter;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

use crate::config::Env;
use crate::metrics;
use client::CollectorClient;
use export::BoundedProcessor;
use settings::{OtelSettings, Reading, SamplerChoice};

/// How long the exit waits for the queued spans to reach the collector:
/// one that is up takes milliseconds, and one that is not must not hold
/// a pod in Terminating (docs/commands.md "Shutdown").
pub const EXIT_FLUSH: Duration = Duration::from_secs(3);

/// The tracing pipeline, or its absence.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// `lanyard_otel_spans_dropped_total`, made before the process's
    /// registry, which registers it when the process starts.
    spans_dropped: IntCounter,
    /// Where spans go, shown without user info or query.
    endpoint: String,
    service_name: String,
}

impl Telemetry {
    /// No tracing: for the commands that serve nothing (`token`, `check`,
    /// `healthcheck`), which the platform's variables must not slow down.
    pub fn off() -> Telemetry {
        Telemetry {
            provider: None,
            spans_dropped: metrics::spans_dropped_counter(),
            endpoint: String::new(),
            service_name: String::new(),
        }
    }

    /// Tracing as the `OTEL_*` variables in `env` configure it, with the
    /// warnings to log once logging is up: never an error, tracing stays
    /// off instead. `ca_file` is `LANYARD_CA_FILE`, trusted for the
    /// collector too.
    pub fn from_env(env: &impl Env, ca_file: Option<&Path>) -> (Telemetry, Vec<String>) {
        let off = Telemetry::off();
        let settings = match settings::read(env) {
            Reading::Off => return (off, Vec::new()),
            Reading::Invalid(warnings) => return (off, warnings),
            Reading::On(settings) => settings,
        };
        match pipeline(&settings, ca_file, off.spans_dropped.clone()) {
            Ok(provider) => {
                let endpoint = &settings.endpoint;
                let shown = format!(
                    "{}://{}{}",
                    endpoint.scheme_str().unwrap_or_default(),
                    endpoint.authority().map_or("", |a| a.as_str()),
                    endpoint.path()
                );
                let telemetry = Telemetry {
                    provider: Some(provider),
                    endpoint: shown,
                    service_name: settings.service_name,
                    ..off
                };
                (telemetry, Vec::new())
            }
            Err(why) => (off, vec![format!("{why}; OpenTelemetry tracing is off")]),
        }
    }

    /// The layer that hands lanyard's spans (and nothing else) to
    /// OpenTelemetry; with tracing off, one that takes nothing.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        layer(self.provider.as_ref())
    }

    /// Where the exporter counts the spans it drops.
    pub fn spans_dropped(&self) -> IntCounter {
        self.spans_dropped.clone()
    }

    /// Logs that tracing is on, and where spans go.
    pub fn announce(&self) {
        if self.provider.is_some() {
            tracing::info!(
                endpoint = %self.endpoint,
                service_name = %self.service_name,
                "OpenTelemetry tracing on: spans exported by OTLP/HTTP"
            );
        }
    }

    /// Exports what is queued, within [`EXIT_FLUSH`] whatever the
    /// collector does; at exit.
    pub fn shutdown(&self) {
        let Some(provider) = &self.provider else {
            return;
        };
        if provider.shutdown_with_timeout(EXIT_FLUSH).is_err() {
            tracing::warn!(
                "spans still queued at exit could not all be exported within {} s",
                EXIT_FLUSH.as_secs()
            );
        }
    }
}

/// The layer handing the spans of [`spans::TARGET`] to `provider`.
///
/// Filtered even with no provider: a layer without a filter takes every
/// span (`Option::None` included), and would make each of lanyard's
/// enabled, and the request path pay for them, with tracing off.
fn layer<S>(provider: Option<&SdkTracerProvider>) -> impl Layer<S> + use<S>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    let on = provider.is_some();
    let only_ours =
        tracing_subscriber::filter::filter_fn(move |meta| on && meta.target() == spans::TARGET)
            .with_max_level_hint(match on {
                true => LevelFilter::INFO,
                false => LevelFilter::OFF,
            });
    let scope = InstrumentationScope::builder("lanyard")
        .with_version(env!("CARGO_PKG_VERSION"))
        .build();
    // What a span says is declared in `spans`: no source locations,
    // threads, timings or targets added.
    provider
        .map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer_with_scope(scope))
                .with_location(false)
                .with_threads(false)
                .with_target(false)
                .with_tracked_inactivity(false)
                .with_context_activation(false)
        })
        .with_filter(only_ours)
}

/// The exporter, its queue and the provider, as `settings` say.
fn pipeline(
    settings: &OtelSettings,
    ca_file: Option<&Path>,
    spans_dropped: IntCounter,
) -> Result<SdkTracerProvider, String> {
    let certificate = settings
        .certificate
        .as_ref()
        .map(|(variable, path)| (*variable, path.as_path()));
    let client = CollectorClient::new(ca_file, certificate, settings.timeout)?;
    // Decoded when read: the exporter sends what it is given as it is.
    let headers: HashMap<String, String> = settings
        .headers
        .iter()
        .map(|(name, value)| (name.to_string(), value.expose().to_string()))
        .collect();
    let mut builder = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(settings.endpoint.to_string())
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(settings.timeout)
        .with_headers(headers);
    if settings.gzip {
        builder = builder.with_compression(Compression::Gzip);
    }
    let mut exporter = builder
        .build()
        .map_err(|err| format!("the OTLP exporter cannot be built: {err}"))?;
    let resource = resource(settings);
    // The export thread owns the exporter; the provider's resource is
    // given to it here rather than through the processor.
    exporter.set_resource(&resource);
    let processor = BoundedProcessor::start(exporter, settings.batch, spans_dropped)
        .map_err(|err| format!("the span export thread cannot start: {err}"))?;
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_sampler(sampler(settings.sampler))
        .with_resource(resource)
        .build())
}

/// The resource: the SDK's own attributes, lanyard's version, then the
/// operator's `OTEL_RESOURCE_ATTRIBUTES` and service name, which win.
fn resource(settings: &OtelSettings) -> Resource {
    let attributes = settings
        .resource
        .iter()
        .map(|(key, value)| KeyValue::new(key.clone(), value.clone()));
    Resource::builder_empty()
        .with_detector(Box::new(TelemetryResourceDetector))
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
        .with_attributes(attributes)
        .with_service_name(settings.service_name.clone())
        .build()
}

fn sampler(choice: SamplerChoice) -> Sampler {
    let parent_based = |root| Sampler::ParentBased(Box::new(root));
    match choice {
        SamplerChoice::AlwaysOn => Sampler::AlwaysOn,
        SamplerChoice::AlwaysOff => Sampler::AlwaysOff,
        SamplerChoice::TraceIdRatio(ratio) => Sampler::TraceIdRatioBased(ratio),
        SamplerChoice::ParentBasedAlwaysOn => parent_based(Sampler::AlwaysOn),
        SamplerChoice::ParentBasedAlwaysOff => parent_based(Sampler::AlwaysOff),
        SamplerChoice::ParentBasedTraceIdRatio(ratio) => {
            parent_based(Sampler::TraceIdRatioBased(ratio))
        }
    }
}
