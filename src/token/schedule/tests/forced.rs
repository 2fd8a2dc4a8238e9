//! The forced renewals after a 401: their spacing, when one runs, and how
//! a rejection is answered; and what a failed request says about the next.

use super::*;

#[test]
fn forced_renewals_are_spaced_5_s_doubling_to_5_minutes() {
    let cases = [
        (0, 5),
        (1, 5),
        (2, 10),
        (3, 20),
        (4, 40),
        (5, 80),
        (6, 160),
        (7, 300),
        (8, 300),
        (u32::MAX, 300),
    ];
    for (streak, spacing) in cases {
        assert_eq!(policy().forced_interval(streak), secs(spacing), "{streak}");
    }
}

#[test]
fn the_forced_streak_grows_while_fresh_tokens_are_rejected_and_resets_after_long_service() {
    let now = Instant::now();
    let p = policy();
    let cases = [
        // (streak, age of the rejected token, streak after, next allowed in)
        (0, Duration::ZERO, 1, 5),
        (0, secs(3600), 1, 5),
        (1, secs(5), 2, 10),
        (1, ms(9999), 2, 10),
        // Served twice the spacing: not rejected for being fresh.
        (1, secs(10), 1, 5),
        (3, secs(39), 4, 40),
        (3, secs(40), 1, 5),
        (7, secs(599), 8, 300),
        (7, secs(600), 1, 5),
    ];
    for (streak, age, after, next_in) in cases {
        let spacing = ForcedSpacing {
            streak,
            last: Some(now - secs(1)),
        };
        let next = spacing.after_forced(&p, now, age);
        assert_eq!(next.streak, after, "streak {streak}, age {age:?}");
        assert_eq!(next.last, Some(now));
        assert_eq!(next.next_allowed(&p), Some(now + secs(next_in)));
    }
    assert_eq!(ForcedSpacing::default().next_allowed(&p), None);
}

fn facts(
    now: Instant,
    failures: u32,
    asked_until: Option<Instant>,
    last: Option<Instant>,
) -> ForcedFacts {
    ForcedFacts {
        now,
        failures,
        endpoint_asked_until: asked_until,
        spacing: ForcedSpacing { streak: 1, last },
    }
}

#[test]
fn a_forced_renewal_runs_only_when_not_backing_off_not_asked_to_wait_and_spaced() {
    let now = Instant::now();
    let p = policy();
    let cases = [
        // (failures, asked until, last forced, answer)
        (0, None, None, Ok(())),
        (0, None, Some(now - secs(5)), Ok(())),
        (0, None, Some(now - secs(60)), Ok(())),
        (
            0,
            None,
            Some(now - secs(4)),
            Err(Declined::TooSoon { until: now + S }),
        ),
        (1, None, None, Err(Declined::BackingOff)),
        (3, Some(now + secs(9)), None, Err(Declined::BackingOff)),
        // New credentials cleared the failures, not the endpoint's request.
        (
            0,
            Some(now + secs(9)),
            None,
            Err(Declined::EndpointAskedToWait {
                until: now + secs(9),
            }),
        ),
        (0, Some(now), None, Ok(())),
        (0, Some(now - secs(1)), Some(now - secs(5)), Ok(())),
    ];
    for (failures, asked_until, last, answer) in cases {
        assert_eq!(
            forced_renewal(&p, &facts(now, failures, asked_until, last)),
            answer,
            "{failures} failures, asked until {asked_until:?}, last {last:?}"
        );
    }
}

#[test]
fn a_rejection_joins_the_request_in_flight_or_starts_one_or_is_declined() {
    let now = Instant::now();
    let p = policy();
    let allowed = facts(now, 0, None, None);
    let too_soon = facts(now, 0, None, Some(now));
    let backing_off = facts(now, 2, None, None);
    let soon = Declined::TooSoon {
        until: now + secs(5),
    };
    let cases = [
        (allowed, InFlight::None, RejectionAnswer::RenewNow),
        (allowed, InFlight::Scheduled, RejectionAnswer::AwaitInFlight),
        (allowed, InFlight::Forced, RejectionAnswer::AwaitInFlight),
        (too_soon, InFlight::None, RejectionAnswer::Decline(soon)),
        (
            too_soon,
            InFlight::Scheduled,
            RejectionAnswer::Decline(soon),
        ),
        (too_soon, InFlight::Forced, RejectionAnswer::AwaitInFlight),
        (
            backing_off,
            InFlight::None,
            RejectionAnswer::Decline(Declined::BackingOff),
        ),
        (
            backing_off,
            InFlight::Scheduled,
            RejectionAnswer::Decline(Declined::BackingOff),
        ),
    ];
    for (facts, in_flight, answer) in cases {
        assert_eq!(
            answer_rejection(&p, &facts, in_flight),
            answer,
            "{facts:?} {in_flight:?}"
        );
    }
}

#[test]
fn failures_are_read_from_exchange_errors() {
    let cases = [
        (
            ExchangeError::Rejected {
                status: 401,
                error: Some("invalid_client".into()),
                description: None,
            },
            refused(),
        ),
        (
            ExchangeError::RateLimited {
                retry_after: Some(secs(45)),
            },
            retry_after(secs(45)),
        ),
        (
            ExchangeError::Server {
                status: 503,
                retry_after: Some(secs(7)),
            },
            retry_after(secs(7)),
        ),
        (
            ExchangeError::Server {
                status: 503,
                retry_after: None,
            },
            transient(),
        ),
        (ExchangeError::Timeout(secs(10)), transient()),
    ];
    for (err, failure) in cases {
        assert_eq!(FailedRequest::from(&err), failure, "{err}");
    }
}
