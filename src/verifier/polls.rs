//! What this replica knows of the sessions it is polled about, which is
//! only ever a shortcut (docs/verifier.md "Running many"): when the
//! service may next be asked about a session, whether a call about it is
//! in flight, and how it ended. The service holds each session's state and
//! answers it on every poll (`assumptions`, 6), so losing any of this (a
//! restart, a poll on another replica) costs one more call to the service,
//! never an answer.
//!
//! Bounded in entries and in time; time is passed in, so the rules are
//! tested without a clock.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::assumptions::{Claims, Ending, Progress};

/// Sessions this replica keeps track of at once. Starts are rate-limited
/// (see `limits`), so one replica's own sessions are fewer at the default
/// lifetime; polls of sessions other replicas started add to them. Past
/// it, the entry polled longest ago is forgotten, which costs one more
/// call to the service. All entries together hold at most [`MAX_CLAIMS_HELD`]
/// of claims.
pub const MAX_SESSIONS: usize = 4096;
/// The service is asked about a session at most this often by one
/// replica at first, however often its page polls: a page in several
/// tabs, or a script, cannot multiply the calls to the service.
pub const SERVICE_POLL_SPACING: Duration = Duration::from_secs(1);
/// ... and at most this often once the session has waited a while: a
/// person takes seconds to scan and consent, and a session left pending
/// for minutes should cost little. The page's own backoff (1 s, growing
/// by half to 5 s) stays at or above [`spacing`], so its polls are
/// answered fresh.
pub const MAX_SERVICE_POLL_SPACING: Duration = Duration::from_secs(5);

/// How long a replica waits between asking the service about a session
/// of this age: a quarter of its age, from 1 s to 5 s.
pub fn spacing(age: Duration) -> Duration {
    (age / 4).clamp(SERVICE_POLL_SPACING, MAX_SERVICE_POLL_SPACING)
}
/// Claims one replica holds at once, all sessions together: a session's
/// claims may be 256 KiB (a portrait), and a full table of them would be
/// a gigabyte. Past it, the ended sessions polled longest ago are
/// forgotten; their next poll asks the service again (`assumptions`, 6).
pub const MAX_CLAIMS_HELD: usize = 64 * 1024 * 1024;
/// An entry is kept this long past its session's lifetime, so that a poll
/// just after the end reads the same ending and it is counted once.
const LINGER: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Entry {
    expires: Instant,
    /// When the service may next be asked.
    next_ask: Instant,
    /// A call about this session is in flight: however slow the service,
    /// a replica has at most one per session.
    asking: bool,
    ended: Option<Ending>,
    /// When this replica first saw the session verified: a login's
    /// `auth_time` (docs/oidc.md, "The ID token").
    verified_at: Option<Instant>,
    /// When a page last polled, for choosing what to forget.
    seen: Instant,
}

/// What a poll finds.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// Ask the service now; the ask is booked, and released by the
    /// [`Asking`] guard's record or drop.
    Ask,
    /// Still pending; asked recently, or being asked.
    Pending,
    Ended(Ending),
}

/// The sessions this replica was polled about.
#[derive(Debug, Default)]
pub struct Polls {
    by_id: HashMap<String, Entry>,
    /// The bytes of claims the entries hold.
    claims_bytes: usize,
}

/// The claims an entry holds, which [`MAX_CLAIMS_HELD`] bounds.
fn held(entry: &Entry) -> usize {
    match &entry.ended {
        Some(Ending::Verified(claims)) => claims.size(),
        _ => 0,
    }
}

impl Polls {
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Where session `id` (the service's), ending at `expires` and `age`
    /// old, stands, and its ending if it ended now (to be counted once per
    /// replica). A session past its lifetime ends expired, and its claims
    /// are no longer served.
    pub fn lookup(
        &mut self,
        id: &str,
        expires: Instant,
        age: Duration,
        now: Instant,
    ) -> (Lookup, Option<Ending>) {
        if !self.by_id.contains_key(id) {
            self.make_room(now);
            let entry = Entry {
                expires,
                next_ask: now,
                asking: false,
                ended: None,
                verified_at: None,
                seen: now,
            };
            self.by_id.insert(id.to_string(), entry);
        }
        let Some(entry) = self.by_id.get_mut(id) else {
            unreachable!("inserted above")
        };
        entry.seen = now;
        let mut newly = None;
        if now >= entry.expires && !matches!(entry.ended, Some(Ending::Expired)) {
            if entry.ended.is_none() {
                newly = Some(Ending::Expired);
            }
            self.claims_bytes -= held(entry);
            entry.ended = Some(Ending::Expired);
        }
        if let Some(ending) = &entry.ended {
            return (Lookup::Ended(ending.clone()), newly);
        }
        if entry.asking || now < entry.next_ask {
            return (Lookup::Pending, None);
        }
        entry.asking = true;
        entry.next_ask = now + spacing(age);
        (Lookup::Ask, None)
    }

    /// The claims session `id` ended with, if it ended verified here and
    /// is within its lifetime: what a token request finds without asking
    /// the service.
    pub fn verified(&self, id: &str) -> Option<Claims> {
        let entry = self.by_id.get(id)?;
        match &entry.ended {
            Some(Ending::Verified(claims)) if Instant::now() < entry.expires => {
                Some(claims.clone())
            }
            _ => None,
        }
    }

    /// When this replica first saw session `id` verified, while it
    /// remembers.
    pub fn verified_at(&self, id: &str) -> Option<Instant> {
        self.by_id.get(id)?.verified_at
    }

    /// Records what the service said of a session asked about; returns
    /// where it now stands and its ending if it ended now. A session that
    /// reached its lifetime while the service was asked expires.
    pub fn record(
        &mut self,
        id: &str,
        progress: Progress,
        now: Instant,
    ) -> (Lookup, Option<Ending>) {
        let Some(entry) = self.by_id.get_mut(id) else {
            // Forgotten meanwhile (past its lifetime, or the table was
            // full): the service's answer stands as it is; its lifetime is
            // not known here, and the next poll's lookup judges it.
            return match ending_of(progress, None, now) {
                Some(ending) => (Lookup::Ended(ending.clone()), Some(ending)),
                None => (Lookup::Pending, None),
            };
        };
        entry.asking = false;
        let mut newly = None;
        if entry.ended.is_none() {
            newly = ending_of(progress, Some(entry.expires), now);
            entry.ended.clone_from(&newly);
            if let Some(Ending::Verified(_)) = &newly {
                entry.verified_at = Some(now);
            }
            self.claims_bytes += held(entry);
        }
        let lookup = match &entry.ended {
            Some(ending) => Lookup::Ended(ending.clone()),
            None => Lookup::Pending,
        };
        self.shed_claims(id);
        (lookup, newly)
    }

    /// The ask booked for `id` gave no answer (the service failed, or the
    /// poll was dropped): the next poll after the spacing asks again.
    pub fn release(&mut self, id: &str) {
        if let Some(entry) = self.by_id.get_mut(id) {
            entry.asking = false;
        }
    }

    /// Forgets every session well past its lifetime, claims and all.
    pub fn sweep(&mut self, now: Instant) {
        self.forget(|entry| now >= entry.expires + LINGER);
    }

    /// Forgets the entries `gone` picks, and the claims they held.
    fn forget(&mut self, gone: impl Fn(&Entry) -> bool) {
        let mut freed = 0;
        self.by_id.retain(|_, entry| {
            let keep = !gone(entry);
            if !keep {
                freed += held(entry);
            }
            keep
        });
        self.claims_bytes -= freed;
    }

    /// Forgets the ended sessions polled longest ago, `id` aside, until
    /// the claims held fit [`MAX_CLAIMS_HELD`].
    fn shed_claims(&mut self, id: &str) {
        while self.claims_bytes > MAX_CLAIMS_HELD {
            let oldest = self
                .by_id
                .iter()
                .filter(|(other, entry)| *other != id && held(entry) > 0)
                .min_by_key(|(_, entry)| entry.seen)
                .map(|(other, _)| other.clone());
            let Some(oldest) = oldest else { return };
            if let Some(entry) = self.by_id.remove(&oldest) {
                self.claims_bytes -= held(&entry);
            }
        }
    }

    /// Room for one more entry: the sessions past their lifetime go first,
    /// then the one polled longest ago that no call is in flight for. Calls
    /// in flight are bounded (`MAX_SERVICE_CALLS`), so the table exceeds
    /// [`MAX_SESSIONS`] by at most that many.
    fn make_room(&mut self, now: Instant) {
        if self.by_id.len() < MAX_SESSIONS {
            return;
        }
        self.forget(|entry| now >= entry.expires);
        if self.by_id.len() < MAX_SESSIONS {
            return;
        }
        let oldest = self
            .by_id
            .iter()
            .filter(|(_, entry)| !entry.asking)
            .min_by_key(|(_, entry)| entry.seen)
            .map(|(id, _)| id.clone());
        if let Some(entry) = oldest.and_then(|id| self.by_id.remove(&id)) {
            self.claims_bytes -= held(&entry);
        }
    }
}

/// The ending `progress` makes, with a pending session past `expires`
/// ending expired.
fn ending_of(progress: Progress, expires: Option<Instant>, now: Instant) -> Option<Ending> {
    match progress {
        Progress::Pending if expires.is_some_and(|at| now >= at) => Some(Ending::Expired),
        Progress::Pending => None,
        Progress::Ended(ending) => Some(ending),
    }
}

/// An ask booked by [`Polls::lookup`]: recording its answer releases it,
/// and so does dropping it, so a poll cut off mid-call (its client gone,
/// an HTTP/2 reset) never leaves its session marked as being asked.
pub struct Asking<'a> {
    polls: &'a Mutex<Polls>,
    id: &'a str,
    armed: bool,
}

impl<'a> Asking<'a> {
    pub fn new(polls: &'a Mutex<Polls>, id: &'a str) -> Asking<'a> {
        Asking {
            polls,
            id,
            armed: true,
        }
    }

    /// What the service said; see [`Polls::record`].
    pub fn record(mut self, progress: Progress, now: Instant) -> (Lookup, Option<Ending>) {
        self.armed = false;
        lock(self.polls).record(self.id, progress, now)
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(self.polls).release(self.id);
        }
    }
}

/// The table; a panic elsewhere while it was held leaves it usable, since
/// every change to it is one step.
pub fn lock(polls: &Mutex<Polls>) -> std::sync::MutexGuard<'_, Polls> {
    polls.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verifier::assumptions::Claims;

    const TTL: Duration = Duration::from_secs(300);

    fn claims() -> Claims {
        let body = br#"{"status":"verified","claims":{"given_name":"Erika"}}"#;
        match super::super::assumptions::parse_progress(body).unwrap() {
            Progress::Ended(Ending::Verified(claims)) => claims,
            other => panic!("{other:?}"),
        }
    }

    fn asks(polls: &mut Polls, id: &str, expires: Instant, at: Instant) -> bool {
        polls.lookup(id, expires, Duration::ZERO, at).0 == Lookup::Ask
    }

    #[test]
    fn a_session_is_asked_about_less_often_as_it_ages() {
        assert_eq!(spacing(Duration::ZERO), SERVICE_POLL_SPACING);
        assert_eq!(spacing(Duration::from_secs(8)), Duration::from_secs(2));
        assert_eq!(spacing(Duration::from_secs(300)), MAX_SERVICE_POLL_SPACING);
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        let old = Duration::from_secs(60);
        assert_eq!(polls.lookup("tx", expires, old, now).0, Lookup::Ask);
        polls.release("tx");
        let soon = now + Duration::from_secs(4);
        assert_eq!(polls.lookup("tx", expires, old, soon).0, Lookup::Pending);
        let later = now + MAX_SERVICE_POLL_SPACING;
        assert_eq!(polls.lookup("tx", expires, old, later).0, Lookup::Ask);
    }

    #[test]
    fn the_service_is_asked_once_a_spacing_and_once_at_a_time() {
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        assert!(asks(&mut polls, "tx", expires, now));
        assert!(!asks(
            &mut polls,
            "tx",
            expires,
            now + Duration::from_millis(500)
        ));
        // Still in flight a minute later: a slow service gets no second ask.
        let later = now + Duration::from_secs(60);
        assert!(!asks(&mut polls, "tx", expires, later));
        polls.release("tx");
        assert!(asks(&mut polls, "tx", expires, later));
        polls.record("tx", Progress::Pending, later);
        assert!(!asks(&mut polls, "tx", expires, later));
        assert!(asks(
            &mut polls,
            "tx",
            expires,
            later + SERVICE_POLL_SPACING
        ));
    }

    #[test]
    fn a_dropped_ask_is_released_and_a_recorded_one_is_not_asked_again_at_once() {
        let polls = Mutex::new(Polls::default());
        let now = Instant::now();
        let expires = now + TTL;
        assert_eq!(
            lock(&polls).lookup("tx", expires, Duration::ZERO, now).0,
            Lookup::Ask
        );
        drop(Asking::new(&polls, "tx"));
        let later = now + SERVICE_POLL_SPACING;
        assert_eq!(
            lock(&polls).lookup("tx", expires, Duration::ZERO, later).0,
            Lookup::Ask
        );
        let (lookup, newly) =
            Asking::new(&polls, "tx").record(Progress::Ended(Ending::Declined), later);
        assert_eq!(lookup, Lookup::Ended(Ending::Declined));
        assert_eq!(newly, Some(Ending::Declined));
    }

    #[test]
    fn an_ending_is_reported_once_and_its_claims_end_with_the_lifetime() {
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        assert!(asks(&mut polls, "tx", expires, now));
        let (view, newly) = polls.record("tx", Progress::Ended(Ending::Verified(claims())), now);
        assert_eq!(view, Lookup::Ended(Ending::Verified(claims())));
        assert_eq!(newly, Some(Ending::Verified(claims())));
        assert_eq!(
            polls.record("tx", Progress::Ended(Ending::Declined), now).1,
            None
        );
        assert_eq!(
            polls.lookup("tx", expires, Duration::ZERO, now),
            (Lookup::Ended(Ending::Verified(claims())), None)
        );
        assert_eq!(
            polls.lookup("tx", expires, Duration::ZERO, expires),
            (Lookup::Ended(Ending::Expired), None),
            "no claims past the lifetime, and counted already"
        );
        polls.sweep(expires + LINGER);
        assert_eq!(polls.len(), 0, "the claims are forgotten");
    }

    #[test]
    fn a_pending_session_past_its_lifetime_expires_once() {
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        assert!(asks(&mut polls, "tx", expires, now));
        polls.record("tx", Progress::Pending, now);
        let (lookup, newly) = polls.lookup("tx", expires, Duration::ZERO, expires);
        assert_eq!(lookup, Lookup::Ended(Ending::Expired));
        assert_eq!(newly, Some(Ending::Expired));
        assert_eq!(polls.lookup("tx", expires, Duration::ZERO, expires).1, None);
        // First polled after its lifetime (started on another replica).
        let (lookup, newly) = polls.lookup("other", now, Duration::ZERO, expires);
        assert_eq!(
            (lookup, newly),
            (Lookup::Ended(Ending::Expired), Some(Ending::Expired))
        );
    }

    #[test]
    fn a_pending_answer_for_a_session_forgotten_meanwhile_stays_pending() {
        let now = Instant::now();
        let mut polls = Polls::default();
        assert_eq!(
            polls.record("gone", Progress::Pending, now),
            (Lookup::Pending, None)
        );
        assert_eq!(
            polls.record("gone", Progress::Ended(Ending::Declined), now),
            (Lookup::Ended(Ending::Declined), Some(Ending::Declined))
        );
    }

    #[test]
    fn a_session_whose_lifetime_ends_while_the_service_is_asked_expires_once() {
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        assert!(asks(
            &mut polls,
            "tx",
            expires,
            expires - Duration::from_millis(1)
        ));
        let (view, newly) = polls.record("tx", Progress::Pending, expires);
        assert_eq!(view, Lookup::Ended(Ending::Expired));
        assert_eq!(newly, Some(Ending::Expired));
        assert_eq!(
            polls.lookup("tx", expires, Duration::ZERO, expires).1,
            None,
            "counted once"
        );
    }

    #[test]
    fn claims_held_are_bounded_forgetting_the_ended_sessions_polled_longest_ago() {
        let now = Instant::now();
        let expires = now + TTL;
        let big = Claims::from_json(&format!(r#"{{"a":"{}"}}"#, "x".repeat(200 * 1024)));
        let fit = MAX_CLAIMS_HELD / big.size();
        let mut polls = Polls::default();
        for n in 0..=fit {
            let (id, at) = (format!("tx{n}"), now + Duration::from_millis(n as u64));
            assert!(asks(&mut polls, &id, expires, at));
            polls.record(&id, Progress::Ended(Ending::Verified(big.clone())), at);
            assert!(polls.claims_bytes <= MAX_CLAIMS_HELD);
        }
        assert_eq!(polls.len(), fit, "the first one went");
        assert!(!polls.by_id.contains_key("tx0"));
        polls.sweep(expires + LINGER);
        assert_eq!((polls.len(), polls.claims_bytes), (0, 0));
    }

    #[test]
    fn the_table_is_bounded_forgetting_the_longest_unpolled_but_not_one_being_asked() {
        let now = Instant::now();
        let expires = now + TTL;
        let mut polls = Polls::default();
        assert!(asks(&mut polls, "asked", expires, now));
        for n in 1..MAX_SESSIONS {
            let at = now + Duration::from_millis(n as u64);
            let id = format!("tx{n}");
            polls.lookup(&id, expires, Duration::ZERO, at);
            polls.release(&id);
        }
        assert_eq!(polls.len(), MAX_SESSIONS);
        let at = now + Duration::from_secs(10);
        polls.lookup("one-more", expires, Duration::ZERO, at);
        assert_eq!(polls.len(), MAX_SESSIONS);
        assert!(
            polls.by_id.contains_key("asked"),
            "a call in flight is kept"
        );
        assert!(
            !polls.by_id.contains_key("tx1"),
            "the longest unpolled goes"
        );
        // A forgotten session asks again: a call, never a wrong answer.
        assert!(asks(&mut polls, "tx1", expires, at));
    }
}
