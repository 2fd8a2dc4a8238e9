//! The service accounts a sidecar serves, at run time (docs/accounts.md):
//! `SA_CREDENTIALS_FILE`'s, the default, for paths that name
//! no organization; and with `SA_CREDENTIALS_DIR`, one per file, each for
//! the paths of its organization. Each has its own exchanger, token,
//! refresher and 401 rule. The route table, from organization to account,
//! is built whole and swapped whole ([`Accounts`]): a request loads it
//! once, lock-free, and the directory's watcher publishes a new one when a
//! file is added, changed or removed.
//!
//! - this file: [`Account`], the route table and its rule.
//! - `organization`: which organization a path names, read as strictly as
//!   an upstream might read it loosely.
//! - `watch`: the directory's watcher.

pub mod organization;
mod watch;

#[cfg(test)]
mod tests;

pub use watch::{DirectoryReloads, spawn as spawn_watcher};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use organization::Route;
use tokio::sync::Semaphore;
use tokio::task::AbortHandle;

use crate::config::accounts::{AccountFile, AccountsDir};
use crate::metrics::Metrics;
use crate::token::refresher::{self, Keeping};
use crate::token::{
    Demand, ExchangeOptions, Exchanger, RefreshPolicy, RejectionRule, TokenClient, TokenHandle,
    WhenNoNewToken,
};

/// Token requests in flight at once across every account of the process:
/// a directory of a thousand accounts whose tokens all fall due together
/// (a restart, the token endpoint back after an outage) asks a few at a
/// time, each within `LANYARD_TOKEN_TIMEOUT`, rather than all at once.
pub const MAX_TOKEN_REQUESTS_IN_FLIGHT: usize = 8;

/// One service account at run time.
pub struct Account {
    organization: Box<str>,
    /// `None` only for an account made of a token alone
    /// ([`Accounts::of_tokens`]).
    exchanger: Option<Arc<Exchanger>>,
    tokens: TokenHandle,
    /// The proxy's 401 rule over this account's token.
    rejections: RejectionRule,
    /// The directory's file it came from; `None` for the default account.
    file: Option<PathBuf>,
    /// Stops this account's refresher once no one holds the account: a
    /// removed file's refresher ends when its last request does.
    _refresher: Option<AbortOnDrop>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("organization", &self.organization)
            .field("file", &self.file)
            .finish()
    }
}

struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Account {
    /// The default account: its refresher and watcher are the process's
    /// (`process::TokenTasks`).
    pub fn default_account(
        exchanger: Arc<Exchanger>,
        tokens: TokenHandle,
        rules: &AccountRules,
    ) -> Account {
        let organization = exchanger.credentials().organization_id.clone().into();
        Account {
            organization,
            rejections: rules.rejection_rule(tokens.clone()),
            exchanger: Some(exchanger),
            tokens,
            file: None,
            _refresher: None,
        }
    }

    /// The organization whose paths it serves.
    pub fn organization(&self) -> &str {
        &self.organization
    }

    pub fn client_id(&self) -> String {
        self.exchanger
            .as_ref()
            .map(|exchanger| exchanger.credentials().client_id.clone())
            .unwrap_or_default()
    }

    pub fn tokens(&self) -> &TokenHandle {
        &self.tokens
    }

    pub fn rejections(&self) -> &RejectionRule {
        &self.rejections
    }

    pub fn exchanger(&self) -> Option<&Arc<Exchanger>> {
        self.exchanger.as_ref()
    }

    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

/// What every account is built with.
#[derive(Clone)]
pub struct AccountRules {
    /// What every account's token requests go through, the default
    /// account's included: one connection pool and one TLS configuration
    /// however many accounts there are.
    pub client: Arc<TokenClient>,
    /// The client's settings.
    pub exchange: ExchangeOptions,
    pub policy: RefreshPolicy,
    /// How long a request waits for the shared renewal after a 401: the
    /// proxy's upstream timeout.
    pub rejection_wait: Duration,
    pub metrics: Metrics,
    /// The cap on token requests in flight, shared by every account.
    pub permits: Arc<Semaphore>,
}

impl AccountRules {
    fn rejection_rule(&self, tokens: TokenHandle) -> RejectionRule {
        RejectionRule::new(
            tokens,
            self.rejection_wait,
            self.metrics.upstream_unauthorized_retries.clone(),
            WhenNoNewToken::PassThe401On,
        )
    }

    /// An account of the directory, its refresher started, kept on
    /// demand.
    pub fn directory_account(&self, file: AccountFile) -> Account {
        let organization = file.credentials.organization_id.clone().into();
        let exchanger = Arc::new(Exchanger::sharing(file.credentials, self.client.clone()));
        let keeping = Keeping {
            demand: Some(Arc::new(Demand::new(self.exchange.timeout))),
            permits: Some(self.permits.clone()),
        };
        let (tokens, task) = refresher::spawn_kept(
            exchanger.clone(),
            self.policy.clone(),
            self.metrics.clone(),
            keeping,
        );
        Account {
            organization,
            rejections: self.rejection_rule(tokens.clone()),
            exchanger: Some(exchanger),
            tokens,
            file: Some(file.path),
            _refresher: Some(AbortOnDrop(task.abort_handle())),
        }
    }
}

/// Why a path gets no account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoAccount {
    /// The path names an organization no account serves.
    ForOrganization(String),
    /// The path names no organization, and there is no default account.
    ForPath,
    /// The path's organization cannot be read plainly, or an upstream
    /// could read one lanyard does not; why, and the segment as a message
    /// shows it.
    Unreadable(&'static str, Option<Box<str>>),
}

/// The route table: built whole, never changed in place.
#[derive(Debug, Default)]
pub struct Routes {
    by_organization: HashMap<Box<str>, Arc<Account>>,
    default: Option<Arc<Account>>,
    /// Paths are routed by their organization: `SA_CREDENTIALS_DIR` is set.
    /// Without it, every path is the default account's, as it always was.
    by_path: bool,
}

impl Routes {
    /// The account for a request's path (after the base URL's prefix).
    pub fn pick(&self, path: &str) -> Result<&Arc<Account>, NoAccount> {
        if !self.by_path {
            // The base URL's prefix is a boundary whatever the routing
            // (docs/proxy.md); plain dot-segments were refused before.
            if let Some(unreadable) = organization::hidden_dot_segment(path) {
                return Err(NoAccount::Unreadable(
                    unreadable.why,
                    unreadable.shown_segment(),
                ));
            }
            return self.default.as_ref().ok_or(NoAccount::ForPath);
        }
        match organization::route(path) {
            Route::Organization(id) => self
                .by_organization
                .get(id)
                .ok_or_else(|| NoAccount::ForOrganization(id.to_string())),
            Route::NoOrganization => self.default.as_ref().ok_or(NoAccount::ForPath),
            Route::Refused(unreadable) => Err(NoAccount::Unreadable(
                unreadable.why,
                unreadable.shown_segment(),
            )),
        }
    }

    pub fn default_account(&self) -> Option<&Arc<Account>> {
        self.default.as_ref()
    }

    /// The directory's accounts, in no order.
    pub fn directory(&self) -> impl Iterator<Item = &Arc<Account>> {
        let default = self.default.as_ref();
        self.by_organization
            .values()
            .filter(move |account| !default.is_some_and(|d| Arc::ptr_eq(d, account)))
    }

    pub fn by_path(&self) -> bool {
        self.by_path
    }

    fn with(
        default: Option<Arc<Account>>,
        directory: impl Iterator<Item = Arc<Account>>,
        by_path: bool,
    ) -> Routes {
        let mut by_organization: HashMap<Box<str>, Arc<Account>> = directory
            .map(|account| (account.organization.clone(), account))
            .collect();
        if let Some(default) = &default {
            // The directory never holds the default's organization: the
            // loader and the watcher refuse a file that would.
            by_organization
                .entry(default.organization.clone())
                .or_insert_with(|| default.clone());
        }
        Routes {
            by_organization,
            default,
            by_path,
        }
    }
}

/// The route table every proxy thread reads, and the watcher replaces.
#[derive(Clone)]
pub struct Accounts {
    routes: Arc<ArcSwap<Routes>>,
}

impl std::fmt::Debug for Accounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Accounts")
            .field("routes", &self.routes.load())
            .finish()
    }
}

impl Accounts {
    /// The default account alone; with `by_path`, routed by organization,
    /// the default account serving its own organization's paths too.
    pub fn new(default: Option<Arc<Account>>, by_path: bool) -> Accounts {
        let routes = Routes::with(default, std::iter::empty(), by_path);
        Accounts {
            routes: Arc::new(ArcSwap::from_pointee(routes)),
        }
    }

    /// One default account of a token alone, whatever its source: for
    /// tests of what reads the table (readiness).
    #[cfg(feature = "test-support")]
    pub fn of_tokens(tokens: TokenHandle) -> Accounts {
        let retries = prometheus::IntCounter::new("retries", "unregistered")
            .unwrap_or_else(|_| unreachable!("a valid name"));
        let account = Account {
            organization: Box::from(""),
            exchanger: None,
            rejections: RejectionRule::new(
                tokens.clone(),
                Duration::ZERO,
                retries,
                WhenNoNewToken::PassThe401On,
            ),
            tokens,
            file: None,
            _refresher: None,
        };
        Accounts::new(Some(Arc::new(account)), false)
    }

    /// The table now: one lock-free load.
    pub fn load(&self) -> arc_swap::Guard<Arc<Routes>> {
        self.routes.load()
    }

    /// Publishes the directory's accounts as they now are.
    fn publish(&self, directory: impl Iterator<Item = Arc<Account>>) {
        let now = self.routes.load();
        let routes = Routes::with(now.default.clone(), directory, now.by_path);
        self.routes.store(Arc::new(routes));
    }
}

/// The directory's accounts at start-up: every file already checked by
/// the loader.
pub fn start_directory(dir: AccountsDir, rules: &AccountRules) -> Vec<Arc<Account>> {
    dir.files
        .into_iter()
        .map(|file| Arc::new(rules.directory_account(file)))
        .collect()
}
