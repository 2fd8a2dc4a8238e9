//! The table of settings: each one declared once, with its TOML key,
//! environment variable, flag, help line, default and reader, its bounds
//! handed to the reader here. The command line (`cli.rs`), the config
//! file's keys, `--help`, the loader and docs/settings.md's settings table
//! (checked by `tests/it/docs.rs`) all come from here. Used as
//! `settings::NAME` inside `config`; `config` re-exports the few that other
//! modules name. The verifier's (`verifier`) and those that bound time and
//! resources (`limits`) are declared in files of their own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use super::declaration::{AnySetting, DefaultValue, Setting};
use super::defaults::{
    DEFAULT_ADMIN_LISTEN, DEFAULT_ASSERTION_TTL, DEFAULT_LISTEN, MAX_CLOCK_SKEW,
};
use super::values::{
    FileMode, ListenAddr, LogFormat, WalletBaseUrl, parse_duration, read_addr, read_bool,
    read_file_mode, read_lifetime, read_listen, read_log_format, read_path, read_port, read_text,
};
use crate::target::TargetUrl;

mod limits;
mod oidc;
mod verifier;

pub use limits::{
    BODY_TIMEOUT, EXPIRY_MARGIN, HEADER_TIMEOUT, MAX_CONNECTIONS, MAX_HEADER_BYTES,
    MAX_UPSTREAM_CONNECTIONS, SEND_TIMEOUT, SHUTDOWN_GRACE, TOKEN_TIMEOUT, UPSTREAM_TIMEOUT,
    WORKER_THREADS,
};
pub use oidc::{
    OIDC_CLAIMS_MAP, OIDC_CLIENTS_FILE, OIDC_ISSUER, OIDC_PAIRWISE_KEY, OIDC_PAIRWISE_KEY_FILE,
    OIDC_PREVIOUS_KEY_FILE, OIDC_SIGNING_KEY, OIDC_SIGNING_KEY_FILE, OIDC_SUB_CLAIM,
};
pub use verifier::{
    VERIFIER_BRAND_FILE, VERIFIER_CLIENT_STARTS, VERIFIER_FORWARDED_HOPS, VERIFIER_SERVICE_CALLS,
    VERIFIER_SESSION_KEY, VERIFIER_SESSION_KEY_FILE, VERIFIER_SESSION_TTL, VERIFIER_STARTS,
};

/// The config file itself is located by flag or environment only.
pub const CONFIG_ENV: &str = "LANYARD_CONFIG";

/// Every setting, in the order docs/settings.md lists them.
pub const SETTINGS: &[&dyn AnySetting] = &[
    &SERVICE_API_URL,
    &CREDENTIALS_FILE,
    &CREDENTIALS_DIR,
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
    &VERIFIER_BRAND_FILE,
    &OIDC_ISSUER,
    &OIDC_CLIENTS_FILE,
    &OIDC_SIGNING_KEY_FILE,
    &OIDC_SIGNING_KEY,
    &OIDC_PREVIOUS_KEY_FILE,
    &OIDC_SUB_CLAIM,
    &OIDC_PAIRWISE_KEY,
    &OIDC_PAIRWISE_KEY_FILE,
    &OIDC_CLAIMS_MAP,
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

/// `SERVICE_API_URL`: the `{base_url}` of docs/service.md, where requests go.
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

/// `SA_CREDENTIALS_FILE`: watched for rotation (docs/tokens.md "Credential rotation").
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

/// `SA_CREDENTIALS_DIR`: one account per file, chosen by the organization
/// in a request's path (docs/accounts.md).
pub const CREDENTIALS_DIR: Setting<PathBuf> = Setting {
    key: "credentials_dir",
    env: "SA_CREDENTIALS_DIR",
    flag: Some("--credentials-dir"),
    value_name: Some("DIR"),
    help: "Directory of credentials files, one account each, chosen by the organization in the request's path",
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

/// `ORG_ID`, as docs/service.md's reference application names it.
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

/// `LANYARD_LISTEN`: loopback unless [`ALLOW_REMOTE`] (docs/settings.md).
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
/// (docs/proxy.md "Listening on a Unix socket").
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

/// `LANYARD_VERIFIER_LISTEN`: unset, `PORT` decides (docs/verifier.md).
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

/// `LANYARD_RFC7523_FIELDS` (docs/tokens.md "Token exchange").
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
