//! The readiness rule, table by table, on plain durations: no runtime.

use super::*;
use crate::secret::Secret;

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn renewal(due_for: Option<Duration>, failures: u32, in_flight: bool) -> RenewalFacts {
    RenewalFacts {
        due_for,
        failures_since_due: failures,
        in_flight,
        stopped: false,
    }
}

fn held(retires_in: Duration, renewal: RenewalFacts) -> ReadinessFacts {
    ReadinessFacts {
        draining: false,
        retires_in: Some(retires_in),
        ever_held: true,
        renewal,
    }
}

#[test]
fn where_the_renewal_stands() {
    let stopped = RenewalFacts {
        stopped: true,
        ..RenewalFacts::default()
    };
    let table = [
        (renewal(None, 0, false), Course::Scheduled),
        // A forced renewal in flight before the renewal is due.
        (renewal(None, 0, true), Course::Scheduled),
        (renewal(Some(Duration::ZERO), 0, false), Course::Underway),
        (renewal(Some(OVERDUE_AFTER), 0, false), Course::Underway),
        (renewal(Some(ms(1001)), 0, false), Course::Overdue),
        // A slow request is on course until its timeout fails it.
        (renewal(Some(secs(30)), 0, true), Course::Underway),
        (renewal(Some(Duration::ZERO), 1, false), Course::Failing),
        // A retry in flight after a failure: still failing.
        (renewal(Some(secs(2)), 1, true), Course::Failing),
        (renewal(Some(secs(40)), 3, false), Course::Failing),
        (stopped, Course::Stopped),
    ];
    for (facts, want) in table {
        assert_eq!(course(&facts), want, "{facts:?}");
        assert_eq!(
            want.is_on_course(),
            matches!(want, Course::Scheduled | Course::Underway)
        );
    }
}

#[test]
fn readiness_by_time_left_and_course() {
    let scheduled = renewal(None, 0, false);
    let underway = renewal(Some(ms(300)), 0, true);
    let failing = renewal(Some(secs(1)), 1, false);
    let overdue = renewal(Some(secs(2)), 0, false);
    let stopped = RenewalFacts {
        stopped: true,
        ..scheduled
    };
    let table = [
        // Time enough: whatever the renewal does.
        (held(secs(300), failing), Ok(())),
        (held(READY_MIN_REMAINING, failing), Ok(())),
        (held(READY_MIN_REMAINING, overdue), Ok(())),
        // Close to retirement: the renewal decides.
        (held(secs(9), scheduled), Ok(())),
        (held(ms(1), scheduled), Ok(())),
        (held(ms(500), underway), Ok(())),
        (
            held(READY_MIN_REMAINING - ms(1), failing),
            Err(NotReady::RenewalFailing),
        ),
        (held(secs(5), overdue), Err(NotReady::RenewalOverdue)),
        (held(secs(5), stopped), Err(NotReady::RefresherStopped)),
    ];
    for (facts, want) in table {
        assert_eq!(readiness(&facts), want, "{facts:?}");
    }
}

#[test]
fn no_usable_token_or_shutting_down_is_never_ready() {
    let none = ReadinessFacts {
        draining: false,
        retires_in: None,
        ever_held: false,
        renewal: RenewalFacts::default(),
    };
    assert_eq!(readiness(&none), Err(NotReady::NoTokenYet));
    let retired = ReadinessFacts {
        ever_held: true,
        ..none
    };
    assert_eq!(readiness(&retired), Err(NotReady::Retired));
    let draining = ReadinessFacts {
        draining: true,
        ..held(secs(300), renewal(None, 0, false))
    };
    assert_eq!(readiness(&draining), Err(NotReady::ShuttingDown));
}

/// One cycle of a token as the refresher schedules it, in 100 ms
/// steps: retired at `retire`, its renewal due at `due`, every request
/// taking `latency` and failing when `down`. Returns the first instant
/// not ready, and why.
fn first_unready(
    retire: Duration,
    due: Duration,
    latency: Duration,
    down: bool,
) -> Option<(Duration, NotReady)> {
    let step = ms(100);
    let mut now = Duration::ZERO;
    while now < retire {
        let due_for = now.checked_sub(due);
        // The first attempt is sent at `due`; when down, it fails
        // `latency` later.
        let failed = down && due_for.is_some_and(|d| d >= latency);
        let facts = held(
            retire - now,
            renewal(due_for, u32::from(failed), due_for.is_some() && !failed),
        );
        if let Err(why) = readiness(&facts) {
            return Some((now, why));
        }
        if !down && due_for.is_some_and(|d| d >= latency) {
            // Renewed: a fresh token, as ready as the one before.
            return None;
        }
        now += step;
    }
    None
}

#[test]
fn a_20_s_token_renewed_on_schedule_is_ready_throughout() {
    // Retired at 18 s (a tenth of the lifetime as margin), renewed at
    // 70-85 %: 1-4 s before the retirement, well within the last 10 s.
    for due in [secs(14), secs(17)] {
        for latency in [ms(0), ms(200), ms(900)] {
            assert_eq!(first_unready(secs(18), due, latency, false), None);
        }
    }
}

#[test]
fn a_20_s_token_is_unready_at_its_renewals_first_failure() {
    for due in [secs(14), secs(17)] {
        let latency = ms(200);
        assert_eq!(
            first_unready(secs(18), due, latency, true),
            Some((due + latency, NotReady::RenewalFailing))
        );
    }
}

#[test]
fn a_300_s_token_whose_renewal_fails_is_unready_10_s_before_retirement() {
    // Retired at 290 s; renewal due at 210-255 s fails at once.
    for due in [secs(210), secs(255)] {
        assert_eq!(
            first_unready(secs(290), due, ms(100), true),
            Some((secs(280) + ms(100), NotReady::RenewalFailing))
        );
    }
}

#[test]
fn facts_are_read_from_the_token_and_the_published_state() {
    let base = Instant::now();
    let token = Token::new(&Secret::new("t"), secs(18), 1, base).unwrap();
    let state = RefreshState {
        generation: 1,
        renewal_due_at: Some(base + secs(15)),
        failures_since_due: 2,
        in_flight_since: Some(base + secs(16)),
        ..RefreshState::default()
    };
    let facts = ReadinessFacts::read(Some(&token), &state, base + secs(17), false, false);
    assert_eq!(facts.retires_in, Some(secs(1)));
    assert!(facts.ever_held);
    assert_eq!(facts.renewal, renewal(Some(secs(2)), 2, true));
    // Not due yet; and a token at its retirement is no longer usable.
    let early = ReadinessFacts::read(Some(&token), &state, base + secs(10), false, false);
    assert_eq!(early.renewal.due_for, None);
    let late = ReadinessFacts::read(Some(&token), &state, base + secs(18), false, true);
    assert_eq!(late.retires_in, None);
    assert!(late.renewal.stopped);
    assert_eq!(readiness(&late), Err(NotReady::Retired));
}

#[test]
fn reasons_name_the_readiness_margin() {
    let margin = format!("less than {} s", READY_MIN_REMAINING.as_secs());
    for why in [
        NotReady::RenewalFailing,
        NotReady::RenewalOverdue,
        NotReady::RefresherStopped,
    ] {
        assert!(why.reason().contains(&margin), "{}", why.reason());
    }
}
