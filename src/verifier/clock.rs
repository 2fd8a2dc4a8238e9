//! The clock the page's API reads: tokio's, as every timing rule here is
//! (docs/verifier.md). The verifier serves from a runtime of its own, on
//! its own thread, which a test's `tokio::time::pause()` does not reach;
//! with the `test-support` feature a test may put this clock ahead
//! instead, so that a step of a login happens "later" without waiting.

#[cfg(feature = "test-support")]
use std::sync::Arc;
#[cfg(feature = "test-support")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "test-support")]
use std::time::Duration;

use tokio::time::Instant;

/// The verifier's clock. Cheap to clone; clones share the lead.
#[derive(Clone, Debug, Default)]
pub struct Clock {
    /// How far ahead of tokio's clock this one is, in milliseconds.
    #[cfg(feature = "test-support")]
    lead: Arc<AtomicU64>,
}

impl Clock {
    /// Now, on this clock.
    pub fn now(&self) -> Instant {
        #[cfg(feature = "test-support")]
        return Instant::now() + Duration::from_millis(self.lead.load(Ordering::Relaxed));
        #[cfg(not(feature = "test-support"))]
        Instant::now()
    }

    /// Puts the clock `by` ahead, for every clone.
    #[cfg(feature = "test-support")]
    pub fn advance(&self, by: Duration) {
        let millis = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.lead.fetch_add(millis, Ordering::Relaxed);
    }
}

#[cfg(all(test, feature = "test-support"))]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_advanced_clock_is_ahead_for_every_clone() {
        let clock = Clock::default();
        let clone = clock.clone();
        let before = clone.now();
        clock.advance(Duration::from_secs(30));
        assert_eq!(clone.now() - before, Duration::from_secs(30));
    }
}

/// Now, in whole seconds of the wall clock, which replicas share.
pub(super) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}
