//! The service accounts the mock knows and the tokens it issued them: the
//! token endpoint issues, the API checks, and both move the counters tests
//! await.

use std::collections::HashMap;
use std::sync::MutexGuard;
use std::time::SystemTime;

use tokio::sync::watch;

use super::table::Table;

/// A service account known to the mock.
#[derive(Debug, Clone)]
pub struct MockAccount {
    pub client_id: String,
    pub organization_id: String,
    /// DER `RSAPublicKey` (PKCS#1) that verifies the account's assertions.
    pub public_key_der: Vec<u8>,
    /// Role identifiers, e.g. `verifications.api`.
    pub roles: Vec<String>,
    /// Projects whose group the account belongs to.
    pub projects: Vec<String>,
}

/// An access token the mock issued.
#[derive(Debug, Clone)]
pub(super) struct IssuedToken {
    pub client_id: String,
    pub expires_at: SystemTime,
}

/// Counters tests can await instead of sleeping.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MockCounters {
    /// Requests that reached the token endpoint, faults included.
    pub token_requests: u64,
    /// Tokens issued.
    pub tokens_issued: u64,
    /// Token requests refused with an OAuth error (a bad assertion, an
    /// unknown account); injected faults and outages are not refusals.
    pub token_refusals: u64,
    /// Requests that reached the API (under `/api`), counted before
    /// authentication, so refused ones count too.
    pub api_requests: u64,
}

/// The accounts by client id, and the tokens issued to them.
#[derive(Debug, Default)]
pub(super) struct Registry {
    pub accounts: HashMap<String, MockAccount>,
    pub tokens: HashMap<String, IssuedToken>,
}

/// The registry and the counters, as the token endpoint and the API share
/// them.
#[derive(Debug)]
pub(super) struct Accounts {
    registry: Table<Registry>,
    counters: watch::Sender<MockCounters>,
}

impl Accounts {
    pub(super) fn new() -> Accounts {
        Accounts {
            registry: Table::default(),
            counters: watch::Sender::new(MockCounters::default()),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock()
    }

    /// Moves the counters; every watcher sees the change.
    pub(super) fn count(&self, change: impl FnOnce(&mut MockCounters)) {
        self.counters.send_modify(change);
    }

    #[cfg(feature = "test-support")]
    pub(super) fn counters(&self) -> MockCounters {
        *self.counters.borrow()
    }

    #[cfg(feature = "test-support")]
    pub(super) fn watch_counters(&self) -> watch::Receiver<MockCounters> {
        self.counters.subscribe()
    }
}
