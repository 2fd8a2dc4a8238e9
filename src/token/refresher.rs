//! The background task that keeps a token fresh: the one owner of every
//! token request and of every fact its timing is computed from.
//!
//! It renews at a jittered fraction of each token's lifetime, backs off
//! exponentially (with jitter) on failure, honours `Retry-After`, and keeps
//! the held token while it is valid: a token is retired its expiry margin
//! before it expires, and until then it is sent even after an upstream 401
//! if no new token can be had (docs/tokens.md "Renewal and retries" and "Token
//! lifetime"). When to do what is [`super::schedule`]'s, a pure policy;
//! this task applies it. Requests only report what the upstream said,
//! through a [`TokenHandle`], and read the answer from the published
//! [`RefreshState`]; they load the token itself lock-free from the cell.
//! That state also carries the facts readiness is judged on (when the
//! renewal falls due, the failures since, the attempt in flight), since
//! this task alone knows them (docs/admin.md "Admin endpoints").

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;
use tracing::Instrument;

use crate::throttle::Throttle;

use super::cell::{Token, TokenCell};
use super::demand::Demand;
use super::exchange::{ExchangeError, Exchanger, Issued};
use super::handle::{RefresherLink, Report, Reports};
use super::schedule::{
    self, Declined, FailedRequest, ForcedFacts, ForcedSpacing, InFlight, RejectionAnswer,
};
use crate::metrics::{AccountLabels, AccountSeries, Metrics};
use crate::otel::spans::TokenSpan;

pub use super::handle::{RefreshState, TokenHandle, Unavailable};

mod dormancy;

pub use super::schedule::RefreshPolicy;
use dormancy::woken;

/// Something that can produce a token: the real exchange, or a fake in tests.
pub trait TokenSource: Send + Sync + 'static {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send;
    /// The account's `client_id` and organization, which its token
    /// metrics are labelled with; read after each token request, since a
    /// reload may change them.
    fn labels(&self) -> AccountLabels;
}

impl TokenSource for Exchanger {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send {
        Exchanger::fetch(self)
    }

    fn labels(&self) -> AccountLabels {
        // One read of the credentials: a reload between two reads would
        // label one account's series with another's pair.
        let credentials = self.credentials();
        AccountLabels::new(&credentials.client_id, &credentials.organization_id)
    }
}

impl<T: TokenSource> TokenSource for Arc<T> {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send {
        T::fetch(self)
    }

    fn labels(&self) -> AccountLabels {
        T::labels(self)
    }
}

/// How an account's token is kept, beyond the schedule.
#[derive(Debug, Clone, Default)]
pub struct Keeping {
    /// `Some`: on demand ([`super::demand`]): no token until a request
    /// needs one, and no renewals once idle. `None`: from the start and
    /// always, as a single account's.
    pub demand: Option<Arc<Demand>>,
    /// The token requests in flight across every account of the process
    /// (docs/accounts.md); `None`: no cap beyond this account's one.
    pub permits: Option<Arc<Semaphore>>,
}

/// Starts the refresher on the current tokio runtime, keeping the token
/// from now on. The task stops when the returned `JoinHandle` is aborted
/// or the runtime shuts down.
pub fn spawn<S: TokenSource>(
    source: S,
    policy: RefreshPolicy,
    metrics: Metrics,
) -> (TokenHandle, tokio::task::JoinHandle<()>) {
    spawn_kept(source, policy, metrics, Keeping::default())
}

/// As [`spawn`], kept as `keeping` says.
pub fn spawn_kept<S: TokenSource>(
    source: S,
    policy: RefreshPolicy,
    metrics: Metrics,
    keeping: Keeping,
) -> (TokenHandle, tokio::task::JoinHandle<()>) {
    let on_demand = keeping.demand.is_some();
    let (published, state) = watch::channel(RefreshState {
        idle: on_demand,
        ..RefreshState::default()
    });
    let link = Arc::new(RefresherLink {
        cell: TokenCell::default(),
        reports: Reports::default(),
        state,
        demand: keeping.demand.clone(),
    });
    let started = now();
    let refresher = Refresher {
        link: link.clone(),
        published,
        policy,
        series: metrics.token.account(source.labels(), on_demand),
        metrics,
        dormant: on_demand,
        demand: keeping.demand,
        permits: keeping.permits,
        generation: 0,
        obtained_at: started,
        failures: 0,
        renewal_due: None,
        failures_since_due: 0,
        next_attempt: started,
        endpoint_asked_until: None,
        forced: ForcedSpacing::default(),
        recheck: None,
        rejected_through: 0,
        new_credentials: false,
        declines: Throttle::new(Duration::ZERO),
        untried_credentials: false,
    };
    let task =
        tokio::spawn(run(source, refresher).instrument(tracing::info_span!("token_refresher")));
    (TokenHandle::new(link), task)
}

/// Why a token request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Attempt {
    /// A renewal on schedule, or a retry after a failure.
    Scheduled,
    /// A renewal forced by an upstream 401.
    Forced,
}

/// The refresher's own facts; nothing else writes them.
struct Refresher {
    link: Arc<RefresherLink>,
    published: watch::Sender<RefreshState>,
    policy: RefreshPolicy,
    metrics: Metrics,
    /// This account's token series.
    series: AccountSeries,
    /// Not renewing: an on-demand account no request has used lately
    /// (or yet).
    dormant: bool,
    demand: Option<Arc<Demand>>,
    permits: Option<Arc<Semaphore>>,
    /// Generation of the newest token obtained.
    generation: u64,
    /// When the held token arrived.
    obtained_at: Instant,
    /// Failed token requests since the last success.
    failures: u32,
    /// When the held token's scheduled renewal falls due; tokio's clock,
    /// as readiness reads it.
    renewal_due: Option<Instant>,
    /// Failed token requests that ended once `renewal_due` had passed.
    failures_since_due: u32,
    next_attempt: Instant,
    /// Until when the token endpoint's last `Retry-After` runs.
    endpoint_asked_until: Option<Instant>,
    forced: ForcedSpacing,
    /// When the spacing after the last forced renewal ends, to look again
    /// at whether the held token was rejected meanwhile.
    recheck: Option<Instant>,
    /// Highest token generation the upstream has rejected.
    rejected_through: u64,
    /// The credentials changed; applied before the next wait, so a change
    /// reported during a token request is not lost.
    new_credentials: bool,
    /// Declined forced renewals, logged once a forced-renewal spacing.
    declines: Throttle,
    /// New credentials have not yet given a token: their failures are
    /// retried promptly (see `failed`).
    untried_credentials: bool,
}

/// The clock the schedule is computed on: tokio's, so that tests can pause
/// and advance it.
fn now() -> Instant {
    Instant::now()
}

async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(at).await;
}

/// Completes at `at`, or never when there is nothing to wait for.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Fleet-spreading jitter for the schedule.
fn jitter() -> f64 {
    fastrand::f64()
}

async fn run<S: TokenSource>(source: S, mut refresher: Refresher) {
    loop {
        let attempt = refresher.until_due().await;
        let in_flight = match attempt {
            Attempt::Scheduled => InFlight::Scheduled,
            Attempt::Forced => InFlight::Forced,
        };
        // Published as in flight while it waits for its turn under the
        // process's cap, which readiness reads as under way: the turn
        // comes within a token request's timeout or two.
        refresher.sending(Instant::now());
        let _permit = match &refresher.permits {
            Some(permits) => permits.clone().acquire_owned().await.ok(),
            None => None,
        };
        let requested = Instant::now();
        // Its duration is the request's; a disabled span when tracing is off.
        let span = TokenSpan::start(attempt == Attempt::Forced);
        // Boxed: the request's state lives only while it is in flight,
        // rather than in every account's task, most of which wait
        // (docs/accounts.md "Memory").
        let mut fetch = Box::pin(span.around(source.fetch()));
        // Reports are answered while the request runs, so that a request
        // the schedule declines is told at once rather than after the
        // token endpoint's answer.
        let result = loop {
            tokio::select! {
                result = &mut fetch => break result,
                () = refresher.link.reports.arrived() => {
                    // Never a new request: one is in flight.
                    let _ = refresher.read_reports(in_flight);
                }
            }
        };
        refresher.label_for(&source);
        match refresher.record(result, requested, attempt) {
            Ok(generation) => span.ended("success", Some(generation)),
            Err(kind) => span.ended(kind, None),
        }
    }
}

impl Refresher {
    /// Waits for the next token request to be due, answering reports
    /// meanwhile.
    async fn until_due(&mut self) -> Attempt {
        loop {
            if std::mem::take(&mut self.new_credentials) {
                self.credentials_changed();
            }
            self.publish_waiting();
            let due = (!self.dormant).then_some(self.next_attempt);
            let demand = self.demand.clone().filter(|_| self.dormant);
            tokio::select! {
                () = sleep_until_some(due) => {
                    if !self.falls_idle() {
                        return Attempt::Scheduled;
                    }
                }
                () = woken(demand) => self.wake_up(),
                () = sleep_until_some(self.recheck) => {
                    self.recheck = None;
                    if self.recheck_rejected() {
                        return Attempt::Forced;
                    }
                }
                () = self.link.reports.arrived() => {
                    if self.read_reports(InFlight::None) {
                        return Attempt::Forced;
                    }
                }
            }
        }
    }

    /// Takes in every report sent since the last, then answers a
    /// rejection of the held token once for all of them. True when a
    /// forced renewal is to start.
    fn read_reports(&mut self, in_flight: InFlight) -> bool {
        let mut rejection = false;
        for report in self.link.reports.take() {
            match report {
                Report::Rejected { generation } => {
                    self.rejected_through = self.rejected_through.max(generation);
                    rejection = true;
                }
                Report::CredentialsChanged => self.new_credentials = true,
            }
        }
        rejection && self.answer_rejection(in_flight)
    }

    /// The held token, if the upstream rejected it; a report about an
    /// older token is answered by the newer one its caller finds.
    fn held_rejected(&self) -> Option<Arc<Token>> {
        self.link
            .cell
            .load()
            .filter(|token| token.generation() <= self.rejected_through)
    }

    fn forced_facts(&self, now: Instant) -> ForcedFacts {
        ForcedFacts {
            now,
            failures: self.failures,
            endpoint_asked_until: self.endpoint_asked_until,
            spacing: self.forced,
        }
    }

    fn answer_rejection(&mut self, in_flight: InFlight) -> bool {
        let Some(held) = self.held_rejected() else {
            return false;
        };
        // Published on the token, so that the requests that follow ask for
        // the shared renewal rather than send it unasked, and /readyz
        // reports it (docs/tokens.md "Renewal and retries").
        held.mark_rejected();
        let now = now();
        match schedule::answer_rejection(&self.policy, &self.forced_facts(now), in_flight) {
            RejectionAnswer::RenewNow => {
                self.begin_forced(now);
                true
            }
            RejectionAnswer::AwaitInFlight => false,
            RejectionAnswer::Decline(declined) => {
                self.decline(declined, now);
                false
            }
        }
    }

    /// The spacing after a forced renewal is over: a token the upstream
    /// rejected meanwhile is replaced now, not only when the next client
    /// request asks (a pod reported not ready may get none) or at the
    /// scheduled renewal.
    fn recheck_rejected(&mut self) -> bool {
        if self.held_rejected().is_none() {
            return false;
        }
        let now = now();
        let allowed = schedule::forced_renewal(&self.policy, &self.forced_facts(now)).is_ok();
        if allowed {
            self.begin_forced(now);
        }
        allowed
    }

    fn begin_forced(&mut self, now: Instant) {
        let token_age = now.saturating_duration_since(self.obtained_at);
        self.forced = self.forced.after_forced(&self.policy, now, token_age);
        self.recheck = self.forced.next_allowed(&self.policy);
        if self.forced.streak > 1 {
            tracing::warn!(
                forced_streak = self.forced.streak,
                next_allowed_in_s = self.forced.interval(&self.policy).as_secs(),
                "the upstream rejected a fresh token again; spacing out forced renewals"
            );
        }
    }

    /// Tells the waiting requests no, and keeps the held token: the
    /// upstream judges each request with it.
    fn decline(&mut self, declined: Declined, now: Instant) {
        self.published.send_modify(|s| s.forced_declined += 1);
        let interval = self.forced.interval(&self.policy);
        if let Some(held_back) = self.declines.due_every(interval, now) {
            tracing::warn!(
                held_back,
                failures = self.failures,
                reason = declined.reason(),
                "the upstream rejected the token again; not forcing another renewal yet"
            );
        }
    }

    fn credentials_changed(&mut self) {
        // The backoff was about the old credentials; the new ones get a
        // prompt first try. A file change is rare (the watcher waits for it
        // to settle), so this cannot become a storm. A Retry-After is the
        // endpoint's word, whatever the credentials, and still holds.
        self.failures = 0;
        self.untried_credentials = true;
        let now = now();
        self.next_attempt = schedule::new_credentials_at(self.endpoint_asked_until, now);
        if self.next_attempt > now {
            tracing::info!(
                wait_ms = (self.next_attempt - now).as_millis() as u64,
                "credentials changed: requesting a token with them once the token endpoint's Retry-After has passed"
            );
        } else {
            tracing::info!("credentials changed: requesting a token with them");
        }
    }

    /// Publishes that a token request was sent at `requested`: readiness
    /// then sees a renewal that fell due as under way, not overdue.
    fn sending(&self, requested: Instant) {
        self.published.send_modify(|state| {
            state.in_flight_since = Some(requested);
            state.next_attempt_at = None;
        });
    }

    /// Publishes when the next token request is planned, if that changed
    /// (new credentials move it), without waking watchers otherwise.
    fn publish_waiting(&self) {
        let at = (!self.dormant).then_some(self.next_attempt);
        let idle = self.dormant;
        self.published.send_if_modified(|state| {
            let changed = state.next_attempt_at != at
                || state.in_flight_since.is_some()
                || state.idle != idle;
            state.next_attempt_at = at;
            state.in_flight_since = None;
            state.idle = idle;
            changed
        });
    }

    /// Applies the outcome of a token request sent at `requested`, and
    /// publishes it with what readiness reads: when the renewal falls due,
    /// the failures since, and the next attempt. The new token's
    /// generation, or the failure's kind.
    fn record(
        &mut self,
        result: Result<Issued, ExchangeError>,
        requested: Instant,
        attempt: Attempt,
    ) -> Result<u64, &'static str> {
        self.series
            .observe_duration(requested.elapsed().as_secs_f64());
        let mut state = self.published.borrow().clone();
        state.attempts += 1;
        let result = result.and_then(|issued| {
            let token = Token::new(
                &issued.access_token,
                self.policy.usable_lifetime(issued.lifetime),
                self.generation + 1,
                requested,
            )
            .map_err(|err| ExchangeError::Malformed(err.to_string()))?;
            Ok((issued, token))
        });
        let outcome = match result {
            Ok((issued, token)) => {
                self.obtained(&issued, token, requested, attempt);
                state.generation = self.generation;
                state.consecutive_failures = 0;
                state.last_error = None;
                Ok(self.generation)
            }
            Err(err) => {
                self.failed(&err, attempt);
                state.consecutive_failures = self.failures;
                let kind = err.kind();
                state.last_error = Some(err);
                Err(kind)
            }
        };
        state.renewal_due_at = self.renewal_due;
        state.failures_since_due = self.failures_since_due;
        state.in_flight_since = None;
        state.next_attempt_at = Some(self.next_attempt);
        self.published.send_replace(state);
        outcome
    }

    /// Holds a new token and schedules its renewal.
    fn obtained(&mut self, issued: &Issued, token: Token, requested: Instant, attempt: Attempt) {
        self.generation += 1;
        self.failures = 0;
        self.failures_since_due = 0;
        self.untried_credentials = false;
        self.series.outcome("success");
        let expiry = token
            .expires_at_wall()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        self.series.set_expiry(expiry.as_secs_f64());
        self.link.cell.store(Arc::new(token));
        let now = now();
        self.obtained_at = now;
        let (at, delay) = self
            .policy
            .renewal_at(issued.lifetime, requested, now, &mut jitter);
        self.next_attempt = at;
        self.renewal_due = Some(at);
        if issued.lifetime_assumed {
            tracing::warn!(
                assumed_s = issued.lifetime.as_secs(),
                "the token response has no expires_in; assuming the default lifetime"
            );
        }
        tracing::info!(
            generation = self.generation,
            expires_in_s = issued.lifetime.as_secs(),
            sent_for_s = self.policy.usable_lifetime(issued.lifetime).as_secs(),
            renew_in_s = delay.as_secs(),
            forced = attempt == Attempt::Forced,
            "token obtained"
        );
    }

    /// Counts a failed token request and schedules the retry; the held
    /// token stays.
    fn failed(&mut self, err: &ExchangeError, attempt: Attempt) {
        self.failures = self.failures.saturating_add(1);
        // Counted when the attempt ends: one that fails once the renewal
        // is due says the renewal is not on course, whenever it started.
        if self.renewal_due.is_some_and(|due| Instant::now() >= due) {
            self.failures_since_due = self.failures_since_due.saturating_add(1);
        }
        self.series.outcome(err.kind());
        let held = self.link.cell.valid();
        // Retries spread over the held token's time left, so a fleet that
        // fails together does not retry together (docs/tokens.md "Renewal and
        // retries"); but new credentials not yet proven are retried
        // promptly, as if none were held: a rotation reaches a fleet's pods
        // over a minute or more anyway, and until they work, a failure may
        // be theirs, which the operator who rotated them wants to know now.
        let spread_over = match self.untried_credentials {
            true => Duration::ZERO,
            false => held.as_ref().map_or(Duration::ZERO, |t| t.remaining()),
        };
        let retry = self.policy.retry_after_failure(
            now(),
            self.failures,
            FailedRequest::from(err),
            spread_over,
            &mut jitter,
        );
        self.next_attempt = retry.at;
        self.endpoint_asked_until = retry.endpoint_asked_until;
        let held_s = held.map(|t| t.remaining().as_secs());
        if attempt == Attempt::Forced && held_s.is_some() {
            // The upstream may have been one replica with stale
            // keys: the token is still within its lifetime, so it
            // keeps being sent and the upstream judges each request.
            tracing::warn!(
                held_token_valid_for_s = held_s,
                "the upstream rejected the token and no new one can be had yet; still sending it until it expires"
            );
        }
        tracing::warn!(
            error = %err,
            kind = err.kind(),
            failures = self.failures,
            retry_in_ms = retry.delay.as_millis() as u64,
            held_token_valid_for_s = held_s,
            "token request failed"
        );
    }
}
