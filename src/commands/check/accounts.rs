//! `lanyard check` of `SA_CREDENTIALS_DIR`: every file, the organization
//! it serves, its key and a token with it, a few at a time (docs/accounts.md).

use std::sync::Arc;

use crate::access;
use crate::accounts::MAX_TOKEN_REQUESTS_IN_FLIGHT;
use crate::config::AccessConfig;
use crate::config::accounts::{AccountFile, AccountsDir};
use crate::outbound::Connector;
use crate::secret::Secret;
use crate::token::{Exchanger, SystemClock, TokenClient};

use super::{CheckReport, CheckStatus, check_token, prove_hsm_key};

/// Organizations named in the summary line at most.
const MAX_NAMED: usize = 20;

/// Checks every file of the directory, each line naming its file and
/// organization; the first token obtained, for the upstream's probe.
pub(super) async fn check_directory(
    config: &AccessConfig,
    dir: &AccountsDir,
    connector: &Connector,
    report: &mut CheckReport,
) -> Option<Secret> {
    let mut organizations: Vec<&str> = dir
        .files
        .iter()
        .map(|file| file.credentials.organization_id.as_str())
        .collect();
    organizations.sort_unstable();
    let named = organizations
        .iter()
        .take(MAX_NAMED)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    let more = organizations.len().saturating_sub(MAX_NAMED);
    report.push(
        CheckStatus::Ok,
        "accounts",
        format!(
            "SA_CREDENTIALS_DIR {}: {} account(s), serving organization(s) {named}{}",
            dir.dir.value.display(),
            dir.files.len(),
            match more {
                0 => String::new(),
                n => format!(" and {n} more"),
            }
        ),
    );
    let mut first = None;
    // One client for every file, as the sidecar's accounts share one.
    let client = Arc::new(TokenClient::new(
        access::exchange_options(config),
        connector.clone(),
        Arc::new(SystemClock),
    ));
    // A few at a time, as the sidecar itself asks the token endpoint.
    for chunk in dir.files.chunks(MAX_TOKEN_REQUESTS_IN_FLIGHT) {
        let mut checks = tokio::task::JoinSet::new();
        for (index, file) in chunk.iter().enumerate() {
            let (file, client) = (file.clone(), client.clone());
            checks.spawn(async move { (index, check_file(&file, client).await) });
        }
        let mut done: Vec<_> = checks.join_all().await;
        done.sort_by_key(|(index, _)| *index);
        for (_, (lines, token)) in done {
            report.lines.extend(lines.lines);
            first = first.or(token);
        }
    }
    first
}

/// One file: what it is, its key if in a token, and a token.
async fn check_file(file: &AccountFile, client: Arc<TokenClient>) -> (CheckReport, Option<Secret>) {
    let mut report = CheckReport::default();
    let creds = &file.credentials;
    report.push(
        CheckStatus::Ok,
        "account",
        format!(
            "{}: organization {}, client id {}, RSA {}-bit key",
            file.path.display(),
            creds.organization_id,
            creds.client_id,
            creds.key.bits()
        ),
    );
    if let Some((status, detail)) = prove_hsm_key(&creds.key, client.options().timeout).await {
        report.push(status, "key", detail);
    }
    let exchanger = Exchanger::sharing(creds.clone(), client);
    let token = check_token(&exchanger, creds, &mut report).await;
    (report, token)
}
