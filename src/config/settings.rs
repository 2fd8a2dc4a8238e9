//! The table of settings: each one declared once, with its TOML key,
//! environment variable, flag, help line, default and reader, its bounds
//! handed to the reader here. The command line (`cli.rs`), the config
//! file's keys, `--help`, the loader and the README's settings table
//! (checked by `tests/it/docs.rs`) all come from here. Used as
//! `settings::NAME` inside `config`; `config` re-exports the few that other
//! modules name.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::declaration::{AnySetting, DefaultValue, Setting};
use super::defaults::{
    DEFAULT_ADMIN_LISTEN, DEFAULT_ASSERTION_TTL, DEFAULT_BODY_TIMEOUT, DEFAULT_EXPIRY_MARGIN,
    DEFAULT_HEADER_TIMEOUT, DEFAULT_LISTEN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES,
    DEFAULT_MAX_UPSTREAM_CONNECTIONS, DEFAULT_MAX_WORKER_THREADS, DEFAULT_SEND_TIMEOUT,
    DEFAULT_SHUTDOWN_GRACE, DEFAULT_TOKEN_TIMEOUT, DEFAULT_UPSTREAM_TIMEOUT,
    DEFAULT_VERIFIER_SESSION_TTL, MAX_CLOCK_SKEW, MAX_FORWARDED_HOPS, MAX_MAX_CONNECTIONS,
    MAX_MAX_HEADER_BYTES, MAX_MAX_UPSTREAM_CONNECTIONS, MAX_WORKER_THREADS, MIN_MAX_HEADER_BYTES,
    default_worker_threads,
};
use super::values::{
    ByteSize, FileMode, ListenAddr, LogFormat, Rate, SessionKeys, WalletBaseUrl, parse_duration,
    read_addr, read_bool, read_byte_size, read_count, read_duration, read_file_mode, read_lifetime,
    read_listen, read_log_format, read_path, read_port, read_positive_duration, read_text,
};
use crate::target::TargetUrl;

/// The config file itself is located by flag or environment only.
pub const CONFIG_ENV: &str = "LANYARD_CONFIG";

/// Every setting, in the order the README lists them.
pub const SETTINGS: &[&dyn AnySetting] = &[
    &SERVICE_API_URL,
    &CREDENTIALS_FILE,
    &CLIENT_ID,
    &PRIVATE_KEY,
    &IAM_AUDIENCE,
    &TOKEN_URI,
    &ORGANIZATION_ID,
    &ORG_ID,
    &PROJECT_ID,
    &RULE_ID,
    &LISTEN,
    &LISTEN_MODE,
    &ALLOW_REMOTE,
    &ADMIN_LISTEN,
    &VERIFIER_LISTEN,
    &PORT,
    &WALLET_BASE_URL,
    &VERIFIER_SESSION_TTL,
    &VERIFIER_FORWARDED_HOPS,
    &VERIFIER_SESSION_KEY,
    &VERIFIER_SESSION_KEY_FILE,
    &VERIFIER_CLIENT_STARTS,
    &VERIFIER_STARTS,
    &VERIFIER_SERVICE_CALLS,
    &ASSERTION_TTL,
    &CLOCK_SKEW,
    &CA_FILE,
    &UPSTREAM_TIMEOUT,
    &TOKEN_TIMEOUT,
    &EXPIRY_MARGIN,
    &SHUTDOWN_GRACE,
    &HEADER_TIMEOUT,
    &BODY_TIMEOUT,
    &SEND_TIMEOUT,
    &MAX_HEADER_BYTES,
    &MAX_CONNECTIONS,
    &MAX_UPSTREAM_CONNECTIONS,
    &WORKER_THREADS,
    &RFC7523_FIELDS,
    &LOG_FORMAT,
    &DEMO,
];

/// `SERVICE_API_URL`: the `{base_url}` of the seed, where requests go.
pub const SERVICE_API_URL: Setting<TargetUrl> = Setting {
    key: "service_api_url",
    env: "SERVICE_API_URL",
    flag: Some("--service-api-url"),
    value_name: Some("URL"),
    help: "The service's API base URL; may carry a path prefix",
    default: DefaultValue::Described("required for `run` and `check`"),
    read: |raw| TargetUrl::parse(raw, false),
    secret: false,
};

/// `SA_CREDENTIALS_FILE`: watched for rotation (README "Credential rotation").
pub const CREDENTIALS_FILE: Setting<PathBuf> = Setting {
    key: "credentials_file",
    env: "SA_CREDENTIALS_FILE",
    flag: Some("--credentials-file"),
    value_name: Some("PATH"),
    help: "Credentials JSON file downloaded from the Portal",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `SA_CLIENT_ID`.
pub const CLIENT_ID: Setting = Setting {
    key: "client_id",
    env: "SA_CLIENT_ID",
    flag: Some("--client-id"),
    value_name: Some("ID"),
    help: "Client id, overriding the credentials file's",
    default: DefaultValue::Described("from file"),
    read: read_text,
    secret: false,
};

/// `SA_PRIVATE_KEY`: environment or config file only, never a flag.
pub const PRIVATE_KEY: Setting = Setting {
    key: "private_key",
    env: "SA_PRIVATE_KEY",
    flag: None,
    value_name: None,
    help: "Private key: PEM, or a pkcs11: URI naming a key in an HSM or KMS; overrides the credentials file's",
    default: DefaultValue::Described("from file"),
    read: read_text,
    secret: true,
};

/// `SA_IAM_AUDIENCE`.
pub const IAM_AUDIENCE: Setting = Setting {
    key: "iam_audience",
    env: "SA_IAM_AUDIENCE",
    flag: Some("--iam-audience"),
    value_name: Some("AUD"),
    help: "IAM audience, overriding the credentials file's",
    default: DefaultValue::Described("from file"),
    read: read_text,
    secret: false,
};

/// `SA_TOKEN_URI`: checked with the credentials, as `TargetUrl`.
pub const TOKEN_URI: Setting = Setting {
    key: "token_uri",
    env: "SA_TOKEN_URI",
    flag: Some("--token-uri"),
    value_name: Some("URL"),
    help: "Token endpoint, overriding the credentials file's",
    default: DefaultValue::Described("from file"),
    read: read_text,
    secret: false,
};

/// `SA_ORGANIZATION_ID`.
pub const ORGANIZATION_ID: Setting = Setting {
    key: "organization_id",
    env: "SA_ORGANIZATION_ID",
    flag: Some("--organization-id"),
    value_name: Some("ID"),
    help: "Organization id, overriding the credentials file's",
    default: DefaultValue::Described("from file, else `ORG_ID`"),
    read: read_text,
    secret: false,
};

/// `ORG_ID`, as the seed's reference application names it.
pub const ORG_ID: Setting = Setting {
    key: "org_id",
    env: "ORG_ID",
    flag: Some("--org-id"),
    value_name: Some("ID"),
    help: "Organization, the fallback organization id",
    default: DefaultValue::None,
    read: read_text,
    secret: false,
};

/// `PROJECT_ID`.
pub const PROJECT_ID: Setting = Setting {
    key: "project_id",
    env: "PROJECT_ID",
    flag: Some("--project-id"),
    value_name: Some("ID"),
    help: "Project id: the rule's project, for `verifier` and `check`",
    default: DefaultValue::None,
    read: read_text,
    secret: false,
};

/// `RULE_ID`.
pub const RULE_ID: Setting = Setting {
    key: "rule_id",
    env: "RULE_ID",
    flag: Some("--rule-id"),
    value_name: Some("UUID"),
    help: "Rule id (UUID): the rule `verifier` starts sessions for",
    default: DefaultValue::None,
    read: read_text,
    secret: false,
};

/// `LANYARD_LISTEN`: loopback unless [`ALLOW_REMOTE`] (README "Settings").
pub const LISTEN: Setting<ListenAddr> = Setting {
    key: "listen",
    env: "LANYARD_LISTEN",
    flag: Some("--listen"),
    value_name: Some("ADDR"),
    help: "Proxy listener: an address (loopback unless --allow-remote) or unix:/path",
    default: DefaultValue::Value(ListenAddr::Tcp(DEFAULT_LISTEN)),
    read: read_listen,
    secret: false,
};

/// `LANYARD_LISTEN_MODE`: who may connect to the proxy's Unix socket.
/// Owner and group by default: the app's container runs as the group
/// (README "Listening on a Unix socket").
pub const LISTEN_MODE: Setting<FileMode> = Setting {
    key: "listen_mode",
    env: "LANYARD_LISTEN_MODE",
    flag: Some("--listen-mode"),
    value_name: Some("MODE"),
    help: "The Unix socket's permissions (LANYARD_LISTEN=unix:...); never open to other users",
    default: DefaultValue::Value(FileMode(0o660)),
    read: read_file_mode,
    secret: false,
};

/// `LANYARD_ALLOW_REMOTE`: the explicit opt-in for a non-loopback proxy.
pub const ALLOW_REMOTE: Setting<bool> = Setting {
    key: "allow_remote",
    env: "LANYARD_ALLOW_REMOTE",
    flag: Some("--allow-remote"),
    value_name: None,
    help: "Allow a non-loopback proxy listener",
    default: DefaultValue::Value(false),
    read: read_bool,
    secret: false,
};

/// `LANYARD_ADMIN_LISTEN`.
pub const ADMIN_LISTEN: Setting<SocketAddr> = Setting {
    key: "admin_listen",
    env: "LANYARD_ADMIN_LISTEN",
    flag: Some("--admin-listen"),
    value_name: Some("ADDR"),
    help: "Admin listener: health and metrics",
    default: DefaultValue::Value(DEFAULT_ADMIN_LISTEN),
    read: read_addr,
    secret: false,
};

/// `LANYARD_VERIFIER_LISTEN`: unset, `PORT` decides (README "The verifier").
pub const VERIFIER_LISTEN: Setting<SocketAddr> = Setting {
    key: "verifier_listen",
    env: "LANYARD_VERIFIER_LISTEN",
    flag: Some("--verifier-listen"),
    value_name: Some("ADDR"),
    help: "Verifier listener (`lanyard verifier`, and the demo's)",
    default: DefaultValue::Described(
        "`0.0.0.0:8080`, or `0.0.0.0:$PORT` when `PORT` is set; `lanyard demo`: `127.0.0.1:8081`",
    ),
    read: read_addr,
    secret: false,
};

/// `PORT`, as serverless platforms set it for the one port they route to.
pub const PORT: Setting<u16> = Setting {
    key: "port",
    env: "PORT",
    flag: None,
    value_name: None,
    help: "The verifier's port when LANYARD_VERIFIER_LISTEN is not set",
    default: DefaultValue::None,
    read: read_port,
    secret: false,
};

/// `WALLET_BASE_URL`: where the wallet button sends a phone; how the link
/// is formed is an assumption (`verifier::assumptions`).
pub const WALLET_BASE_URL: Setting<WalletBaseUrl> = Setting {
    key: "wallet_base_url",
    env: "WALLET_BASE_URL",
    flag: Some("--wallet-base-url"),
    value_name: Some("URL"),
    help: "The wallet's base URL, for the verifier's wallet button",
    default: DefaultValue::Described("required for `verifier`; the demo's is the mock wallet"),
    read: WalletBaseUrl::parse,
    secret: false,
};

/// `LANYARD_VERIFIER_SESSION_TTL`.
pub const VERIFIER_SESSION_TTL: Setting<Duration> = Setting {
    key: "verifier_session_ttl",
    env: "LANYARD_VERIFIER_SESSION_TTL",
    flag: Some("--verifier-session-ttl"),
    value_name: Some("DURATION"),
    help: "How long a verification session is held and polled",
    default: DefaultValue::Value(DEFAULT_VERIFIER_SESSION_TTL),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_VERIFIER_FORWARDED_HOPS`: behind a load balancer or a
/// serverless platform every client arrives from the proxy's address, and
/// a per-client limit keyed on it would be one limit for everyone.
pub const VERIFIER_FORWARDED_HOPS: Setting<usize> = Setting {
    key: "verifier_forwarded_hops",
    env: "LANYARD_VERIFIER_FORWARDED_HOPS",
    flag: Some("--verifier-forwarded-hops"),
    value_name: Some("N"),
    help: "Proxies in front of the verifier whose X-Forwarded-For entries are trusted",
    default: DefaultValue::Value(0),
    read: |raw| read_count(raw, 0..=MAX_FORWARDED_HOPS, "proxies"),
    secret: false,
};

/// `LANYARD_VERIFIER_SESSION_KEY`: environment or config file only, never
/// a flag (a flag's value shows in the process list).
pub const VERIFIER_SESSION_KEY: Setting<SessionKeys> = Setting {
    key: "verifier_session_key",
    env: "LANYARD_VERIFIER_SESSION_KEY",
    flag: None,
    value_name: None,
    help: "The verifier's session binding key: base64 of 32+ bytes, or `current,previous`",
    default: DefaultValue::Described("derived from the service account's key"),
    read: SessionKeys::parse,
    secret: true,
};

/// `LANYARD_VERIFIER_SESSION_KEY_FILE`: the same, from a file (a mounted
/// Secret).
pub const VERIFIER_SESSION_KEY_FILE: Setting<PathBuf> = Setting {
    key: "verifier_session_key_file",
    env: "LANYARD_VERIFIER_SESSION_KEY_FILE",
    flag: Some("--verifier-session-key-file"),
    value_name: Some("PATH"),
    help: "A file holding LANYARD_VERIFIER_SESSION_KEY",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_VERIFIER_CLIENT_STARTS`: a person restarts a few times, or a
/// few people share an address; a flood from one client stops here and
/// spends nothing of the shared limit.
pub const VERIFIER_CLIENT_STARTS: Setting<Rate> = Setting {
    key: "verifier_client_starts",
    env: "LANYARD_VERIFIER_CLIENT_STARTS",
    flag: Some("--verifier-client-starts"),
    value_name: Some("COUNT/DURATION"),
    help: "Verification starts one client (IPv4 address, IPv6 /64) may make",
    default: DefaultValue::Value(Rate {
        burst: std::num::NonZeroU32::new(10).unwrap(),
        per: Duration::from_secs(60),
    }),
    read: Rate::parse,
    secret: false,
};

/// `LANYARD_VERIFIER_STARTS`: well beyond one verifier's visitors, and a
/// bound on what a flood from many addresses makes it ask of the service.
pub const VERIFIER_STARTS: Setting<Rate> = Setting {
    key: "verifier_starts",
    env: "LANYARD_VERIFIER_STARTS",
    flag: Some("--verifier-starts"),
    value_name: Some("COUNT/DURATION"),
    help: "Verification starts all clients together may make, per replica",
    default: DefaultValue::Value(Rate {
        burst: std::num::NonZeroU32::new(50).unwrap(),
        per: Duration::from_secs(5),
    }),
    read: Rate::parse,
    secret: false,
};

/// `LANYARD_VERIFIER_SERVICE_CALLS`: one budget for the calls a replica
/// makes to the service, starts and polls together; the service's own
/// rate limits exist though the seed does not give them.
pub const VERIFIER_SERVICE_CALLS: Setting<Rate> = Setting {
    key: "verifier_service_calls",
    env: "LANYARD_VERIFIER_SERVICE_CALLS",
    flag: Some("--verifier-service-calls"),
    value_name: Some("COUNT/DURATION"),
    help: "Calls to the service one replica may make, starts and polls together",
    default: DefaultValue::Value(Rate {
        burst: std::num::NonZeroU32::new(40).unwrap(),
        per: Duration::from_secs(2),
    }),
    read: Rate::parse,
    secret: false,
};

/// `LANYARD_ASSERTION_TTL`: read without the one-day bound, then capped at
/// `MAX_ASSERTION_TTL` with a warning.
pub const ASSERTION_TTL: Setting<Duration> = Setting {
    key: "assertion_ttl",
    env: "LANYARD_ASSERTION_TTL",
    flag: Some("--assertion-ttl"),
    value_name: Some("DURATION"),
    help: "Assertion lifetime, at most 1h",
    default: DefaultValue::Value(DEFAULT_ASSERTION_TTL),
    read: read_lifetime,
    secret: false,
};

/// `LANYARD_CLOCK_SKEW`: also checked against the assertion lifetime.
pub const CLOCK_SKEW: Setting<Duration> = Setting {
    key: "clock_skew",
    env: "LANYARD_CLOCK_SKEW",
    flag: Some("--clock-skew"),
    value_name: Some("DURATION"),
    help: "Backdate the assertion's iat and exp for a token endpoint whose clock is behind, at most 5m",
    default: DefaultValue::Value(Duration::ZERO),
    read: read_clock_skew,
    secret: false,
};

/// At most [`MAX_CLOCK_SKEW`]: a clock further off wants fixing, not
/// tolerating.
fn read_clock_skew(raw: &str) -> Result<Duration, String> {
    match parse_duration(raw)? {
        d if d > MAX_CLOCK_SKEW => Err(format!(
            "{} s is more than the {} s allowed; fix the clock instead (NTP)",
            d.as_secs(),
            MAX_CLOCK_SKEW.as_secs()
        )),
        d => Ok(d),
    }
}

/// `LANYARD_CA_FILE`: read and parsed once, at load.
pub const CA_FILE: Setting<PathBuf> = Setting {
    key: "ca_file",
    env: "LANYARD_CA_FILE",
    flag: Some("--ca-file"),
    value_name: Some("PATH"),
    help: "Extra CA bundle (PEM) for upstream and token TLS",
    default: DefaultValue::None,
    read: read_path,
    secret: false,
};

/// `LANYARD_UPSTREAM_TIMEOUT`.
pub const UPSTREAM_TIMEOUT: Setting<Duration> = Setting {
    key: "upstream_timeout",
    env: "LANYARD_UPSTREAM_TIMEOUT",
    flag: Some("--upstream-timeout"),
    value_name: Some("DURATION"),
    help: "Time to upstream response headers",
    default: DefaultValue::Value(DEFAULT_UPSTREAM_TIMEOUT),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_TOKEN_TIMEOUT`.
pub const TOKEN_TIMEOUT: Setting<Duration> = Setting {
    key: "token_timeout",
    env: "LANYARD_TOKEN_TIMEOUT",
    flag: Some("--token-timeout"),
    value_name: Some("DURATION"),
    help: "Time for one token request",
    default: DefaultValue::Value(DEFAULT_TOKEN_TIMEOUT),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_EXPIRY_MARGIN` (README "Token lifetime").
pub const EXPIRY_MARGIN: Setting<Duration> = Setting {
    key: "expiry_margin",
    env: "LANYARD_EXPIRY_MARGIN",
    flag: Some("--expiry-margin"),
    value_name: Some("DURATION"),
    help: "Stop sending a token this long before it expires, at most a tenth of its lifetime",
    default: DefaultValue::Value(DEFAULT_EXPIRY_MARGIN),
    read: read_duration,
    secret: false,
};

/// `LANYARD_SHUTDOWN_GRACE` (README "Shutdown").
pub const SHUTDOWN_GRACE: Setting<Duration> = Setting {
    key: "shutdown_grace",
    env: "LANYARD_SHUTDOWN_GRACE",
    flag: Some("--shutdown-grace"),
    value_name: Some("DURATION"),
    help: "Drain time on shutdown",
    default: DefaultValue::Value(DEFAULT_SHUTDOWN_GRACE),
    read: read_duration,
    secret: false,
};

/// `LANYARD_HEADER_TIMEOUT` (README "Limits").
pub const HEADER_TIMEOUT: Setting<Duration> = Setting {
    key: "header_timeout",
    env: "LANYARD_HEADER_TIMEOUT",
    flag: Some("--header-timeout"),
    value_name: Some("DURATION"),
    help: "Time a client has to send a request's headers, also the idle keep-alive limit",
    default: DefaultValue::Value(DEFAULT_HEADER_TIMEOUT),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_BODY_TIMEOUT` (README "Limits").
pub const BODY_TIMEOUT: Setting<Duration> = Setting {
    key: "body_timeout",
    env: "LANYARD_BODY_TIMEOUT",
    flag: Some("--body-timeout"),
    value_name: Some("DURATION"),
    help: "Time a request body may stay silent before the request is given up",
    default: DefaultValue::Value(DEFAULT_BODY_TIMEOUT),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_SEND_TIMEOUT` (README "Limits").
pub const SEND_TIMEOUT: Setting<Duration> = Setting {
    key: "send_timeout",
    env: "LANYARD_SEND_TIMEOUT",
    flag: Some("--send-timeout"),
    value_name: Some("DURATION"),
    help: "Time a client may take none of an answer's bytes before its stream or connection is ended",
    default: DefaultValue::Value(DEFAULT_SEND_TIMEOUT),
    read: read_positive_duration,
    secret: false,
};

/// `LANYARD_MAX_HEADER_BYTES` (README "Limits").
pub const MAX_HEADER_BYTES: Setting<ByteSize> = Setting {
    key: "max_header_bytes",
    env: "LANYARD_MAX_HEADER_BYTES",
    flag: Some("--max-header-bytes"),
    value_name: Some("BYTES"),
    help: "Largest request head a client may send: bytes, KiB or MiB",
    default: DefaultValue::Value(ByteSize(DEFAULT_MAX_HEADER_BYTES)),
    read: |raw| read_byte_size(raw, MIN_MAX_HEADER_BYTES..=MAX_MAX_HEADER_BYTES),
    secret: false,
};

/// `LANYARD_MAX_CONNECTIONS` (README "Limits").
pub const MAX_CONNECTIONS: Setting<usize> = Setting {
    key: "max_connections",
    env: "LANYARD_MAX_CONNECTIONS",
    flag: Some("--max-connections"),
    value_name: Some("N"),
    help: "Most client connections the proxy holds open at once",
    default: DefaultValue::Value(DEFAULT_MAX_CONNECTIONS),
    read: |raw| read_count(raw, 1..=MAX_MAX_CONNECTIONS, "connections"),
    secret: false,
};

/// `LANYARD_MAX_UPSTREAM_CONNECTIONS` (README "Limits").
pub const MAX_UPSTREAM_CONNECTIONS: Setting<usize> = Setting {
    key: "max_upstream_connections",
    env: "LANYARD_MAX_UPSTREAM_CONNECTIONS",
    flag: Some("--max-upstream-connections"),
    value_name: Some("N"),
    help: "Most connections to the upstream, across all proxy threads",
    default: DefaultValue::Value(DEFAULT_MAX_UPSTREAM_CONNECTIONS),
    read: |raw| read_count(raw, 1..=MAX_MAX_UPSTREAM_CONNECTIONS, "connections"),
    secret: false,
};

/// `LANYARD_WORKER_THREADS`.
pub const WORKER_THREADS: Setting<usize> = Setting {
    key: "worker_threads",
    env: "LANYARD_WORKER_THREADS",
    flag: Some("--worker-threads"),
    value_name: Some("N"),
    help: "Proxy threads",
    default: DefaultValue::Computed {
        value: default_worker_threads,
        shown: || format!("CPUs available, at most {DEFAULT_MAX_WORKER_THREADS}"),
    },
    read: |raw| read_count(raw, 1..=MAX_WORKER_THREADS, "threads"),
    secret: false,
};

/// `LANYARD_RFC7523_FIELDS` (README "Token exchange").
pub const RFC7523_FIELDS: Setting<bool> = Setting {
    key: "rfc7523_fields",
    env: "LANYARD_RFC7523_FIELDS",
    flag: Some("--rfc7523-fields"),
    value_name: Some("BOOL"),
    help: "Send RFC 7523 grant_type and client_assertion_type",
    default: DefaultValue::Value(true),
    read: read_bool,
    secret: false,
};

/// `LANYARD_LOG_FORMAT`: unset, a person at a terminal reads text, and a
/// collector (a container's log, a pipe, a file) gets JSON.
pub const LOG_FORMAT: Setting<LogFormat> = Setting {
    key: "log_format",
    env: "LANYARD_LOG_FORMAT",
    flag: Some("--log-format"),
    value_name: Some("FORMAT"),
    help: "Log format, json or text",
    default: DefaultValue::Described("`text` when stderr is a terminal, else `json`"),
    read: read_log_format,
    secret: false,
};

/// `DEMO_MOCK`: the command `lanyard demo` is its flag.
pub const DEMO: Setting<bool> = Setting {
    key: "demo",
    env: "DEMO_MOCK",
    flag: None,
    value_name: None,
    help: "Run against the embedded mock service, as `lanyard demo` does",
    default: DefaultValue::Value(false),
    read: read_bool,
    secret: false,
};
