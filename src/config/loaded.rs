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
use super::problems::ConfigError;
use super::settings::{ORG_ID, ORGANIZATION_ID};
use super::sources::{Env, Flags, Layers, Sourced};
use super::values::WalletBaseUrl;
use super::rule_path::{RulePath, Segment};
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

/// `lanyard run`'s, and `lanyard check`'s.
#[derive(Debug, Clone)]
pub struct RunConfig {
    pub settings: Config,
    /// `SERVICE_API_URL`.
    pub upstream: TargetUrl,
    pub signing: Signing,
}

/// `lanyard token`'s.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    pub settings: Config,
    pub signing: Signing,
}

/// `lanyard verifier`'s: one account, whose organization the rule path
/// names unless `ORG_ID` does.
#[derive(Debug, Clone)]
pub struct VerifierSetup {
    pub settings: Config,
    /// `SERVICE_API_URL`.
    pub upstream: TargetUrl,
    pub account: Account,
    pub tls: rustls::ClientConfig,
    /// `PROJECT_ID` and `RULE_ID` of `ORG_ID` or the account's
    /// organization, each segment checked.
    pub rule_path: RulePath,
    /// `WALLET_BASE_URL`.
    pub wallet: WalletBaseUrl,
}

/// `lanyard demo`'s, and `run`'s or `verifier`'s with `DEMO_MOCK`: the
/// demo makes its own account and service, and reaches them with these
/// roots.
#[derive(Debug, Clone)]
pub struct DemoConfig {
    pub settings: Config,
    pub tls: rustls::ClientConfig,
}

/// The settings, loaded for one command.
#[derive(Debug, Clone)]
pub enum Loaded {
    Run(Box<RunConfig>),
    Check(Box<RunConfig>),
    Token(Box<TokenConfig>),
    Verifier(Box<VerifierSetup>),
    /// `lanyard demo`, or `run` or `verifier` with `DEMO_MOCK`.
    Demo(Box<DemoConfig>),
    Healthcheck(Box<Config>),
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
        let mut layers = Layers::open(flags, env);
        let (mut settings, parts) = Config::gather(&mut layers, need);
        settings.warnings = std::mem::take(&mut layers.warnings);
        match assemble(need, settings, parts, &mut layers) {
            Some(loaded) if layers.errors.is_empty() => Ok(loaded),
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

    /// The settings every command reads.
    pub fn settings(&self) -> &Config {
        match self {
            Loaded::Run(run) | Loaded::Check(run) => &run.settings,
            Loaded::Token(token) => &token.settings,
            Loaded::Verifier(setup) => &setup.settings,
            Loaded::Demo(demo) => &demo.settings,
            Loaded::Healthcheck(settings) => settings,
        }
    }

    pub fn into_settings(self) -> Config {
        match self {
            Loaded::Run(run) | Loaded::Check(run) => run.settings,
            Loaded::Token(token) => token.settings,
            Loaded::Verifier(setup) => setup.settings,
            Loaded::Demo(demo) => demo.settings,
            Loaded::Healthcheck(settings) => *settings,
        }
    }
}

/// The command's configuration from what was read; `None` when something
/// it requires is missing, which the step that read it reported. Each
/// part is matched as present here once, rather than by every component
/// that uses it.
fn assemble(
    need: Requirement,
    settings: Config,
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
    Some(match need {
        Requirement::Demo => Loaded::Demo(Box::new(DemoConfig {
            tls: tls?,
            settings,
        })),
        Requirement::Upstream | Requirement::Verifier if settings.demo => {
            Loaded::Demo(Box::new(DemoConfig {
                tls: tls?,
                settings,
            }))
        }
        Requirement::AdminOnly => Loaded::Healthcheck(Box::new(settings)),
        Requirement::Upstream | Requirement::Check => {
            let run = Box::new(RunConfig {
                upstream: upstream?,
                signing: Signing {
                    accounts: accounts?,
                    tls: tls?,
                },
                settings,
            });
            match need {
                Requirement::Check => Loaded::Check(run),
                _ => Loaded::Run(run),
            }
        }
        Requirement::NoUpstream => Loaded::Token(Box::new(TokenConfig {
            signing: Signing {
                accounts: accounts?,
                tls: tls?,
            },
            settings,
        })),
        Requirement::Verifier => {
            // `SA_CREDENTIALS_DIR` is refused for the verifier as it is
            // read, so its accounts are one.
            let Some(AccountSet::One(account)) = accounts else {
                return None;
            };
            let rule_path = rule_path(&settings, &account, layers)?;
            Loaded::Verifier(Box::new(VerifierSetup {
                upstream: upstream?,
                tls: tls?,
                wallet: wallet?,
                rule_path,
                account,
                settings,
            }))
        }
    })
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
