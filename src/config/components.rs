//! Each component's configuration, built from the settings once: the
//! verifier's (with its OpenID Connect provider), the admin listener's,
//! the accounts' token access, and the process's own; the proxy's is
//! read straight from the settings (`proxy`). A component takes its own
//! and nothing else (docs/architecture.md, `config/`).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::brand::Brand;
use super::credentials::CredentialSettings;
use super::oidc::OidcConfig;
use super::proxy::ProxyConfig;
use super::values::{LogFormat, SessionKeys};
use super::verifier::VerifierRates;
use super::{Config, defaults};

/// What the process itself reads: how it logs, what was adjusted while
/// the settings were read, and how long it drains.
#[derive(Debug, Clone)]
pub struct ProcessConfig {
    /// As given; `None`: text on a terminal, else JSON ([`LogFormat::for_stderr`]).
    pub log_format: Option<LogFormat>,
    /// Values that were accepted with an adjustment, and what was logged
    /// while reading them, to log once logging is set up.
    pub warnings: Vec<String>,
    /// `LANYARD_CA_FILE`, which the span exporter trusts too.
    pub ca_file: Option<PathBuf>,
    /// How long the client listeners drain for (`LANYARD_SHUTDOWN_GRACE`).
    pub shutdown_grace: Duration,
}

/// The admin listener's: health and metrics (docs/admin.md).
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// `LANYARD_ADMIN_LISTEN`, or the command's own default.
    pub listen: SocketAddr,
    /// How long a client may take none of an answer (`LANYARD_SEND_TIMEOUT`).
    pub send_timeout: Duration,
}

/// The verifier's (docs/verifier.md), and its OpenID Connect provider's
/// (docs/oidc.md); the rule, the wallet and the service it verifies
/// against are the command's.
#[derive(Debug, Clone)]
pub struct VerifierConfig {
    /// Where it listens, and the setting that chose it, for the message
    /// when it cannot.
    pub listen: SocketAddr,
    pub listen_setting: &'static str,
    pub session_ttl: Duration,
    /// Trusted proxies in front (`LANYARD_VERIFIER_FORWARDED_HOPS`).
    pub forwarded_hops: usize,
    /// `LANYARD_VERIFIER_SESSION_KEY`; `None`: derived from the account's
    /// key.
    pub session_key: Option<SessionKeys>,
    pub rates: VerifierRates,
    /// Time to the service's answer (`LANYARD_UPSTREAM_TIMEOUT`).
    pub service_timeout: Duration,
    /// How long a client may take none of an answer
    /// (`LANYARD_SEND_TIMEOUT`).
    pub send_timeout: Duration,
    pub max_header_bytes: usize,
    /// Client connections (`LANYARD_MAX_CONNECTIONS`), before the
    /// open-file limit lowers it.
    pub max_connections: usize,
    /// The OpenID Connect provider, when `LANYARD_OIDC_ISSUER` is set.
    pub oidc: Option<OidcConfig>,
    /// How long a signature in a PKCS#11 token may take
    /// (`LANYARD_TOKEN_TIMEOUT`).
    pub signing_timeout: Duration,
    /// The relying party's brand for the page
    /// (`LANYARD_VERIFIER_BRAND_FILE`).
    pub brand: Option<Arc<Brand>>,
}

/// How every account's tokens are asked for and kept (docs/tokens.md),
/// and what the default account's credentials watch reads again.
#[derive(Debug, Clone)]
pub struct AccessConfig {
    /// The `SA_*` settings, which a reload of the credentials file merges
    /// again.
    pub credentials: CredentialSettings,
    /// Whether `SA_CREDENTIALS_DIR` is set: the default account's
    /// organization may not change then (docs/accounts.md).
    pub organization_fixed: bool,
    pub assertion_ttl: Duration,
    /// How far `iat` (and with it `exp`) is backdated.
    pub clock_skew: Duration,
    pub rfc7523_fields: bool,
    /// A token request's limit, and a key in a token's
    /// (`LANYARD_TOKEN_TIMEOUT`).
    pub token_timeout: Duration,
    /// How long before its expiry a token stops being sent; at run time at
    /// most a tenth of each token's lifetime.
    pub expiry_margin: Duration,
}

/// Where the demo's listeners go unless told: the demo is one person's
/// machine, so its admin listener stays on loopback and its verifier
/// beside the proxy; `PORT` is a platform's choice for a deployed
/// verifier, not the demo's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Defaults {
    /// `lanyard run`, `lanyard verifier` (with `DEMO_MOCK` too) and the
    /// one-shot commands.
    Deployed,
    /// `lanyard demo`, and `run` with `DEMO_MOCK`.
    Demo,
}

impl Config {
    pub(super) fn process_config(&self) -> ProcessConfig {
        ProcessConfig {
            log_format: self.log_format,
            warnings: self.warnings.clone(),
            ca_file: self.ca_file.clone(),
            shutdown_grace: self.shutdown_grace,
        }
    }

    pub(super) fn admin_config(&self, defaults: Defaults) -> AdminConfig {
        let listen = match (defaults, self.admin_listen_given) {
            (Defaults::Demo, false) => defaults::DEMO_ADMIN_LISTEN,
            _ => self.admin_listen,
        };
        AdminConfig {
            listen,
            send_timeout: self.send_timeout,
        }
    }

    pub(super) fn proxy_config(&self) -> ProxyConfig {
        self.proxy.clone()
    }

    pub(super) fn verifier_config(&self, defaults: Defaults) -> VerifierConfig {
        let on_port = |port| SocketAddr::new(defaults::DEFAULT_VERIFIER_LISTEN.ip(), port);
        let (listen, listen_setting) = match (defaults, self.verifier_listen_given, self.port) {
            (_, Some(given), _) => (given, "LANYARD_VERIFIER_LISTEN"),
            (Defaults::Demo, None, _) => {
                (defaults::DEMO_VERIFIER_LISTEN, "LANYARD_VERIFIER_LISTEN")
            }
            (Defaults::Deployed, None, Some(port)) => (on_port(port), "PORT"),
            (Defaults::Deployed, None, None) => {
                (defaults::DEFAULT_VERIFIER_LISTEN, "LANYARD_VERIFIER_LISTEN")
            }
        };
        VerifierConfig {
            listen,
            listen_setting,
            session_ttl: self.verifier_session_ttl,
            forwarded_hops: self.verifier_forwarded_hops,
            session_key: self.verifier_session_key.clone(),
            rates: self.verifier_rates,
            service_timeout: self.upstream_timeout,
            send_timeout: self.send_timeout,
            max_header_bytes: self.max_header_bytes,
            max_connections: self.max_connections,
            oidc: self.oidc.clone(),
            signing_timeout: self.token_timeout,
            brand: self.verifier_brand.clone(),
        }
    }

    pub(super) fn access_config(&self) -> AccessConfig {
        AccessConfig {
            credentials: self.credentials.clone(),
            organization_fixed: self.credentials_dir.is_some(),
            assertion_ttl: self.assertion_ttl,
            clock_skew: self.clock_skew,
            rfc7523_fields: self.rfc7523_fields,
            token_timeout: self.token_timeout,
            expiry_margin: self.expiry_margin,
        }
    }
}
