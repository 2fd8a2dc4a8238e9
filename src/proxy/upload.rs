//! How far a streamed request body has gone upstream, so that the upstream
//! timeout counts the upstream's time only (docs/proxy.md, "Limits").
//!
//! `LANYARD_UPSTREAM_TIMEOUT` bounds the time to the response's headers.
//! Most upstreams answer once they have the whole body, so a large upload
//! on a slow link would take longer than the timeout to arrive, and be
//! answered 504 `upstream_timeout`, blaming a service that was waiting on
//! the client. So while a body streams, the timeout runs from the last
//! moment the upstream took its bytes: the client's pauses are bounded by
//! `LANYARD_BODY_TIMEOUT` instead, and an upstream that stops taking the
//! body still meets its timeout.

use std::pin::pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;
use tokio::time::error::Elapsed;

/// Shared by a streamed body, which reports, and the request waiting for
/// its answer, which reads.
#[derive(Clone)]
pub(super) struct UploadProgress(Arc<Progress>);

struct Progress {
    /// What `taken` counts from.
    origin: Instant,
    /// When the upstream's side last asked for more of the body (or saw
    /// its end), in nanoseconds after `origin`.
    taken: AtomicU64,
    /// The upstream's side asked for more and the client has not sent it
    /// yet: the client's time, not the upstream's.
    waiting_on_client: AtomicBool,
}

impl UploadProgress {
    pub(super) fn new() -> Self {
        UploadProgress(Arc::new(Progress {
            origin: Instant::now(),
            taken: AtomicU64::new(0),
            waiting_on_client: AtomicBool::new(false),
        }))
    }

    /// The upstream's side asks for the next bytes: those before them are
    /// taken.
    pub(super) fn asked(&self) {
        let since = self.0.origin.elapsed().as_nanos();
        self.0
            .taken
            .store(u64::try_from(since).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Whether the body now waits on the client for its next bytes.
    pub(super) fn waiting_on_client(&self, waiting: bool) {
        self.0.waiting_on_client.store(waiting, Ordering::Relaxed);
    }

    /// When the upstream's time runs out, `timeout` after it last took the
    /// body's bytes; while the body waits on its client, `timeout` from
    /// `now`.
    pub(super) fn deadline(&self, timeout: Duration, now: Instant) -> Instant {
        if self.0.waiting_on_client.load(Ordering::Relaxed) {
            return now + timeout;
        }
        let taken = Duration::from_nanos(self.0.taken.load(Ordering::Relaxed));
        self.0.origin + taken + timeout
    }
}

/// `sending`'s outcome, waited for until `timeout` passes with the
/// upstream taking none of the body or, the body sent, no answer; the
/// first wait ends at `deadline`.
pub(super) async fn answer_within<F: Future>(
    mut deadline: Instant,
    timeout: Duration,
    upload: &UploadProgress,
    sending: F,
) -> Result<F::Output, Elapsed> {
    let mut sending = pin!(sending);
    loop {
        match tokio::time::timeout_at(deadline, &mut sending).await {
            Err(elapsed) => {
                let now = Instant::now();
                match upload.deadline(timeout, now) {
                    later if later > now => deadline = later,
                    _ => return Err(elapsed),
                }
            }
            answered => return answered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(30);

    #[tokio::test(start_paused = true)]
    async fn the_deadline_follows_the_bytes_the_upstream_takes() {
        let progress = UploadProgress::new();
        let start = Instant::now();
        assert_eq!(progress.deadline(TIMEOUT, start), start + TIMEOUT);
        tokio::time::advance(Duration::from_secs(20)).await;
        progress.asked();
        assert_eq!(
            progress.deadline(TIMEOUT, Instant::now()),
            start + Duration::from_secs(50)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_waiting_on_its_client_spends_none_of_the_upstreams_time() {
        let progress = UploadProgress::new();
        progress.asked();
        progress.waiting_on_client(true);
        tokio::time::advance(Duration::from_secs(45)).await;
        let now = Instant::now();
        assert_eq!(progress.deadline(TIMEOUT, now), now + TIMEOUT);
        // The client's bytes arrive and the upstream stops taking them.
        progress.waiting_on_client(false);
        progress.asked();
        assert_eq!(progress.deadline(TIMEOUT, now), now + TIMEOUT);
        tokio::time::advance(TIMEOUT).await;
        assert_eq!(progress.deadline(TIMEOUT, Instant::now()), now + TIMEOUT);
    }
}
