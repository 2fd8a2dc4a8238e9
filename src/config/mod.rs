//! Settings: command-line flags, environment, TOML file and defaults, merged
//! into one validated [`Config`] (README "Settings").
//!
//! - [`settings`]: the table. Each setting is declared once there, with
//!   its key, variable, flag, help, default and reader; the command line,
//!   `--help`, the config file's keys and the README's table follow it.
//! - [`declaration`]: what a declaration holds, [`Setting`] and
//!   [`AnySetting`].
//! - `values`: readers for durations, counts, sizes and addresses; URLs
//!   are read by [`crate::target::TargetUrl`].
//! - `sources`: flags, environment and file, layered, each value with
//!   where it came from.
//! - `outbound`: the credentials and TLS roots, read and checked once.
//! - `problems`: the one-line-per-problem error.
//!
//! Precedence is flag > environment > file > default. Every problem is
//! collected before failing, and each message names the setting and where
//! its value came from; values of secret settings are never echoed.

pub mod credentials;
pub mod declaration;
mod outbound;
mod problems;
pub mod settings;
mod sources;
mod values;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::target::TargetUrl;

pub use declaration::{AnySetting, DefaultValue, Setting, ShownDefault};
pub use outbound::Account;
pub use problems::ConfigError;
pub use settings::*;
pub use sources::{Env, Flags, NotUnicode, ProcessEnv, Source, Sourced, io_reason};
pub use values::{
    ByteSize, LogFormat, MIN_SESSION_KEY_BYTES, Rate, SessionKeys, Shown, WalletBaseUrl,
    parse_duration,
};

use sources::{Layers, Reported};

/// The credentials-related settings, unresolved: the credentials file is
/// read and merged with these by [`crate::config::credentials`].
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
    /// `LANYARD_VERIFIER_LISTEN` and `PORT` as given; the command decides
    /// what unset means ([`Config::verifier_listen`]).
    pub verifier_listen_given: Option<SocketAddr>,
    pub port: Option<u16>,
    /// Required for `verifier`, unless it runs against the mock.
    pub wallet_base_url: Option<WalletBaseUrl>,
    pub verifier_session_ttl: Duration,
    /// Trusted proxies in front of the verifier (X-Forwarded-For).
    pub verifier_forwarded_hops: usize,
    /// `LANYARD_VERIFIER_SESSION_KEY(_FILE)`; `None`: derived from the
    /// service account's key.
    pub verifier_session_key: Option<SessionKeys>,
    /// `LANYARD_VERIFIER_CLIENT_STARTS`, `LANYARD_VERIFIER_STARTS`,
    /// `LANYARD_VERIFIER_SERVICE_CALLS`.
    pub verifier_rates: VerifierRates,
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
    /// As given; `None`: text on a terminal, else JSON ([`LogFormat::for_stderr`]).
    pub log_format: Option<LogFormat>,
    pub demo: bool,
    /// Values that were accepted with an adjustment, and what was logged
    /// while reading them, to log once logging is set up.
    pub warnings: Vec<String>,
    /// The credentials, read and checked at load for the commands that
    /// sign assertions (`run`, `check`, `token`); `None` otherwise.
    pub account: Option<Account>,
    /// TLS for the token endpoint and the upstream: the system roots plus
    /// the `LANYARD_CA_FILE` bundle, read at load; `None` for
    /// `healthcheck`, which opens no TLS connection.
    pub tls: Option<rustls::ClientConfig>,
}

/// What the command needs from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// `run` and `check`: the upstream base URL and credentials.
    Upstream,
    /// `verifier`: as `run`, plus the rule and the wallet.
    Verifier,
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
        matches!(
            self,
            Requirement::Upstream | Requirement::Verifier | Requirement::NoUpstream
        )
    }
}

/// A path segment of the rule path (docs/service.md §4.3), as lanyard
/// sends it: no character that would need escaping, so the segment is the
/// value.
pub fn is_path_segment(value: &str) -> bool {
    !value.is_empty()
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
}

/// What the verifier needs beyond `run`'s settings: the rule path's
/// segments and the wallet, each reported by name when missing or unusable.
fn check_verifier_settings(
    l: &mut Layers,
    org_id: Option<&Sourced<String>>,
    project_id: Option<&Sourced<String>>,
    rule_id: Option<&Sourced<String>>,
    wallet: Option<&WalletBaseUrl>,
) {
    let required = [
        (
            PROJECT_ID.env,
            project_id.is_some(),
            "the verification project's id",
        ),
        (
            RULE_ID.env,
            rule_id.is_some(),
            "the UUID of the published rule",
        ),
        (
            WALLET_BASE_URL.env,
            wallet.is_some(),
            "the wallet's base URL, for the wallet button",
        ),
    ];
    for (env, given, what) in required {
        if !given {
            l.errors.push(format!(
                "{env}: is required for `lanyard verifier` ({what})"
            ));
        }
    }
    for (setting, value) in [(&ORG_ID, org_id), (&PROJECT_ID, project_id)] {
        if let Some(value) = value
            && !is_path_segment(&value.value)
        {
            let why = "has characters that cannot appear in a URL path segment";
            l.problem(setting.env, &value.source, why);
        }
    }
    if let Some(rule) = rule_id {
        let why = if rule.value.starts_with("ver_") {
            Some(
                "is the rule's `ver_` identifier; use its Rule ID, the UUID the Generate ID action made (docs/service.md §2.5)",
            )
        } else if rule.value.len() != 36 || uuid::Uuid::try_parse(&rule.value).is_err() {
            Some(
                "is not a UUID (like 0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10): the Rule ID of a published rule (docs/service.md §2.5)",
            )
        } else {
            None
        };
        if let Some(why) = why {
            l.problem(RULE_ID.env, &rule.source, why);
        }
    }
}

/// How fast the verifier starts sessions and calls the service, per
/// replica (README "The verifier", Limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifierRates {
    pub client_starts: Rate,
    pub starts: Rate,
    pub service_calls: Rate,
}

impl Default for VerifierRates {
    fn default() -> Self {
        VerifierRates {
            client_starts: VERIFIER_CLIENT_STARTS.default_value(),
            starts: VERIFIER_STARTS.default_value(),
            service_calls: VERIFIER_SERVICE_CALLS.default_value(),
        }
    }
}

/// Longer than any key file: two keys of a few hundred bytes at most.
const MAX_SESSION_KEY_FILE_BYTES: u64 = 4096;

/// The verifier's session key, given or read from its file (one or the
/// other); never quoted in a problem.
fn verifier_session_key(l: &mut Layers<'_>) -> Option<SessionKeys> {
    let given = l.optional(&VERIFIER_SESSION_KEY);
    let Some(file) = l.optional(&VERIFIER_SESSION_KEY_FILE) else {
        return given.map(|keys| keys.value);
    };
    if given.is_some() {
        let why = format!("{} is set too; set one of them", VERIFIER_SESSION_KEY.env);
        l.problem(VERIFIER_SESSION_KEY_FILE.env, &file.source, &why);
        return None;
    }
    // Opening a FIFO would block start-up until a writer came.
    let regular = std::fs::metadata(&file.value).and_then(|meta| match meta.is_file() {
        true => Ok(()),
        false if meta.is_dir() => Err(std::io::ErrorKind::IsADirectory.into()),
        false => Err(std::io::Error::other("not a regular file")),
    });
    let read = regular
        .and_then(|()| std::fs::File::open(&file.value))
        .and_then(|f| {
            use std::io::Read as _;
            let mut text = String::new();
            f.take(MAX_SESSION_KEY_FILE_BYTES + 1)
                .read_to_string(&mut text)?;
            Ok(text)
        });
    let why = match read {
        Err(err) => format!(
            "{} cannot be read: {}",
            file.value.display(),
            io_reason(&err)
        ),
        Ok(text) if text.len() as u64 > MAX_SESSION_KEY_FILE_BYTES => format!(
            "{} is larger than {MAX_SESSION_KEY_FILE_BYTES} bytes; not a key file",
            file.value.display()
        ),
        Ok(text) => match SessionKeys::parse(text.trim()) {
            Ok(keys) => return Some(keys),
            Err(why) => format!("{}: {why}", file.value.display()),
        },
    };
    l.problem(VERIFIER_SESSION_KEY_FILE.env, &file.source, &why);
    None
}

impl Config {
    /// Where `lanyard verifier` listens: as given, else on `PORT`, else
    /// [`DEFAULT_VERIFIER_LISTEN`].
    pub fn verifier_listen(&self) -> SocketAddr {
        let on_port = |port| SocketAddr::new(DEFAULT_VERIFIER_LISTEN.ip(), port);
        self.verifier_listen_given
            .or(self.port.map(on_port))
            .unwrap_or(DEFAULT_VERIFIER_LISTEN)
    }

    /// Where `lanyard demo` serves the verifier: as given, else beside the
    /// proxy on loopback. `PORT` is a platform's choice for the one port
    /// of a deployed verifier, not the demo's.
    pub fn demo_verifier_listen(&self) -> SocketAddr {
        self.verifier_listen_given.unwrap_or(DEMO_VERIFIER_LISTEN)
    }

    /// Merges flags, environment, config file and defaults, validates
    /// everything, and reads the credentials and the CA bundle the command
    /// needs, reporting all problems at once.
    pub fn load(flags: &Flags, env: &dyn Env, need: Requirement) -> Result<Config, ConfigError> {
        let mut layers = Layers::open(flags, env);
        let l = &mut layers;

        let demo = l.value(&DEMO);
        let service_api_url = match l.given(&SERVICE_API_URL) {
            Ok(Some(url)) => Some(url.value),
            Ok(None) if matches!(need, Requirement::Upstream | Requirement::Verifier) && !demo => {
                l.errors.push(format!(
                    "{}: is required (the service's API base URL, e.g. https://api.example.com)",
                    SERVICE_API_URL.env
                ));
                None
            }
            Ok(None) | Err(Reported) => None,
        };

        let credentials = CredentialSettings {
            file: l.optional(&CREDENTIALS_FILE),
            client_id: l.optional(&CLIENT_ID),
            private_key: l.optional(&PRIVATE_KEY).map(|key| Sourced {
                value: crate::Secret::new(key.value),
                source: key.source,
            }),
            iam_audience: l.optional(&IAM_AUDIENCE),
            token_uri: l.optional(&TOKEN_URI),
            organization_id: l.optional(&ORGANIZATION_ID),
            org_id: l.optional(&ORG_ID),
        };
        let org_id = credentials.org_id.as_ref().map(|s| s.value.clone());
        let project_id = l.optional(&PROJECT_ID);
        let rule_id = l.optional(&RULE_ID);
        let wallet_base_url = l.optional(&WALLET_BASE_URL).map(|s| s.value);
        if need == Requirement::Verifier && !demo {
            check_verifier_settings(
                l,
                credentials.org_id.as_ref(),
                project_id.as_ref(),
                rule_id.as_ref(),
                wallet_base_url.as_ref(),
            );
        }
        let project_id = project_id.map(|s| s.value);
        let rule_id = rule_id.map(|s| s.value);
        let port = l.optional(&PORT).map(|s| s.value);
        let verifier_listen_given = l.optional(&VERIFIER_LISTEN).map(|s| s.value);
        let verifier_session_ttl = l.value(&VERIFIER_SESSION_TTL);
        let verifier_forwarded_hops = l.value(&VERIFIER_FORWARDED_HOPS);
        let verifier_session_key = verifier_session_key(l);
        let verifier_rates = VerifierRates {
            client_starts: l.value(&VERIFIER_CLIENT_STARTS),
            starts: l.value(&VERIFIER_STARTS),
            service_calls: l.value(&VERIFIER_SERVICE_CALLS),
        };

        let allow_remote = l.value(&ALLOW_REMOTE);
        let listen = match l.optional(&LISTEN) {
            Some(addr) if !addr.value.ip().is_loopback() && !allow_remote => {
                let why = format!(
                    "{} is not a loopback address; anyone who can reach the proxy acts as the service account. Set {}=true to allow it",
                    addr.value, ALLOW_REMOTE.env
                );
                l.problem(LISTEN.env, &addr.source, &why);
                LISTEN.default_value()
            }
            Some(addr) => addr.value,
            None => LISTEN.default_value(),
        };
        let admin_listen = l.value(&ADMIN_LISTEN);

        let assertion_ttl = match l.optional(&ASSERTION_TTL) {
            Some(ttl) => {
                if ttl.value > MAX_ASSERTION_TTL {
                    l.warnings.push(format!(
                        "{} ({}): {} s is capped at {} s, the longest the service accepts (docs/service.md §5.2)",
                        ASSERTION_TTL.env,
                        ttl.source,
                        ttl.value.as_secs(),
                        MAX_ASSERTION_TTL.as_secs()
                    ));
                }
                values::capped_lifetime(ttl.value)
            }
            None => ASSERTION_TTL.default_value(),
        };
        let clock_skew = match l.optional(&CLOCK_SKEW) {
            Some(skew) if skew.value >= assertion_ttl => {
                let why = format!(
                    "{} s is not less than the assertion lifetime ({} s): the assertion would be expired when sent",
                    skew.value.as_secs(),
                    assertion_ttl.as_secs()
                );
                l.problem(CLOCK_SKEW.env, &skew.source, &why);
                CLOCK_SKEW.default_value()
            }
            Some(skew) => skew.value,
            None => CLOCK_SKEW.default_value(),
        };
        let ca_file = l.optional(&CA_FILE);
        let upstream_timeout = l.value(&UPSTREAM_TIMEOUT);
        let token_timeout = l.value(&TOKEN_TIMEOUT);
        let expiry_margin = l.value(&EXPIRY_MARGIN);
        let shutdown_grace = l.value(&SHUTDOWN_GRACE);
        let header_timeout = l.value(&HEADER_TIMEOUT);
        let body_timeout = l.value(&BODY_TIMEOUT);
        let ByteSize(max_header_bytes) = l.value(&MAX_HEADER_BYTES);
        let max_upstream_connections = l.value(&MAX_UPSTREAM_CONNECTIONS);
        let max_connections = l.value(&MAX_CONNECTIONS);
        let worker_threads = l.value(&WORKER_THREADS);
        let rfc7523_fields = l.value(&RFC7523_FIELDS);
        let log_format = l.optional(&LOG_FORMAT).map(|given| given.value);

        // What the settings point at comes last, so its problems follow
        // the settings' own; all of them show in one run.
        let tls = match need {
            Requirement::AdminOnly => None,
            _ => outbound::tls(ca_file.as_ref(), l),
        };
        let account = match need.credentials() && !demo {
            true => outbound::account(&credentials, l),
            false => None,
        };

        if !layers.errors.is_empty() {
            return Err(ConfigError::new(layers.errors));
        }
        Ok(Config {
            service_api_url,
            credentials,
            org_id,
            project_id,
            rule_id,
            listen,
            admin_listen,
            verifier_listen_given,
            port,
            wallet_base_url,
            verifier_session_ttl,
            verifier_forwarded_hops,
            verifier_session_key,
            verifier_rates,
            assertion_ttl,
            clock_skew,
            ca_file: ca_file.map(|ca| ca.value),
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
            account,
            tls,
        })
    }
}
