//! The verifier's settings (docs/verifier.md): its sessions, the
//! proxies in front of it, its session key, its rates and its brand.

use std::path::PathBuf;
use std::time::Duration;

use crate::config::declaration::{DefaultValue, Setting};
use crate::config::defaults::{DEFAULT_VERIFIER_SESSION_TTL, MAX_FORWARDED_HOPS};
use crate::config::values::{Rate, SessionKeys, read_count, read_path, read_positive_duration};

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
/// rate limits exist though docs/service.md does not give them.
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

/// `LANYARD_VERIFIER_BRAND_FILE`: the relying party's name, logo, accent
/// and texts for the page (`config::brand`), read and checked once at
/// start-up.
pub const VERIFIER_BRAND_FILE: Setting<PathBuf> = Setting {
    key: "verifier_brand_file",
    env: "LANYARD_VERIFIER_BRAND_FILE",
    flag: Some("--verifier-brand-file"),
    value_name: Some("PATH"),
    help: "The relying party's name, logo, accent colour and texts for the verifier's page (TOML)",
    default: DefaultValue::Described("none: the page's own"),
    read: read_path,
    secret: false,
};
