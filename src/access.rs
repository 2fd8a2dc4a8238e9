//! How lanyard reaches the service as its service account: the outbound
//! connector, the token exchanger, and what the credentials watcher
//! needs, built from validated settings for every command.

use std::sync::Arc;

use crate::config::credentials::Credentials;
use crate::config::{Config, ConfigError};
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
    /// From the credentials and TLS roots that [`Config::load`] read and
    /// checked; nothing is read again here.
    pub fn from_config(config: &Config) -> Result<ServiceAccess, ConfigError> {
        let (Some(account), Some(tls)) = (&config.account, &config.tls) else {
            return Err(ConfigError::loaded_for_another_command(
                "the service account's credentials",
                "every command that signs assertions",
            ));
        };
        let mut access =
            ServiceAccess::with_credentials(config, account.credentials(), tls.clone());
        if config.credentials.file.is_some() {
            access.watch = Some(reload::Watch {
                settings: config.credentials.clone(),
                loaded: account.loaded,
                organization_fixed: config.credentials_dir.is_some(),
            });
        }
        Ok(access)
    }

    /// As [`ServiceAccess::from_config`], with credentials and TLS already
    /// in hand (the demo's); nothing to watch.
    pub fn with_credentials(
        config: &Config,
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

/// How every account's token requests are made, from the settings.
pub fn exchange_options(config: &Config) -> ExchangeOptions {
    ExchangeOptions {
        assertion_ttl: config.assertion_ttl,
        clock_skew: config.clock_skew,
        rfc7523_fields: config.rfc7523_fields,
        timeout: config.token_timeout,
    }
}
