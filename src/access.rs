//! How lanyard reaches the service as its service account: the outbound
//! connector, the token exchanger, and what the credentials watcher
//! needs, built from the accounts' configuration for every command.

use std::sync::Arc;

use crate::config::credentials::Credentials;
use crate::config::{AccessConfig, Account, Signing};
use crate::outbound::{self, Connector};
use crate::reload;
use crate::token::{ExchangeOptions, Exchanger, SystemClock};

/// The connector and the exchanger for one service account.
pub struct ServiceAccess {
    pub connector: Connector,
    pub exchanger: Arc<Exchanger>,
    /// Set when the credentials came from a file the sidecar should watch.
    pub watch: Option<reload::Watch>,
}

impl ServiceAccess {
    /// The default account's, from the credentials and TLS roots that
    /// [`Loaded::load`](crate::config::Loaded::load) read and checked;
    /// nothing is read again here. Its credentials file, when it has one,
    /// is watched.
    pub fn new(
        config: &AccessConfig,
        account: &Account,
        tls: &rustls::ClientConfig,
    ) -> ServiceAccess {
        let mut access =
            ServiceAccess::with_credentials(config, account.credentials(), tls.clone());
        if config.credentials.file.is_some() {
            access.watch = Some(reload::Watch {
                settings: config.credentials.clone(),
                loaded: account.loaded,
                organization_fixed: config.organization_fixed,
            });
        }
        access
    }

    /// The default account's, when `signing` has one: with only
    /// `SA_CREDENTIALS_DIR`, there is none.
    pub fn of_default(config: &AccessConfig, signing: &Signing) -> Option<ServiceAccess> {
        let account = signing.accounts.default_account()?;
        Some(ServiceAccess::new(config, account, &signing.tls))
    }

    /// As [`ServiceAccess::new`], with credentials and TLS already
    /// in hand (the demo's); nothing to watch.
    pub fn with_credentials(
        config: &AccessConfig,
        credentials: Credentials,
        tls: rustls::ClientConfig,
    ) -> ServiceAccess {
        let connector = outbound::connector(tls);
        let exchanger = Arc::new(Exchanger::new(
            credentials,
            exchange_options(config),
            connector.clone(),
            Arc::new(SystemClock),
        ));
        ServiceAccess {
            connector,
            exchanger,
            watch: None,
        }
    }
}

/// How every account's token requests are made.
pub fn exchange_options(config: &AccessConfig) -> ExchangeOptions {
    ExchangeOptions {
        assertion_ttl: config.assertion_ttl,
        clock_skew: config.clock_skew,
        rfc7523_fields: config.rfc7523_fields,
        timeout: config.token_timeout,
    }
}
