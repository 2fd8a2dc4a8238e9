//! One configuration per command (docs/architecture.md, `config/`): what [`Loaded::load`]
//! hands each command, every part the command requires present, so that
//! nothing after loading asks whether a setting was given.
//!
//! - `lanyard run` and `lanyard check`: [`RunConfig`], the upstream and
//!   the accounts to sign as; `check` checks what `run` would run.
//! - `lanyard token`: [`TokenConfig`], the accounts only.
//! - `lanyard verifier`: [`VerifierSetup`], one account, the upstream and
//!   the rule path.
//! - `lanyard demo` (and `run` or `verifier` with `DEMO_MOCK`):
//!   [`DemoConfig`], the settings and the TLS roots; the demo makes its
//!   own account and service.
//! - `lanyard healthcheck`: the settings alone.

use std::path::PathBuf;

use super::account::{self, Account};
use super::accounts::AccountsDir;
use super::components::{AccessConfig, AdminConfig, Defaults, ProcessConfig, VerifierConfig};
use super::oidc::OidcConfig;
use super::problems::ConfigError;
use super::proxy::ProxyConfig;
use super::rule_path::{RulePath, Segment};
use super::settings::{ORG_ID, ORGANIZATION_ID};
use super::sources::{Env, Flags, Layers, Sourced};
use super::values::WalletBaseUrl;
use super::{Config, Requirement};
use crate::target::TargetUrl;

/// The accounts a command signs assertions as.
#[derive(Debug, Clone)]
pub enum AccountSet {
    /// `SA_CREDENTIALS_FILE`'s (or the `SA_*` settings') account.
    One(Account),
    /// `SA_CREDENTIALS_DIR`'s accounts, and `SA_CREDENTIALS_FILE`'s as
    /// the default when it is set (docs/accounts.md).
    Directory {
        default: Option<Account>,
        dir: AccountsDir,
    },
}

impl AccountSet {
    /// The account for paths without an organization; `None` when only
    /// `SA_CREDENTIALS_DIR` is set.
    pub fn default_account(&self) -> Option<&Account> {
        match self {
            AccountSet::One(account) => Some(account),
            AccountSet::Directory { default, .. } => default.as_ref(),
        }
    }

    pub fn directory(&self) -> Option<&AccountsDir> {
        match self {
            AccountSet::One(_) => None,
            AccountSet::Directory { dir, .. } => Some(dir),
        }
    }
}

/// Whom a command signs as, and the TLS roots (the system's plus
/// `LANYARD_CA_FILE`'s) it reaches the token endpoint and the upstream
/// with.
#[derive(Debug, Clone)]
pub struct Signing {
    pub accounts: AccountSet,
    pub tls: rustls::ClientConfig,
}

/// `lanyard run`'s: the proxy, the admin listener and the accounts.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub process: ProcessConfig,
    pub admin: AdminConfig,
    pub proxy: ProxyConfig,
    /// `SERVICE_API_URL`, where the proxy forwards to.
    pub upstream: TargetUrl,
    pub access: AccessConfig,
    pub signing: Signing,
}

/// `lanyard check`'s: what `run` would run, and the provider and the
/// rule it probes.
#[derive(Debug, Clone)]
pub struct CheckConfig {
    pub run: RunConfig,
    /// The OpenID Connect provider, when `LANYARD_OIDC_ISSUER` is set.
    pub provider: Option<OidcConfig>,
    /// `ORG_ID`, `PROJECT_ID` and `RULE_ID` as given: the rule is probed
    /// when both of the last two are, its segments checked there.
    pub org_id: Option<String>,
    pub project_id: Option<String>,
    pub rule_id: Option<String>,
}

/// `lanyard token`'s.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    pub process: ProcessConfig,
    pub access: AccessConfig,
    pub signing: Signing,
}

/// `lanyard verifier`'s: one account, whose organization the rule path
/// names unless `ORG_ID` does.
#[derive(Debug, Clone)]
pub struct VerifierSetup {
    pub process: ProcessConfig,
    pub admin: AdminConfig,
    pub verifier: VerifierConfig,
    /// `SERVICE_API_URL`, which the verifier calls.
    pub upstream: TargetUrl,
    /// `PROJECT_ID` and `RULE_ID` of `ORG_ID` or the account's
    /// organization, each segment checked.
    pub rule_path: RulePath,
    /// `WALLET_BASE_URL`.
    pub wallet: WalletBaseUrl,
    pub access: AccessConfig,
    pub account: Account,
    pub tls: rustls::ClientConfig,
}

/// `lanyard demo`'s, and `run`'s or `verifier`'s with `DEMO_MOCK`: the
/// demo makes its own account and service, and reaches them with these
/// roots.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    pub process: ProcessConfig,
    pub admin: AdminConfig,
    /// `None` for `DEMO_MOCK=true lanyard verifier`, which serves the
    /// verifier alone.
    pub proxy: Option<ProxyConfig>,
    pub verifier: VerifierConfig,
    pub access: AccessConfig,
    pub tls: rustls::ClientConfig,
}

/// `lanyard healthcheck`'s: where the admin listener is.
#[derive(Debug, Clone)]
pub struct HealthcheckConfig {
    pub process: ProcessConfig,
    pub admin: AdminConfig,
}

/// The settings, loaded for one command.
#[derive(Debug, Clone)]
pub enum Loaded {
    Run(Box<RunConfig>),
    Check(Box<CheckConfig>),
    Token(Box<TokenConfig>),
    Verifier(Box<VerifierSetup>),
    /// `lanyard demo`, or `run` or `verifier` with `DEMO_MOCK`.
    Demo(Box<DemoConfig>),
    Healthcheck(Box<HealthcheckConfig>),
}

/// What the settings point at, read by [`Config::gather`]; each
/// `None` where the command does not read it, or where its problem was
/// recorded.
pub(super) struct Parts {
    pub upstream: Option<TargetUrl>,
    pub ca_file: Option<Sourced<PathBuf>>,
    pub wallet: Option<WalletBaseUrl>,
    pub tls: Option<rustls::ClientConfig>,
    pub accounts: Option<AccountSet>,
}

impl Loaded {
    /// Merges flags, environment, config file and defaults, validates
    /// everything, and reads the credentials and the CA bundle the command
    /// needs, reporting all problems at once.
    pub fn load(flags: &Flags, env: &dyn Env, need: Requirement) -> Result<Loaded, ConfigError> {
        Loaded::load_with_settings(flags, env, need).map(|(loaded, _)| loaded)
    }

    /// As [`Loaded::load`], with the settings it was made from (their
    /// tests read them).
    pub(super) fn load_with_settings(
        flags: &Flags,
        env: &dyn Env,
        need: Requirement,
    ) -> Result<(Loaded, Config), ConfigError> {
        let mut layers = Layers::open(flags, env);
        let (mut settings, parts) = Config::gather(&mut layers, need);
        settings.warnings = std::mem::take(&mut layers.warnings);
        match assemble(need, &settings, parts, &mut layers) {
            Some(loaded) if layers.errors.is_empty() => Ok((loaded, settings)),
            _ => {
                if layers.errors.is_empty() {
                    // Each step that leaves a part out records why; this
                    // line only keeps a bug from exiting without a word.
                    layers.errors.push(
                        "the settings: a part this command requires was not read, and nothing said why; please report this"
                            .to_string(),
                    );
                }
                Err(ConfigError::new(layers.errors).unanswered_if(layers.unanswered))
            }
        }
    }

    /// What every command's process reads: logging, warnings, the CA file.
    pub fn process(&self) -> &ProcessConfig {
        match self {
            Loaded::Run(run) => &run.process,
            Loaded::Check(check) => &check.run.process,
            Loaded::Token(token) => &token.process,
            Loaded::Verifier(setup) => &setup.process,
            Loaded::Demo(demo) => &demo.process,
            Loaded::Healthcheck(health) => &health.process,
        }
    }
}

/// The command's configuration from what was read; `None` when something
/// it requires is missing, which the step that read it reported. Each
/// part is matched as present here once, rather than by every component
/// that uses it.
fn assemble(
    need: Requirement,
    settings: &Config,
    parts: Parts,
    layers: &mut Layers,
) -> Option<Loaded> {
    let Parts {
        upstream,
        wallet,
        tls,
        accounts,
        ..
    } = parts;
    let signing = |accounts: Option<AccountSet>, tls| {
        Some(Signing {
            accounts: accounts?,
            tls: tls?,
        })
    };
    Some(match need {
        Requirement::Demo => Loaded::Demo(Box::new(demo(need, settings, tls?))),
        Requirement::Upstream | Requirement::Verifier if settings.demo => {
            Loaded::Demo(Box::new(demo(need, settings, tls?)))
        }
        Requirement::AdminOnly => Loaded::Healthcheck(Box::new(HealthcheckConfig {
            process: settings.process_config(),
            admin: settings.admin_config(Defaults::Deployed),
        })),
        Requirement::Upstream | Requirement::Check => {
            let run = RunConfig {
                process: settings.process_config(),
                admin: settings.admin_config(Defaults::Deployed),
                proxy: settings.proxy_config(),
                upstream: upstream?,
                access: settings.access_config(),
                signing: signing(accounts, tls)?,
            };
            match need {
                Requirement::Check => Loaded::Check(Box::new(CheckConfig {
                    run,
                    provider: settings.oidc.clone(),
                    org_id: settings.org_id.clone(),
                    project_id: settings.project_id.clone(),
                    rule_id: settings.rule_id.clone(),
                })),
                _ => Loaded::Run(Box::new(run)),
            }
        }
        Requirement::NoUpstream => Loaded::Token(Box::new(TokenConfig {
            process: settings.process_config(),
            access: settings.access_config(),
            signing: signing(accounts, tls)?,
        })),
        Requirement::Verifier => {
            // `SA_CREDENTIALS_DIR` is refused for the verifier as it is
            // read, so its accounts are one.
            let Some(AccountSet::One(account)) = accounts else {
                return None;
            };
            let rule_path = rule_path(settings, &account, layers)?;
            Loaded::Verifier(Box::new(VerifierSetup {
                process: settings.process_config(),
                admin: settings.admin_config(Defaults::Deployed),
                verifier: settings.verifier_config(Defaults::Deployed),
                upstream: upstream?,
                rule_path,
                wallet: wallet?,
                access: settings.access_config(),
                account,
                tls: tls?,
            }))
        }
    })
}

/// The demo's: `lanyard demo` (or `run` with `DEMO_MOCK`) keeps to
/// loopback unless told, and `verifier` with `DEMO_MOCK` serves the
/// verifier alone, where `lanyard verifier` would.
fn demo(need: Requirement, settings: &Config, tls: rustls::ClientConfig) -> DemoConfig {
    let (defaults, proxy) = match need {
        Requirement::Verifier => (Defaults::Deployed, None),
        _ => (Defaults::Demo, Some(settings.proxy_config())),
    };
    DemoConfig {
        process: settings.process_config(),
        admin: settings.admin_config(defaults),
        proxy,
        verifier: settings.verifier_config(defaults),
        access: settings.access_config(),
        tls,
    }
}

/// The deployment's rule path, in `ORG_ID`'s organization or else the
/// account's.
fn rule_path(settings: &Config, account: &Account, layers: &mut Layers) -> Option<RulePath> {
    let (project, rule) = (settings.project_id.as_ref()?, settings.rule_id.as_ref()?);
    let path = RulePath::new(
        settings.org_id.as_deref(),
        account.organization_id(),
        project,
        rule,
    );
    // ORG_ID, PROJECT_ID and RULE_ID were checked as they were read, and
    // a bad one reported there; the credentials' own organization is
    // checked here, where it becomes a path segment.
    if settings.org_id.is_none()
        && let Some((Segment::Organization, why)) = path.problem()
    {
        layers.errors.push(format!(
            "{} (or the credentials file's organization_id): `{}` {why}; set {} to the organization of the rule path",
            ORGANIZATION_ID.env,
            path.organization(),
            ORG_ID.env
        ));
        return None;
    }
    Some(path)
}

/// The accounts, `SA_CREDENTIALS_FILE`'s and `SA_*`'s, and
/// `SA_CREDENTIALS_DIR`'s; `None` when a problem was recorded.
pub(super) fn accounts(settings: &mut Config, layers: &mut Layers<'_>) -> Option<AccountSet> {
    settings.credentials.key_timeout = settings.token_timeout;
    let Some(dir) = settings.credentials_dir.clone() else {
        return account::account(&settings.credentials, layers).map(AccountSet::One);
    };
    // Both are read whatever the other's outcome, so that every problem
    // shows in one run.
    let default = match &settings.credentials.file {
        Some(_) => Some(account::account(&settings.credentials, layers)),
        None => {
            super::accounts::refuse_overrides(&settings.credentials, layers);
            None
        }
    };
    let clashes_with = default
        .as_ref()
        .and_then(Option::as_ref)
        .zip(settings.credentials.file.as_ref())
        .map(|(account, file)| (account.organization_id(), file.value.as_path()));
    let dir = super::accounts::load(&dir, clashes_with, settings.token_timeout, layers);
    match (default, dir) {
        (Some(None), _) | (_, None) => None,
        (default, Some(dir)) => Some(AccountSet::Directory {
            default: default.flatten(),
            dir,
        }),
    }
}
