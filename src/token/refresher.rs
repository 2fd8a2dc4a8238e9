//! The background task that keeps a token fresh, and the handle through
//! which the rest of lanyard reads it.
//!
//! One task owns all token requests, so at most one is ever in flight. It
//! renews at a jittered fraction of each token's lifetime, backs off
//! exponentially (with jitter) on failure, honours `Retry-After`, and keeps
//! the held token while it is valid: a token is retired its expiry margin
//! before it expires, and until then it is sent even after an upstream 401
//! if no new token can be had (README "Token lifetime"). Readers only load
//! from the cell; the one exception is a request the upstream answered 401,
//! which asks for a forced renewal that every such request shares.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tracing::Instrument;

use super::cell::{Token, TokenCell};
use super::exchange::{ExchangeError, Exchanger, Issued};
use crate::metrics::Metrics;

/// Something that can produce a token: the real exchange, or a fake in tests.
pub trait TokenSource: Send + Sync + 'static {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send;
}

impl TokenSource for Exchanger {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send {
        Exchanger::fetch(self)
    }
}

impl<T: TokenSource> TokenSource for Arc<T> {
    fn fetch(&self) -> impl Future<Output = Result<Issued, ExchangeError>> + Send {
        T::fetch(self)
    }
}

/// When to renew and how to back off.
#[derive(Debug, Clone)]
pub struct RefreshPolicy {
    /// Renew after this fraction of the lifetime, drawn uniformly from the
    /// range so a fleet of sidecars does not renew in lockstep.
    pub renew_fraction: (f64, f64),
    /// Never renew sooner than this after obtaining a token (unless the
    /// lifetime itself is shorter than twice this).
    pub min_renew_delay: Duration,
    /// First retry delay after a failure; doubles per failure.
    pub backoff_initial: Duration,
    /// Longest retry delay for transient failures.
    pub backoff_max: Duration,
    /// Shortest retry delay once the token endpoint refused the
    /// credentials: they will not start working in a second.
    pub rejected_delay: Duration,
    /// `Retry-After` beyond this is treated as this: a larger value is more
    /// likely a mistake than a plan to leave us without a token for hours.
    pub max_retry_after: Duration,
    /// Forced renewals (after an upstream 401) no more often than this: an
    /// upstream that rejects every token must not turn each request into a
    /// token request. Doubles with each forced renewal in a row.
    pub min_forced_interval: Duration,
    /// Longest wait between forced renewals while fresh tokens keep being
    /// rejected.
    pub max_forced_interval: Duration,
    /// A token is retired this long before `sent_at + expires_in`, or a
    /// tenth of its lifetime if that is shorter.
    pub expiry_margin: Duration,
    /// Longest wait between attempts while no usable token is held: every
    /// second without one is an outage for the apps. Jittered over its
    /// upper half; a `Retry-After` still wins.
    pub no_token_max_delay: Duration,
}

impl Default for RefreshPolicy {
    fn default() -> Self {
        RefreshPolicy {
            // 70-85% leaves at least 15% of the lifetime (45 s of a 300 s
            // token) to retry in before the held token expires.
            renew_fraction: (0.70, 0.85),
            min_renew_delay: Duration::from_secs(1),
            backoff_initial: Duration::from_secs(1),
            backoff_max: Duration::from_secs(60),
            rejected_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(3600),
            min_forced_interval: Duration::from_secs(5),
            max_forced_interval: Duration::from_secs(300),
            expiry_margin: crate::config::DEFAULT_EXPIRY_MARGIN,
            no_token_max_delay: Duration::from_secs(15),
        }
    }
}

impl RefreshPolicy {
    /// How long a token of the given lifetime is sent: all of it but the
    /// expiry margin, which is at most a tenth of the lifetime so that a
    /// short-lived token is not retired as soon as it arrives. Renewal, at
    /// 70-85% of the lifetime, always comes before retirement.
    pub fn usable_lifetime(&self, lifetime: Duration) -> Duration {
        lifetime.saturating_sub(self.expiry_margin.min(lifetime / 10))
    }

    /// Delay before renewing a token of the given lifetime.
    pub fn renew_delay(&self, lifetime: Duration) -> Duration {
        let (low, high) = self.renew_fraction;
        let fraction = low + (high - low) * fastrand::f64();
        let floor = self.min_renew_delay.min(lifetime / 2);
        lifetime.mul_f64(fraction).max(floor)
    }

    /// Shortest time after the `streak`-th forced renewal in a row before
    /// the next may run.
    pub fn forced_interval(&self, streak: u32) -> Duration {
        let exponent = streak.saturating_sub(1).min(20);
        self.min_forced_interval
            .saturating_mul(1 << exponent)
            .min(self.max_forced_interval)
    }

    /// Delay before retrying after the `failures`-th failure in a row,
    /// while the held token stays usable for `held_for` (zero: none held).
    pub fn retry_delay(&self, failures: u32, err: &ExchangeError, held_for: Duration) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        let ceiling = self
            .backoff_initial
            .saturating_mul(1 << exponent)
            .min(self.backoff_max);
        // "Equal jitter": at least half the ceiling, so retries still back off.
        let mut delay = ceiling / 2 + (ceiling / 2).mul_f64(fastrand::f64());
        // Jittered upwards only: a fleet refused or rate limited at the
        // same moment must not come back in lockstep, and none may come
        // back sooner than asked.
        if err.is_rejection() {
            delay = delay.max(self.rejected_delay.mul_f64(1.0 + 0.5 * fastrand::f64()));
        }
        // Once the held token is retired, no wait may exceed the no-token
        // cap: the gentler backoff is for when a token still serves. The cap
        // is drawn from its upper half so a fleet that lost its tokens
        // together comes back spread out, not in one second.
        let cap = held_for + self.no_token_max_delay.mul_f64(0.5 + 0.5 * fastrand::f64());
        delay = delay.min(cap);
        if let Some(after) = err.retry_after() {
            let after = after.min(self.max_retry_after);
            delay = delay.max(after + after.mul_f64(0.1 * fastrand::f64()));
        }
        delay
    }
}

/// What the refresher has done, for readiness and forced renewals.
#[derive(Debug, Clone, Default)]
pub struct RefreshState {
    /// Generation of the newest token obtained (0: none yet).
    pub generation: u64,
    /// Token requests completed, successful or not.
    pub attempts: u64,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// The last failure, cleared by a success.
    pub last_error: Option<ExchangeError>,
    /// Forced renewals declined: too soon after the last one, or while
    /// backing off from failures.
    pub forced_declined: u64,
}

/// Why no token can be handed out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("no valid token is held")]
    NoToken,
    #[error("renewing the rejected token failed: {0}")]
    RenewalFailed(ExchangeError),
    #[error(
        "a renewal was forced moments ago, or the token endpoint is failing; not renewing again yet"
    )]
    Throttled,
    #[error("the token refresher has stopped")]
    Stopped,
}

struct Shared {
    cell: TokenCell,
    /// Wakes the refresher for a forced renewal.
    wake: Notify,
    /// Wakes the refresher because the credentials changed.
    credentials_changed: Notify,
    /// Highest token generation the upstream has rejected.
    rejected: AtomicU64,
    /// The refresher task owns the sender, so waiters learn when it stops.
    state: watch::Receiver<RefreshState>,
    /// When forced renewals may run again, in milliseconds since `epoch`;
    /// lets callers be declined without waking the refresher.
    forced_not_before_ms: AtomicU64,
    /// The refresher is backing off from failed token requests.
    backing_off: AtomicBool,
    /// Generation of the token a forced renewal in flight is replacing;
    /// 0 when none is in flight.
    renewing: AtomicU64,
    epoch: Instant,
}

impl Shared {
    fn millis_since_epoch(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// A forced renewal would be declined now.
    fn declines_forced(&self) -> bool {
        self.backing_off.load(Ordering::Acquire)
            || self.millis_since_epoch() < self.forced_not_before_ms.load(Ordering::Acquire)
    }

    /// The held token is one the upstream rejected.
    fn held_token_rejected(&self) -> bool {
        self.cell
            .load()
            .is_some_and(|t| t.generation() <= self.rejected.load(Ordering::Acquire))
    }
}

/// Cheap to clone; every clone sees the same token.
#[derive(Clone)]
pub struct TokenHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TokenHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenHandle")
            .field("token", &self.shared.cell.load())
            .finish()
    }
}

impl TokenHandle {
    /// The held token, if it is still valid. Lock-free.
    pub fn current(&self) -> Option<Arc<Token>> {
        self.shared.cell.valid()
    }

    /// The refresher's progress, to watch or inspect.
    pub fn state(&self) -> watch::Receiver<RefreshState> {
        self.shared.state.clone()
    }

    /// A token for a request: the held one while usable. When the upstream
    /// has rejected it, the shared renewal's result; when no new token can
    /// be had (the endpoint down or failing, renewals throttled), the held
    /// one still, so that the upstream judges each request: one replica's
    /// 401 must not become an outage of lanyard's own making.
    pub async fn get(&self) -> Result<Arc<Token>, Unavailable> {
        let token = self.shared.cell.valid().ok_or(Unavailable::NoToken)?;
        if !token.is_rejected() {
            return Ok(token);
        }
        match self.renew_after_rejection(&token).await {
            Ok(fresh) => Ok(fresh),
            Err(_) => self.shared.cell.valid().ok_or(Unavailable::NoToken),
        }
    }

    /// Asks for a token with new credentials now, past any backoff: a
    /// failure so far may have been the old credentials' fault. The held
    /// token keeps serving until the new one arrives.
    pub fn renew_for_new_credentials(&self) {
        self.shared.credentials_changed.notify_one();
    }

    /// Reports that the upstream answered 401 to `rejected`, and waits for
    /// its replacement. Concurrent callers for the same token share one
    /// token request; a caller whose token was already replaced gets the
    /// replacement at once.
    pub async fn renew_after_rejection(&self, rejected: &Token) -> Result<Arc<Token>, Unavailable> {
        let generation = rejected.generation();
        let mut state = self.shared.state.clone();
        rejected.mark_rejected();
        self.shared.rejected.fetch_max(generation, Ordering::AcqRel);
        let (attempts_before, declined_before) = {
            let now = state.borrow_and_update();
            (now.attempts, now.forced_declined)
        };
        if let Some(token) = self.newer_than(generation) {
            return Ok(token);
        }
        if self.shared.renewing.load(Ordering::Acquire) == generation {
            // This token's renewal is in flight: join it. The refresher
            // clears `renewing` before it publishes the outcome, which the
            // loop below then sees.
        } else if self.shared.declines_forced() {
            return Err(Unavailable::Throttled);
        } else {
            self.shared.wake.notify_one();
        }
        loop {
            state.changed().await.map_err(|_| Unavailable::Stopped)?;
            if let Some(token) = self.newer_than(generation) {
                return Ok(token);
            }
            let now = state.borrow_and_update();
            if now.forced_declined > declined_before {
                return Err(Unavailable::Throttled);
            }
            if now.attempts > attempts_before
                && let Some(err) = &now.last_error
            {
                return Err(Unavailable::RenewalFailed(err.clone()));
            }
        }
    }

    fn newer_than(&self, generation: u64) -> Option<Arc<Token>> {
        self.shared
            .cell
            .valid()
            .filter(|token| token.generation() > generation)
    }

    /// Waits until a token is held or an attempt fails, for commands that
    /// need exactly one answer.
    pub async fn first_outcome(&self) -> Result<Arc<Token>, Unavailable> {
        let mut state = self.shared.state.clone();
        loop {
            {
                let now = state.borrow_and_update();
                if now.generation > 0
                    && let Some(token) = self.current()
                {
                    return Ok(token);
                }
                if let Some(err) = &now.last_error {
                    return Err(Unavailable::RenewalFailed(err.clone()));
                }
            }
            state.changed().await.map_err(|_| Unavailable::Stopped)?;
        }
    }
}

/// Starts the refresher on the current tokio runtime. The task stops when
/// the returned `JoinHandle` is aborted or the runtime shuts down.
pub fn spawn<S: TokenSource>(
    source: S,
    policy: RefreshPolicy,
    metrics: Metrics,
) -> (TokenHandle, tokio::task::JoinHandle<()>) {
    let (state, state_rx) = watch::channel(RefreshState::default());
    let shared = Arc::new(Shared {
        cell: TokenCell::default(),
        wake: Notify::new(),
        credentials_changed: Notify::new(),
        rejected: AtomicU64::new(0),
        state: state_rx,
        forced_not_before_ms: AtomicU64::new(0),
        backing_off: AtomicBool::new(false),
        renewing: AtomicU64::new(0),
        epoch: Instant::now(),
    });
    let handle = TokenHandle {
        shared: shared.clone(),
    };
    let task = tokio::spawn(
        run(source, shared, state, policy, metrics)
            .instrument(tracing::info_span!("token_refresher")),
    );
    (handle, task)
}

/// Forced renewals so far, to space them out.
#[derive(Debug, Default)]
struct Forcing {
    /// Forced renewals in a row whose tokens were rejected soon after.
    streak: u32,
    last: Option<Instant>,
    /// When the throttle after the last forced renewal ends, to look again
    /// at whether the held token was rejected meanwhile.
    recheck: Option<Instant>,
}

impl Forcing {
    fn allowed(&self, policy: &RefreshPolicy) -> bool {
        let interval = policy.forced_interval(self.streak);
        self.last.is_none_or(|at| at.elapsed() >= interval)
    }

    /// Records a forced renewal, starting now, of the token of
    /// `generation`, which was obtained `age` ago.
    fn begin(&mut self, policy: &RefreshPolicy, shared: &Shared, generation: u64, age: Duration) {
        let interval = policy.forced_interval(self.streak);
        // A token that served well past the interval before its rejection
        // was not rejected for being fresh: start over.
        if age >= interval.saturating_mul(2) {
            self.streak = 0;
        }
        self.streak = self.streak.saturating_add(1);
        let now = Instant::now();
        self.last = Some(now);
        let next_interval = policy.forced_interval(self.streak);
        self.recheck = Some(now + next_interval);
        if self.streak > 1 {
            tracing::warn!(
                forced_streak = self.streak,
                next_allowed_in_s = next_interval.as_secs(),
                "the upstream rejected a fresh token again; spacing out forced renewals"
            );
        }
        shared.renewing.store(generation, Ordering::Release);
        let not_before = shared.millis_since_epoch() + next_interval.as_millis() as u64;
        shared
            .forced_not_before_ms
            .store(not_before, Ordering::Release);
    }
}

/// The token endpoint's `Retry-After` has not passed yet: credentials
/// changing clears the failure count, not the endpoint's request.
fn waiting_out(retry_after_until: Option<Instant>) -> bool {
    retry_after_until.is_some_and(|until| until > Instant::now())
}

/// Completes at `at`, or never when there is nothing to wait for.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn run<S: TokenSource>(
    source: S,
    shared: Arc<Shared>,
    state_tx: watch::Sender<RefreshState>,
    policy: RefreshPolicy,
    metrics: Metrics,
) {
    let mut next = Instant::now();
    let mut failures: u32 = 0;
    let mut generation: u64 = 0;
    let mut forcing = Forcing::default();
    // When the held token was obtained.
    let mut obtained_at = Instant::now();
    let mut last_decline_log: Option<Instant> = None;
    // When the token endpoint's last Retry-After ends.
    let mut retry_after_until: Option<Instant> = None;
    loop {
        let forced = tokio::select! {
            () = tokio::time::sleep_until(next) => false,
            () = shared.credentials_changed.notified() => {
                // The backoff was about the old credentials; the new ones
                // get a prompt first try. A file change is rare (the watcher
                // waits for it to settle), so this cannot become a storm.
                // A Retry-After is the endpoint's word, whatever the
                // credentials, and still holds.
                failures = 0;
                if let Some(until) = retry_after_until.filter(|until| *until > Instant::now()) {
                    next = until;
                    tracing::info!(
                        wait_ms = until.duration_since(Instant::now()).as_millis() as u64,
                        "credentials changed: requesting a token with them once the token endpoint's Retry-After has passed"
                    );
                    continue;
                }
                tracing::info!("credentials changed: requesting a token with them");
                false
            }
            () = sleep_until_some(forcing.recheck) => {
                // The throttle after a forced renewal is over: a token the
                // upstream rejected meanwhile is replaced now, not only when
                // the next client request asks (a pod reported not ready
                // may get none) or at the scheduled renewal.
                forcing.recheck = None;
                if failures > 0 || waiting_out(retry_after_until) || !shared.held_token_rejected() {
                    continue;
                }
                forcing.begin(&policy, &shared, generation, obtained_at.elapsed());
                true
            }
            () = shared.wake.notified() => {
                if !shared.held_token_rejected() {
                    // Already replaced; the waiters see the new token.
                    continue;
                }
                // While backing off, a 401 storm must not override the
                // token endpoint's rate limit; and renewals forced in quick
                // succession mean the upstream rejects fresh tokens too, so
                // each waits twice as long as the one before.
                if failures > 0 || waiting_out(retry_after_until) || !forcing.allowed(&policy) {
                    state_tx.send_modify(|s| s.forced_declined += 1);
                    let interval = policy.forced_interval(forcing.streak);
                    if last_decline_log.is_none_or(|at| at.elapsed() >= interval) {
                        last_decline_log = Some(Instant::now());
                        tracing::warn!(
                            failures,
                            "the upstream rejected the token again; not forcing another renewal yet"
                        );
                    }
                    continue;
                }
                forcing.begin(&policy, &shared, generation, obtained_at.elapsed());
                true
            }
        };

        let started = Instant::now();
        let result = source.fetch().await;
        metrics
            .token_request_duration
            .observe(started.elapsed().as_secs_f64());

        let mut state = state_tx.borrow().clone();
        state.attempts += 1;
        match result.and_then(|issued| {
            let token = Token::new(
                &issued.access_token,
                policy.usable_lifetime(issued.lifetime),
                generation + 1,
                started,
            )
            .map_err(|err| ExchangeError::Malformed(err.to_string()))?;
            Ok((issued, token))
        }) {
            Ok((issued, token)) => {
                generation += 1;
                failures = 0;
                metrics.token_requests.with_label_values(&["success"]).inc();
                let expiry = token
                    .expires_at_wall()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                metrics.token_expiry.set(expiry.as_secs_f64());
                shared.cell.store(Arc::new(token));
                obtained_at = Instant::now();
                // Lifetime and renewal both count from the request; an
                // exchange slower than the delay still leaves a gap.
                let delay = policy.renew_delay(issued.lifetime);
                next = (started + delay).max(Instant::now() + delay / 4);
                if issued.lifetime_assumed {
                    tracing::warn!(
                        assumed_s = issued.lifetime.as_secs(),
                        "the token response has no expires_in; assuming the default lifetime"
                    );
                }
                tracing::info!(
                    generation,
                    expires_in_s = issued.lifetime.as_secs(),
                    sent_for_s = policy.usable_lifetime(issued.lifetime).as_secs(),
                    renew_in_s = delay.as_secs(),
                    forced,
                    "token obtained"
                );
                state.generation = generation;
                state.consecutive_failures = 0;
                state.last_error = None;
            }
            Err(err) => {
                failures = failures.saturating_add(1);
                metrics
                    .token_requests
                    .with_label_values(&[err.kind()])
                    .inc();
                let held = shared.cell.valid();
                let held_for = held.as_ref().map_or(Duration::ZERO, |t| t.remaining());
                let delay = policy.retry_delay(failures, &err, held_for);
                next = Instant::now() + delay;
                retry_after_until = err.retry_after().map(|_| next);
                let held_s = held.map(|t| t.remaining().as_secs());
                if forced && held_s.is_some() {
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
                    failures,
                    retry_in_ms = delay.as_millis() as u64,
                    held_token_valid_for_s = held_s,
                    "token request failed"
                );
                state.consecutive_failures = failures;
                state.last_error = Some(err);
            }
        }
        shared
            .backing_off
            .store(state.consecutive_failures > 0, Ordering::Release);
        if forced {
            // Before publishing, so that a caller who finds no renewal in
            // flight sees this outcome, and one who joined it is woken.
            shared.renewing.store(0, Ordering::Release);
        }
        state_tx.send_replace(state);
    }
}
