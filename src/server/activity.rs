//! A connection's activity: whether it has sent a whole request, its
//! requests in flight (until each answer's body is sent), those of them
//! waiting for the client to take bytes, and since when none are in
//! flight. What the idle rule and eviction go by.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Whether a connection has sent a whole request yet, its requests in
/// flight (until each answer's body is sent), and since when there are
/// none: what the idle rule and eviction go by.
pub(super) struct Activity {
    epoch: Instant,
    started: AtomicBool,
    in_flight: AtomicUsize,
    /// Of those in flight, HTTP/2 streams waiting for their client to
    /// take bytes (`super::stall`): a connection whose every request is
    /// so counts as idle.
    stalled: AtomicUsize,
    idle_since_ms: AtomicU64,
    changed: Notify,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            epoch: Instant::now(),
            started: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            stalled: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
            changed: Notify::new(),
        }
    }

    /// A request has arrived; counted in flight, if `count`, until the
    /// guard is dropped.
    pub(super) fn enter(self: &Arc<Self>, count: bool) -> Option<ActivityGuard> {
        self.started.store(true, Ordering::Release);
        if !count {
            return None;
        }
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.changed.notify_one();
        }
        Some(ActivityGuard(self.clone()))
    }

    /// Whether a whole request has arrived on the connection.
    pub(super) fn started(&self) -> bool {
        self.started.load(Ordering::Acquire)
    }

    /// Since when no request has been in flight but for those waiting for
    /// their client; `None` while one is.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        if self.in_flight.load(Ordering::Acquire) > self.stalled.load(Ordering::Acquire) {
            return None;
        }
        Some(self.epoch + Duration::from_millis(self.idle_since_ms.load(Ordering::Acquire)))
    }

    /// One of the requests in flight now waits for its client to take
    /// bytes.
    pub(super) fn stall(&self) {
        let stalled = self.stalled.fetch_add(1, Ordering::AcqRel) + 1;
        if stalled >= self.in_flight.load(Ordering::Acquire) {
            self.mark_idle();
        }
    }

    /// A request counted by [`Activity::stall`] is moving again, or over.
    pub(super) fn unstall(&self) {
        let stalled = self.stalled.fetch_sub(1, Ordering::AcqRel) - 1;
        // Busy again, if this made the difference.
        if stalled + 1 == self.in_flight.load(Ordering::Acquire) {
            self.changed.notify_one();
        }
    }

    fn mark_idle(&self) {
        let now = self.epoch.elapsed().as_millis() as u64;
        self.idle_since_ms.store(now, Ordering::Release);
        self.changed.notify_one();
    }

    /// Completes once no request has been in flight for `limit`.
    pub(super) async fn idle_for(&self, limit: Duration) {
        loop {
            let Some(since) = self.idle_since() else {
                self.changed.notified().await;
                continue;
            };
            let until = since + limit;
            if Instant::now() >= until {
                return;
            }
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = self.changed.notified() => {}
            }
        }
    }
}

/// Marks one request in flight until dropped.
pub(super) struct ActivityGuard(Arc<Activity>);

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        let activity = &self.0;
        let now = activity.epoch.elapsed().as_millis() as u64;
        activity.idle_since_ms.store(now, Ordering::Release);
        // Idle once those left in flight are all stalled (none, usually).
        let left = activity.in_flight.fetch_sub(1, Ordering::AcqRel) - 1;
        if left <= activity.stalled.load(Ordering::Acquire) {
            activity.changed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_connection_whose_every_request_is_stalled_is_idle_and_the_idle_rule_sees_it() {
        let activity = Arc::new(Activity::new());
        let first = activity.enter(true);
        let second = activity.enter(true);
        activity.stall();
        assert_eq!(activity.idle_since(), None, "one request still moves");
        activity.stall();
        let since = activity.idle_since().expect("every request stalled");
        assert_eq!(since, Instant::now());
        activity.unstall();
        assert_eq!(activity.idle_since(), None, "moving again");
        // The one that moved ends; the stalled one left makes the
        // connection idle, and the idle rule's wait ends on that.
        let idle = activity.idle_for(Duration::from_secs(30));
        tokio::pin!(idle);
        assert!(futures_poll(idle.as_mut()).is_pending());
        drop(second);
        let ended = Instant::now();
        idle.await;
        assert_eq!(ended.elapsed(), Duration::from_secs(30));
        activity.unstall();
        drop(first);
        assert!(activity.idle_since().is_some());
    }

    /// Polls `future` once, with a waker that does nothing.
    fn futures_poll<F: std::future::Future>(
        future: std::pin::Pin<&mut F>,
    ) -> std::task::Poll<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        future.poll(&mut cx)
    }
}
