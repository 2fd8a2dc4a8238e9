//! Forced renewals: what the refresher answers when the upstream rejects
//! a token (docs/tokens.md "Renewal and retries"): one token request shared by
//! every request that saw the 401, spaced out while fresh tokens keep
//! being rejected, never while backing off or within a `Retry-After`, and
//! the held token kept whenever no new one can be had.

use std::time::Duration;

use lanyard::metrics::Metrics;
use lanyard::token::refresher::spawn;
use lanyard::token::{ExchangeError, RefreshPolicy, Unavailable};
use tokio::time::Instant;

use super::scripted::*;
use crate::support::*;

#[tokio::test(start_paused = true)]
async fn failed_forced_renewal_keeps_the_rejected_token_until_it_expires() {
    let source = Scripted::new(vec![token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let rejected = handle.current().unwrap();
    let err = handle.renew_after_rejection(&rejected).await.unwrap_err();
    assert_eq!(err, Unavailable::RenewalFailed(server_error()));
    // No new token can be had: the held one is still sent, at once and
    // without another token request, for the upstream to judge.
    let calls = source.call_count();
    assert_eq!(handle.get().await.unwrap().generation(), 1);
    assert_eq!(
        handle.renew_after_rejection(&rejected).await.unwrap_err(),
        Unavailable::Throttled
    );
    assert_eq!(source.call_count(), calls);
    // Until it is retired, 90 s after it was requested.
    tokio::time::sleep_until(rejected.expires_at()).await;
    assert_eq!(handle.get().await.unwrap_err(), Unavailable::NoToken);
}

#[tokio::test]
async fn concurrent_forced_renewals_share_one_token_request() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (handle, _task) = against_the_mock(&mock, dir.path());
    let rejected = handle.first_outcome().await.unwrap();
    assert_eq!(mock.counters().token_requests, 1);

    let mut callers = tokio::task::JoinSet::new();
    for _ in 0..32 {
        let handle = handle.clone();
        let rejected = rejected.clone();
        callers.spawn(async move { handle.renew_after_rejection(&rejected).await });
    }
    while let Some(result) = callers.join_next().await {
        assert_eq!(result.unwrap().unwrap().generation(), 2);
    }
    assert_eq!(mock.counters().token_requests, 2);
    // A request arriving after the 401 gets the new token, not the old one.
    assert_eq!(handle.get().await.unwrap().generation(), 2);
    assert_eq!(mock.counters().token_requests, 2);
}

#[tokio::test(start_paused = true)]
async fn forced_renewals_in_quick_succession_are_throttled() {
    let source = Scripted::new(vec![token(100), token(100), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let first = handle.current().unwrap();
    let second = handle.renew_after_rejection(&first).await.unwrap();
    assert_eq!(second.generation(), 2);

    // Rejected again at once: no new token request, and the request path
    // keeps the token so the upstream's answer reaches the client.
    let err = handle.renew_after_rejection(&second).await.unwrap_err();
    assert_eq!(err, Unavailable::Throttled);
    assert_eq!(handle.get().await.unwrap().generation(), 2);
    assert_eq!(source.call_count(), 2);

    tokio::time::sleep(RefreshPolicy::default().min_forced_interval).await;
    let third = handle.renew_after_rejection(&second).await.unwrap();
    assert_eq!(third.generation(), 3);
}

#[tokio::test(start_paused = true)]
async fn forced_renewals_back_off_exponentially_while_fresh_tokens_are_rejected() {
    let source = Scripted::new((0..12).map(|_| token(86_400)).collect());
    let policy = RefreshPolicy::default();
    let (handle, _task) = spawn(source.clone(), policy.clone(), Metrics::unregistered());
    wait_attempts(&handle, 1).await;

    // An upstream that rejects every token, with a request arriving every
    // second: each 401 asks for a renewal; only the backoff decides.
    let mut held = handle.current().unwrap();
    for _ in 0..5 {
        loop {
            match handle.renew_after_rejection(&held).await {
                Ok(fresh) => {
                    held = fresh;
                    break;
                }
                Err(Unavailable::Throttled) => tokio::time::sleep(Duration::from_secs(1)).await,
                Err(other) => panic!("unexpected {other:?}"),
            }
        }
    }
    let gaps: Vec<u64> = source.gaps()[1..].iter().map(|g| g.as_secs()).collect();
    assert_eq!(
        gaps,
        [5, 10, 20, 40],
        "forced renewals double their spacing"
    );

    // A token that then serves for a long while was not rejected for being
    // fresh: the next rejection is renewed at once, and the spacing starts
    // over from the minimum.
    tokio::time::sleep(policy.max_forced_interval * 2).await;
    held = handle.renew_after_rejection(&held).await.unwrap();
    assert_eq!(
        handle.renew_after_rejection(&held).await.unwrap_err(),
        Unavailable::Throttled
    );
    tokio::time::sleep(policy.min_forced_interval).await;
    handle.renew_after_rejection(&held).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn forced_renewal_is_declined_while_backing_off() {
    let source = Scripted::new(vec![token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    // Let the scheduled renewal fail, so the refresher is backing off.
    wait_attempts(&handle, 2).await;
    let held = handle.current().unwrap();
    let calls = source.call_count();
    assert_eq!(
        handle.renew_after_rejection(&held).await.unwrap_err(),
        Unavailable::Throttled
    );
    assert_eq!(source.call_count(), calls);
}

#[tokio::test(start_paused = true)]
async fn waiters_learn_when_the_refresher_stops() {
    let source = Scripted::new(vec![token(100)]);
    let (handle, task) = start(&source);
    wait_attempts(&handle, 1).await;
    let held = handle.current().unwrap();
    task.abort();
    let _ = task.await;
    assert_eq!(
        handle.renew_after_rejection(&held).await.unwrap_err(),
        Unavailable::Stopped
    );
}

#[tokio::test(start_paused = true)]
async fn a_rejection_during_a_scheduled_renewal_shares_it() {
    // The renewal at 70-85 s takes 20 s; a 401 at 86 s waits for it
    // rather than asking for a second token.
    let source = Scripted::slow(vec![token(100), token(100)], Duration::from_secs(20));
    let (handle, _task) = start(&source);
    let started = Instant::now();
    wait_attempts(&handle, 1).await;
    let first = handle.current().unwrap();
    tokio::time::sleep_until(started + Duration::from_secs(86)).await;
    assert_eq!(source.call_count(), 2);
    let fresh = handle.renew_after_rejection(&first).await.unwrap();
    assert_eq!(fresh.generation(), 2);
    assert_eq!(source.call_count(), 2);
    let renewal = source.calls.lock().unwrap()[1];
    assert_eq!(Instant::now(), renewal + Duration::from_secs(20));
}

#[tokio::test(start_paused = true)]
async fn a_rejection_too_soon_is_declined_at_once_while_a_renewal_runs() {
    let source = Scripted::new(vec![token(100), token(5), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let first = handle.current().unwrap();
    let forced_at = Instant::now();
    let second = handle.renew_after_rejection(&first).await.unwrap();
    // The 5 s token's renewal starts at 3.5-4.25 s and takes 10 s; the
    // next forced renewal may come 5 s after the last.
    *source.latency.lock().unwrap() = Duration::from_secs(10);
    tokio::time::sleep_until(forced_at + Duration::from_millis(4300)).await;
    assert_eq!(source.call_count(), 3);
    let asked = Instant::now();
    assert_eq!(
        handle.renew_after_rejection(&second).await.unwrap_err(),
        Unavailable::Throttled
    );
    assert_eq!(Instant::now(), asked, "declined without waiting");
    // Requests keep sending the held token, now known to be rejected.
    let held = handle.get().await.unwrap();
    assert_eq!(held.generation(), 2);
    assert!(held.is_rejected());
    assert_eq!(source.call_count(), 3);
}

#[tokio::test(start_paused = true)]
async fn a_rejection_of_a_replaced_token_gets_the_replacement_at_once() {
    let source = Scripted::new(vec![token(100), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let first = handle.current().unwrap();
    let second = handle.renew_after_rejection(&first).await.unwrap();
    let again = handle.renew_after_rejection(&first).await.unwrap();
    assert_eq!(again.generation(), second.generation());
    assert!(!again.is_rejected());
    assert_eq!(source.call_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_rejected_token_is_replaced_when_the_spacing_ends_without_another_request() {
    let source = Scripted::new(vec![token(100), token(100), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let first = handle.current().unwrap();
    let second = handle.renew_after_rejection(&first).await.unwrap();
    let forced_at = *source.calls.lock().unwrap().last().unwrap();
    assert_eq!(
        handle.renew_after_rejection(&second).await.unwrap_err(),
        Unavailable::Throttled
    );
    assert!(handle.current().unwrap().is_rejected());
    // No request asks again: apps that saw 401s may have stopped calling.
    wait_for(&mut handle.state(), Duration::from_secs(60), |s| {
        s.generation == 3
    })
    .await;
    let third = source.calls.lock().unwrap()[2];
    assert_eq!(
        third - forced_at,
        RefreshPolicy::default().min_forced_interval
    );
    assert!(!handle.current().unwrap().is_rejected());
}

#[tokio::test(start_paused = true)]
async fn new_credentials_do_not_let_a_rejection_force_a_renewal_within_a_retry_after() {
    let source = Scripted::new(vec![
        token(100),
        Err(ExchangeError::RateLimited {
            retry_after: Some(Duration::from_secs(45)),
        }),
        token(100),
    ]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let held = handle.current().unwrap();
    wait_attempts(&handle, 2).await;
    let refused_at = Instant::now();
    handle.renew_for_new_credentials();
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(
        handle.renew_after_rejection(&held).await.unwrap_err(),
        Unavailable::Throttled
    );
    assert_eq!(source.call_count(), 2);
    wait_attempts(&handle, 3).await;
    let retried = source.calls.lock().unwrap()[2];
    assert!(
        between(retried - refused_at, 45_000, 49_500),
        "{:?}",
        retried - refused_at
    );
}
