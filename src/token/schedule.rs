//! When to ask the token endpoint for a token: the refresher's whole
//! timing policy, as pure functions of what it knows (docs/tokens.md "Renewal and
//! retries" and "Token lifetime").
//!
//! Nothing here reads a clock or draws a random number: `now` and the
//! jitter come in as arguments, so the tests drive every rule with plain
//! `#[test]`s, no runtime. The refresher task applies these answers and
//! owns every fact they are computed from.

use std::time::Duration;

use tokio::time::Instant;

use super::exchange::ExchangeError;

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
    /// Longest retry delay for transient failures, and the most of a held
    /// token's time left that a retry waits for.
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

impl RefreshPolicy {
    /// The defaults, with tokens retired `expiry_margin` before their
    /// expiry (`LANYARD_EXPIRY_MARGIN`).
    pub fn with_expiry_margin(expiry_margin: Duration) -> RefreshPolicy {
        RefreshPolicy {
            expiry_margin,
            ..RefreshPolicy::default()
        }
    }
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
            max_retry_after: super::exchange::MAX_RETRY_AFTER,
            min_forced_interval: Duration::from_secs(5),
            max_forced_interval: Duration::from_secs(300),
            expiry_margin: crate::config::DEFAULT_EXPIRY_MARGIN,
            no_token_max_delay: Duration::from_secs(15),
        }
    }
}

/// What a failed token request says about the next one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FailedRequest {
    /// The token endpoint refused the credentials (`invalid_client` and
    /// other 4xx): they will not start working in a second.
    pub refused: bool,
    /// The token endpoint's `Retry-After` (RFC 9110 §10.2.3), on a 429 or
    /// a 5xx.
    pub retry_after: Option<Duration>,
}

impl From<&ExchangeError> for FailedRequest {
    fn from(err: &ExchangeError) -> Self {
        FailedRequest {
            refused: err.is_rejection(),
            retry_after: err.retry_after(),
        }
    }
}

/// The next attempt after a failed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    pub at: Instant,
    pub delay: Duration,
    /// Until when the token endpoint asked not to be called: new
    /// credentials skip the backoff, never this.
    pub endpoint_asked_until: Option<Instant>,
}

impl RefreshPolicy {
    /// How long a token of the given lifetime is sent: all of it but the
    /// expiry margin, which is at most a tenth of the lifetime so that a
    /// short-lived token is not retired as soon as it arrives. Renewal, at
    /// 70-85% of the lifetime, always comes before retirement.
    pub fn usable_lifetime(&self, lifetime: Duration) -> Duration {
        lifetime.saturating_sub(self.expiry_margin.min(lifetime / 10))
    }

    /// Delay before renewing a token of the given lifetime, `jitter`
    /// drawing uniformly from [0, 1).
    pub fn renew_delay(&self, lifetime: Duration, jitter: &mut impl FnMut() -> f64) -> Duration {
        let (low, high) = self.renew_fraction;
        let fraction = low + (high - low) * jitter();
        let floor = self.min_renew_delay.min(lifetime / 2);
        lifetime.mul_f64(fraction).max(floor)
    }

    /// When to renew a token of `lifetime` whose request was sent at
    /// `requested` and which arrived at `now`, and the delay drawn.
    /// Lifetime and renewal both count from the request; an exchange slower
    /// than the delay still leaves a gap of a quarter of it, so a slow
    /// endpoint is not asked again the moment it answers.
    pub fn renewal_at(
        &self,
        lifetime: Duration,
        requested: Instant,
        now: Instant,
        jitter: &mut impl FnMut() -> f64,
    ) -> (Instant, Duration) {
        let delay = self.renew_delay(lifetime, jitter);
        ((requested + delay).max(now + delay / 4), delay)
    }

    /// Delay before retrying after the `failures`-th failure in a row,
    /// while the held token stays usable for `held_for` (zero: none held;
    /// the refresher passes the time to the held token's retirement, as it
    /// stands when the failed request has ended).
    ///
    /// "Equal jitter" on a ceiling: half to all of it. The ceiling is the
    /// doubling backoff or, while a token is held, the time it has left if
    /// that is longer (up to `backoff_max`). So a fleet whose renewals fell
    /// due together, and failed together, spreads its retries over the
    /// time its tokens have left, rather than piling its first short steps
    /// (0.5-1 s, 1-2 s, ...) into the same seconds against an endpoint
    /// that is already failing. A wait drawn from the time left ends
    /// before the retirement, and each leaves less time for the next, so
    /// the retries keep coming while the token serves, more than one when
    /// there is time, until the doubling backoff outgrows what is left and
    /// the next attempt falls after the retirement, under the no-token cap.
    pub fn retry_delay(
        &self,
        failures: u32,
        failure: FailedRequest,
        held_for: Duration,
        jitter: &mut impl FnMut() -> f64,
    ) -> Duration {
        let ceiling = self
            .backoff_ceiling(failures)
            .max(held_for.min(self.backoff_max));
        // At least half the ceiling, so retries still back off.
        let mut delay = ceiling / 2 + (ceiling / 2).mul_f64(jitter());
        // Jittered upwards only: a fleet refused or rate limited at the
        // same moment must not come back in lockstep, and none may come
        // back sooner than asked.
        if failure.refused {
            delay = delay.max(self.rejected_delay.mul_f64(1.0 + 0.5 * jitter()));
        }
        // Once the held token is retired, no wait may exceed the no-token
        // cap: the gentler backoff is for when a token still serves. The cap
        // is drawn from its upper half so a fleet that lost its tokens
        // together comes back spread out, not in one second.
        let cap = held_for + self.no_token_max_delay.mul_f64(0.5 + 0.5 * jitter());
        delay = delay.min(cap);
        if let Some(after) = failure.retry_after {
            let after = after.min(self.max_retry_after);
            delay = delay.max(after + after.mul_f64(0.1 * jitter()));
        }
        delay
    }

    /// The doubling backoff's ceiling after the `failures`-th failure in a
    /// row: `backoff_initial`, doubled per failure, up to `backoff_max`.
    fn backoff_ceiling(&self, failures: u32) -> Duration {
        let exponent = failures.saturating_sub(1).min(20);
        self.backoff_initial
            .saturating_mul(1 << exponent)
            .min(self.backoff_max)
    }

    /// The next attempt after the `failures`-th failure in a row at `now`.
    pub fn retry_after_failure(
        &self,
        now: Instant,
        failures: u32,
        failure: FailedRequest,
        held_for: Duration,
        jitter: &mut impl FnMut() -> f64,
    ) -> Retry {
        let delay = self.retry_delay(failures, failure, held_for, jitter);
        let at = now + delay;
        Retry {
            at,
            delay,
            endpoint_asked_until: failure.retry_after.map(|_| at),
        }
    }

    /// Shortest time after the `streak`-th forced renewal in a row before
    /// the next may run.
    pub fn forced_interval(&self, streak: u32) -> Duration {
        let exponent = streak.saturating_sub(1).min(20);
        self.min_forced_interval
            .saturating_mul(1 << exponent)
            .min(self.max_forced_interval)
    }
}

/// When to try new credentials that arrived at `now`: at once, past any
/// backoff, since a failure so far may have been the old credentials'
/// fault; but not before the token endpoint's `Retry-After`, which is its
/// word whatever the credentials.
pub fn new_credentials_at(endpoint_asked_until: Option<Instant>, now: Instant) -> Instant {
    endpoint_asked_until.map_or(now, |until| until.max(now))
}

/// Forced renewals so far (each after an upstream 401), to space them out:
/// an upstream that rejects every token must not turn each request into a
/// token request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ForcedSpacing {
    /// Forced renewals in a row whose tokens were rejected soon after.
    pub streak: u32,
    /// When the last forced renewal started.
    pub last: Option<Instant>,
}

impl ForcedSpacing {
    /// The wait after the last forced renewal before the next may run.
    pub fn interval(&self, policy: &RefreshPolicy) -> Duration {
        policy.forced_interval(self.streak)
    }

    /// When the next forced renewal may run; `None` when none ran yet.
    /// The refresher wakes then to replace a token the upstream rejected
    /// meanwhile, since apps that saw 401s may have stopped calling.
    pub fn next_allowed(&self, policy: &RefreshPolicy) -> Option<Instant> {
        self.last.map(|at| at + self.interval(policy))
    }

    /// The spacing once a forced renewal starts at `now`, replacing a
    /// token obtained `token_age` ago. A token that served for twice the
    /// spacing or more was not rejected for being fresh: the streak starts
    /// over.
    #[must_use]
    pub fn after_forced(
        self,
        policy: &RefreshPolicy,
        now: Instant,
        token_age: Duration,
    ) -> ForcedSpacing {
        let streak = if token_age >= self.interval(policy).saturating_mul(2) {
            0
        } else {
            self.streak
        };
        ForcedSpacing {
            streak: streak.saturating_add(1),
            last: Some(now),
        }
    }
}

/// What the refresher knows when the upstream has rejected the held token.
#[derive(Debug, Clone, Copy)]
pub struct ForcedFacts {
    pub now: Instant,
    /// Failed token requests since the last success.
    pub failures: u32,
    /// Until when the token endpoint asked not to be called.
    pub endpoint_asked_until: Option<Instant>,
    pub spacing: ForcedSpacing,
}

/// Why a forced renewal does not run now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Declined {
    /// Token requests are failing: a 401 storm must not override the
    /// backoff (docs/tokens.md "Renewal and retries").
    BackingOff,
    /// The token endpoint's `Retry-After` has not passed.
    EndpointAskedToWait { until: Instant },
    /// Too soon after the last forced renewal.
    TooSoon { until: Instant },
}

impl Declined {
    /// For logs: the instants mean nothing to a reader.
    pub fn reason(&self) -> &'static str {
        match self {
            Declined::BackingOff => "backing_off",
            Declined::EndpointAskedToWait { .. } => "retry_after",
            Declined::TooSoon { .. } => "forced_spacing",
        }
    }
}

/// Whether a forced renewal may run now.
pub fn forced_renewal(policy: &RefreshPolicy, facts: &ForcedFacts) -> Result<(), Declined> {
    if facts.failures > 0 {
        return Err(Declined::BackingOff);
    }
    if let Some(until) = facts
        .endpoint_asked_until
        .filter(|until| *until > facts.now)
    {
        return Err(Declined::EndpointAskedToWait { until });
    }
    match facts.spacing.next_allowed(policy) {
        Some(until) if until > facts.now => Err(Declined::TooSoon { until }),
        _ => Ok(()),
    }
}

/// The token request running when a rejection is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlight {
    None,
    /// A renewal on schedule or a retry.
    Scheduled,
    /// A forced renewal, replacing the held token.
    Forced,
}

/// The refresher's answer to "the upstream rejected the held token".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionAnswer {
    /// Start a forced renewal.
    RenewNow,
    /// The request in flight will replace the token: every request that
    /// saw the 401 shares it.
    AwaitInFlight,
    /// Keep the held token for now; the upstream judges each request.
    Decline(Declined),
}

/// What to do about a rejection of the held token, with `in_flight`
/// running. A forced renewal in flight is always joined; a scheduled one
/// only when a forced renewal would be allowed now, so that a request
/// declined a moment ago is not made to wait for the endpoint instead.
pub fn answer_rejection(
    policy: &RefreshPolicy,
    facts: &ForcedFacts,
    in_flight: InFlight,
) -> RejectionAnswer {
    if in_flight == InFlight::Forced {
        return RejectionAnswer::AwaitInFlight;
    }
    match (forced_renewal(policy, facts), in_flight) {
        (Err(declined), _) => RejectionAnswer::Decline(declined),
        (Ok(()), InFlight::Scheduled) => RejectionAnswer::AwaitInFlight,
        (Ok(()), _) => RejectionAnswer::RenewNow,
    }
}

#[cfg(test)]
mod tests;
