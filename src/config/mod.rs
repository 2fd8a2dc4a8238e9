//! Settings: command-line flags, environment, TOML file and defaults, merged
//! into one validated [`Config`], and from it each component's
//! configuration (docs/settings.md).
//!
//! - this file: [`Config`], every setting as read, what the command needs
//!   ([`Requirement`]), and the steps from the sources to them. Nothing
//!   outside `config` takes a `Config`: each component takes its own.
//! - [`loaded`]: each command's configuration, [`Loaded`], holding its
//!   components' configurations with every part it requires present.
//! - `components`: each component's configuration, built from the
//!   settings once: [`ProxyConfig`], [`VerifierConfig`], [`AdminConfig`],
//!   [`AccessConfig`] and [`ProcessConfig`].
//! - `proxy`: the proxy's, [`ProxyConfig`], its own settings read straight
//!   into it.
//! - `rule_path`: the rule path, [`RulePath`], formatted and its
//!   organization decided in one place.
//! - `account`: the credentials and TLS roots the settings point at, read
//!   and checked once.
//! - [`credentials`]: the credentials file, the `SA_*` overrides and the
//!   RSA key, merged into checked credentials.
//! - [`accounts`]: `SA_CREDENTIALS_DIR`'s files, an account each.
//! - `verifier`: what `lanyard verifier` reads beyond `run`'s settings.
//! - [`brand`]: the relying party's brand file for the verifier's page,
//!   read and checked once.
//! - [`oidc`]: what the OpenID Connect provider reads, and the clients
//!   file and keys its settings point at.
//! - [`issuer`]: the provider's value types.
//! - `sources`: flags, environment and file, layered, each value with
//!   where it came from.
//! - [`settings`]: the table. Each setting is declared once there, with
//!   its key, variable, flag, help, default and reader; the command line,
//!   `--help`, the config file's keys and docs/settings.md's table follow it.
//! - [`declaration`]: what a declaration holds, [`Setting`] and
//!   [`AnySetting`].
//! - `defaults`: the defaults and bounds the table declares, each with why.
//! - `values`: the value types and their readers: durations, counts,
//!   sizes, addresses, rates, keys; URLs are read by
//!   [`crate::target::TargetUrl`].
//! - `problems`: the one-line-per-problem error.
//! - `shown`: what a text shown to a person may not hold (invisible,
//!   reordering and control characters).
//!
//! Each of these imports only modules listed after it, so types flow down:
//! `values`, `defaults` and `problems` import nothing of `config`. Other
//! modules name a setting as `config::settings::NAME`, or by the few names
//! re-exported here.
//!
//! Precedence is flag > environment > file > default. Every problem is
//! collected before failing, and each message names the setting and where
//! its value came from; values of secret settings are never echoed.

mod account;
pub mod accounts;
pub mod brand;
mod components;
pub mod credentials;
pub mod declaration;
mod defaults;
pub mod issuer;
pub mod loaded;
pub mod oidc;
mod problems;
mod proxy;
mod rule_path;
pub mod settings;
mod shown;
mod sources;
mod values;
mod verifier;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::target::TargetUrl;

pub use components::{AccessConfig, AdminConfig, ProcessConfig, VerifierConfig};
pub use credentials::CredentialSettings;
pub use declaration::{AnySetting, DefaultValue, Setting, ShownDefault};
pub use proxy::ProxyConfig;
// The defaults and settings other modules name; the rest of the table is
// `config::settings::NAME`.
pub use account::Account;
// For tests elsewhere that read what was logged.
#[cfg(test)]
pub(crate) use account::Kept;
pub use defaults::{
    DEFAULT_EXPIRY_MARGIN, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEADER_BYTES, MIN_MAX_HEADER_BYTES,
};
pub use loaded::{
    AccountSet, CheckConfig, DemoConfig, HealthcheckConfig, Loaded, RunConfig, Signing,
    TokenConfig, VerifierSetup,
};
pub use problems::ConfigError;
pub use rule_path::{RulePath, Segment};
pub use settings::{
    ALLOW_REMOTE, CONFIG_ENV, CREDENTIALS_FILE, LISTEN, PRIVATE_KEY, SERVICE_API_URL, SETTINGS,
};
pub use sources::{Env, Flags, NotUnicode, ProcessEnv, Source, Sourced, io_reason};
pub use values::{
    ByteSize, FileMode, ListenAddr, LogFormat, MIN_SESSION_KEY_BYTES, Rate, SOCKET_STAGING_ROOM,
    SessionKeys, Shown, WalletBaseUrl, parse_duration,
};
pub use verifier::{VerifierRates, is_path_segment, path_segment_problem};

use defaults::{DEFAULT_ADMIN_LISTEN, MAX_ASSERTION_TTL};
use settings::{
    ADMIN_LISTEN, ASSERTION_TTL, CA_FILE, CLIENT_ID, CLOCK_SKEW, CREDENTIALS_DIR, DEMO,
    EXPIRY_MARGIN, IAM_AUDIENCE, LOG_FORMAT, ORG_ID, ORGANIZATION_ID, RFC7523_FIELDS,
    SHUTDOWN_GRACE, TOKEN_TIMEOUT, TOKEN_URI, VERIFIER_BRAND_FILE,
};
use sources::{Layers, Reported};
use verifier::VerifierSettings;

/// Every setting, validated.
#[derive(Debug, Clone)]
pub struct Config {
    pub credentials: CredentialSettings,
    pub org_id: Option<String>,
    /// `PROJECT_ID` and `RULE_ID` as given: `lanyard check` probes the
    /// rule when both are; `lanyard verifier` requires them
    /// ([`VerifierSetup::rule_path`]).
    pub project_id: Option<String>,
    pub rule_id: Option<String>,
    pub admin_listen: SocketAddr,
    /// Whether `admin_listen` was given rather than defaulted: the demo
    /// keeps to loopback unless it was ([`AdminConfig`]).
    pub admin_listen_given: bool,
    /// `LANYARD_VERIFIER_LISTEN` and `PORT` as given; the command decides
    /// what unset means ([`Config::verifier_listen`]).
    pub verifier_listen_given: Option<SocketAddr>,
    pub port: Option<u16>,
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
    /// `LANYARD_SEND_TIMEOUT`: how long a client may take none of an
    /// answer's bytes.
    pub send_timeout: Duration,
    pub max_header_bytes: usize,
    pub max_connections: usize,
    /// The proxy's settings, read straight into its configuration.
    pub proxy: ProxyConfig,
    pub rfc7523_fields: bool,
    /// As given; `None`: text on a terminal, else JSON ([`LogFormat::for_stderr`]).
    pub log_format: Option<LogFormat>,
    pub demo: bool,
    /// Values that were accepted with an adjustment, and what was logged
    /// while reading them, to log once logging is set up.
    pub warnings: Vec<String>,
    /// `SA_CREDENTIALS_DIR` as given.
    pub credentials_dir: Option<Sourced<PathBuf>>,
    /// The OpenID Connect provider, read and checked at load for
    /// `verifier`, `check` and `demo` when `LANYARD_OIDC_ISSUER` is set.
    pub oidc: Option<oidc::OidcConfig>,
    /// `LANYARD_VERIFIER_BRAND_FILE`, read and checked at load for
    /// `verifier`, `check` and `demo` when it is set; `None`: the page's
    /// own name, colours and texts.
    pub verifier_brand: Option<Arc<brand::Brand>>,
}

/// What the command needs from the settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requirement {
    /// `run`: the upstream base URL and credentials, or `DEMO_MOCK`.
    Upstream,
    /// `check`: as `run`, with no demo (there is no mock to check).
    Check,
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
            Requirement::Upstream
                | Requirement::Check
                | Requirement::Verifier
                | Requirement::NoUpstream
        )
    }

    /// `check` and `token` act on the account as configured: the demo's
    /// mock lives in the process that serves it.
    fn has_demo(self) -> bool {
        !matches!(self, Requirement::Check | Requirement::NoUpstream)
    }
}

impl Config {
    /// The settings alone, loaded and checked as for `need`
    /// ([`Loaded::load`]), what they point at included.
    pub fn load(flags: &Flags, env: &dyn Env, need: Requirement) -> Result<Config, ConfigError> {
        Loaded::load_with_settings(flags, env, need).map(|(_, settings)| settings)
    }

    /// Every setting, and what the settings point at that `need` reads:
    /// the TLS roots, the accounts, the provider and the brand, with
    /// their problems after the settings' own, so all of them show in one
    /// run.
    fn gather(layers: &mut Layers<'_>, need: Requirement) -> (Config, loaded::Parts) {
        let (mut config, mut parts) = Config::read(layers, need);
        let (provider, brand_file) = match need {
            Requirement::Verifier | Requirement::Check | Requirement::Demo => (
                oidc::OidcSettings::read(layers),
                layers.optional(&VERIFIER_BRAND_FILE),
            ),
            _ => (None, None),
        };
        if need != Requirement::AdminOnly {
            parts.tls = account::tls(parts.ca_file.as_ref(), layers);
        }
        if need.credentials() && !config.demo {
            parts.accounts = loaded::accounts(&mut config, layers);
        }
        if let Some(provider) = provider {
            let account_key = parts
                .accounts
                .as_ref()
                .and_then(AccountSet::default_account)
                .map(|account| account.credentials().key);
            config.oidc = provider.load(layers, account_key.as_deref(), config.token_timeout);
        }
        if let Some(file) = brand_file {
            config.verifier_brand = brand::load(layers, &file).map(Arc::new);
        }
        (config, parts)
    }

    /// Every setting, read in the order their problems are reported, and
    /// the parts only some commands require; `warnings`, the accounts and
    /// the TLS roots are left for [`Config::gather`] and [`Loaded::load`].
    fn read(l: &mut Layers<'_>, need: Requirement) -> (Config, loaded::Parts) {
        let demo = match l.optional(&DEMO) {
            Some(given) if given.value && !need.has_demo() => {
                l.problem(
                    DEMO.env,
                    &given.source,
                    "`true`, but `lanyard check` and `lanyard token` have no demo: the embedded mock runs inside `lanyard demo`, `lanyard run` and `lanyard verifier`; unset it to check or use a real account",
                );
                false
            }
            given => given.is_some_and(|given| given.value),
        };
        let upstream = service_api_url(l, need, demo);
        let credentials = credential_settings(l);
        let credentials_dir = credentials_dir(l, need);
        let verifier_required = need == Requirement::Verifier && !demo;
        let VerifierSettings {
            project_id,
            rule_id,
            wallet_base_url,
            port,
            verifier_listen_given,
            verifier_session_ttl,
            verifier_forwarded_hops,
            verifier_session_key,
            verifier_rates,
        } = VerifierSettings::read(l, credentials.org_id.as_ref(), verifier_required);
        let listen = proxy::listen(l);
        let admin_listen = l.optional(&ADMIN_LISTEN).map(|given| given.value);
        let (assertion_ttl, clock_skew) = assertion_timing(l);
        let ca_file = l.optional(&CA_FILE);
        // The proxy's own settings, and those the verifier shares.
        let proxy = ProxyConfig::read(l, listen);
        // Struct fields are evaluated as written: this order is the
        // problems' order too.
        let config = Config {
            org_id: credentials.org_id.as_ref().map(|s| s.value.clone()),
            credentials,
            project_id,
            rule_id,
            admin_listen: admin_listen.unwrap_or(DEFAULT_ADMIN_LISTEN),
            admin_listen_given: admin_listen.is_some(),
            verifier_listen_given,
            port,
            verifier_session_ttl,
            verifier_forwarded_hops,
            verifier_session_key,
            verifier_rates,
            assertion_ttl,
            clock_skew,
            ca_file: ca_file.as_ref().map(|ca| ca.value.clone()),
            upstream_timeout: proxy.upstream_timeout,
            token_timeout: l.value(&TOKEN_TIMEOUT),
            expiry_margin: l.value(&EXPIRY_MARGIN),
            shutdown_grace: l.value(&SHUTDOWN_GRACE),
            send_timeout: proxy.send_timeout,
            max_header_bytes: proxy.max_header_bytes,
            max_connections: proxy.max_connections,
            proxy,
            rfc7523_fields: l.value(&RFC7523_FIELDS),
            log_format: l.optional(&LOG_FORMAT).map(|given| given.value),
            demo,
            warnings: Vec::new(),
            credentials_dir,
            oidc: None,
            verifier_brand: None,
        };
        let parts = loaded::Parts {
            upstream,
            ca_file,
            wallet: wallet_base_url,
            tls: None,
            accounts: None,
        };
        (config, parts)
    }
}

/// `SERVICE_API_URL`, required where the command forwards to the service.
fn service_api_url(l: &mut Layers<'_>, need: Requirement, demo: bool) -> Option<TargetUrl> {
    match l.given(&SERVICE_API_URL) {
        Ok(Some(url)) => Some(url.value),
        Ok(None)
            if matches!(
                need,
                Requirement::Upstream | Requirement::Check | Requirement::Verifier
            ) && !demo =>
        {
            l.errors.push(format!(
                "{}: is required (the service's API base URL, e.g. https://api.example.com)",
                SERVICE_API_URL.env
            ));
            None
        }
        Ok(None) | Err(Reported) => None,
    }
}

/// `SA_CREDENTIALS_DIR`, for the commands that serve many accounts:
/// `lanyard verifier` serves one, and refuses it.
fn credentials_dir(l: &mut Layers<'_>, need: Requirement) -> Option<Sourced<PathBuf>> {
    let dir = l.optional(&CREDENTIALS_DIR)?;
    if need == Requirement::Verifier {
        let why = format!(
            "`lanyard verifier` serves one service account; set {} instead",
            settings::CREDENTIALS_FILE.env
        );
        l.problem(CREDENTIALS_DIR.env, &dir.source, &why);
        return None;
    }
    Some(dir)
}

/// The `SA_*` settings and `ORG_ID`, for [`credentials`] to merge.
fn credential_settings(l: &mut Layers<'_>) -> CredentialSettings {
    CredentialSettings {
        file: l.optional(&CREDENTIALS_FILE),
        client_id: l.optional(&CLIENT_ID),
        private_key: l.optional(&PRIVATE_KEY).map(|key| Sourced {
            value: crate::secret::Secret::new(key.value),
            source: key.source,
        }),
        iam_audience: l.optional(&IAM_AUDIENCE),
        token_uri: l.optional(&TOKEN_URI),
        organization_id: l.optional(&ORGANIZATION_ID),
        org_id: l.optional(&ORG_ID),
        // Set from LANYARD_TOKEN_TIMEOUT once it is read (loaded::accounts).
        ..CredentialSettings::default()
    }
}

/// The assertion's lifetime, capped at `MAX_ASSERTION_TTL` with a
/// warning and whole seconds at least (`iat` and `exp` are integers), and
/// the clock skew, which must be less than it.
fn assertion_timing(l: &mut Layers<'_>) -> (Duration, Duration) {
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
            ttl.value.min(MAX_ASSERTION_TTL).max(Duration::from_secs(1))
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
    (assertion_ttl, clock_skew)
}
