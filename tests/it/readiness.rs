//! `/readyz` across renewal cycles (docs/tokens.md "Token lifetime", "Admin
//! endpoints"): a renewal on schedule never makes the pod unready, however
//! short the tokens; a renewal off course does, once the held token has
//! less than 10 s to go before its retirement.
//!
//! The 20 s tokens run on the real clock against the embedded mock, over
//! real sockets, as a Kubernetes probe sees them. The 300 s and 40 s
//! tokens run the real refresher on tokio's paused clock with a scripted
//! token source, and ask `Admin::readyz` without a socket: a paused clock
//! would jump ahead whenever the test waited on one.

use crate::support;
use crate::support::DefaultTokens;

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use lanyard::Secret;
use lanyard::admin::Admin;
use lanyard::metrics::Metrics;
use lanyard::token::refresher::spawn;
use lanyard::token::{ExchangeError, Issued, RefreshPolicy, TokenSource};
use serde_json::Value;
use support::sidecar::{self, Running, get};
use support::*;
use tokio::time::Instant;

const FAILING: &str =
    "the token has less than 10 s left before it is retired, and its renewal is failing";
const OVERDUE: &str =
    "the token has less than 10 s left before it is retired, and its renewal is overdue";
const RETIRED: &str =
    "the token has been retired (its expiry margin reached) and could not be renewed";

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// A sidecar against the mock, which issues tokens for `expires_in` s.
async fn sidecar_with_tokens_of(expires_in: i64) -> Running {
    let mock = mock().await;
    mock.set_expires_in(Some(expires_in));
    let api = mock.api_url();
    let running = sidecar::start(mock, &api, &[]).await;
    running.ready().await;
    running
}

fn secs_left(body: &Value) -> u64 {
    body["token_expires_in_s"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token_expires_in_s: {body}"))
}

#[tokio::test]
async fn short_tokens_keep_the_pod_ready_through_three_renewals() {
    // Retired at 18 s (a tenth of the lifetime as margin), renewed at
    // 14-17 s: each token spends 6-9 s with less than 10 s to go.
    let running = sidecar_with_tokens_of(20).await;
    let readyz = format!("{}/readyz", running.admin);
    let state = running.process.default_tokens().state();
    let deadline = Instant::now() + secs(90);
    let (mut answers, mut close) = (0, 0);
    while state.borrow().generation < 4 {
        assert!(Instant::now() < deadline, "three renewals took too long");
        let answer = get(&readyz).await;
        let body = answer.json();
        assert_eq!(answer.status, StatusCode::OK, "{body}");
        assert_eq!(body["status"], "ready", "{body}");
        assert!(body["reason"].is_null(), "{body}");
        let renewal = &body["renewal"];
        assert_eq!(renewal["on_course"], true, "{body}");
        assert_eq!(renewal["failures_since_due"], 0, "{body}");
        assert!(renewal["in_flight"].is_boolean(), "{body}");
        assert!(renewal["due_in_s"].is_number(), "{body}");
        assert_eq!(body["consecutive_failures"], 0, "{body}");
        assert_eq!(body["upstream_rejected_token"], false, "{body}");
        if secs_left(&body) < 10 {
            close += 1;
        }
        answers += 1;
        tokio::time::sleep(ms(200)).await;
    }
    // Polled across the window that used to answer 503 in every cycle.
    assert!(close >= 3 * 10, "{close} of {answers} answers within 10 s");
    assert_eq!(running.mock.counters().token_requests, 4);
}

/// What `/readyz` answered, and the refresher's failures since the
/// renewal fell due just before and just after.
struct Poll {
    status: StatusCode,
    body: Value,
    failed_before: u32,
    failed_after: u32,
}

/// `/readyz` at the first poll that saw a renewal fail: not ready, the
/// renewal failing and overdue, the error named.
fn assert_first_failure(body: &Value) {
    // The first failure comes 1-4 s before the retirement.
    assert_eq!(body["reason"], FAILING, "{body}");
    assert!(secs_left(body) < 4, "{body}");
    let renewal = &body["renewal"];
    assert_eq!(renewal["state"], "failing", "{body}");
    assert_eq!(renewal["on_course"], false, "{body}");
    assert!(
        renewal["failures_since_due"].as_u64().unwrap() >= 1,
        "{body}"
    );
    assert!(renewal["due_in_s"].as_f64().unwrap() <= 0.0, "{body}");
    assert!(
        body["consecutive_failures"].as_u64().unwrap() >= 1,
        "{body}"
    );
    assert_eq!(
        body["last_error"], "the token endpoint failed: HTTP 503",
        "{body}"
    );
    assert!(
        renewal["next_attempt_in_s"].is_number() || renewal["in_flight"] == true,
        "{body}"
    );
}

#[tokio::test]
async fn short_tokens_turn_unready_at_the_first_failed_renewal() {
    let running = sidecar_with_tokens_of(20).await;
    running.mock.set_token_outage(true);
    let readyz = format!("{}/readyz", running.admin);
    let state = running.process.default_tokens().state();
    let failures = || state.borrow().failures_since_due;
    let deadline = Instant::now() + secs(30);
    let mut polls = Vec::new();
    // Until the token has been retired for a second.
    while polls
        .iter()
        .filter(|p: &&Poll| p.body["reason"] == RETIRED)
        .count()
        < 10
    {
        assert!(Instant::now() < deadline, "the token was never retired");
        let failed_before = failures();
        let answer = get(&readyz).await;
        polls.push(Poll {
            status: answer.status,
            body: answer.json(),
            failed_before,
            failed_after: failures(),
        });
        tokio::time::sleep(ms(100)).await;
    }

    for poll in &polls {
        let body = &poll.body;
        if poll.failed_after == 0 {
            // No renewal had failed: ready, however close the retirement.
            assert_eq!(poll.status, StatusCode::OK, "{body}");
        } else if poll.failed_before > 0 {
            assert_eq!(poll.status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
            assert_eq!(body["status"], "not_ready", "{body}");
            assert!(
                body["reason"] == FAILING || body["reason"] == RETIRED,
                "{body}"
            );
        }
    }
    let first = polls
        .iter()
        .find(|p| p.failed_before > 0)
        .expect("a renewal failed");
    assert_first_failure(&first.body);

    // The endpoint comes back: retries are at most 15 s apart with no
    // token held, and the first success makes the pod ready again.
    running.mock.set_token_outage(false);
    wait_for(
        &mut running.process.default_tokens().state(),
        secs(20),
        |s| s.generation >= 2,
    )
    .await;
    let answer = get(&readyz).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json());
    assert_eq!(answer.json()["renewal"]["failures_since_due"], 0);
}

/// Answers from a script, then with `failure` forever.
struct Scripted {
    script: Mutex<VecDeque<Result<Issued, ExchangeError>>>,
}

impl Scripted {
    fn new(script: Vec<Result<Issued, ExchangeError>>) -> Arc<Scripted> {
        Arc::new(Scripted {
            script: Mutex::new(script.into()),
        })
    }
}

impl TokenSource for Scripted {
    fn labels(&self) -> lanyard::metrics::AccountLabels {
        lanyard::metrics::AccountLabels::new("sa-test", "org-test")
    }

    async fn fetch(&self) -> Result<Issued, ExchangeError> {
        self.script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Err(server_error(None)))
    }
}

fn token(seconds: u64) -> Result<Issued, ExchangeError> {
    Ok(Issued {
        access_token: Secret::new(format!("tok-{seconds}")),
        lifetime: secs(seconds),
        lifetime_assumed: false,
    })
}

fn server_error(retry_after: Option<Duration>) -> ExchangeError {
    ExchangeError::Server {
        status: 503,
        retry_after,
    }
}

/// The admin endpoints over the real refresher, fed by `source`.
fn admin_over(source: &Arc<Scripted>) -> (Admin, lanyard::token::TokenHandle) {
    let (tokens, _task) = spawn(
        source.clone(),
        RefreshPolicy::default(),
        Metrics::unregistered(),
    );
    let admin = Admin::new(
        lanyard::accounts::Accounts::of_tokens(tokens.clone()),
        prometheus::Registry::new(),
        Arc::new(AtomicBool::new(false)),
    );
    (admin, tokens)
}

/// `/readyz` every `step` from `start` until `end`: when, and what.
async fn probe(
    admin: &Admin,
    start: Instant,
    end: Duration,
    step: Duration,
) -> Vec<(Duration, StatusCode, Value)> {
    let mut answers = Vec::new();
    while start.elapsed() < end {
        // Sleeping, not advancing: the refresher's timers fire in order.
        tokio::time::sleep(step).await;
        let (status, body) = admin.readyz();
        answers.push((start.elapsed(), status, body));
    }
    answers
}

#[tokio::test(start_paused = true)]
async fn a_300_s_token_whose_renewal_fails_turns_unready_10_s_before_retirement() {
    let start = Instant::now();
    let source = Scripted::new(vec![token(300)]);
    let (admin, _tokens) = admin_over(&source);
    let step = ms(250);
    let answers = probe(&admin, start, secs(295), step).await;

    // Retired at 290 s; its renewal, due at 210-255 s, fails from then on.
    let retirement = secs(290);
    for (at, status, body) in &answers {
        if *at <= retirement - secs(10) {
            assert_eq!(*status, StatusCode::OK, "at {at:?}: {body}");
        } else if *at < retirement {
            assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE, "at {at:?}");
            assert_eq!(body["reason"], FAILING, "at {at:?}: {body}");
        } else {
            assert_eq!(body["reason"], RETIRED, "at {at:?}: {body}");
        }
    }
    // Failing for 25-70 s before that, and ready all along: the token
    // still had time.
    let failing_but_ready = answers
        .iter()
        .filter(|(_, status, body)| {
            *status == StatusCode::OK && body["renewal"]["state"] == "failing"
        })
        .count();
    let failing_for = step * u32::try_from(failing_but_ready).unwrap();
    assert!(
        failing_for >= secs(20),
        "failing and ready for {failing_for:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_held_back_past_its_due_time_is_overdue() {
    // A 40 s token is retired at 36 s and renewed at 28-34 s. A forced
    // renewal at 5 s fails with `Retry-After: 60`: nothing may be sent
    // before 65 s, so the renewal cannot come in time.
    let start = Instant::now();
    let source = Scripted::new(vec![token(40), Err(server_error(Some(secs(60))))]);
    let (admin, tokens) = admin_over(&source);
    tokio::time::sleep(secs(5)).await;
    let held = tokens.current().expect("the first token");
    assert!(tokens.renew_after_rejection(&held).await.is_err());

    let step = ms(100);
    let answers = probe(&admin, start, secs(38), step).await;
    let due = tokens.state().borrow().renewal_due_at.unwrap() - start;
    assert!((secs(28)..=secs(34)).contains(&due), "due at {due:?}");
    let overdue_from = due + lanyard::admin::OVERDUE_AFTER;
    for (at, status, body) in &answers {
        if *at <= overdue_from {
            // The earlier failure does not count: it came before the
            // renewal fell due, and the token had time.
            assert_eq!(*status, StatusCode::OK, "at {at:?}: {body}");
            assert_eq!(body["consecutive_failures"], 1, "{body}");
        } else if *at < secs(36) {
            assert_eq!(*status, StatusCode::SERVICE_UNAVAILABLE, "at {at:?}");
            assert_eq!(body["reason"], OVERDUE, "at {at:?}: {body}");
            assert_eq!(body["renewal"]["state"], "overdue", "{body}");
            assert_eq!(body["renewal"]["in_flight"], false, "{body}");
            let next = body["renewal"]["next_attempt_in_s"].as_f64().unwrap();
            assert!(next > 25.0, "{body}");
        } else {
            assert_eq!(body["reason"], RETIRED, "at {at:?}: {body}");
        }
    }
    assert!(
        answers.iter().any(|(_, _, body)| body["reason"] == OVERDUE),
        "never overdue"
    );
}
