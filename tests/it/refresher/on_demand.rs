//! An account kept on demand (docs/accounts.md), on tokio's paused
//! clock: no token until a request needs one, renewals while it is used,
//! none once it has gone unused for `IDLE_AFTER`, and woken again by the
//! next request; and the process-wide cap on token requests in flight.

use std::sync::Arc;
use std::time::Duration;

use lanyard::metrics::Metrics;
use lanyard::token::demand::IDLE_AFTER;
use lanyard::token::refresher::{Keeping, spawn_kept};
use lanyard::token::{Demand, RefreshPolicy, TokenHandle, Unavailable};
use tokio::sync::Semaphore;

use super::scripted::*;

const FIRST_WAIT: Duration = Duration::from_secs(10);

fn on_demand(source: &Arc<Scripted>, permits: Option<Arc<Semaphore>>) -> TokenHandle {
    let keeping = Keeping {
        demand: Some(Arc::new(Demand::new(FIRST_WAIT))),
        permits,
    };
    let (tokens, _task) = spawn_kept(
        source.clone(),
        RefreshPolicy::default(),
        Metrics::unregistered(),
        keeping,
    );
    tokens
}

#[tokio::test(start_paused = true)]
async fn no_token_is_asked_for_until_a_request_needs_one() {
    let source = Scripted::new(vec![token(3600)]);
    let tokens = on_demand(&source, None);
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(source.call_count(), 0, "an unused account asks for nothing");
    assert!(tokens.is_idle());
    assert!(tokens.state().borrow().idle);
    let token = tokens
        .get()
        .await
        .expect("the first request waits for a token");
    assert_eq!(token.generation(), 1);
    assert_eq!(source.call_count(), 1);
    assert!(!tokens.is_idle());
}

#[tokio::test(start_paused = true)]
async fn a_first_token_that_does_not_come_fails_the_request_within_the_wait() {
    let source = Scripted::slow(vec![token(3600)], FIRST_WAIT * 3);
    let tokens = on_demand(&source, None);
    let started = tokio::time::Instant::now();
    assert_eq!(tokens.get().await.unwrap_err(), Unavailable::NoToken);
    assert_eq!(started.elapsed(), FIRST_WAIT);
}

#[tokio::test(start_paused = true)]
async fn a_first_token_request_that_fails_is_reported_to_the_request() {
    let source = Scripted::new(vec![Err(server_error())]);
    let tokens = on_demand(&source, None);
    assert!(matches!(
        tokens.get().await,
        Err(Unavailable::RenewalFailed(_))
    ));
}

#[tokio::test(start_paused = true)]
async fn an_account_in_use_is_renewed_and_one_unused_for_idle_after_is_not() {
    // Tokens of 10 minutes, renewed at 70-85% of their lifetime.
    let source = Scripted::new((0..12).map(|_| token(600)).collect());
    let tokens = on_demand(&source, None);
    tokens.get().await.unwrap();
    // Used every minute for 20 minutes: renewed as a kept token is.
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_secs(60)).await;
        tokens
            .get()
            .await
            .expect("a used account always has a token");
    }
    let renewed = source.call_count();
    assert!(renewed >= 3, "renewed while in use: {renewed} requests");
    // Then unused: at most the renewals that fall due within IDLE_AFTER.
    tokio::time::sleep(IDLE_AFTER + Duration::from_secs(600)).await;
    let after_idle = source.call_count();
    assert!(tokens.is_idle(), "idle once unused for IDLE_AFTER");
    tokio::time::sleep(Duration::from_secs(6 * 3600)).await;
    assert_eq!(
        source.call_count(),
        after_idle,
        "an idle account asks for no token"
    );
    assert!(tokens.current().is_none(), "its token has lapsed");
    // The next request wakes it and waits for a new token.
    let token = tokens.get().await.expect("woken by a request");
    assert_eq!(source.call_count(), after_idle + 1);
    assert!(token.generation() as usize == after_idle + 1);
    assert!(!tokens.is_idle());
}

#[tokio::test(start_paused = true)]
async fn a_request_to_a_dormant_account_with_a_valid_token_is_served_at_once_and_wakes_it() {
    // A token of 6 hours outlives IDLE_AFTER: the account goes dormant at
    // its renewal (~4.5 h) only if unused since.
    let source = Scripted::new(vec![token(6 * 3600), token(6 * 3600)]);
    let tokens = on_demand(&source, None);
    tokens.get().await.unwrap();
    tokio::time::sleep(Duration::from_secs(5 * 3600 + 600)).await;
    assert!(tokens.is_idle(), "dormant at the renewal it skipped");
    assert_eq!(source.call_count(), 1);
    let held = tokens.get().await.expect("the held token is still valid");
    assert_eq!(held.generation(), 1, "served the held token, not a new one");
    // Woken, it renews at once: the renewal was due.
    let mut state = tokens.state();
    crate::support::wait_for(&mut state, Duration::from_secs(60), |s| s.generation >= 2).await;
    assert_eq!(source.call_count(), 2);
}

#[tokio::test(start_paused = true)]
async fn the_cap_bounds_token_requests_in_flight_across_accounts() {
    let permits = Arc::new(Semaphore::new(2));
    let sources: Vec<_> = (0..6)
        .map(|_| Scripted::slow(vec![token(3600)], Duration::from_secs(1)))
        .collect();
    let accounts: Vec<_> = sources
        .iter()
        .map(|source| on_demand(source, Some(permits.clone())))
        .collect();
    let started = tokio::time::Instant::now();
    let requests: Vec<_> = accounts
        .iter()
        .cloned()
        .map(|tokens| tokio::spawn(async move { tokens.get().await }))
        .collect();
    for request in requests {
        request
            .await
            .unwrap()
            .expect("every account gets its token");
    }
    // Six requests of 1 s, two at a time: 3 s, not 1 s.
    assert_eq!(started.elapsed(), Duration::from_secs(3));
    let mut calls: Vec<_> = sources
        .iter()
        .flat_map(|s| s.calls.lock().unwrap().clone())
        .collect();
    calls.sort();
    for window in calls.windows(3) {
        assert!(
            window[2] - window[0] >= Duration::from_secs(1),
            "never three in flight at once: {calls:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_request_is_not_held_while_the_account_waits_out_a_retry_after() {
    let rate_limited = lanyard::token::ExchangeError::RateLimited {
        retry_after: Some(Duration::from_secs(60)),
    };
    let source = Scripted::new(vec![Err(rate_limited), token(3600)]);
    let tokens = on_demand(&source, None);
    assert!(matches!(
        tokens.get().await,
        Err(Unavailable::RenewalFailed(_))
    ));
    // The next attempt is a minute off, past the 10 s a request may wait:
    // told at once, not after 10 s of nothing.
    let asked = tokio::time::Instant::now();
    assert!(matches!(
        tokens.get().await,
        Err(Unavailable::RenewalFailed(_))
    ));
    assert_eq!(asked.elapsed(), Duration::ZERO);
    assert_eq!(source.call_count(), 1);
    // Once the minute has passed, a request gets the token.
    tokio::time::sleep(Duration::from_secs(61)).await;
    tokens
        .get()
        .await
        .expect("the retry after a minute brings a token");
}
