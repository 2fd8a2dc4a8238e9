//! What bounds lanyard's time and resources (docs/proxy.md "Limits"): timeouts,
//! connection and header limits, threads.

use std::time::Duration;

use crate::config::declaration::{DefaultValue, Setting};
use crate::config::defaults::{
    DEFAULT_BODY_TIMEOUT, DEFAULT_EXPIRY_MARGIN, DEFAULT_HEADER_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_HEADER_BYTES, DEFAULT_MAX_UPSTREAM_CONNECTIONS, DEFAULT_MAX_WORKER_THREADS,
    DEFAULT_SEND_TIMEOUT, DEFAULT_SHUTDOWN_GRACE, DEFAULT_TOKEN_TIMEOUT, DEFAULT_UPSTREAM_TIMEOUT,
    MAX_MAX_CONNECTIONS, MAX_MAX_HEADER_BYTES, MAX_MAX_UPSTREAM_CONNECTIONS, MAX_WORKER_THREADS,
    MIN_MAX_HEADER_BYTES, default_worker_threads,
};
use crate::config::values::{
    ByteSize, read_byte_size, read_count, read_duration, read_positive_duration,
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

/// `LANYARD_EXPIRY_MARGIN` (docs/tokens.md "Token lifetime").
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

/// `LANYARD_SHUTDOWN_GRACE` (docs/commands.md "Shutdown").
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

/// `LANYARD_HEADER_TIMEOUT` (docs/proxy.md "Limits").
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

/// `LANYARD_BODY_TIMEOUT` (docs/proxy.md "Limits").
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

/// `LANYARD_SEND_TIMEOUT` (docs/proxy.md "Limits").
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

/// `LANYARD_MAX_HEADER_BYTES` (docs/proxy.md "Limits").
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

/// `LANYARD_MAX_CONNECTIONS` (docs/proxy.md "Limits").
pub const MAX_CONNECTIONS: Setting<usize> = Setting {
    key: "max_connections",
    env: "LANYARD_MAX_CONNECTIONS",
    flag: Some("--max-connections"),
    value_name: Some("N"),
    help: "Most client connections each client listener (the proxy's, the verifier's) holds open at once",
    default: DefaultValue::Value(DEFAULT_MAX_CONNECTIONS),
    read: |raw| read_count(raw, 1..=MAX_MAX_CONNECTIONS, "connections"),
    secret: false,
};

/// `LANYARD_MAX_UPSTREAM_CONNECTIONS` (docs/proxy.md "Limits").
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
