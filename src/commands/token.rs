//! `lanyard token`: one token on stdout, for scripts.

use crate::Secret;
use crate::config::Config;

use crate::Failure;
use crate::access::ServiceAccess;

/// `lanyard token`: one token, for scripts.
pub async fn token(config: &Config) -> Result<Secret, Failure> {
    let access = ServiceAccess::from_config(config)?;
    access
        .exchanger
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
