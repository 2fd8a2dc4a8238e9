//! `/readyz`'s report of `SA_CREDENTIALS_DIR`'s accounts (docs/accounts.md):
//! counts, and the accounts that are not ready. They never
//! make the pod unready: an account's failure (a revoked key, a missing
//! role) is the same on every replica, and taking replicas out of service
//! for it would turn one organization's problem into every
//! organization's outage. An idle account is not judged at all, and one
//! fetching its first token is starting, not failing, so the report
//! never flaps with the schedule.

use serde_json::json;
use tokio::time::Instant;

use crate::accounts::Routes;

use super::{AccountFacts, NotReady, readiness};

/// Not-ready accounts listed at most; the count says how many there are.
const MAX_LISTED: usize = 100;

/// The directory's accounts, as `/readyz` reports them.
pub(super) fn summary(routes: &Routes, now: Instant) -> serde_json::Value {
    let (mut total, mut idle, mut ready, mut starting) = (0, 0, 0, 0);
    let mut not_ready = Vec::new();
    for account in routes.directory() {
        total += 1;
        let tokens = account.tokens();
        if tokens.is_idle() {
            idle += 1;
            continue;
        }
        let read = AccountFacts::read(tokens, now, false);
        match readiness(&read.facts) {
            Ok(()) => ready += 1,
            // Fetching its first token, or its next after a lapse while
            // idle: starting, not failing.
            Err(NotReady::NoTokenYet | NotReady::Retired)
                if read.state.in_flight_since.is_some() || read.state.last_error.is_none() =>
            {
                starting += 1
            }
            Err(why) => not_ready.push((
                account.organization().to_string(),
                account.client_id(),
                why.reason(),
                read.state.last_error.as_ref().map(ToString::to_string),
            )),
        }
    }
    let count = not_ready.len();
    not_ready.sort();
    not_ready.truncate(MAX_LISTED);
    let listed: Vec<_> = not_ready
        .into_iter()
        .map(|(organization, client_id, reason, last_error)| {
            json!({
                "organization": organization,
                "client_id": client_id,
                "reason": reason,
                "last_error": last_error,
            })
        })
        .collect();
    json!({
        "total": total,
        "ready": ready,
        "idle": idle,
        "starting": starting,
        "not_ready": count,
        "not_ready_accounts": listed,
    })
}
