//! The accounts' token tasks, each stopped by the drain: the default
//! account's refresher and credentials watcher, the directory's accounts
//! with their refreshers and the directory's watcher, and the route table
//! they make (docs/accounts.md).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Notify, Semaphore, watch};

use crate::access::ServiceAccess;
use crate::accounts::{
    self, Account, AccountRules, Accounts, DirectoryReloads, MAX_TOKEN_REQUESTS_IN_FLIGHT,
};
use crate::config::accounts::AccountsDir;
use crate::metrics::Metrics;
use crate::outbound::Connector;
use crate::reload;
use crate::token::refresher::RefreshPolicy;
use crate::token::refresher::{self, Keeping};
use crate::token::{ExchangeOptions, SystemClock, TokenClient, TokenHandle};

use super::shutdown::until_drained;

/// What the token tasks give the rest of the process.
pub(super) struct TokenTasks {
    /// The default account's token, when there is one.
    pub(super) tokens: Option<TokenHandle>,
    pub(super) accounts: Accounts,
    /// Wake the watchers (SIGHUP).
    pub(super) check_credentials: Vec<Arc<Notify>>,
    /// What the credentials file's watcher has done.
    pub(super) reloads: Option<watch::Receiver<reload::Reloads>>,
    /// What the directory's watcher has done.
    pub(super) directory: Option<watch::Receiver<DirectoryReloads>>,
}

impl TokenTasks {
    pub(super) fn spawn(
        access: Option<&ServiceAccess>,
        directory: Option<AccountsDir>,
        rules: AccountRules,
        drain: &drain::Watch,
    ) -> TokenTasks {
        let mut tasks = TokenTasks {
            tokens: None,
            accounts: Accounts::new(None, false),
            check_credentials: Vec::new(),
            reloads: None,
            directory: None,
        };
        let default = access.map(|access| tasks.default_account(access, &rules, drain));
        tasks.accounts = Accounts::new(default, directory.is_some());
        if let Some(directory) = directory {
            tasks.directory_accounts(directory, rules, drain);
        }
        tasks
    }

    /// The default account's refresher, and its file's watcher when the
    /// credentials came from one.
    fn default_account(
        &mut self,
        access: &ServiceAccess,
        rules: &AccountRules,
        drain: &drain::Watch,
    ) -> Arc<Account> {
        // Kept as a single account is, and never queued behind the
        // directory's token requests: readiness rests on it.
        let keeping = Keeping::default();
        let (tokens, refresher) = refresher::spawn_kept(
            access.exchanger.clone(),
            rules.policy.clone(),
            rules.metrics.clone(),
            keeping,
        );
        until_drained(refresher, drain.clone());
        if let Some(watch) = access.watch.clone() {
            let check = Arc::new(Notify::new());
            let spawned = reload::spawn(
                watch,
                access.exchanger.clone(),
                tokens.clone(),
                rules.metrics.clone(),
                check.clone(),
            );
            if let Some((watcher, reloads)) = spawned {
                until_drained(watcher, drain.clone());
                self.check_credentials.push(check);
                self.reloads = Some(reloads);
            }
        }
        self.tokens = Some(tokens.clone());
        Arc::new(Account::default_account(
            access.exchanger.clone(),
            tokens,
            rules,
        ))
    }

    /// The directory's accounts as loaded at start-up, and its watcher.
    fn directory_accounts(
        &mut self,
        directory: AccountsDir,
        rules: AccountRules,
        drain: &drain::Watch,
    ) {
        let started: Vec<_> = directory
            .files
            .into_iter()
            .map(|file| {
                let loaded = file.fingerprint;
                (Arc::new(rules.directory_account(file)), loaded)
            })
            .collect();
        let check = Arc::new(Notify::new());
        let (watcher, reloads) = accounts::spawn_watcher(
            directory.dir,
            started,
            rules,
            self.accounts.clone(),
            check.clone(),
        );
        until_drained(watcher, drain.clone());
        self.check_credentials.push(check);
        self.directory = Some(reloads);
    }
}

/// The client every token request of the process goes through: the
/// default account's, when there is one, so that the directory's accounts
/// share its connections too (docs/accounts.md "Memory").
pub(super) fn token_client(
    access: Option<&ServiceAccess>,
    connector: Connector,
    exchange: ExchangeOptions,
) -> Arc<TokenClient> {
    match access {
        Some(access) => access.exchanger.client().clone(),
        None => Arc::new(TokenClient::new(exchange, connector, Arc::new(SystemClock))),
    }
}

/// What every account of the process is built with; `rejection_wait`
/// is the proxy's upstream timeout, when there is a proxy.
pub(super) fn rules(
    client: Arc<TokenClient>,
    policy: RefreshPolicy,
    rejection_wait: Option<Duration>,
    metrics: &Metrics,
) -> AccountRules {
    AccountRules {
        exchange: client.options().clone(),
        client,
        policy,
        rejection_wait: rejection_wait.unwrap_or(Duration::ZERO),
        metrics: metrics.clone(),
        // The cap on token requests in flight across the process's
        // accounts.
        permits: Arc::new(Semaphore::new(MAX_TOKEN_REQUESTS_IN_FLIGHT)),
    }
}
