//! From validated settings to the pieces every command and the sidecar
//! share: the outbound connector, the token exchanger, and what the
//! credentials watcher needs.

use std::sync::Arc;

use crate::config::credentials::Credentials;
use crate::config::{Config, ConfigError};
use crate::outbound::{self, Connector};
use crate::reload;
use crate::token::{ExchangeOptions, Exchanger, SystemClock};

/// Credentials, TLS and an exchanger, built from the settings.
pub struct Wiring {
    pub connector: Connector,
    pub exchanger: Arc<Exchanger>,
    /// Set when the credentials came from a file the sidecar should watch.
    pub watch: Option<reload::Watch>,
}

/// Builds the outbound HTTP stack from the credentials and TLS roots that
/// [`Config::load`] read and checked; nothing is read again here.
pub fn wire(config: &Config) -> Result<Wiring, ConfigError> {
    let (Some(account), Some(tls)) = (&config.account, &config.tls) else {
        return Err(ConfigError::new(vec![
            "no credentials: these settings were loaded for a command that signs no assertion"
                .into(),
        ]));
    };
    let mut wiring = wire_with(config, account.credentials(), tls.clone());
    if config.credentials.file.is_some() {
        wiring.watch = Some(reload::Watch {
            settings: config.credentials.clone(),
            loaded: account.loaded,
        });
    }
    Ok(wiring)
}

/// As [`wire`], with credentials and TLS already in hand; nothing to
/// watch.
pub fn wire_with(config: &Config, credentials: Credentials, tls: rustls::ClientConfig) -> Wiring {
    let connector = outbound::connector(tls);
    let options = ExchangeOptions {
        assertion_ttl: config.assertion_ttl,
        clock_skew: config.clock_skew,
        rfc7523_fields: config.rfc7523_fields,
        timeout: config.token_timeout,
    };
    let exchanger = Arc::new(Exchanger::new(
        credentials,
        options,
        connector.clone(),
        Arc::new(SystemClock),
    ));
    Wiring {
        connector,
        exchanger,
        watch: None,
    }
}
