//! Settings: command-line flags, environment, TOML file and defaults, merged
//! into one validated [`Config`].
//!
//! Every setting is declared once below as a [`Setting`] with its TOML key,
//! environment variable and flag, so the README, the example config and the
//! code cannot drift apart (a test reads the README against [`SETTINGS`]).
//! Precedence is flag > environment > file > default. Every problem is
//! collected before failing, and each message names the setting and where
//! its value came from; values of secret settings are never echoed.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use http::Uri;

/// One user-facing setting: how it is spelled in each source.
#[derive(Debug)]
pub struct Setting {
    /// Key in the TOML config file.
    pub key: &'static str,
    /// Environment variable.
    pub env: &'static str,
    /// Command-line flag, if there is one. Secrets have none: a flag's value
    /// is visible to every user of the machine through the process list.
    pub flag: Option<&'static str>,
    /// The value is a secret and is never printed.
    pub secret: bool,
}

macro_rules! settings {
    ($($name:ident = ($key:literal, $env:literal, $flag:expr, $secret:literal);)*) => {
        $(
            #[doc = concat!("`", $env, "`")]
            pub const $name: Setting = Setting { key: $key, env: $env, flag: $flag, secret: $secret };
        )*
        /// Every setting, in the order the README lists them.
        pub const SETTINGS: &[&Setting] = &[$(&$name),*];
    };
}

settings! {
    SERVICE_API_URL = ("service_api_url", "SERVICE_API_URL", Some("--service-api-url"), false);
    CREDENTIALS_FILE = ("credentials_file", "SA_CREDENTIALS_FILE", Some("--credentials-file"), false);
    CLIENT_ID = ("client_id", "SA_CLIENT_ID", Some("--client-id"), false);
    PRIVATE_KEY = ("private_key", "SA_PRIVATE_KEY", None, true);
    IAM_AUDIENCE = ("iam_audience", "SA_IAM_AUDIENCE", Some("--iam-audience"), false);
    TOKEN_URI = ("token_uri", "SA_TOKEN_URI", Some("--token-uri"), false);
    ORGANIZATION_ID = ("organization_id", "SA_ORGANIZATION_ID", Some("--organization-id"), false);
    ORG_ID = ("org_id", "ORG_ID", Some("--org-id"), false);
    PROJECT_ID = ("project_id", "PROJECT_ID", Some("--project-id"), false);
    RULE_ID = ("rule_id", "RULE_ID", Some("--rule-id"), false);
    LISTEN = ("listen", "LANYARD_LISTEN", Some("--listen"), false);
    ALLOW_REMOTE = ("allow_remote", "LANYARD_ALLOW_REMOTE", Some("--allow-remote"), false);
    ADMIN_LISTEN = ("admin_listen", "LANYARD_ADMIN_LISTEN", Some("--admin-listen"), false);
    ASSERTION_TTL = ("assertion_ttl", "LANYARD_ASSERTION_TTL", Some("--assertion-ttl"), false);
    CLOCK_SKEW = ("clock_skew", "LANYARD_CLOCK_SKEW", Some("--clock-skew"), false);
    CA_FILE = ("ca_file", "LANYARD_CA_FILE", Some("--ca-file"), false);
    UPSTREAM_TIMEOUT = ("upstream_timeout", "LANYARD_UPSTREAM_TIMEOUT", Some("--upstream-timeout"), false);
    TOKEN_TIMEOUT = ("token_timeout", "LANYARD_TOKEN_TIMEOUT", Some("--token-timeout"), false);
    EXPIRY_MARGIN = ("expiry_margin", "LANYARD_EXPIRY_MARGIN", Some("--expiry-margin"), false);
    SHUTDOWN_GRACE = ("shutdown_grace", "LANYARD_SHUTDOWN_GRACE", Some("--shutdown-grace"), false);
    HEADER_TIMEOUT = ("header_timeout", "LANYARD_HEADER_TIMEOUT", Some("--header-timeout"), false);
    BODY_TIMEOUT = ("body_timeout", "LANYARD_BODY_TIMEOUT", Some("--body-timeout"), false);
    MAX_HEADER_BYTES = ("max_header_bytes", "LANYARD_MAX_HEADER_BYTES", Some("--max-header-bytes"), false);
    MAX_CONNECTIONS = ("max_connections", "LANYARD_MAX_CONNECTIONS", Some("--max-connections"), false);
    MAX_UPSTREAM_CONNECTIONS = ("max_upstream_connections", "LANYARD_MAX_UPSTREAM_CONNECTIONS", Some("--max-upstream-connections"), false);
    WORKER_THREADS = ("worker_threads", "LANYARD_WORKER_THREADS", Some("--worker-threads"), false);
    RFC7523_FIELDS = ("rfc7523_fields", "LANYARD_RFC7523_FIELDS", Some("--rfc7523-fields"), false);
    LOG_FORMAT = ("log_format", "LANYARD_LOG_FORMAT", Some("--log-format"), false);
    DEMO = ("demo", "DEMO_MOCK", None, false);
}

/// The config file itself is located by flag or environment only.
pub const CONFIG_ENV: &str = "LANYARD_CONFIG";

/// Loopback only: anyone who can reach the proxy acts as the service account.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";
/// All interfaces, so kubelet probes and Prometheus can reach it; it serves
/// health and metrics only, never a token.
pub const DEFAULT_ADMIN_LISTEN: &str = "0.0.0.0:9090";
/// The seed suggests one hour, and its token endpoint refuses longer.
pub const DEFAULT_ASSERTION_TTL: Duration = Duration::from_secs(3600);
/// Upper bound of the assertion lifetime (seed §5.2, §8).
pub const MAX_ASSERTION_TTL: Duration = Duration::from_secs(3600);
/// Backdating `iat` beyond this would hide a broken clock rather than
/// tolerate a drifting one.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);
/// Time to response headers; generous because some API calls do real work.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// A token endpoint that has not answered in 10 s is better retried than
/// waited on; the held token keeps serving meanwhile.
pub const DEFAULT_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that has not sent a request's headers by now, on a new or an
/// idle keep-alive connection, is disconnected, so slow or idle
/// connections cannot pile up.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// A request body silent this long is given up: the HTTP/1.1 connection is
/// closed, the HTTP/2 stream reset. Of the order of the header timeout, so
/// a client stalling its body holds a connection no longer than one
/// stalling its headers.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// Request header bytes per connection (HTTP/1.1: the whole request head;
/// HTTP/2: each header list). Envoy allows 60 KiB and nginx 32 KiB; API
/// clients send a few KiB. With the connection limit it bounds memory
/// (README "Limits").
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// hyper's smallest read buffer: a request head must fit in one.
pub const MIN_MAX_HEADER_BYTES: usize = 8 * 1024;
/// Beyond this a header limit is no limit.
pub const MAX_MAX_HEADER_BYTES: usize = 1024 * 1024;
/// Upstream connections across all proxy threads: an app's concurrency is
/// tens of requests, and each HTTP/2 stream from a client no longer costs a
/// connection of its own; beyond it, requests wait for a pooled one.
pub const DEFAULT_MAX_UPSTREAM_CONNECTIONS: usize = 256;
/// More than one process should hold to one upstream.
pub const MAX_MAX_UPSTREAM_CONNECTIONS: usize = 65_536;
/// One app's connection pool needs tens of connections; a thousand leaves
/// room for bursts while keeping memory and file descriptors bounded.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Far beyond what one app needs, and what one process can hold open.
pub const MAX_MAX_CONNECTIONS: usize = 1 << 20;
/// A sidecar shares its pod's CPUs with the app: by default one runtime
/// thread per CPU the process may use (cgroup quotas included), at most
/// this many, as Istio caps Envoy at two.
pub const DEFAULT_MAX_WORKER_THREADS: usize = 4;
/// More threads than this is a typo, not a tuning.
pub const MAX_WORKER_THREADS: usize = 256;
/// A token is retired this long before the expiry its `expires_in` gives:
/// a JWT's `exp` is whole seconds (up to 1 s sooner), the request takes
/// its latency to arrive, and the API's clock may run ahead of ours. Ten
/// seconds covers all three with room; see README "Token lifetime".
pub const DEFAULT_EXPIRY_MARGIN: Duration = Duration::from_secs(10);
/// Below Kubernetes' default 30 s termination grace period, so lanyard
/// finishes draining before the kubelet kills it.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);

/// Where a value came from, for error messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Flag(&'static str),
    Env(&'static str),
    File { path: PathBuf, key: &'static str },
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Flag(flag) => write!(f, "flag {flag}"),
            Source::Env(name) => write!(f, "environment variable {name}"),
            Source::File { path, key } => write!(f, "key `{key}` in {}", path.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// A value together with where it came from.
#[derive(Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    pub value: T,
    pub source: Source,
}

impl<T: fmt::Debug> fmt::Debug for Sourced<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} ({})", self.value, self.source)
    }
}

/// An environment variable is set but is not valid UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotUnicode;

/// Read access to environment variables, so tests pass a map instead of
/// mutating the process environment.
pub trait Env {
    /// The variable's value, `None` when unset.
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(NotUnicode),
        }
    }
}

impl<S: std::hash::BuildHasher> Env for HashMap<String, String, S> {
    fn var(&self, name: &str) -> Result<Option<String>, NotUnicode> {
        Ok(self.get(name).cloned())
    }
}

/// Values given on the command line, keyed by [`Setting::key`].
#[derive(Debug, Clone, Default)]
pub struct Flags {
    pub config: Option<PathBuf>,
    pub values: BTreeMap<&'static str, String>,
}

impl Flags {
    /// Records a flag's value when it was given.
    pub fn set(&mut self, setting: &Setting, value: Option<impl Into<String>>) {
        if let Some(value) = value {
            self.values.insert(setting.key, value.into());
        }
    }
}

/// Problems found in the settings; each line names the setting and source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ConfigError(Vec<String>);

impl ConfigError {
    /// Collects problem lines, escaping control characters and the
    /// characters that reorder or break text: a line quotes values as
    /// given, and a line break, terminal escape or bidirectional override
    /// in one would split the problem or disguise it on stderr.
    pub fn new(lines: Vec<String>) -> Self {
        ConfigError(
            lines
                .into_iter()
                .map(|line| {
                    let mut shown = String::with_capacity(line.len());
                    for c in line.chars() {
                        if c.is_control() || reorders_text(c) {
                            shown.extend(c.escape_default());
                        } else {
                            shown.push(c);
                        }
                    }
                    shown
                })
                .collect(),
        )
    }

    pub fn lines(&self) -> &[String] {
        &self.0
    }

    pub fn into_lines(self) -> Vec<String> {
        self.0
    }
}

/// Bidirectional embeddings, overrides and isolates, and the Unicode line
/// and paragraph separators.
fn reorders_text(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{2028}' | '\u{2029}')
}

/// Log line encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Json,
    Text,
}

/// An absolute `http(s)` URL that lanyard sends the token to.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    uri: Uri,
}

impl TargetUrl {
    /// Parses and checks a URL: absolute, `http` or `https`, no user info,
    /// no fragment, and `https` unless the host is a loopback address.
    /// The message does not repeat the value, which may carry a secret.
    pub fn parse(raw: &str, allow_query: bool) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.contains('#') {
            return Err("must not have a fragment (#...)".into());
        }
        let uri: Uri = raw
            .parse()
            .map_err(|_| "is not a valid absolute URL".to_string())?;
        let scheme = uri
            .scheme_str()
            .ok_or("is not an absolute URL (expected https://host/...)")?;
        let authority = uri
            .authority()
            .ok_or("is not an absolute URL (expected https://host/...)")?;
        if authority.as_str().contains('@') {
            return Err("must not carry user info (user:password@)".into());
        }
        if authority.host().is_empty() {
            return Err("has no host".into());
        }
        if !allow_query && uri.query().is_some() {
            return Err("must not have a query string".into());
        }
        match scheme {
            "https" => {}
            "http" if is_loopback_host(authority.host()) => {}
            "http" => {
                return Err(
                    "must use https: the token would cross the network in clear text (plain http is accepted on loopback only)"
                        .into(),
                );
            }
            _ => return Err("must be an http or https URL".into()),
        }
        Ok(TargetUrl { uri })
    }

    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// Path prefix without a trailing slash (empty for the root).
    pub fn path_prefix(&self) -> &str {
        self.uri.path().trim_end_matches('/')
    }
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.uri, f)
    }
}

impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.uri, f)
    }
}

/// True for `localhost`, `127.0.0.0/8` and `::1`.
pub fn is_loopback_host(host: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.eq_ignore_ascii_case("localhost")
        || bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// The credentials-related settings, unresolved: the credentials file is
/// read and merged with these by [`crate::credentials`].
#[derive(Debug, Clone, Default)]
pub struct CredentialSettings {
    pub file: Option<Sourced<PathBuf>>,
    pub client_id: Option<Sourced<String>>,
    pub private_key: Option<Sourced<crate::Secret>>,
    pub iam_audience: Option<Sourced<String>>,
    pub token_uri: Option<Sourced<String>>,
    pub organization_id: Option<Sourced<String>>,
    /// `ORG_ID`, the fallback for the organization id.
    pub org_id: Option<Sourced<String>>,
}

/// Every setting, validated.
#[derive(Debug, Clone)]
pub struct Config {
    /// `None` only where the command does not need it (`token`, `demo`).
    pub service_api_url: Option<TargetUrl>,
    pub credentials: CredentialSettings,
    pub org_id: Option<String>,
    pub project_id: Option<String>,
    pub rule_id: Option<String>,
    pub listen: SocketAddr,
    pub admin_listen: SocketAddr,
    pub assertion_ttl: Duration,
    /// How far `iat` (and with it `exp`) is backdated.
    pub clock_skew: Duration,
    pub ca_file: Option<PathBuf>,
    pub upstream_timeout: Duration,
    pub token_timeout: Duration,
    /// How long before its expiry a token stops being sent; at run time at
    /// most a tenth of each token's lifetime.
    pub expiry_margin: Duration,
    pub shutdown_grace: Duration,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    pub max_upstream_connections: usize,
    /// Proxy threads for `run` and `demo`, each with its own runtime.
    pub worker_threads: usize,
    pub rfc7523_fields: bool,
    pub log_format: LogFormat,
    pub demo: bool,
    /// Values that were accepted with an adjustment, to log once logging
    /// is set up.
    pub warnings: Vec<String>,
}

/// What the command needs from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// `run` and `check`: the upstream base URL and credentials.
    Upstream,
    /// `token`: credentials only.
    NoUpstream,
    /// `demo`: neither; the demo makes its own.
    Demo,
    /// `healthcheck`: the admin address only. It runs every few seconds in
    /// the container, so it must not read the key.
    AdminOnly,
}

impl Requirement {
    fn credentials(self) -> bool {
        matches!(self, Requirement::Upstream | Requirement::NoUpstream)
    }
}

/// The merged sources, answering "what is this setting and where from".
struct Layers<'a> {
    flags: &'a Flags,
    env: &'a dyn Env,
    file: Option<(PathBuf, toml::Table)>,
    errors: Vec<String>,
    warnings: Vec<String>,
    /// Settings whose variable was set but unreadable: reported once, and
    /// not again as unset.
    unreadable: Vec<&'static str>,
}

impl Layers<'_> {
    fn raw(&mut self, setting: &'static Setting) -> Option<Sourced<String>> {
        if let (Some(flag), Some(value)) = (setting.flag, self.flags.values.get(setting.key)) {
            return Some(Sourced {
                value: value.clone(),
                source: Source::Flag(flag),
            });
        }
        match self.env.var(setting.env) {
            Ok(Some(value)) if !value.trim().is_empty() => {
                return Some(Sourced {
                    value,
                    source: Source::Env(setting.env),
                });
            }
            // An empty variable is how a Kubernetes manifest or a shell
            // unsets a value; treat it as not given.
            Ok(_) => {}
            Err(NotUnicode) => {
                self.errors.push(format!(
                    "{} (environment variable {}): is not valid UTF-8",
                    setting.env, setting.env
                ));
                self.unreadable.push(setting.env);
                return None;
            }
        }
        let (path, table) = self.file.as_ref()?;
        let value = table.get(setting.key)?;
        let source = Source::File {
            path: path.clone(),
            key: setting.key,
        };
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(x) => x.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            _ => {
                self.errors.push(format!(
                    "{} ({source}): must be a string, a number or a boolean",
                    setting.env
                ));
                return None;
            }
        };
        Some(Sourced {
            value: text,
            source,
        })
    }

    /// Reads and converts a setting, recording a problem when the value is bad.
    fn parse<T>(
        &mut self,
        setting: &'static Setting,
        convert: impl FnOnce(&str) -> Result<T, String>,
    ) -> Option<Sourced<T>> {
        let raw = self.raw(setting)?;
        match convert(raw.value.trim()) {
            Ok(value) => Some(Sourced {
                value,
                source: raw.source,
            }),
            Err(why) => {
                self.problem(setting, &raw, &why);
                None
            }
        }
    }

    fn problem(&mut self, setting: &Setting, raw: &Sourced<String>, why: &str) {
        self.errors
            .push(format!("{} ({}): {why}", setting.env, raw.source));
    }

    fn string(&mut self, setting: &'static Setting) -> Option<Sourced<String>> {
        self.parse(setting, |s| Ok(s.to_string()))
    }
}

/// A whole number of `what`, from 1 to `max`.
fn parse_count(raw: &str, max: usize, what: &str) -> Result<usize, String> {
    match raw.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".to_string()),
        Ok(n) if n > max => Err(format!("{n} is more than the {max} allowed")),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{raw}` is not a whole number of {what}")),
    }
}

/// A byte count: plain bytes, or with a `KiB` or `MiB` suffix, from
/// [`MIN_MAX_HEADER_BYTES`] to [`MAX_MAX_HEADER_BYTES`].
fn parse_header_bytes(raw: &str) -> Result<usize, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, unit) = raw.split_at(split);
    let scale = match unit.trim() {
        "" => 1,
        "KiB" => 1024,
        "MiB" => 1024 * 1024,
        _ => {
            return Err(format!(
                "`{raw}` is not a size (use bytes, or a value like 64KiB)"
            ));
        }
    };
    let bytes = digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(scale))
        .ok_or_else(|| format!("`{raw}` is not a size (use bytes, or a value like 64KiB)"))?;
    if !(MIN_MAX_HEADER_BYTES..=MAX_MAX_HEADER_BYTES).contains(&bytes) {
        return Err(format!(
            "{bytes} bytes is outside {} KiB to {} KiB",
            MIN_MAX_HEADER_BYTES / 1024,
            MAX_MAX_HEADER_BYTES / 1024
        ));
    }
    Ok(bytes)
}

/// One per CPU this process may use, up to [`DEFAULT_MAX_WORKER_THREADS`].
fn default_worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(DEFAULT_MAX_WORKER_THREADS)
}

/// The longest any duration setting may be.
const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);

/// Parses `30`, `90s`, `5m`, `1h` (and `250ms`, for tests and tuning), up
/// to a day.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let duration = parse_any_duration(raw)?;
    // Nothing lanyard waits for takes longer, and deadlines computed from
    // an unbounded value would overflow.
    if duration > MAX_DURATION {
        return Err(format!(
            "`{}` is longer than a day, the most any duration may be",
            raw.trim()
        ));
    }
    Ok(duration)
}

/// As [`parse_duration`], with no upper bound, for a setting that caps its
/// value itself (CONTRACT §2: the assertion lifetime is "capped at 3600").
fn parse_any_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (digits, unit) = raw.split_at(split);
    let expected =
        || format!("`{raw}` is not a duration (use seconds, or a value like 90s, 5m, 1h)");
    let n: u64 = digits.parse().map_err(|_| expected())?;
    let duration = match unit.trim() {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        _ => return Err(expected()),
    };
    Ok(duration)
}

fn parse_bool(raw: &str) -> Result<bool, String> {
    match raw.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(format!("`{raw}` is not a boolean (use true or false)")),
    }
}

fn parse_addr(raw: &str) -> Result<SocketAddr, String> {
    raw.parse().map_err(|_| {
        format!("`{raw}` is not an address with a port (like 127.0.0.1:8080 or [::1]:8080)")
    })
}

/// Reads the TOML config file, refusing keys lanyard does not know so a
/// typo is an error rather than a silently ignored setting.
fn read_file(path: &Path, source: &str, errors: &mut Vec<String>) -> Option<toml::Table> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            errors.push(format!(
                "config file {} ({source}): cannot be read: {}",
                path.display(),
                io_reason(&err)
            ));
            return None;
        }
    };
    let table: toml::Table = match text.parse() {
        Ok(table) => table,
        Err(err) => {
            // toml's message quotes the offending line, which may hold the
            // private key; report only the position.
            let at = err
                .span()
                .map(|span| {
                    let line = text[..span.start].matches('\n').count() + 1;
                    format!(" at line {line}")
                })
                .unwrap_or_default();
            errors.push(format!(
                "config file {} ({source}): is not valid TOML{at}",
                path.display()
            ));
            return None;
        }
    };
    for key in table.keys() {
        if !SETTINGS.iter().any(|s| s.key == key) {
            errors.push(format!(
                "config file {}: unknown key `{key}` (see config/lanyard.example.toml for the keys)",
                path.display()
            ));
        }
    }
    Some(table)
}

/// A short, secret-free reason for an I/O error.
pub fn io_reason(err: &std::io::Error) -> String {
    match err.kind() {
        std::io::ErrorKind::NotFound => "no such file".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "is a directory".into(),
        std::io::ErrorKind::InvalidData => "is not valid UTF-8".into(),
        _ => err.to_string(),
    }
}

impl Config {
    /// Merges flags, environment, config file and defaults, and validates
    /// everything, reporting all problems at once.
    pub fn load(flags: &Flags, env: &dyn Env, need: Requirement) -> Result<Config, ConfigError> {
        let mut errors = Vec::new();
        let file = match (&flags.config, env.var(CONFIG_ENV)) {
            (Some(path), _) => Some((path.clone(), "flag --config")),
            (None, Ok(Some(path))) if !path.trim().is_empty() => {
                Some((PathBuf::from(path), "environment variable LANYARD_CONFIG"))
            }
            (None, Err(NotUnicode)) => {
                errors.push(format!(
                    "{CONFIG_ENV} (environment variable {CONFIG_ENV}): is not valid UTF-8"
                ));
                None
            }
            _ => None,
        }
        .and_then(|(path, source)| {
            read_file(&path, source, &mut errors).map(|table| (path, table))
        });

        let mut layers = Layers {
            flags,
            env,
            file,
            errors,
            warnings: Vec::new(),
            unreadable: Vec::new(),
        };
        let l = &mut layers;

        let demo = l.parse(&DEMO, parse_bool).is_some_and(|d| d.value);
        let service_api_url = match l.raw(&SERVICE_API_URL) {
            Some(raw) => match TargetUrl::parse(&raw.value, false) {
                Ok(url) => Some(url),
                Err(why) => {
                    l.problem(&SERVICE_API_URL, &raw, &why);
                    None
                }
            },
            None => {
                if need == Requirement::Upstream && !demo {
                    l.errors.push(format!(
                        "{}: is required (the service's API base URL, e.g. https://api.example.com)",
                        SERVICE_API_URL.env
                    ));
                }
                None
            }
        };

        let credentials = CredentialSettings {
            file: l.parse(&CREDENTIALS_FILE, |s| Ok(PathBuf::from(s))),
            client_id: l.string(&CLIENT_ID),
            private_key: l.raw(&PRIVATE_KEY).map(|raw| Sourced {
                value: crate::Secret::new(raw.value),
                source: raw.source,
            }),
            iam_audience: l.string(&IAM_AUDIENCE),
            token_uri: l.string(&TOKEN_URI),
            organization_id: l.string(&ORGANIZATION_ID),
            org_id: l.string(&ORG_ID),
        };
        let org_id = credentials.org_id.as_ref().map(|s| s.value.clone());
        let project_id = l.string(&PROJECT_ID).map(|s| s.value);
        let rule_id = l.string(&RULE_ID).map(|s| s.value);

        let allow_remote = l.parse(&ALLOW_REMOTE, parse_bool).is_some_and(|a| a.value);
        let listen = match l.raw(&LISTEN) {
            None => parse_addr(DEFAULT_LISTEN).ok(),
            Some(raw) => match parse_addr(raw.value.trim()) {
                Ok(addr) if !addr.ip().is_loopback() && !allow_remote => {
                    l.problem(
                        &LISTEN,
                        &raw,
                        &format!(
                            "{addr} is not a loopback address; anyone who can reach the proxy acts as the service account. Set {}=true to allow it",
                            ALLOW_REMOTE.env
                        ),
                    );
                    None
                }
                Ok(addr) => Some(addr),
                Err(why) => {
                    l.problem(&LISTEN, &raw, &why);
                    None
                }
            },
        };
        let admin_listen = l
            .parse(&ADMIN_LISTEN, parse_addr)
            .map(|a| a.value)
            .or_else(|| parse_addr(DEFAULT_ADMIN_LISTEN).ok());

        let positive = |s: &str| match parse_duration(s)? {
            d if d.is_zero() => Err("must be greater than zero".to_string()),
            d => Ok(d),
        };
        let assertion_ttl = l
            .parse(&ASSERTION_TTL, |s| match parse_any_duration(s)? {
                d if d.is_zero() => Err("must be greater than zero".to_string()),
                d => Ok(d),
            })
            .map_or(DEFAULT_ASSERTION_TTL, |ttl| {
                if ttl.value > MAX_ASSERTION_TTL {
                    l.warnings.push(format!(
                        "{} ({}): {} s is capped at {} s, the longest the service accepts (seed §5.2)",
                        ASSERTION_TTL.env,
                        ttl.source,
                        ttl.value.as_secs(),
                        MAX_ASSERTION_TTL.as_secs()
                    ));
                }
                // Whole seconds: `iat` and `exp` are integers.
                ttl.value.min(MAX_ASSERTION_TTL).max(Duration::from_secs(1))
            });
        let clock_skew = l
            .parse(&CLOCK_SKEW, |s| match parse_duration(s)? {
                d if d > MAX_CLOCK_SKEW => Err(format!(
                    "{} s is more than the {} s allowed; fix the clock instead (NTP)",
                    d.as_secs(),
                    MAX_CLOCK_SKEW.as_secs()
                )),
                d if d >= assertion_ttl => Err(format!(
                    "{} s is not less than the assertion lifetime ({} s): the assertion would be expired when sent",
                    d.as_secs(),
                    assertion_ttl.as_secs()
                )),
                d => Ok(d),
            })
            .map_or(Duration::ZERO, |d| d.value);
        let upstream_timeout = l
            .parse(&UPSTREAM_TIMEOUT, positive)
            .map_or(DEFAULT_UPSTREAM_TIMEOUT, |d| d.value);
        let token_timeout = l
            .parse(&TOKEN_TIMEOUT, positive)
            .map_or(DEFAULT_TOKEN_TIMEOUT, |d| d.value);
        let expiry_margin = l
            .parse(&EXPIRY_MARGIN, parse_duration)
            .map_or(DEFAULT_EXPIRY_MARGIN, |d| d.value);
        let shutdown_grace = l
            .parse(&SHUTDOWN_GRACE, parse_duration)
            .map_or(DEFAULT_SHUTDOWN_GRACE, |d| d.value);
        let header_timeout = l
            .parse(&HEADER_TIMEOUT, positive)
            .map_or(DEFAULT_HEADER_TIMEOUT, |d| d.value);
        let body_timeout = l
            .parse(&BODY_TIMEOUT, positive)
            .map_or(DEFAULT_BODY_TIMEOUT, |d| d.value);
        let max_header_bytes = l
            .parse(&MAX_HEADER_BYTES, parse_header_bytes)
            .map_or(DEFAULT_MAX_HEADER_BYTES, |n| n.value);
        let max_upstream_connections = l
            .parse(&MAX_UPSTREAM_CONNECTIONS, |s| {
                parse_count(s, MAX_MAX_UPSTREAM_CONNECTIONS, "connections")
            })
            .map_or(DEFAULT_MAX_UPSTREAM_CONNECTIONS, |n| n.value);
        let max_connections = l
            .parse(&MAX_CONNECTIONS, |s| {
                parse_count(s, MAX_MAX_CONNECTIONS, "connections")
            })
            .map_or(DEFAULT_MAX_CONNECTIONS, |n| n.value);
        let worker_threads = l
            .parse(&WORKER_THREADS, |s| {
                parse_count(s, MAX_WORKER_THREADS, "threads")
            })
            .map_or_else(default_worker_threads, |n| n.value);
        let rfc7523_fields = l.parse(&RFC7523_FIELDS, parse_bool).is_none_or(|b| b.value);
        let log_format = l
            .parse(&LOG_FORMAT, |s| match s.to_ascii_lowercase().as_str() {
                "json" => Ok(LogFormat::Json),
                "text" => Ok(LogFormat::Text),
                _ => Err(format!("`{s}` is not a log format (use json or text)")),
            })
            .map_or(LogFormat::Json, |f| f.value);
        let ca_file = l
            .parse(&CA_FILE, |s| {
                let path = PathBuf::from(s);
                match std::fs::metadata(&path) {
                    Ok(meta) if meta.is_file() => crate::http_client::ca_certificates(&path)
                        .map(|_| path)
                        .map_err(|why| format!("{s}: {why}")),
                    Ok(_) => Err(format!("{s} is not a file")),
                    Err(err) => Err(format!("{s}: {}", io_reason(&err))),
                }
            })
            .map(|p| p.value);

        // The addresses are `None` only when a problem was recorded.
        let (Some(listen), Some(admin_listen), true) =
            (listen, admin_listen, layers.errors.is_empty())
        else {
            // Report the credentials' problems too, so one run shows all.
            let mut errors = layers.errors;
            if need.credentials()
                && !demo
                && let Err(more) = crate::credentials::load(&credentials)
            {
                let reported = |line: &String| {
                    layers.unreadable.iter().any(|env| {
                        line.strip_prefix(env)
                            .is_some_and(|rest| rest.starts_with(": not set"))
                    })
                };
                errors.extend(more.into_lines().into_iter().filter(|l| !reported(l)));
            }
            return Err(ConfigError::new(errors));
        };
        Ok(Config {
            service_api_url,
            credentials,
            org_id,
            project_id,
            rule_id,
            listen,
            admin_listen,
            assertion_ttl,
            clock_skew,
            ca_file,
            upstream_timeout,
            token_timeout,
            expiry_margin,
            shutdown_grace,
            header_timeout,
            body_timeout,
            max_header_bytes,
            max_connections,
            max_upstream_connections,
            worker_threads,
            rfc7523_fields,
            log_format,
            demo,
            warnings: layers.warnings,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn load(pairs: &[(&str, &str)]) -> Result<Config, ConfigError> {
        Config::load(&Flags::default(), &env(pairs), Requirement::Upstream)
    }

    #[test]
    fn defaults_apply_when_only_the_upstream_is_set() {
        let config = load(&[("SERVICE_API_URL", "https://api.example.com/v1/")]).unwrap();
        assert_eq!(config.listen, "127.0.0.1:8080".parse().unwrap());
        assert_eq!(config.admin_listen, "0.0.0.0:9090".parse().unwrap());
        assert_eq!(config.assertion_ttl, Duration::from_secs(3600));
        assert_eq!(config.upstream_timeout, Duration::from_secs(30));
        assert_eq!(config.shutdown_grace, Duration::from_secs(20));
        assert!(config.rfc7523_fields);
        assert_eq!(config.log_format, LogFormat::Json);
        assert_eq!(config.service_api_url.unwrap().path_prefix(), "/v1");
    }

    #[test]
    fn clock_skew_is_bounded_by_its_cap_and_the_assertion_lifetime() {
        let base = ("SERVICE_API_URL", "https://api.example.com");
        let config = load(&[base, ("LANYARD_CLOCK_SKEW", "1m")]).unwrap();
        assert_eq!(config.clock_skew, Duration::from_secs(60));
        assert_eq!(load(&[base]).unwrap().clock_skew, Duration::ZERO);

        let err = load(&[base, ("LANYARD_CLOCK_SKEW", "10m")]).unwrap_err();
        assert_eq!(
            err.lines()[..1],
            [
                "LANYARD_CLOCK_SKEW (environment variable LANYARD_CLOCK_SKEW): 600 s is more than the 300 s allowed; fix the clock instead (NTP)"
            ]
        );
        let err = load(&[
            base,
            ("LANYARD_CLOCK_SKEW", "2m"),
            ("LANYARD_ASSERTION_TTL", "120"),
        ])
        .unwrap_err();
        assert_eq!(
            err.lines()[..1],
            [
                "LANYARD_CLOCK_SKEW (environment variable LANYARD_CLOCK_SKEW): 120 s is not less than the assertion lifetime (120 s): the assertion would be expired when sent"
            ]
        );
    }

    #[test]
    fn problem_lines_escape_what_would_split_or_disguise_them() {
        let err = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_LOG_FORMAT", "a\nLANYARD_FAKE: b\u{202E}c"),
        ])
        .unwrap_err();
        assert_eq!(
            err.lines()[0],
            "LANYARD_LOG_FORMAT (environment variable LANYARD_LOG_FORMAT): `a\\nLANYARD_FAKE: b\\u{202e}c` is not a log format (use json or text)"
        );
    }

    #[test]
    fn worker_threads_default_to_the_cpus_up_to_four_and_are_checked() {
        let base = ("SERVICE_API_URL", "https://api.example.com");
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        assert_eq!(load(&[base]).unwrap().worker_threads, cpus.min(4));
        let config = load(&[base, ("LANYARD_WORKER_THREADS", "8")]).unwrap();
        assert_eq!(config.worker_threads, 8);
        for (value, why) in [
            ("0", "must be at least 1"),
            ("1000", "1000 is more than the 256 allowed"),
            ("two", "`two` is not a whole number of threads"),
        ] {
            let err = load(&[base, ("LANYARD_WORKER_THREADS", value)]).unwrap_err();
            assert_eq!(
                err.lines()[0],
                format!(
                    "LANYARD_WORKER_THREADS (environment variable LANYARD_WORKER_THREADS): {why}"
                )
            );
        }
    }

    #[test]
    fn connection_limit_and_header_timeout_are_checked() {
        let base = ("SERVICE_API_URL", "https://api.example.com");
        let config = load(&[base]).unwrap();
        assert_eq!(config.max_connections, 1024);
        assert_eq!(config.header_timeout, Duration::from_secs(30));
        let config = load(&[
            base,
            ("LANYARD_MAX_CONNECTIONS", "50"),
            ("LANYARD_HEADER_TIMEOUT", "5s"),
        ])
        .unwrap();
        assert_eq!(config.max_connections, 50);
        assert_eq!(config.header_timeout, Duration::from_secs(5));

        let err = load(&[
            base,
            ("LANYARD_MAX_CONNECTIONS", "0"),
            ("LANYARD_HEADER_TIMEOUT", "0"),
        ])
        .unwrap_err();
        assert_eq!(
            err.lines()[..2],
            [
                "LANYARD_HEADER_TIMEOUT (environment variable LANYARD_HEADER_TIMEOUT): must be greater than zero",
                "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): must be at least 1",
            ]
        );
        let err = load(&[base, ("LANYARD_MAX_CONNECTIONS", "3000000000000000000")]).unwrap_err();
        assert_eq!(
            err.lines()[..1],
            [
                "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): 3000000000000000000 is more than the 1048576 allowed"
            ]
        );
        let err = load(&[base, ("LANYARD_MAX_CONNECTIONS", "lots")]).unwrap_err();
        assert_eq!(
            err.lines()[..1],
            [
                "LANYARD_MAX_CONNECTIONS (environment variable LANYARD_MAX_CONNECTIONS): `lots` is not a whole number of connections"
            ]
        );
    }

    #[test]
    fn body_timeout_header_bytes_and_upstream_connections_are_checked() {
        let base = ("SERVICE_API_URL", "https://api.example.com");
        let config = load(&[base]).unwrap();
        assert_eq!(config.body_timeout, Duration::from_secs(30));
        assert_eq!(config.max_header_bytes, 64 * 1024);
        assert_eq!(config.max_upstream_connections, 256);
        let config = load(&[
            base,
            ("LANYARD_BODY_TIMEOUT", "5s"),
            ("LANYARD_MAX_HEADER_BYTES", "16KiB"),
            ("LANYARD_MAX_UPSTREAM_CONNECTIONS", "8"),
        ])
        .unwrap();
        assert_eq!(config.body_timeout, Duration::from_secs(5));
        assert_eq!(config.max_header_bytes, 16 * 1024);
        assert_eq!(config.max_upstream_connections, 8);
        assert_eq!(
            load(&[base, ("LANYARD_MAX_HEADER_BYTES", "20000")])
                .unwrap()
                .max_header_bytes,
            20000
        );

        let err = load(&[
            base,
            ("LANYARD_BODY_TIMEOUT", "0"),
            ("LANYARD_MAX_HEADER_BYTES", "1KiB"),
            ("LANYARD_MAX_UPSTREAM_CONNECTIONS", "0"),
        ])
        .unwrap_err();
        assert_eq!(
            err.lines()[..3],
            [
                "LANYARD_BODY_TIMEOUT (environment variable LANYARD_BODY_TIMEOUT): must be greater than zero",
                "LANYARD_MAX_HEADER_BYTES (environment variable LANYARD_MAX_HEADER_BYTES): 1024 bytes is outside 8 KiB to 1024 KiB",
                "LANYARD_MAX_UPSTREAM_CONNECTIONS (environment variable LANYARD_MAX_UPSTREAM_CONNECTIONS): must be at least 1",
            ]
        );
        for bad in ["64kb", "lots", "99999999999999999999MiB", "-1"] {
            let err = load(&[base, ("LANYARD_MAX_HEADER_BYTES", bad)]).unwrap_err();
            assert!(err.lines()[0].contains("is not a size"), "{bad}: {err}");
        }
    }

    #[test]
    fn flag_beats_environment_beats_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lanyard.toml");
        std::fs::write(
            &path,
            "service_api_url = \"https://file.example\"\nupstream_timeout = 7\nassertion_ttl = \"5m\"\n",
        )
        .unwrap();
        let mut flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        flags.set(&UPSTREAM_TIMEOUT, Some("9s"));
        let config = Config::load(
            &flags,
            &env(&[
                ("SERVICE_API_URL", "https://env.example"),
                ("LANYARD_UPSTREAM_TIMEOUT", "8"),
            ]),
            Requirement::Upstream,
        )
        .unwrap();
        assert_eq!(config.upstream_timeout, Duration::from_secs(9));
        assert_eq!(
            config.service_api_url.unwrap().to_string(),
            "https://env.example/"
        );
        assert_eq!(config.assertion_ttl, Duration::from_secs(300));
    }

    #[test]
    fn every_problem_is_reported_with_its_setting_and_source() {
        let err = load(&[
            ("LANYARD_LISTEN", "0.0.0.0:8080"),
            ("LANYARD_UPSTREAM_TIMEOUT", "soon"),
            ("LANYARD_LOG_FORMAT", "xml"),
        ])
        .unwrap_err();
        let lines = err.lines();
        assert_eq!(lines.len(), 5, "{lines:#?}");
        assert!(lines.iter().any(|l| l.starts_with("no credentials: ")));
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("SERVICE_API_URL: is required"))
        );
        assert!(lines.iter().any(|l| l.starts_with(
            "LANYARD_LISTEN (environment variable LANYARD_LISTEN): 0.0.0.0:8080 is not a loopback address"
        )));
        assert!(
            lines.iter().any(|l| l.contains("LANYARD_UPSTREAM_TIMEOUT")
                && l.contains("`soon` is not a duration"))
        );
        assert!(
            lines
                .iter()
                .any(|l| l.contains("LANYARD_LOG_FORMAT") && l.contains("`xml`"))
        );
    }

    #[test]
    fn remote_listen_needs_explicit_opt_in() {
        let config = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_LISTEN", "0.0.0.0:8080"),
            ("LANYARD_ALLOW_REMOTE", "true"),
        ])
        .unwrap();
        assert_eq!(config.listen, "0.0.0.0:8080".parse().unwrap());
    }

    #[test]
    fn plain_http_upstream_is_refused_off_loopback() {
        let err = load(&[("SERVICE_API_URL", "http://api.example.com")]).unwrap_err();
        assert!(err.lines()[0].contains("must use https"), "{err}");
        for ok in [
            "http://127.0.0.1:9000",
            "http://localhost:1/x",
            "http://[::1]:2",
        ] {
            load(&[("SERVICE_API_URL", ok)]).unwrap();
        }
    }

    #[test]
    fn url_with_user_info_is_refused_without_echoing_it() {
        let err = load(&[("SERVICE_API_URL", "https://user:hunter2@api.example.com")]).unwrap_err();
        assert!(err.lines()[0].contains("user info"), "{err}");
        assert!(!err.to_string().contains("hunter2"));
    }

    #[test]
    fn unknown_and_malformed_config_file_keys_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "servce_api_url = \"https://x\"\nlisten = [1]\n").unwrap();
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        let err = Config::load(&flags, &env(&[]), Requirement::NoUpstream).unwrap_err();
        assert!(
            err.lines()
                .iter()
                .any(|l| l.contains("unknown key `servce_api_url`")),
            "{err}"
        );
        assert!(
            err.lines()
                .iter()
                .any(|l| l.contains("LANYARD_LISTEN") && l.contains("must be a string")),
            "{err}"
        );
    }

    #[test]
    fn invalid_toml_reports_the_line_but_not_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broken.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:1\"\nprivate_key = \"-----BEGIN PRIVATE KEY-----\nMIIsecret",
        )
        .unwrap();
        let flags = Flags {
            config: Some(path),
            ..Flags::default()
        };
        let err = Config::load(&flags, &env(&[]), Requirement::NoUpstream).unwrap_err();
        assert!(
            err.to_string().contains("is not valid TOML at line "),
            "{err}"
        );
        assert!(!err.to_string().contains("MIIsecret"));
    }

    #[test]
    fn missing_config_file_is_named() {
        let flags = Flags {
            config: Some(PathBuf::from("/nonexistent/lanyard.toml")),
            ..Flags::default()
        };
        let err = Config::load(&flags, &env(&[]), Requirement::Demo).unwrap_err();
        assert_eq!(
            err.lines(),
            ["config file /nonexistent/lanyard.toml (flag --config): cannot be read: no such file"]
        );
    }

    #[test]
    fn assertion_lifetime_over_an_hour_is_capped_with_a_warning() {
        let config = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_ASSERTION_TTL", "2h"),
        ])
        .unwrap();
        assert_eq!(config.assertion_ttl, MAX_ASSERTION_TTL);
        // Capped, as CONTRACT §2 says, even past the day other durations
        // may be.
        let config = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_ASSERTION_TTL", "100h"),
        ])
        .unwrap();
        assert_eq!(config.assertion_ttl, MAX_ASSERTION_TTL);
        let config = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_ASSERTION_TTL", "2h"),
        ])
        .unwrap();
        assert_eq!(
            config.warnings,
            [
                "LANYARD_ASSERTION_TTL (environment variable LANYARD_ASSERTION_TTL): 7200 s is capped at 3600 s, the longest the service accepts (seed §5.2)"
            ]
        );
    }

    #[test]
    fn durations_accept_plain_seconds_and_suffixes() {
        assert_eq!(parse_duration("30").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("24h").unwrap(), Duration::from_secs(86400));
        for bad in ["", "s", "-1", "1.5s", "1d", "ten", "86401", "25h"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_huge_duration_is_refused_rather_than_overflowing_a_deadline() {
        let err = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_HEADER_TIMEOUT", "18446744073709551615"),
        ])
        .unwrap_err();
        assert_eq!(
            err.lines()[0],
            "LANYARD_HEADER_TIMEOUT (environment variable LANYARD_HEADER_TIMEOUT): `18446744073709551615` is longer than a day, the most any duration may be"
        );
    }

    #[test]
    fn empty_environment_variable_counts_as_unset() {
        let config = load(&[
            ("SERVICE_API_URL", "https://api.example.com"),
            ("LANYARD_LISTEN", ""),
        ])
        .unwrap();
        assert_eq!(config.listen, "127.0.0.1:8080".parse().unwrap());
    }
}
