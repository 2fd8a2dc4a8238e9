//! `lanyard token`: one token on stdout, for scripts.

use std::sync::Arc;

use crate::Secret;
use crate::config::{Config, ConfigError};

use crate::Failure;
use crate::access::{self, ServiceAccess};
use crate::token::{Exchanger, SystemClock};

/// `lanyard token`: one token, for scripts: the default account's, or with
/// `organization`, that organization's account's (docs/accounts.md).
pub async fn token(config: &Config, organization: Option<&str>) -> Result<Secret, Failure> {
    let exchanger = match (organization, &config.account) {
        (Some(organization), _) => account_of(config, organization)?,
        (None, Some(_)) => ServiceAccess::from_config(config)?.exchanger,
        (None, None) => {
            return Err(ConfigError::new(vec![
                "SA_CREDENTIALS_DIR: holds an account per organization, and SA_CREDENTIALS_FILE is not set: say whose token with --organization ORG_ID".to_string(),
            ])
            .into());
        }
    };
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

/// The exchanger of the account that serves `organization`: the default
/// account when it is that organization's, else the directory's file.
fn account_of(config: &Config, organization: &str) -> Result<Arc<Exchanger>, Failure> {
    if let Some(account) = &config.account
        && account.organization_id() == organization
    {
        return Ok(ServiceAccess::from_config(config)?.exchanger);
    }
    let file = config.accounts.as_ref().and_then(|dir| {
        dir.files
            .iter()
            .find(|file| file.credentials.organization_id == organization)
    });
    let (Some(file), Some(tls)) = (file, &config.tls) else {
        let served = match &config.accounts {
            Some(_) => {
                "no file of SA_CREDENTIALS_DIR names it, and SA_CREDENTIALS_FILE's account is another organization's"
            }
            None => {
                "SA_CREDENTIALS_DIR is not set, and SA_CREDENTIALS_FILE's account is another organization's"
            }
        };
        return Err(ConfigError::new(vec![format!(
            "--organization {organization}: no account serves this organization: {served}"
        )])
        .into());
    };
    Ok(Arc::new(Exchanger::new(
        file.credentials.clone(),
        access::exchange_options(config),
        crate::outbound::connector(tls.clone()),
        Arc::new(SystemClock),
    )))
}
