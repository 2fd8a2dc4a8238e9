//! The refresher, through its public handle: renewal timing, backoff,
//! Retry-After, new credentials, the held token under failure, and (in
//! `refresher/forced.rs`) forced renewals after an upstream 401, and (in
//! `refresher/on_demand.rs`) an account kept on demand. Timing
//! runs on tokio's paused clock with a scripted token source; the rest
//! against the real mock. The rules themselves are tested one by one, with
//! no runtime, in `src/token/schedule/tests.rs`.

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
#[path = "refresher/forced.rs"]
mod forced;
#[path = "refresher/on_demand.rs"]
mod on_demand;
#[path = "refresher/scripted.rs"]
mod scripted;

use std::time::Duration;

use lanyard::metrics::Metrics;
use lanyard::mock::Fault;
use lanyard::token::refresher::spawn;
use lanyard::token::{ExchangeError, RefreshPolicy, Unavailable};
use scripted::*;
use support::*;
use tokio::time::Instant;

#[tokio::test(start_paused = true)]
async fn renewal_happens_at_a_jittered_fraction_of_the_lifetime() {
    let source = Scripted::new(vec![token(100), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 2).await;
    let gap = source.gaps()[0];
    assert!(between(gap, 70_000, 85_000), "renewed after {gap:?}");
    assert_eq!(handle.current().unwrap().generation(), 2);
}

#[tokio::test(start_paused = true)]
async fn refresh_failure_keeps_previous_token_and_retries_within_its_time_left() {
    let source = Scripted::new(vec![
        token(100),
        Err(server_error()),
        Err(server_error()),
        Err(server_error()),
        token(100),
    ]);
    let (handle, _task) = start(&source);
    // Two failures in, the retries have come within the held token's time
    // left: it still serves. (The third may come after its retirement.)
    wait_attempts(&handle, 3).await;
    let state = handle.state().borrow().clone();
    assert_eq!(state.consecutive_failures, 2);
    assert_eq!(state.last_error, Some(server_error()));
    let held = handle.current().expect("the first token is still valid");
    assert_eq!(held.generation(), 1);

    wait_attempts(&handle, 5).await;
    assert_eq!(handle.current().unwrap().generation(), 2);
    let gaps = source.gaps();
    // Equal jitter on a ceiling: the held token's time left (retired at
    // 90 s of its 100), or the doubling backoff (1 s, 2 s, 4 s) once that
    // is longer; so the retries come before the retirement, closer as it
    // nears (docs/tokens.md "Renewal and retries").
    let mut left = 90_000 - gaps[0].as_millis() as u64;
    for (n, gap) in gaps[1..4].iter().enumerate() {
        let ceiling = left.max(1000 << n);
        assert!(between(*gap, ceiling / 2, ceiling), "retry {n}: {gaps:?}");
        left = left.saturating_sub(gap.as_millis() as u64);
    }
}

#[tokio::test(start_paused = true)]
async fn backoff_is_capped_at_a_minute_while_a_token_is_held() {
    // A day-long token: its scheduled renewal fails, and the retries that
    // follow all happen while it is still held.
    let source = Scripted::new(vec![token(86_400)]);
    let (handle, _task) = start(&source);
    wait_for(&mut handle.state(), Duration::from_secs(2 * 86_400), |s| {
        s.attempts >= 13
    })
    .await;
    assert!(handle.current().is_some());
    let gaps = &source.gaps()[1..];
    assert!(
        gaps.iter().all(|g| *g <= Duration::from_secs(60)),
        "{gaps:?}"
    );
    assert!(gaps[10] >= Duration::from_secs(30), "{gaps:?}");
}

#[tokio::test(start_paused = true)]
async fn with_no_token_held_attempts_are_at_most_15_s_apart() {
    let source = Scripted::new(vec![]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 40).await;
    let calls = source.calls.lock().unwrap().clone();
    let start = calls[0];
    let after_a_minute: Vec<Duration> = calls
        .windows(2)
        .filter(|w| w[0] - start >= Duration::from_secs(60))
        .map(|w| w[1] - w[0])
        .collect();
    assert!(after_a_minute.len() > 10, "{after_a_minute:?}");
    assert!(
        after_a_minute.iter().all(|g| between(*g, 7_500, 15_000)),
        "{after_a_minute:?}"
    );
    // Jittered, so that a fleet that lost its tokens together does not
    // retry in the same second.
    assert!(
        after_a_minute.windows(2).any(|w| w[0] != w[1]),
        "{after_a_minute:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn once_the_held_token_is_retired_the_next_attempt_is_within_15_s() {
    // Renewal of the 100 s token at 70-85 s fails, and so does every retry;
    // the token is retired at 90 s (its 10 s margin).
    let source = Scripted::new(vec![token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    let retired = Instant::now() + Duration::from_secs(90);
    let mut state = handle.state();
    wait_for(&mut state, Duration::from_secs(3600), |_| {
        source
            .calls
            .lock()
            .unwrap()
            .last()
            .is_some_and(|at| *at > retired + Duration::from_secs(60))
    })
    .await;
    assert!(handle.current().is_none());
    let calls = source.calls.lock().unwrap().clone();
    let first_after = calls.iter().find(|at| **at >= retired).unwrap();
    assert!(
        *first_after - retired <= Duration::from_secs(15),
        "first attempt {:?} after retirement",
        *first_after - retired
    );
    for pair in calls.windows(2).filter(|w| w[0] >= retired) {
        assert!(pair[1] - pair[0] <= Duration::from_secs(15), "{calls:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_obeyed() {
    let source = Scripted::new(vec![
        Err(ExchangeError::RateLimited {
            retry_after: Some(Duration::from_secs(45)),
        }),
        token(100),
    ]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 2).await;
    let gap = source.gaps()[0];
    // Never sooner than asked; up to 10% later, so a fleet spreads out.
    assert!(between(gap, 45_000, 49_500), "retried after {gap:?}");
}

#[tokio::test(start_paused = true)]
async fn new_credentials_skip_the_backoff_but_not_a_retry_after() {
    let source = Scripted::new(vec![
        Err(ExchangeError::Rejected {
            status: 401,
            error: Some("invalid_client".into()),
            description: None,
        }),
        Err(ExchangeError::RateLimited {
            retry_after: Some(Duration::from_secs(45)),
        }),
        token(100),
    ]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    // Refused credentials wait 30 s; new ones are tried at once.
    handle.renew_for_new_credentials();
    wait_attempts(&handle, 2).await;
    assert_eq!(source.gaps()[0], Duration::ZERO);
    // After a 429, new credentials wait for its Retry-After (plus up to
    // 10% of jitter, so a fleet does not return in step).
    handle.renew_for_new_credentials();
    wait_attempts(&handle, 3).await;
    let gap = source.gaps()[1];
    assert!(between(gap, 45_000, 49_500), "retried after {gap:?}");
}

#[tokio::test(start_paused = true)]
async fn refused_credentials_are_not_retried_quickly_while_a_token_is_held() {
    let source = Scripted::new(vec![token(1000), refused(), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 3).await;
    assert!(
        source.gaps()[1] >= Duration::from_secs(30),
        "{:?}",
        source.gaps()
    );
}

#[tokio::test(start_paused = true)]
async fn with_no_token_refused_credentials_are_retried_within_15_s() {
    let source = Scripted::new(vec![refused(), token(100)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 2).await;
    assert!(
        between(source.gaps()[0], 7_500, 15_000),
        "{:?}",
        source.gaps()
    );
}

#[tokio::test(start_paused = true)]
async fn expired_token_is_not_handed_out_while_renewal_fails() {
    let source = Scripted::new(vec![token(10)]);
    let (handle, _task) = start(&source);
    wait_attempts(&handle, 1).await;
    assert!(handle.get().await.is_ok());
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert!(handle.current().is_none());
    assert_eq!(handle.get().await.unwrap_err(), Unavailable::NoToken);
}

#[tokio::test(start_paused = true)]
async fn a_token_is_retired_its_expiry_margin_before_it_expires() {
    let policy = RefreshPolicy::default();
    assert_eq!(policy.expiry_margin, Duration::from_secs(10));
    // The margin, or a tenth of a short lifetime.
    assert_eq!(
        policy.usable_lifetime(Duration::from_secs(300)),
        Duration::from_secs(290)
    );
    assert_eq!(
        policy.usable_lifetime(Duration::from_secs(20)),
        Duration::from_secs(18)
    );
    let source = Scripted::new(vec![token(300)]);
    let (handle, _task) = spawn(source, policy, Metrics::unregistered());
    wait_attempts(&handle, 1).await;
    let requested = Instant::now();
    let held = handle.current().unwrap();
    assert_eq!(held.expires_at(), requested + Duration::from_secs(290));
    tokio::time::sleep(Duration::from_millis(289_999)).await;
    assert!(handle.current().is_some());
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert!(handle.current().is_none());
}

#[tokio::test(start_paused = true)]
async fn metrics_count_outcomes_and_publish_expiry() {
    let metrics = Metrics::unregistered();
    let source = Scripted::new(vec![Err(server_error()), token(100)]);
    let (handle, _task) = spawn(source, RefreshPolicy::default(), metrics.clone());
    wait_attempts(&handle, 2).await;
    assert_eq!(
        metrics
            .token
            .requests
            .with_label_values(&["sa-test", "org-test", "server_error"])
            .get(),
        1
    );
    assert_eq!(
        metrics
            .token
            .requests
            .with_label_values(&["sa-test", "org-test", "success"])
            .get(),
        1
    );
    assert_eq!(
        metrics
            .token
            .duration
            .with_label_values(&["sa-test", "org-test"])
            .get_sample_count(),
        2
    );
    let expiry = handle
        .current()
        .unwrap()
        .expires_at_wall()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert_eq!(
        metrics
            .token
            .expiry
            .with_label_values(&["sa-test", "org-test"])
            .get(),
        expiry
    );
}

#[tokio::test]
async fn renewal_happens_before_expiry_against_the_mock() {
    let mock = mock().await;
    // Renewal comes after 2.8-3.4 s, leaving a margin for a loaded machine.
    mock.set_expires_in(Some(4));
    let dir = tempfile::tempdir().unwrap();
    let (handle, _task) = against_the_mock(&mock, dir.path());
    let first = handle.first_outcome().await.unwrap();
    wait_for(&mut handle.state(), Duration::from_secs(10), |s| {
        s.generation >= 2
    })
    .await;
    assert!(
        !first.is_expired(),
        "renewed only after the first token expired"
    );
    assert_eq!(handle.current().unwrap().generation(), 2);
}

#[tokio::test]
async fn retry_after_from_the_token_endpoint_is_obeyed() {
    let mock = mock().await;
    mock.push_fault(Fault::rate_limited(Some("1")));
    let dir = tempfile::tempdir().unwrap();
    let access = access(&settings(&mock, dir.path(), &[]));
    let policy = RefreshPolicy {
        backoff_initial: Duration::from_millis(10),
        ..RefreshPolicy::default()
    };
    let mut counters = mock.watch_counters();
    let (handle, _task) = spawn(access.exchanger, policy, Metrics::unregistered());
    wait_for(&mut counters, Duration::from_secs(5), |c| {
        c.token_requests >= 1
    })
    .await;
    let refused_at = Instant::now();
    wait_for(&mut counters, Duration::from_secs(5), |c| {
        c.token_requests >= 2
    })
    .await;
    assert!(
        refused_at.elapsed() >= Duration::from_millis(900),
        "{:?}",
        refused_at.elapsed()
    );
    wait_for(&mut handle.state(), Duration::from_secs(5), |s| {
        s.generation == 1
    })
    .await;
    assert!(handle.current().is_some());
}

#[tokio::test(start_paused = true)]
async fn new_credentials_during_a_token_request_are_tried_when_it_ends() {
    // Every answer is a 503 after 10 s: without the new credentials, the
    // next attempt would come 0.5-1 s after the first failure.
    let source = Scripted::slow(vec![], Duration::from_secs(10));
    let (handle, _task) = start(&source);
    tokio::time::sleep(Duration::from_secs(5)).await;
    handle.renew_for_new_credentials();
    wait_attempts(&handle, 1).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(source.call_count(), 2);
    assert_eq!(source.gaps()[0], Duration::from_secs(10));
}
