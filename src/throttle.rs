//! A warning that can repeat for every request or session (an outage, a
//! flood, a 403 on every call) logged at most once an interval, with how
//! many were held back meanwhile: an outage must not become a line per
//! request. One type for every such line, so the copies cannot drift, on tokio's clock,
//! with `now` passed in so the rule is tested without one.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// The usual interval: a person reading the log sees the problem within a
/// minute, and an outage of an hour costs sixty lines.
pub const EVERY_MINUTE: Duration = Duration::from_secs(60);

/// When a repeating line was last logged, and how many were held back.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    logged: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    pub const fn new(interval: Duration) -> Throttle {
        Throttle {
            interval,
            state: Mutex::new(State {
                logged: None,
                held_back: 0,
            }),
        }
    }

    /// Whether the line is due at `now`; if so, how many were held back
    /// since the last one (to log with it), and the next is due an
    /// interval later. Concurrent callers log it once.
    pub fn due(&self, now: Instant) -> Option<u64> {
        self.due_every(self.interval, now)
    }

    /// As [`Throttle::due`], with an interval of the moment's (one that
    /// grows with a backoff, say).
    pub fn due_every(&self, interval: Duration, now: Instant) -> Option<u64> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let due = state
            .logged
            .is_none_or(|at| now.saturating_duration_since(at) >= interval);
        if !due {
            state.held_back += 1;
            return None;
        }
        state.logged = Some(now);
        Some(std::mem::take(&mut state.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repeating_line_is_logged_once_an_interval_with_the_count_held_back() {
        let throttle = Throttle::new(EVERY_MINUTE);
        let start = Instant::now();
        assert_eq!(throttle.due(start), Some(0), "the first is logged");
        for s in 1..60 {
            assert_eq!(throttle.due(start + Duration::from_secs(s)), None);
        }
        assert_eq!(throttle.due(start + EVERY_MINUTE), Some(59));
        assert_eq!(throttle.due(start + EVERY_MINUTE), None);
        let short = Duration::from_secs(5);
        assert_eq!(
            throttle.due_every(short, start + EVERY_MINUTE + short),
            Some(1)
        );
    }
}
