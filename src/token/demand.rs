//! An account kept on demand (docs/accounts.md): its first token is
//! fetched when a request first needs it, and once no request has used it
//! for [`IDLE_AFTER`] its renewals stop and the token lapses, so that a
//! directory of a thousand accounts costs the token endpoint only what
//! its traffic needs. A request to an idle account wakes it: it is served
//! the held token while that is valid, else waits for a new one, at most
//! `LANYARD_TOKEN_TIMEOUT`.
//!
//! The request path pays one clock read and one relaxed load for it: the
//! time of last use is kept to the second, and written only when the
//! second changed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// How long an account may go unused before its renewals stop: long
/// enough that an app calling every few minutes never waits for a token,
/// short enough that a thousand accounts of which a few are in use cost
/// a few renewals, not a thousand.
pub const IDLE_AFTER: Duration = Duration::from_secs(15 * 60);

/// What a request tells an on-demand account's refresher, and what the
/// refresher tells requests back.
#[derive(Debug)]
pub struct Demand {
    /// What `last_used` counts from.
    origin: Instant,
    /// Seconds from `origin` to the last use, plus one; 0: never used.
    last_used: AtomicU64,
    /// The refresher is not renewing: a use must wake it.
    dormant: AtomicBool,
    wake: Notify,
    /// How long a request waits for the first token of an account that
    /// holds none (`LANYARD_TOKEN_TIMEOUT`).
    pub(super) first_wait: Duration,
}

impl Demand {
    /// An account asleep until its first use.
    pub fn new(first_wait: Duration) -> Demand {
        Demand {
            origin: Instant::now(),
            last_used: AtomicU64::new(0),
            dormant: AtomicBool::new(true),
            wake: Notify::new(),
            first_wait,
        }
    }

    /// A request used the account (or wants a token for it).
    pub(super) fn used(&self) {
        let now = Instant::now()
            .saturating_duration_since(self.origin)
            .as_secs()
            + 1;
        // Sequentially consistent, with the refresher's two steps in
        // `falls_idle`: either this use sees the account dormant and wakes
        // it, or the refresher sees this use and stays awake.
        if self.last_used.load(Ordering::Relaxed) != now {
            self.last_used.store(now, Ordering::SeqCst);
        }
        if self.dormant.load(Ordering::SeqCst) {
            self.wake.notify_one();
        }
    }

    /// Whether no request has used the account for [`IDLE_AFTER`] at
    /// `now`.
    pub(super) fn is_idle(&self, now: Instant) -> bool {
        match self.last_used.load(Ordering::SeqCst) {
            0 => true,
            used => {
                let used = self.origin + Duration::from_secs(used - 1);
                now.saturating_duration_since(used) >= IDLE_AFTER
            }
        }
    }

    pub(super) fn set_dormant(&self, dormant: bool) {
        self.dormant.store(dormant, Ordering::SeqCst);
    }

    pub fn is_dormant(&self) -> bool {
        self.dormant.load(Ordering::SeqCst)
    }

    /// Completes once a request has used the dormant account.
    pub(super) async fn woken(&self) {
        self.wake.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn idle_until_used_and_again_once_unused_for_idle_after() {
        let demand = Demand::new(Duration::from_secs(5));
        assert!(demand.is_idle(Instant::now()));
        demand.used();
        assert!(!demand.is_idle(Instant::now()));
        tokio::time::advance(IDLE_AFTER - Duration::from_secs(2)).await;
        assert!(!demand.is_idle(Instant::now()));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(demand.is_idle(Instant::now()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_use_wakes_a_dormant_account_only() {
        let demand = Demand::new(Duration::from_secs(5));
        demand.used();
        // Woken: the use of a dormant account left a permit.
        tokio::time::timeout(Duration::from_secs(1), demand.woken())
            .await
            .unwrap();
        demand.set_dormant(false);
        demand.used();
        assert!(
            tokio::time::timeout(Duration::from_secs(1), demand.woken())
                .await
                .is_err()
        );
    }
}
