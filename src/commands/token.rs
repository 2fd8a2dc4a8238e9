//! `lanyard token`: one token on stdout, for scripts.

use std::sync::Arc;

use crate::config::credentials::Credentials;
use crate::config::{Account, AccountSet, ConfigError, TokenConfig};
use crate::secret::Secret;

use crate::access::ServiceAccess;
use crate::failure::Failure;
use crate::token::Exchanger;

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
    let TokenConfig {
        access, signing, ..
    } = config;
    let credentials = match organization {
        None => signing
            .accounts
            .default_account()
            .map(Account::credentials)
            .ok_or_else(|| {
                ConfigError::new(vec![
                    "SA_CREDENTIALS_DIR: holds an account per organization, and SA_CREDENTIALS_FILE is not set: say whose token with --organization ORG_ID".to_string(),
                ])
            })?,
        Some(organization) => credentials_of(&signing.accounts, organization)?,
    };
    Ok(ServiceAccess::with_credentials(access, credentials, signing.tls.clone()).exchanger)
}

/// The credentials of the account that serves `organization`.
fn credentials_of(accounts: &AccountSet, organization: &str) -> Result<Credentials, ConfigError> {
    let default = accounts.default_account();
    if let Some(account) = default.filter(|account| account.organization_id() == organization) {
        return Ok(account.credentials());
    }
    let dir = accounts.directory();
    let file = dir.and_then(|dir| {
        dir.files
            .iter()
            .find(|file| file.credentials.organization_id == organization)
    });
    if let Some(file) = file {
        return Ok(file.credentials.clone());
    }
    let served = match (dir, default) {
        (Some(_), Some(_)) => {
            "no file of SA_CREDENTIALS_DIR names it, and SA_CREDENTIALS_FILE's account is another organization's"
        }
        (Some(_), None) => "no file of SA_CREDENTIALS_DIR names it",
        (None, _) => {
            "SA_CREDENTIALS_DIR is not set, and SA_CREDENTIALS_FILE's account is another organization's"
        }
    };
    Err(ConfigError::new(vec![format!(
        "--organization {organization}: no account serves this organization: {served}"
    )]))
}
