//! The standard `OTEL_*` variables, read as OpenTelemetry SDKs read them
//! (the specification's "Environment Variable Specification" and the OTLP
//! exporter's), in one pure function of the environment: tracing is on
//! with what they say, off, or off with one warning for each bad or
//! unsupported variable. They are not lanyard settings (no flag, no config
//! key, no exit 2): an SDK never stops its process over them, and neither
//! does lanyard (docs/admin.md "Tracing").
//!
//! A warning names its variable and never repeats the value of one that
//! may hold a secret: headers carry collectors' API keys, an endpoint or a
//! resource attribute may carry credentials.

use std::path::PathBuf;
use std::time::Duration;

use http::uri::{PathAndQuery, Uri};
use http::{HeaderName, HeaderValue};

use crate::config::Env;
use crate::secret::Secret;

pub const SDK_DISABLED: &str = "OTEL_SDK_DISABLED";
pub const TRACES_EXPORTER: &str = "OTEL_TRACES_EXPORTER";
pub const ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
pub const TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
pub const PROTOCOL: &str = "OTEL_EXPORTER_OTLP_PROTOCOL";
pub const TRACES_PROTOCOL: &str = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL";
pub const HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
pub const TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
pub const CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_CERTIFICATE";
pub const TRACES_CERTIFICATE: &str = "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE";
pub const TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
pub const TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
pub const COMPRESSION: &str = "OTEL_EXPORTER_OTLP_COMPRESSION";
pub const TRACES_COMPRESSION: &str = "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION";
pub const SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
pub const RESOURCE_ATTRIBUTES: &str = "OTEL_RESOURCE_ATTRIBUTES";
pub const SAMPLER: &str = "OTEL_TRACES_SAMPLER";
pub const SAMPLER_ARG: &str = "OTEL_TRACES_SAMPLER_ARG";
pub const PROPAGATORS: &str = "OTEL_PROPAGATORS";
pub const BSP_SCHEDULE_DELAY: &str = "OTEL_BSP_SCHEDULE_DELAY";
pub const BSP_EXPORT_TIMEOUT: &str = "OTEL_BSP_EXPORT_TIMEOUT";
pub const BSP_MAX_QUEUE_SIZE: &str = "OTEL_BSP_MAX_QUEUE_SIZE";
pub const BSP_MAX_EXPORT_BATCH_SIZE: &str = "OTEL_BSP_MAX_EXPORT_BATCH_SIZE";

/// Client certificates for the collector (mutual TLS): not supported, so
/// set they turn tracing off rather than be ignored into a collector's
/// refusals.
const CLIENT_TLS: [&str; 4] = [
    "OTEL_EXPORTER_OTLP_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY",
    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
    "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE",
];

/// The specification's defaults: the OTLP exporter's 10 s, and the batch
/// span processor's 5 s, 30 s, 2048 and 512.
const DEFAULT_TIMEOUT_MS: u64 = 10_000;
const DEFAULT_SCHEDULE_DELAY_MS: u64 = 5_000;
const DEFAULT_EXPORT_TIMEOUT_MS: u64 = 30_000;
const DEFAULT_MAX_QUEUE: u64 = 2048;
const DEFAULT_MAX_BATCH: u64 = 512;
/// A queue this long holds a gigabyte of spans or so; beyond it the bound
/// no longer bounds anything an operator would want.
const MAX_QUEUE: u64 = 1_000_000;
/// Longest duration any of the millisecond variables may give: an hour.
const MAX_MS: u64 = 3_600_000;
/// `service.name` when neither `OTEL_SERVICE_NAME` nor the resource
/// attributes name one.
pub const DEFAULT_SERVICE_NAME: &str = "lanyard";

/// What the variables ask for.
#[derive(Debug)]
pub enum Reading {
    /// No endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`.
    Off,
    On(Box<OtelSettings>),
    /// Tracing stays off: one warning per bad variable.
    Invalid(Vec<String>),
}

/// Tracing as the variables configure it.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelSettings {
    /// Where spans are POSTed: the traces endpoint as given, or the
    /// endpoint with `/v1/traces` appended.
    pub endpoint: Uri,
    /// Sent with every export, values percent-decoded here (the exporter
    /// sends what it is given). Secrets: collectors' API keys.
    pub headers: Vec<(HeaderName, Secret)>,
    /// A PEM bundle added to the trusted roots for the collector, with
    /// the variable that named it.
    pub certificate: Option<(&'static str, PathBuf)>,
    /// One export request, retries included.
    pub timeout: Duration,
    pub gzip: bool,
    pub service_name: String,
    /// `OTEL_RESOURCE_ATTRIBUTES`, decoded, `service.name` aside.
    pub resource: Vec<(String, String)>,
    pub sampler: SamplerChoice,
    pub batch: BatchOptions,
}

/// The specification's samplers; `ratio` is `OTEL_TRACES_SAMPLER_ARG`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SamplerChoice {
    AlwaysOn,
    AlwaysOff,
    TraceIdRatio(f64),
    ParentBasedAlwaysOn,
    ParentBasedAlwaysOff,
    ParentBasedTraceIdRatio(f64),
}

/// The batch span processor's `OTEL_BSP_*` settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchOptions {
    /// Longest a span waits in a batch before the batch is exported.
    pub schedule_delay: Duration,
    /// One export, the exporter's retries included.
    pub export_timeout: Duration,
    /// Spans waiting for the exporter; more are dropped and counted.
    pub max_queue: usize,
    /// Spans in one export request; at most `max_queue`.
    pub max_batch: usize,
}

impl Default for BatchOptions {
    fn default() -> Self {
        BatchOptions {
            schedule_delay: Duration::from_millis(DEFAULT_SCHEDULE_DELAY_MS),
            export_timeout: Duration::from_millis(DEFAULT_EXPORT_TIMEOUT_MS),
            max_queue: DEFAULT_MAX_QUEUE as usize,
            max_batch: DEFAULT_MAX_BATCH as usize,
        }
    }
}

/// Reads every `OTEL_*` variable lanyard honours from `env`.
pub fn read(env: &impl Env) -> Reading {
    let mut vars = Vars {
        env,
        problems: Vec::new(),
    };
    match vars
        .get(SDK_DISABLED)
        .as_deref()
        .map(str::to_ascii_lowercase)
    {
        Some(v) if v == "true" => return Reading::Off,
        Some(v) if v == "false" => {}
        Some(_) => vars.problem(SDK_DISABLED, "is neither true nor false"),
        None => {}
    }
    if let Some(exporter) = vars.get(TRACES_EXPORTER) {
        match exporter.trim() {
            "none" => return Reading::Off,
            "otlp" => {}
            other => vars.problem(
                TRACES_EXPORTER,
                &format!("is `{other}`: lanyard exports by OTLP only (`otlp`, or `none`)"),
            ),
        }
    }
    let Some(endpoint) = vars.endpoint() else {
        return match vars.problems.is_empty() {
            true => Reading::Off,
            false => Reading::Invalid(vars.problems),
        };
    };
    let settings = vars.settings(endpoint);
    match (settings, vars.problems.is_empty()) {
        (Some(settings), true) => Reading::On(Box::new(settings)),
        _ => Reading::Invalid(vars.problems),
    }
}

/// The environment, with every problem found so far.
struct Vars<'a, E> {
    env: &'a E,
    problems: Vec<String>,
}

impl<E: Env> Vars<'_, E> {
    /// A variable's value; empty counts as unset, as the specification
    /// says.
    fn get(&mut self, name: &'static str) -> Option<String> {
        match self.env.var(name) {
            Ok(value) => value.filter(|v| !v.trim().is_empty()),
            Err(_) => {
                self.problem(name, "is not valid UTF-8");
                None
            }
        }
    }

    /// The signal's own variable, else the general one, with the name of
    /// the one set.
    fn either(
        &mut self,
        traces: &'static str,
        all: &'static str,
    ) -> Option<(&'static str, String)> {
        match self.get(traces) {
            Some(value) => Some((traces, value)),
            None => self.get(all).map(|value| (all, value)),
        }
    }

    fn problem(&mut self, name: &str, why: &str) {
        self.problems
            .push(format!("{name} {why}; OpenTelemetry tracing is off"));
    }

    /// The traces endpoint, if one is set: `None` means tracing is off.
    fn endpoint(&mut self) -> Option<Option<Uri>> {
        if let Some(url) = self.get(TRACES_ENDPOINT) {
            return Some(self.checked(TRACES_ENDPOINT, collector_url(&url)));
        }
        let url = self.get(ENDPOINT)?;
        let joined = collector_url(&url).and_then(|base| {
            if base.query().is_some() {
                return Err("has a query string, to which /v1/traces cannot be appended".into());
            }
            let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
            let mut parts = base.into_parts();
            parts.path_and_query = Some(PathAndQuery::try_from(path).map_err(|e| e.to_string())?);
            Uri::from_parts(parts).map_err(|e| e.to_string())
        });
        Some(self.checked(ENDPOINT, joined))
    }

    fn checked<T>(&mut self, name: &str, value: Result<T, String>) -> Option<T> {
        value.map_err(|why| self.problem(name, &why)).ok()
    }

    /// Everything but the endpoint; `None` when something is wrong.
    fn settings(&mut self, endpoint: Option<Uri>) -> Option<OtelSettings> {
        self.supported();
        let headers = self.headers();
        let certificate = self
            .either(TRACES_CERTIFICATE, CERTIFICATE)
            .map(|(name, path)| (name, PathBuf::from(path)));
        let timeout = self.millis(TRACES_TIMEOUT, TIMEOUT, DEFAULT_TIMEOUT_MS);
        let gzip = self.gzip();
        let (service_name, resource) = self.resource();
        let sampler = self.sampler();
        let batch = self.batch();
        Some(OtelSettings {
            endpoint: endpoint?,
            headers: headers?,
            certificate,
            timeout: timeout?,
            gzip: gzip?,
            service_name,
            resource: resource?,
            sampler: sampler?,
            batch: batch?,
        })
    }

    /// What lanyard does not do, said rather than ignored: another
    /// protocol, other propagators, client certificates.
    fn supported(&mut self) {
        if let Some((name, protocol)) = self.either(TRACES_PROTOCOL, PROTOCOL)
            && protocol.trim() != "http/protobuf"
        {
            let why = format!(
                "is `{}`: lanyard exports OTLP over http/protobuf only",
                protocol.trim()
            );
            self.problem(name, &why);
        }
        if let Some(list) = self.get(PROPAGATORS) {
            let entries: Vec<&str> = list.split(',').map(str::trim).collect();
            let known = entries
                .iter()
                .all(|p| ["tracecontext", "baggage"].contains(p));
            if !known || !entries.contains(&"tracecontext") {
                self.problem(PROPAGATORS, "is not `tracecontext` or `tracecontext,baggage`: lanyard propagates the W3C trace context and passes baggage on untouched");
            }
        }
        for name in CLIENT_TLS {
            if self.get(name).is_some() {
                self.problem(
                    name,
                    "is set: lanyard does not present client certificates to the collector",
                );
            }
        }
    }

    /// `None` when the list is bad, after saying so.
    fn headers(&mut self) -> Option<Vec<(HeaderName, Secret)>> {
        let Some((name, list)) = self.either(TRACES_HEADERS, HEADERS) else {
            return Some(Vec::new());
        };
        let parsed = pairs(&list).and_then(|pairs| {
            pairs
                .into_iter()
                .map(|(key, value)| {
                    let header = HeaderName::from_bytes(key.as_bytes()).map_err(|_| ())?;
                    let value = percent_decode(value)?;
                    HeaderValue::from_str(&value).map_err(|_| ())?;
                    Ok((header, Secret::new(value)))
                })
                .collect::<Result<Vec<_>, ()>>()
        });
        if parsed.is_err() {
            self.problem(
                name,
                "is not a list of name=value pairs with header names and percent-encoded values (not shown: it may hold a key)",
            );
        }
        parsed.ok()
    }

    /// Milliseconds from `traces` or `all`, at least 1 and at most an hour.
    fn millis(
        &mut self,
        traces: &'static str,
        all: &'static str,
        default: u64,
    ) -> Option<Duration> {
        let Some((name, value)) = self.either(traces, all) else {
            return Some(Duration::from_millis(default));
        };
        let ms = self.checked(name, whole_number(&value, 1, MAX_MS))?;
        Some(Duration::from_millis(ms))
    }

    fn gzip(&mut self) -> Option<bool> {
        let Some((name, value)) = self.either(TRACES_COMPRESSION, COMPRESSION) else {
            return Some(false);
        };
        match value.trim() {
            "gzip" => Some(true),
            "none" => Some(false),
            other => {
                let why = format!("is `{other}`: lanyard compresses with `gzip` or `none`");
                self.problem(name, &why);
                None
            }
        }
    }

    /// `service.name` and the other resource attributes.
    fn resource(&mut self) -> (String, Option<Vec<(String, String)>>) {
        let mut attributes = Vec::new();
        if let Some(list) = self.get(RESOURCE_ATTRIBUTES) {
            let decoded = pairs(&list).and_then(|pairs| {
                pairs
                    .into_iter()
                    .map(|(key, value)| Ok((key.to_string(), percent_decode(value)?)))
                    .collect::<Result<Vec<_>, ()>>()
            });
            match decoded {
                Ok(decoded) => attributes = decoded,
                Err(()) => {
                    self.problem(
                        RESOURCE_ATTRIBUTES,
                        "is not a list of key=value pairs with percent-encoded values",
                    );
                    return (String::new(), None);
                }
            }
        }
        let from_resource = attributes
            .iter()
            .position(|(key, _)| key == "service.name")
            .map(|at| attributes.remove(at).1);
        let name = self
            .get(SERVICE_NAME)
            .map(|name| name.trim().to_string())
            .or(from_resource)
            .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string());
        (name, Some(attributes))
    }

    fn sampler(&mut self) -> Option<SamplerChoice> {
        let Some(name) = self.get(SAMPLER) else {
            return Some(SamplerChoice::ParentBasedAlwaysOn);
        };
        let ratio = |vars: &mut Self| match vars.get(SAMPLER_ARG) {
            None => Some(1.0),
            Some(arg) => {
                let ratio = arg
                    .trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r));
                if ratio.is_none() {
                    vars.problem(SAMPLER_ARG, "is not a ratio from 0 to 1");
                }
                ratio
            }
        };
        match name.trim().to_ascii_lowercase().as_str() {
            "always_on" => Some(SamplerChoice::AlwaysOn),
            "always_off" => Some(SamplerChoice::AlwaysOff),
            "traceidratio" => ratio(self).map(SamplerChoice::TraceIdRatio),
            "parentbased_always_on" => Some(SamplerChoice::ParentBasedAlwaysOn),
            "parentbased_always_off" => Some(SamplerChoice::ParentBasedAlwaysOff),
            "parentbased_traceidratio" => ratio(self).map(SamplerChoice::ParentBasedTraceIdRatio),
            other => {
                let why = format!(
                    "is `{other}`: lanyard samples with always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
                );
                self.problem(SAMPLER, &why);
                None
            }
        }
    }

    fn batch(&mut self) -> Option<BatchOptions> {
        let mut number = |name: &'static str, default: u64, max: u64| match self.get(name) {
            None => Some(default),
            Some(value) => self.checked(name, whole_number(&value, 1, max)),
        };
        let schedule_delay = number(BSP_SCHEDULE_DELAY, DEFAULT_SCHEDULE_DELAY_MS, MAX_MS);
        let export_timeout = number(BSP_EXPORT_TIMEOUT, DEFAULT_EXPORT_TIMEOUT_MS, MAX_MS);
        let max_queue = number(BSP_MAX_QUEUE_SIZE, DEFAULT_MAX_QUEUE, MAX_QUEUE);
        let max_batch = number(BSP_MAX_EXPORT_BATCH_SIZE, DEFAULT_MAX_BATCH, MAX_QUEUE);
        let max_queue = max_queue? as usize;
        Some(BatchOptions {
            schedule_delay: Duration::from_millis(schedule_delay?),
            export_timeout: Duration::from_millis(export_timeout?),
            max_queue,
            // The specification: a batch larger than the queue is the queue.
            max_batch: (max_batch? as usize).min(max_queue),
        })
    }
}

/// A collector's URL: absolute, http or https, with a host and no user
/// info (credentials go in headers). Plain http is allowed anywhere: a
/// collector in the cluster is commonly reached so, and spans carry no
/// secret; the headers are the operator's to protect.
fn collector_url(raw: &str) -> Result<Uri, String> {
    let uri: Uri = raw
        .trim()
        .parse()
        .map_err(|_| "is not a valid absolute URL".to_string())?;
    let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
        return Err("is not an absolute URL (expected http://host:4318)".into());
    };
    if !["http", "https"].contains(&scheme) {
        return Err("must be an http or https URL".into());
    }
    if authority.as_str().contains('@') {
        return Err("must not carry user info (user:password@); send credentials in OTEL_EXPORTER_OTLP_HEADERS".into());
    }
    if authority.host().is_empty() {
        return Err("has no host".into());
    }
    Ok(uri)
}

/// A whole number from `min` to `max`.
fn whole_number(value: &str, min: u64, max: u64) -> Result<u64, String> {
    value
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("is not a whole number from {min} to {max}"))
}

/// `key=value,key=value` (the W3C baggage form the specification uses for
/// headers and resource attributes), values still percent-encoded; empty
/// entries are skipped.
fn pairs(list: &str) -> Result<Vec<(&str, &str)>, ()> {
    list.split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (key, value) = entry.split_once('=').ok_or(())?;
            let key = key.trim();
            match key.is_empty() {
                true => Err(()),
                false => Ok((key, value.trim())),
            }
        })
        .collect()
}

/// Percent-decoding (RFC 3986 §2.1) to UTF-8; `+` stays a plus.
fn percent_decode(text: &str) -> Result<String, ()> {
    crate::percent::decode(text)
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or(())
}

#[cfg(test)]
mod tests;
