//! The refresher's part in keeping an account on demand
//! ([`super::super::demand`]): asleep until a request needs a token, and
//! asleep again once no request has used it for `IDLE_AFTER`.

use std::sync::Arc;

use super::super::demand::Demand;
use super::{Refresher, TokenSource, now};

/// Completes when a request uses the account, if it is waiting for one;
/// else never.
pub(super) async fn woken(demand: Option<Arc<Demand>>) {
    match demand {
        Some(demand) => demand.woken().await,
        None => std::future::pending().await,
    }
}

impl Refresher {
    /// At a renewal or retry that fell due: an on-demand account no
    /// request has used for `IDLE_AFTER` stops renewing, and its token
    /// lapses. True when it did.
    pub(super) fn falls_idle(&mut self) -> bool {
        let Some(demand) = &self.demand else {
            return false;
        };
        if !demand.is_idle(now()) {
            return false;
        }
        demand.set_dormant(true);
        // A use between the look and the flag found the account awake and
        // woke nothing: it is looked at once more.
        if !demand.is_idle(now()) {
            demand.set_dormant(false);
            return false;
        }
        self.dormant = true;
        self.series.hide_expiry();
        tracing::info!(
            client_id = %self.series.labels().client_id,
            organization = %self.series.labels().organization,
            "no request has used this account lately: its token is no longer renewed, and the next request fetches one"
        );
        true
    }

    /// A request used the dormant account: its renewal, or its first
    /// token, is due now.
    pub(super) fn wake_up(&mut self) {
        if let Some(demand) = &self.demand {
            demand.set_dormant(false);
        }
        self.dormant = false;
        self.next_attempt = self.next_attempt.min(now());
    }

    /// The series to count with are those of the client and organization
    /// the credentials now name: a reload may have changed the account.
    pub(super) fn label_for<S: TokenSource>(&mut self, source: &S) {
        let labels = source.labels();
        if &labels != self.series.labels() {
            self.series = self.metrics.token.account(labels, self.demand.is_some());
        }
    }
}
