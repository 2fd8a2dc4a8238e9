//! The sidecar against each way the token endpoint can fail, end to end
//! over real sockets. For every fault: the held token keeps serving
//! proxied requests; `/readyz` and `/metrics` say what happened; retries
//! are bounded; and with no token ever obtained, clients get docs/proxy.md "Errors made by lanyard itself"'s
//! `token_unavailable` and `/readyz` names the failure.
//!
//! The sidecar runs the default `RefreshPolicy` (it takes no other), so
//! the clock here is real: retries 0.5-1 s after a first transient failure,
//! 1-2 s after a second, never sooner than 30 s after a rejection, no
//! sooner than a `Retry-After`, forced renewals no sooner than 5 s apart
//! (and further apart while fresh tokens keep being rejected). A
//! scheduled renewal of the mock's 120 s token would come after 84 s, so
//! the renewal tests ask for one the way a rotated credentials file does
//! (the file changes, SIGHUP): the refresher requests a token at once,
//! through the same request, classify and retry path, while a token valid
//! for two more minutes is held. One test goes through the schedule itself.
//! Malformed answers and odd `expires_in` are in `token_faults/answers.rs`,
//! renewals meeting rejections in `token_faults/renewals.rs`.

use crate::support;
use crate::support::DefaultTokens;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod answers;
mod renewals;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::StatusCode;
use lanyard::mock::{Fault, MockService};
use lanyard::token::RefreshState;
use support::logs::Logs;
use support::sidecar::{self, Answer, Running, get};
use support::upstream::TestUpstream;
use support::*;
use tokio::sync::watch;
use tokio::time::Instant;

/// Faults queued when every token request should meet one: more than any
/// test lets the sidecar make.
const QUEUED: usize = 20;
/// A bound on waits for things that take a second or two, generous for a
/// loaded 2-core machine.
const LIMIT: Duration = Duration::from_secs(20);
const EXPIRY: &str = "lanyard_token_expiry_timestamp_seconds";
const RULE: &str = "7d1e0c4b-2a9f-4b8e-9c3d-5f6a7b8c9d0e";
/// A timeout short enough to run into quickly.
const SHORT_TIMEOUT: &[(&str, &str)] = &[("LANYARD_TOKEN_TIMEOUT", "1s")];

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// What goes wrong at the token endpoint.
#[derive(Clone)]
enum Trouble {
    /// Every token request meets this fault.
    Fault(Fault),
    /// Tokens come with this `expires_in`.
    ExpiresIn(i64),
    /// Nothing listens at the token endpoint.
    Gone,
}

/// A fault and how the sidecar should report it.
struct Case {
    trouble: Trouble,
    /// The `outcome` label of `lanyard_token_requests_total`.
    kind: &'static str,
    /// Part of what `/readyz` reports as `last_error`.
    error: &'static str,
    extra: &'static [(&'static str, &'static str)],
}

/// A sidecar in front of an echo upstream, reading its credentials from a
/// file the test can touch.
struct Rig {
    running: Running,
    upstream: TestUpstream,
    credentials: PathBuf,
    /// When each token request completed, as the refresher reports it,
    /// recorded by a task of its own so gaps can be measured while the
    /// test does other things.
    attempts: watch::Receiver<Vec<Instant>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start(mock: MockService, extra: &[(&str, &str)]) -> Rig {
        let upstream = TestUpstream::start(None).await;
        let dir = tempfile::tempdir().unwrap();
        let credentials = write_private(
            dir.path(),
            "credentials.json",
            &credentials_json(&mock, &fixture("rsa2048.pkcs8.pem")),
        );
        let path = credentials.to_str().unwrap().to_string();
        let mut settings = vec![("SA_CREDENTIALS_FILE", path.as_str())];
        settings.extend_from_slice(extra);
        let running = sidecar::start(mock, &upstream.url, &settings).await;
        let attempts = timestamps(running.process.default_tokens().state(), |s| s.attempts);
        Rig {
            running,
            upstream,
            credentials,
            attempts,
            _dir: dir,
        }
    }

    async fn proxied(&self) -> Answer {
        get(&format!("{}/x", self.running.proxy)).await
    }

    async fn readyz(&self) -> Answer {
        get(&format!("{}/readyz", self.running.admin)).await
    }

    async fn scrape(&self) -> Scrape {
        scrape(&self.running.admin).await
    }

    fn state(&self) -> RefreshState {
        self.running
            .process
            .default_tokens()
            .state()
            .borrow()
            .clone()
    }

    async fn wait_state(&self, done: impl FnMut(&RefreshState) -> bool) -> RefreshState {
        wait_for(
            &mut self.running.process.default_tokens().state(),
            LIMIT,
            done,
        )
        .await
    }

    /// Asks for a token now, as a rotated credentials file does: the file
    /// changes (the same credentials and one more newline) and SIGHUP
    /// says so.
    async fn renew_now(&self) {
        let mut reloads = self
            .running
            .process
            .reloads
            .clone()
            .expect("the credentials file is watched");
        let before = reloads.borrow().succeeded;
        let mut text = std::fs::read_to_string(&self.credentials).unwrap();
        text.push('\n');
        std::fs::write(&self.credentials, text).unwrap();
        assert!(self.running.process.reload_credentials());
        wait_for(&mut reloads, LIMIT, |r| r.succeeded > before).await;
    }

    /// Makes every token request from now on meet `trouble`.
    async fn arm(&mut self, trouble: &Trouble) {
        match trouble {
            Trouble::Fault(fault) => {
                for _ in 0..QUEUED {
                    self.running.mock.push_fault(fault.clone());
                }
            }
            Trouble::ExpiresIn(seconds) => self.running.mock.set_expires_in(Some(*seconds)),
            Trouble::Gone => {
                // Dropping the mock closes its port.
                self.running.mock = MockService::start().await.unwrap();
            }
        }
    }

    /// (c) for a transient failure: retries 0.5-1 s after the first, 1-2 s
    /// after the second (equal jitter on 1 s doubling), with 100 ms of
    /// slack for observing completions late; nothing else in between.
    async fn backs_off_exponentially(&self) {
        let times = wait_for(&mut self.attempts.clone(), LIMIT, |t| t.len() >= 3).await;
        let gaps = [times[1] - times[0], times[2] - times[1]];
        assert!(gaps[0] >= ms(400), "first retry too soon: {gaps:?}");
        assert!(gaps[1] >= ms(900), "second retry too soon: {gaps:?}");
        // The fourth comes at least 2 s after the third; none was made
        // unseen in between, by the refresher's count or the endpoint's.
        assert!(self.state().attempts <= 3, "{:?}", self.state());
        assert!(
            self.running.mock.counters().token_requests <= 3,
            "{:?}",
            self.running.mock.counters()
        );
        assert_eq!(self.state().generation, 0);
    }

    /// (c) for a rejection: no second request within `window` of the
    /// first, although plain backoff would have retried within 1 s.
    async fn is_not_retried_within(&self, window: Duration) {
        let first = self.attempts.borrow()[0];
        let mut attempts = self.attempts.clone();
        let retried =
            tokio::time::timeout_at(first + window, attempts.wait_for(|t| t.len() >= 2)).await;
        assert!(retried.is_err(), "retried within {window:?}");
        assert_eq!(self.running.mock.counters().token_requests, 1);
    }

    /// (c) for a `Retry-After`: the first retry waited at least `at_least`.
    async fn first_retry_waited(&self, at_least: Duration) {
        let times = wait_for(&mut self.attempts.clone(), LIMIT, |t| t.len() >= 2).await;
        let gap = times[1] - times[0];
        assert!(gap >= at_least, "retried after {gap:?}");
        assert_eq!(self.running.mock.counters().token_requests, 2);
    }
}

/// Records when `count` of the watched value goes up.
fn timestamps<T: Send + Sync + 'static>(
    mut rx: watch::Receiver<T>,
    count: fn(&T) -> u64,
) -> watch::Receiver<Vec<Instant>> {
    let (tx, times) = watch::channel(Vec::new());
    tokio::spawn(async move {
        loop {
            let now = count(&rx.borrow_and_update());
            tx.send_if_modified(|times| {
                let before = times.len();
                while (times.len() as u64) < now {
                    times.push(Instant::now());
                }
                times.len() > before
            });
            if rx.changed().await.is_err() {
                return;
            }
        }
    });
    times
}

/// A `/metrics` answer.
struct Scrape(String);

async fn scrape(admin: &str) -> Scrape {
    let answer = get(&format!("{admin}/metrics")).await;
    assert_eq!(answer.status, StatusCode::OK);
    Scrape(String::from_utf8(answer.body.to_vec()).unwrap())
}

impl Scrape {
    /// The value of one series, named with at most one of its labels:
    /// every token series also carries the account's `client_id`, which
    /// these tests, of one account, leave unnamed.
    fn value(&self, series: &str) -> Option<f64> {
        let (name, label) = match series.split_once('{') {
            Some((name, label)) => (name, label.trim_end_matches('}')),
            None => (series, ""),
        };
        self.0.lines().find_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            let named = label.is_empty() || labels.split(',').any(|l| l == label);
            named.then(|| value.parse().ok())?
        })
    }

    fn outcome(&self, kind: &str) -> f64 {
        self.value(&format!(
            "lanyard_token_requests_total{{outcome=\"{kind}\"}}"
        ))
        .unwrap_or(0.0)
    }

    fn expiry(&self) -> f64 {
        self.value(EXPIRY).expect("the expiry gauge is exported")
    }
}

/// The `Authorization` the echo upstream received.
fn authorization(answer: &Answer) -> String {
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&answer.body)
    );
    answer.json()["headers"]["authorization"][0]
        .as_str()
        .expect("an Authorization header reached the upstream")
        .to_string()
}

fn assert_token_unavailable(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer.headers["lanyard-error"], "token_unavailable");
    assert_eq!(answer.headers["content-type"], "application/json");
    let body = answer.json();
    assert_eq!(body["error"], "token_unavailable");
    assert!(body["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert_eq!(body.as_object().unwrap().len(), 2, "{body}");
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// (a) and (b) with a token held: the renewal meets the fault, the held
/// token keeps being forwarded, `/readyz` stays ready, the failure is
/// counted under its kind, and the expiry gauge still shows the held token.
async fn renewal_failure_leaves_the_held_token_serving(case: &Case) {
    let mut rig = Rig::start(mock().await, case.extra).await;
    rig.running.ready().await;
    let token = authorization(&rig.proxied().await);
    let expiry = rig.scrape().await.expiry();

    rig.arm(&case.trouble).await;
    let attempts = rig.state().attempts;
    rig.renew_now().await;
    let state = rig.wait_state(|s| s.attempts > attempts).await;
    let err = state.last_error.expect("the renewal failed");
    assert_eq!(err.kind(), case.kind, "{err}");
    assert!(err.to_string().contains(case.error), "{err}");
    assert_eq!(state.generation, 1, "{err}");

    assert_eq!(
        authorization(&rig.proxied().await),
        token,
        "{}: the held token is still forwarded",
        case.error
    );
    let ready = rig.readyz().await;
    assert_eq!(ready.status, StatusCode::OK, "{}", case.error);
    assert_eq!(ready.json()["status"], "ready");
    let scrape = rig.scrape().await;
    assert!(scrape.outcome(case.kind) >= 1.0, "{}", scrape.0);
    assert_eq!(scrape.outcome("success"), 1.0);
    assert_eq!(
        scrape.expiry(),
        expiry,
        "{}: the held token's expiry",
        case.error
    );
}

/// (d) with the fault from the start: proxied requests get
/// `token_unavailable` and reach nobody, `/readyz` is 503 naming the
/// failure, and `/metrics` counts it with no success and no expiry.
async fn no_token_is_token_unavailable_and_not_ready(case: &Case) -> Rig {
    let mock = mock().await;
    let closed = format!("http://{}/oauth2/token", closed_port());
    let mut extra = case.extra.to_vec();
    match &case.trouble {
        Trouble::Fault(fault) => {
            for _ in 0..QUEUED {
                mock.push_fault(fault.clone());
            }
        }
        Trouble::ExpiresIn(seconds) => mock.set_expires_in(Some(*seconds)),
        Trouble::Gone => extra.push(("SA_TOKEN_URI", &closed)),
    }
    let rig = Rig::start(mock, &extra).await;
    rig.wait_state(|s| s.attempts >= 1).await;

    assert_token_unavailable(&rig.proxied().await);
    assert_eq!(rig.upstream.requests(), 0);

    let ready = rig.readyz().await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.headers["content-type"], "application/json");
    let body = ready.json();
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["reason"], "no token has been obtained yet");
    let last = body["last_error"].as_str().unwrap_or_default();
    assert!(last.contains(case.error), "{body}");
    assert!(body["consecutive_failures"].as_u64() >= Some(1), "{body}");

    let scrape = rig.scrape().await;
    assert!(scrape.outcome(case.kind) >= 1.0, "{}", scrape.0);
    assert_eq!(scrape.outcome("success"), 0.0);
    assert_eq!(scrape.expiry(), 0.0);
    rig
}

/// Both halves at once, on two sidecars; returns the one that never got
/// a token, for the test to check how it retries.
async fn survives_and_reports(case: &Case) -> Rig {
    let ((), rig) = tokio::join!(
        renewal_failure_leaves_the_held_token_serving(case),
        no_token_is_token_unavailable_and_not_ready(case),
    );
    rig
}

#[tokio::test]
async fn token_endpoint_refusing_connections_is_a_connect_failure_that_backs_off() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Gone,
        kind: "connect",
        error: "cannot connect to the token endpoint",
        extra: &[],
    })
    .await;
    rig.backs_off_exponentially().await;
}

#[tokio::test]
async fn token_endpoint_dropping_the_connection_is_a_network_failure_that_backs_off() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::Disconnect),
        kind: "network",
        error: "the connection to the token endpoint failed",
        extra: &[],
    })
    .await;
    rig.backs_off_exponentially().await;
}

#[tokio::test]
async fn token_endpoint_beyond_the_timeout_is_a_timeout_failure_that_backs_off() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::Delay(Duration::from_secs(30))),
        kind: "timeout",
        error: "the token endpoint did not answer within 1000 ms",
        extra: SHORT_TIMEOUT,
    })
    .await;
    rig.backs_off_exponentially().await;
    // Each attempt was given the whole timeout, and not much more.
    let scrape = rig.scrape().await;
    let count = scrape
        .value("lanyard_token_request_duration_seconds_count")
        .unwrap();
    let sum = scrape
        .value("lanyard_token_request_duration_seconds_sum")
        .unwrap();
    assert!(count >= 3.0, "{count}");
    let mean = sum / count;
    assert!((0.95..1.5).contains(&mean), "{mean} s per attempt");
}

#[tokio::test]
async fn slow_token_endpoint_within_the_timeout_delivers_and_never_holds_up_requests() {
    const EXTRA: &[(&str, &str)] = &[("LANYARD_TOKEN_TIMEOUT", "5s")];
    let slow = Duration::from_secs(2);
    let first_token = async {
        let mock = mock().await;
        mock.push_fault(Fault::Delay(slow));
        let mut arrived = mock.watch_counters();
        let rig = Rig::start(mock, EXTRA).await;
        wait_for(&mut arrived, LIMIT, |c| c.token_requests >= 1).await;
        // While the answer is awaited: not ready, and no failure to report.
        let ready = rig.readyz().await;
        assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
        let body = ready.json();
        assert_eq!(body["reason"], "no token has been obtained yet");
        assert!(body["last_error"].is_null(), "{body}");
        assert_eq!(body["consecutive_failures"], 0);
        assert_token_unavailable(&rig.proxied().await);

        rig.running.ready().await;
        assert_eq!(rig.readyz().await.status, StatusCode::OK);
        let scrape = rig.scrape().await;
        assert_eq!(scrape.outcome("success"), 1.0);
        assert_eq!(scrape.outcome("timeout"), 0.0);
        let took = scrape
            .value("lanyard_token_request_duration_seconds_sum")
            .unwrap();
        assert!(took >= slow.as_secs_f64() - 0.1, "{took}");
        assert_eq!(
            scrape.value("lanyard_token_request_duration_seconds_count"),
            Some(1.0)
        );
    };
    let renewal = async {
        let rig = Rig::start(mock().await, EXTRA).await;
        rig.running.ready().await;
        let token = authorization(&rig.proxied().await);
        rig.running.mock.push_fault(Fault::Delay(slow));
        let mut arrived = rig.running.mock.watch_counters();
        rig.renew_now().await;
        wait_for(&mut arrived, LIMIT, |c| c.token_requests >= 2).await;
        // The renewal is being answered slowly; requests do not wait for it.
        assert_eq!(authorization(&rig.proxied().await), token);
        assert_eq!(rig.readyz().await.status, StatusCode::OK);
        assert_eq!(
            rig.state().generation,
            1,
            "the request was answered only after the renewal"
        );

        rig.wait_state(|s| s.generation >= 2).await;
        assert_ne!(authorization(&rig.proxied().await), token);
        assert_eq!(rig.scrape().await.outcome("success"), 2.0);
    };
    tokio::join!(first_token, renewal);
}

#[tokio::test]
async fn token_endpoint_5xx_is_a_server_error_that_backs_off() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::server_error(503)),
        kind: "server_error",
        error: "the token endpoint failed: HTTP 503",
        extra: &[],
    })
    .await;
    rig.backs_off_exponentially().await;
}

#[tokio::test]
async fn rate_limit_with_retry_after_seconds_is_waited_out() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::rate_limited(Some("2"))),
        kind: "rate_limited",
        error: "the token endpoint is rate limiting (HTTP 429), retry after 2 s",
        extra: &[],
    })
    .await;
    // Plain backoff would have retried within 1 s.
    rig.first_retry_waited(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn rate_limit_with_retry_after_as_an_http_date_is_waited_out() {
    // Whole seconds, and read a moment after it was written: 3-4 s ahead.
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(4));
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::rate_limited(Some(&date))),
        kind: "rate_limited",
        error: "the token endpoint is rate limiting (HTTP 429), retry after ",
        extra: &[],
    })
    .await;
    // Plain backoff would have retried within 1 s; the date asked for
    // about 3 s more, less the time the sidecar took to start.
    rig.first_retry_waited(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn rate_limit_without_retry_after_backs_off_like_any_transient_failure() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::rate_limited(None)),
        kind: "rate_limited",
        error: "the token endpoint is rate limiting (HTTP 429)",
        extra: &[],
    })
    .await;
    let err = rig.state().last_error.unwrap().to_string();
    assert!(!err.contains("retry after"), "{err}");
    rig.backs_off_exponentially().await;
}

#[tokio::test]
async fn invalid_client_401_is_a_rejection_not_retried_at_once() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::invalid_client()),
        kind: "rejected",
        error: "the token endpoint refused the request: HTTP 401 (invalid_client: client authentication failed)",
        extra: &[],
    })
    .await;
    rig.is_not_retried_within(Duration::from_secs(3)).await;
}

#[tokio::test]
async fn bad_request_400_is_a_rejection_not_retried_at_once() {
    let rig = survives_and_reports(&Case {
        trouble: Trouble::Fault(Fault::Respond {
            status: 400,
            body: r#"{"error":"invalid_grant","error_description":"assertion refused"}"#.into(),
            retry_after: None,
        }),
        kind: "rejected",
        error: "the token endpoint refused the request: HTTP 400 (invalid_grant: assertion refused)",
        extra: &[],
    })
    .await;
    rig.is_not_retried_within(Duration::from_secs(3)).await;
}
