//! Every timing rule of docs/tokens.md "Renewal and retries" and "Token lifetime",
//! table by table, on fixed instants and fixed jitter.

use super::*;

const S: Duration = Duration::from_secs(1);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Jitter that always draws `value`: 0 gives the low end of every range,
/// 1 its high end.
fn fixed(value: f64) -> impl FnMut() -> f64 {
    move || value
}

const LOW: f64 = 0.0;
const HIGH: f64 = 1.0;

fn policy() -> RefreshPolicy {
    RefreshPolicy::default()
}

fn transient() -> FailedRequest {
    FailedRequest::default()
}

fn refused() -> FailedRequest {
    FailedRequest {
        refused: true,
        retry_after: None,
    }
}

fn retry_after(after: Duration) -> FailedRequest {
    FailedRequest {
        refused: false,
        retry_after: Some(after),
    }
}

#[test]
fn defaults_are_the_documented_ones() {
    let p = policy();
    assert_eq!(p.renew_fraction, (0.70, 0.85));
    assert_eq!(p.min_renew_delay, secs(1));
    assert_eq!((p.backoff_initial, p.backoff_max), (secs(1), secs(60)));
    assert_eq!(p.rejected_delay, secs(30));
    assert_eq!(p.max_retry_after, secs(3600));
    assert_eq!(
        (p.min_forced_interval, p.max_forced_interval),
        (secs(5), secs(300))
    );
    assert_eq!(p.expiry_margin, secs(10));
    assert_eq!(p.no_token_max_delay, secs(15));
}

#[test]
fn a_token_is_sent_for_its_lifetime_less_the_margin_or_a_tenth() {
    let cases = [
        // (margin, lifetime, sent for)
        (secs(10), secs(300), secs(290)),
        (secs(10), secs(3600), secs(3590)),
        (secs(10), secs(100), secs(90)),
        (secs(10), secs(20), secs(18)),
        (secs(10), secs(6), ms(5400)),
        (secs(0), secs(300), secs(300)),
        (secs(60), secs(300), secs(270)),
        (secs(10), Duration::ZERO, Duration::ZERO),
    ];
    for (margin, lifetime, sent_for) in cases {
        let p = RefreshPolicy {
            expiry_margin: margin,
            ..policy()
        };
        assert_eq!(
            p.usable_lifetime(lifetime),
            sent_for,
            "{margin:?} {lifetime:?}"
        );
    }
}

/// Equal to within a microsecond: the fractions are floating point.
fn assert_close(actual: Duration, expected: Duration, case: &str) {
    let off = actual.abs_diff(expected);
    assert!(
        off <= Duration::from_micros(1),
        "{case}: {actual:?}, not {expected:?}"
    );
}

#[test]
fn renewal_comes_at_70_to_85_percent_of_the_lifetime() {
    let cases = [
        // (lifetime, jitter, delay)
        (secs(100), LOW, secs(70)),
        (secs(100), HIGH, secs(85)),
        (secs(100), 0.5, ms(77_500)),
        (secs(300), LOW, secs(210)),
        (secs(300), HIGH, secs(255)),
        (secs(86_400), HIGH, secs(73_440)),
        (ms(1000), LOW, ms(700)),
        (ms(100), HIGH, ms(85)),
    ];
    for (lifetime, jitter, delay) in cases {
        let drawn = policy().renew_delay(lifetime, &mut fixed(jitter));
        assert_close(drawn, delay, &format!("{lifetime:?} at {jitter}"));
    }
}

#[test]
fn renewal_is_never_sooner_than_the_floor_unless_the_lifetime_is_shorter_than_twice_it() {
    // The default fractions never reach the floor; early ones do.
    let early = RefreshPolicy {
        renew_fraction: (0.1, 0.2),
        min_renew_delay: secs(1),
        ..policy()
    };
    let cases = [
        // (lifetime, jitter, delay)
        (secs(100), LOW, secs(10)),
        (secs(5), LOW, secs(1)),
        (secs(5), HIGH, secs(1)),
        (secs(2), HIGH, secs(1)),
        // Shorter than twice the floor: half the lifetime.
        (ms(1000), LOW, ms(500)),
        (ms(300), HIGH, ms(150)),
    ];
    for (lifetime, jitter, delay) in cases {
        let drawn = early.renew_delay(lifetime, &mut fixed(jitter));
        assert_close(drawn, delay, &format!("{lifetime:?} at {jitter}"));
    }
}

#[test]
fn renewal_always_comes_before_retirement() {
    for lifetime in [6, 20, 60, 100, 300, 3600, 86_400].map(secs) {
        let delay = policy().renew_delay(lifetime, &mut fixed(HIGH));
        assert!(
            delay < policy().usable_lifetime(lifetime),
            "{lifetime:?}: renewed after {delay:?}"
        );
    }
}

#[test]
fn renewal_counts_from_the_request_but_leaves_a_gap_after_a_slow_exchange() {
    let requested = Instant::now();
    let cases = [
        // (exchange took, renew at, after the request)
        (Duration::ZERO, secs(70)),
        (secs(2), secs(70)),
        (ms(52_500), secs(70)),
        // Slower than three quarters of the delay: a quarter of it after
        // the answer.
        (secs(60), ms(77_500)),
        (secs(100), ms(117_500)),
    ];
    for (took, at) in cases {
        let (renew_at, delay) =
            policy().renewal_at(secs(100), requested, requested + took, &mut fixed(LOW));
        assert_close(delay, secs(70), "delay");
        assert_close(renew_at - requested, at, &format!("exchange took {took:?}"));
    }
}

#[test]
fn while_a_token_is_held_a_retry_waits_half_to_all_of_its_time_left_up_to_a_minute() {
    let cases = [
        // (failures, held for, jitter, delay)
        (1, secs(12), LOW, secs(6)),
        (1, secs(12), 0.5, secs(9)),
        (1, secs(12), HIGH, secs(12)),
        (1, secs(3), LOW, ms(1500)),
        (1, secs(3), HIGH, secs(3)),
        (2, secs(40), LOW, secs(20)),
        (2, secs(40), HIGH, secs(40)),
        // Up to a minute, however long the token has left.
        (1, secs(60), LOW, secs(30)),
        (1, secs(60), HIGH, secs(60)),
        (1, secs(1000), LOW, secs(30)),
        (1, secs(86_400), HIGH, secs(60)),
        (40, secs(86_400), LOW, secs(30)),
        (u32::MAX, secs(86_400), HIGH, secs(60)),
        // The doubling backoff (0.5-1 s, 1-2 s, 2-4 s, ... up to 30-60 s)
        // when it is the longer.
        (1, ms(300), LOW, ms(500)),
        (1, ms(300), HIGH, secs(1)),
        (3, secs(1), LOW, secs(2)),
        (3, secs(1), HIGH, secs(4)),
        (4, secs(5), HIGH, secs(8)),
        (6, secs(20), LOW, secs(16)),
        (6, secs(20), HIGH, secs(32)),
        (7, secs(40), LOW, secs(30)),
    ];
    for (failures, held_for, jitter, delay) in cases {
        assert_close(
            policy().retry_delay(failures, transient(), held_for, &mut fixed(jitter)),
            delay,
            &format!("{failures} failures, held for {held_for:?}, at {jitter}"),
        );
    }
}

/// The first retries of 1000 sidecars whose renewals failed together,
/// each with `held_for` left, their jitter drawn evenly over [0, 1): the
/// earliest, the latest, and the most in any one second.
fn first_retries_of_a_fleet(held_for: Duration) -> (Duration, Duration, usize) {
    const N: u32 = 1000;
    let mut delays: Vec<Duration> = (0..N)
        .map(|i| {
            let draw = (f64::from(i) + 0.5) / f64::from(N);
            policy().retry_delay(1, transient(), held_for, &mut fixed(draw))
        })
        .collect();
    delays.sort();
    let busiest = (0..delays.len())
        .map(|i| delays[i..].partition_point(|d| *d < delays[i] + S))
        .max()
        .unwrap_or(0);
    (delays[0], delays[delays.len() - 1], busiest)
}

#[test]
fn a_fleet_that_fails_with_tokens_held_spreads_its_retries_over_their_time_left() {
    let cases = [
        // (held for, earliest, latest, most of 1000 in one second)
        // None held: the doubling backoff's first step, all in one second.
        (Duration::ZERO, ms(500), secs(1), 1000),
        // Held: evenly over the second half of the time left, so any one
        // second holds 2 / (seconds left) of the fleet.
        (secs(3), ms(1500), secs(3), 667),
        (secs(4), secs(2), secs(4), 500),
        (secs(12), secs(6), secs(12), 167),
        (secs(35), ms(17_500), secs(35), 58),
        // Up to a minute: 30-60 s, a thirtieth of the fleet a second.
        (secs(80), secs(30), secs(60), 34),
        (secs(3600), secs(30), secs(60), 34),
    ];
    for (held_for, earliest, latest, most) in cases {
        let (first, last, busiest) = first_retries_of_a_fleet(held_for);
        let case = format!("held for {held_for:?}: {first:?}-{last:?}, {busiest} in a second");
        assert!(first >= earliest && first - earliest < ms(100), "{case}");
        assert!(last <= latest && latest - last < ms(100), "{case}");
        assert!(busiest.abs_diff(most) <= 1, "{case}");
    }
}

/// The attempts after a renewal that failed with `held_for` left, every
/// one failing and each wait drawn at `jitter`: when they come, from the
/// failed renewal, up to the first at or after the retirement.
fn attempts_until_retired(held_for: Duration, jitter: f64) -> Vec<Duration> {
    let mut at = Duration::ZERO;
    let mut attempts = Vec::new();
    let mut failures = 0;
    while at < held_for {
        failures += 1;
        let left = held_for - at;
        at += policy().retry_delay(failures, transient(), left, &mut fixed(jitter));
        attempts.push(at);
    }
    attempts
}

#[test]
fn retries_come_before_the_retirement_more_than_once_when_there_is_time() {
    let cases: [(Duration, f64, &[Duration]); 8] = [
        // (held for at the failed renewal, jitter, attempts after it)
        // A 20 s token's renewal fails 1-4 s before its retirement: once
        // before it.
        (secs(3), 0.5, &[ms(2250), ms(3750)]),
        // A 60 s token's, 3-12 s before: twice or three times, in the
        // last 10 s, when a failed renewal has made the pod unready and
        // a success would make it ready again.
        (secs(12), 0.5, &[secs(9), ms(11_250), ms(14_250)]),
        (secs(12), LOW, &[secs(6), secs(9), secs(11), secs(15)]),
        // A 300 s token's, 35-80 s before: the first within a minute,
        // then closer together as the retirement nears.
        (
            secs(80),
            0.5,
            &[secs(45), ms(71_250), ms(77_812), ms(83_812)],
        ),
        (
            secs(80),
            LOW,
            &[secs(30), secs(55), ms(67_500), ms(73_750), ms(81_750)],
        ),
        (
            secs(35),
            LOW,
            &[ms(17_500), ms(26_250), ms(30_625), ms(34_625), ms(42_500)],
        ),
        // No time for a retry: the first comes after the retirement.
        (ms(400), 0.5, &[ms(750)]),
        (ms(400), LOW, &[ms(500)]),
    ];
    for (held_for, jitter, expected) in cases {
        let attempts = attempts_until_retired(held_for, jitter);
        let case = format!("held for {held_for:?} at {jitter}: {attempts:?}");
        assert_eq!(attempts.len(), expected.len(), "{case}");
        for (at, want) in attempts.iter().zip(expected) {
            assert!(at.abs_diff(*want) < ms(1), "{case}");
        }
    }
    // A day-long token's: every 30-60 s (45 s at 0.5) to its retirement.
    let attempts = attempts_until_retired(secs(3600), 0.5);
    assert_eq!(attempts.len(), 80, "{attempts:?}");
    assert_eq!(attempts[0], secs(45));
    assert_eq!(attempts[78], secs(79 * 45));
}

#[test]
fn refused_credentials_wait_at_least_30_to_45_s_while_a_token_is_held() {
    let cases = [
        // (failures, held for, jitter, delay)
        (1, secs(40), LOW, secs(30)),
        (1, secs(40), HIGH, secs(45)),
        (5, secs(40), HIGH, secs(45)),
        // A minute of the time left is longer than the refusal's wait.
        (1, secs(1000), LOW, secs(30)),
        (1, secs(1000), HIGH, secs(60)),
        (8, secs(1000), HIGH, secs(60)),
    ];
    for (failures, held_for, jitter, delay) in cases {
        assert_eq!(
            policy().retry_delay(failures, refused(), held_for, &mut fixed(jitter)),
            delay,
            "{failures} failures, held for {held_for:?}, at {jitter}"
        );
    }
}

#[test]
fn with_no_token_held_no_wait_exceeds_7_5_to_15_s() {
    let cases = [
        // (failures, failure, jitter, delay)
        (1, transient(), LOW, ms(500)),
        (4, transient(), HIGH, secs(8)),
        (5, transient(), LOW, ms(7500)),
        (5, transient(), HIGH, secs(15)),
        (12, transient(), LOW, ms(7500)),
        (12, transient(), HIGH, secs(15)),
        (12, transient(), 0.5, ms(11_250)),
        (1, refused(), LOW, ms(7500)),
        (1, refused(), HIGH, secs(15)),
    ];
    for (failures, failure, jitter, delay) in cases {
        assert_eq!(
            policy().retry_delay(failures, failure, Duration::ZERO, &mut fixed(jitter)),
            delay,
            "{failures} {failure:?} at {jitter}"
        );
    }
}

#[test]
fn a_held_token_about_to_retire_bounds_the_wait_to_its_time_left_plus_the_cap() {
    let cases = [
        // (held for, failure, jitter, delay)
        (secs(5), transient(), HIGH, secs(20)),
        (secs(5), transient(), LOW, ms(12_500)),
        (secs(20), refused(), LOW, ms(27_500)),
        (secs(10), refused(), HIGH, secs(25)),
        (secs(1), refused(), LOW, ms(8500)),
        (secs(100), transient(), HIGH, secs(60)),
    ];
    for (held_for, failure, jitter, delay) in cases {
        assert_eq!(
            policy().retry_delay(12, failure, held_for, &mut fixed(jitter)),
            delay,
            "held for {held_for:?}, {failure:?} at {jitter}"
        );
    }
}

#[test]
fn retry_after_always_wins_capped_at_an_hour_plus_up_to_10_percent() {
    let cases = [
        // (failures, held for, Retry-After, jitter, delay)
        (1, secs(20), secs(45), LOW, secs(45)),
        (1, secs(20), secs(45), HIGH, ms(49_500)),
        // Never sooner than asked; a longer wait for the time left stays.
        (1, secs(1000), secs(45), LOW, secs(45)),
        (1, secs(1000), secs(45), HIGH, secs(60)),
        (1, secs(1000), secs(100), HIGH, secs(110)),
        // Beyond the no-token cap, and beyond the backoff ceiling.
        (1, Duration::ZERO, secs(45), LOW, secs(45)),
        (12, Duration::ZERO, secs(600), HIGH, secs(660)),
        (1, Duration::ZERO, secs(7200), LOW, secs(3600)),
        (1, Duration::ZERO, secs(7200), HIGH, secs(3960)),
        // A short one does not cut the backoff.
        (12, secs(1000), Duration::ZERO, HIGH, secs(60)),
        (12, secs(1000), secs(1), LOW, secs(30)),
        (12, secs(1000), secs(45), HIGH, secs(60)),
    ];
    for (failures, held_for, after, jitter, delay) in cases {
        assert_eq!(
            policy().retry_delay(failures, retry_after(after), held_for, &mut fixed(jitter)),
            delay,
            "{failures} failures, held for {held_for:?}, Retry-After {after:?} at {jitter}"
        );
    }
    let with_refusal = FailedRequest {
        refused: true,
        retry_after: Some(secs(120)),
    };
    assert_eq!(
        policy().retry_delay(1, with_refusal, Duration::ZERO, &mut fixed(LOW)),
        secs(120)
    );
}

#[test]
fn the_jitter_is_drawn_independently_for_each_range() {
    // Drawn in order: backoff, refusal, no-token cap. A refusal's 30 s
    // is cut to a 5 s token's 5 + 15 s...
    let mut draws = [HIGH, LOW, HIGH].into_iter();
    let delay = policy().retry_delay(1, refused(), secs(5), &mut || draws.next().unwrap());
    assert_eq!(delay, secs(20));
    // ...and a long-lived one keeps the refusal's upper end.
    let mut draws = [LOW, HIGH, HIGH].into_iter();
    let delay = policy().retry_delay(1, refused(), secs(100), &mut || draws.next().unwrap());
    assert_eq!(delay, secs(45));
}

#[test]
fn a_retry_after_is_remembered_until_the_retry() {
    let now = Instant::now();
    let held = secs(1000);
    let plain = policy().retry_after_failure(now, 1, transient(), held, &mut fixed(HIGH));
    assert_eq!(
        plain,
        Retry {
            at: now + secs(60),
            delay: secs(60),
            endpoint_asked_until: None,
        }
    );
    let asked = policy().retry_after_failure(now, 1, retry_after(secs(45)), held, &mut fixed(LOW));
    assert_eq!(asked.at, now + secs(45));
    assert_eq!(asked.endpoint_asked_until, Some(now + secs(45)));
}

#[test]
fn new_credentials_are_tried_at_once_but_not_within_a_retry_after() {
    let now = Instant::now();
    let cases = [
        (None, now),
        (Some(now + secs(45)), now + secs(45)),
        (Some(now), now),
        // Passed: at once.
        (Some(now - secs(1)), now),
    ];
    for (asked_until, at) in cases {
        assert_eq!(new_credentials_at(asked_until, now), at, "{asked_until:?}");
    }
}

mod forced;
