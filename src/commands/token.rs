//! `lanyard token`: one token on stdout, for scripts.

use std::sync::Arc;

use crate::Secret;
use crate::config::{ConfigError, TokenConfig};

use crate::Failure;
use crate::access::{self, ServiceAccess};
use crate::token::{Exchanger, SystemClock};

/// `lanyard token`: one token, for scripts: the default account's, or with
/// `organization`, that organization's account's (docs/accounts.md).
pub async fn token(config: &TokenConfig, organization: Option<&str>) -> Result<Secret, Failure> {
    let exchanger = exchanger(config, organization)?;
    exchanger
        .fetch()
        .await
        .map(|issued| {
            if issued.lifetime_assumed {
                tracing::warn!(
                    assumed_s = issued.lifetime.as_secs(),
                    "the token response has no expires_in; assuming the default lifetime"
                );
            }
            issued.access_token
        })
        .map_err(|err| Failure::Runtime(err.to_string()))
}

/// The exchanger of the account asked for: `organization`'s, the
/// default account when it is that organization's, else the directory's
/// file; without `organization`, the default account.
fn exchanger(
    config: &TokenConfig,
    organization: Option<&str>,
) -> Result<Arc<Exchanger>, ConfigError> {
    let TokenConfig { settings, signing } = config;
    let default = signing.accounts.default_account();
    let Some(organization) = organization else {
        return match default {
            Some(account) => Ok(ServiceAccess::new(settings, account, &signing.tls).exchanger),
            None => Err(ConfigError::new(vec![
                "SA_CREDENTIALS_DIR: holds an account per organization, and SA_CREDENTIALS_FILE is not set: say whose token with --organization ORG_ID".to_string(),
            ])),
        };
    };
    if let Some(account) = default.filter(|account| account.organization_id() == organization) {
        return Ok(ServiceAccess::new(settings, account, &signing.tls).exchanger);
    }
    let dir = signing.accounts.directory();
    let file = dir.and_then(|dir| {
        dir.files
            .iter()
            .find(|file| file.credentials.organization_id == organization)
    });
    let Some(file) = file else {
        let served = match dir {
            Some(_) => {
                "no file of SA_CREDENTIALS_DIR names it, and SA_CREDENTIALS_FILE's account is another organization's"
            }
            None => {
                "SA_CREDENTIALS_DIR is not set, and SA_CREDENTIALS_FILE's account is another organization's"
            }
        };
        return Err(ConfigError::new(vec![format!(
            "--organization {organization}: no account serves this organization: {served}"
        )]));
    };
    Ok(Arc::new(Exchanger::new(
        file.credentials.clone(),
        access::exchange_options(settings),
        crate::outbound::connector(signing.tls.clone()),
        Arc::new(SystemClock),
    )))
}
