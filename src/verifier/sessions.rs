//! The sessions the verifier has started: whose browser each belongs to,
//! where it stands, and when it ends. The table is bounded in size, in
//! sessions per browser, and in time (README "The verifier", Limits).
//!
//! Time is passed in, so the rules are tested without a clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::assumptions::{Claims, Progress};

/// Sessions held at once. Starts are rate-limited (see `limits`), so at the
/// default lifetime the table holds far fewer; this bounds memory when the
/// lifetime is set long: each session holds at most 16 KiB of claims.
pub const MAX_SESSIONS: usize = 4096;
/// Pending sessions one browser holds; a new start ends its oldest. A
/// person restarts a few times at most; a script reusing a cookie gains
/// nothing by starting more.
pub const MAX_PENDING_PER_BROWSER: usize = 4;
/// The service is asked about a session at most this often, however often
/// its page polls: a page in several tabs, or a script, cannot multiply
/// the calls to the service.
pub const SERVICE_POLL_SPACING: Duration = Duration::from_secs(1);

/// A browser, as its cookie names it: 128 random bits, hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Browser(String);

impl Browser {
    /// A new browser id from the operating system's random source.
    pub fn random() -> Browser {
        Browser(uuid::Uuid::new_v4().simple().to_string())
    }

    /// A cookie's value, if it is one lanyard could have set.
    pub fn from_cookie(value: &str) -> Option<Browser> {
        (value.len() == 32 && value.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| Browser(value.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Verified(Claims),
    Declined,
    Expired,
    Failed,
}

impl Ending {
    /// The `outcome` label of `lanyard_verifier_sessions_total`, and the
    /// page's status.
    pub fn outcome(&self) -> &'static str {
        match self {
            Ending::Verified(_) => "verified",
            Ending::Declined => "declined",
            Ending::Expired => "expired",
            Ending::Failed => "failed",
        }
    }
}

#[derive(Debug)]
struct Session {
    browser: Browser,
    started: Instant,
    expires: Instant,
    /// When the service may next be asked.
    next_poll: Instant,
    ended: Option<Ending>,
}

/// What a browser's poll finds.
#[derive(Debug, PartialEq)]
pub enum Lookup<'a> {
    /// No such session for this browser: never started, another
    /// browser's, or ended and forgotten.
    Unknown,
    /// Still pending; ask the service when `ask` is true, else answer
    /// pending.
    Pending {
        ask: bool,
        expires: Instant,
    },
    Ended(&'a Ending),
}

/// The table is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// The sessions, and their endings not yet counted.
#[derive(Debug)]
pub struct Sessions {
    by_id: HashMap<String, Session>,
    ttl: Duration,
}

impl Sessions {
    pub fn new(ttl: Duration) -> Sessions {
        Sessions {
            by_id: HashMap::new(),
            ttl,
        }
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// Whether a start may go to the service: the table has room once
    /// the ended sessions are swept.
    pub fn has_room(&self) -> bool {
        self.by_id.len() < MAX_SESSIONS
    }

    /// Holds a session the service started for `browser`, and returns the
    /// endings this caused: the browser's oldest pending session, when it
    /// already holds [`MAX_PENDING_PER_BROWSER`], ends expired.
    pub fn insert(
        &mut self,
        id: String,
        browser: &Browser,
        now: Instant,
    ) -> Result<(Instant, Vec<Ending>), Full> {
        if self.by_id.len() >= MAX_SESSIONS {
            return Err(Full);
        }
        let mut pending: Vec<(&String, Instant)> = self
            .by_id
            .iter()
            .filter(|(_, s)| s.browser == *browser && s.ended.is_none())
            .map(|(id, s)| (id, s.started))
            .collect();
        let mut endings = Vec::new();
        if pending.len() >= MAX_PENDING_PER_BROWSER {
            pending.sort_by_key(|(_, started)| *started);
            let excess = pending.len() + 1 - MAX_PENDING_PER_BROWSER;
            let oldest: Vec<String> = pending[..excess]
                .iter()
                .map(|(id, _)| (*id).clone())
                .collect();
            for id in oldest {
                self.by_id.remove(&id);
                endings.push(Ending::Expired);
            }
        }
        let expires = now + self.ttl;
        self.by_id.insert(
            id,
            Session {
                browser: browser.clone(),
                started: now,
                expires,
                next_poll: now,
                ended: None,
            },
        );
        Ok((expires, endings))
    }

    /// What `browser` may know of session `id`. A pending session past its
    /// lifetime ends expired here (the ending is returned to be counted);
    /// when the service may be asked, the next ask is booked.
    pub fn lookup(
        &mut self,
        id: &str,
        browser: &Browser,
        now: Instant,
    ) -> (Lookup<'_>, Option<Ending>) {
        let Some(session) = self.by_id.get_mut(id) else {
            return (Lookup::Unknown, None);
        };
        if session.browser != *browser {
            return (Lookup::Unknown, None);
        }
        let mut newly = None;
        if session.ended.is_none() && now >= session.expires {
            session.ended = Some(Ending::Expired);
            newly = Some(Ending::Expired);
        }
        if let Some(ending) = &session.ended {
            return (Lookup::Ended(ending), newly);
        }
        let ask = now >= session.next_poll;
        if ask {
            session.next_poll = now + SERVICE_POLL_SPACING;
        }
        (
            Lookup::Pending {
                ask,
                expires: session.expires,
            },
            None,
        )
    }

    /// Records what the service said of a pending session; returns the
    /// ending when this ended it.
    pub fn record(&mut self, id: &str, progress: Progress) -> Option<Ending> {
        let session = self.by_id.get_mut(id)?;
        if session.ended.is_some() {
            return None;
        }
        let ending = match progress {
            Progress::Pending => return None,
            Progress::Verified(claims) => Ending::Verified(claims),
            Progress::Declined => Ending::Declined,
            Progress::Expired => Ending::Expired,
            Progress::Failed => Ending::Failed,
        };
        session.ended = Some(ending.clone());
        Some(ending)
    }

    /// Forgets every session past its lifetime, claims and all, and
    /// returns the endings of those still pending (they expired).
    pub fn sweep(&mut self, now: Instant) -> Vec<Ending> {
        let mut endings = Vec::new();
        self.by_id.retain(|_, session| {
            let live = now < session.expires;
            if !live && session.ended.is_none() {
                endings.push(Ending::Expired);
            }
            live
        });
        endings
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(300);

    fn claims() -> Claims {
        serde_json::json!({"given_name": "Erika"})
            .as_object()
            .unwrap()
            .clone()
    }

    #[test]
    fn a_session_answers_only_its_own_browser() {
        let now = Instant::now();
        let (mine, theirs) = (Browser::random(), Browser::random());
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &mine, now).unwrap();
        assert!(matches!(
            sessions.lookup("tx", &mine, now).0,
            Lookup::Pending { ask: true, .. }
        ));
        assert_eq!(sessions.lookup("tx", &theirs, now).0, Lookup::Unknown);
        assert_eq!(sessions.lookup("other", &mine, now).0, Lookup::Unknown);
    }

    #[test]
    fn the_service_is_asked_at_most_once_a_second_per_session() {
        let now = Instant::now();
        let browser = Browser::random();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &browser, now).unwrap();
        let asks = |sessions: &mut Sessions, at| {
            matches!(
                sessions.lookup("tx", &browser, at).0,
                Lookup::Pending { ask: true, .. }
            )
        };
        assert!(asks(&mut sessions, now));
        assert!(!asks(&mut sessions, now + Duration::from_millis(500)));
        assert!(asks(&mut sessions, now + SERVICE_POLL_SPACING));
    }

    #[test]
    fn an_ending_is_reported_once_and_then_kept_until_the_lifetime_ends() {
        let now = Instant::now();
        let browser = Browser::random();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &browser, now).unwrap();
        assert_eq!(sessions.record("tx", Progress::Pending), None);
        assert_eq!(
            sessions.record("tx", Progress::Verified(claims())),
            Some(Ending::Verified(claims()))
        );
        assert_eq!(sessions.record("tx", Progress::Declined), None);
        assert_eq!(
            sessions.lookup("tx", &browser, now).0,
            Lookup::Ended(&Ending::Verified(claims()))
        );
        assert!(sessions.sweep(now + TTL).is_empty(), "counted already");
        assert!(sessions.is_empty(), "the claims are forgotten");
    }

    #[test]
    fn a_pending_session_past_its_lifetime_expires_once() {
        let now = Instant::now();
        let browser = Browser::random();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("a".into(), &browser, now).unwrap();
        sessions.insert("b".into(), &browser, now).unwrap();
        let later = now + TTL;
        let (lookup, newly) = sessions.lookup("a", &browser, later);
        assert_eq!(lookup, Lookup::Ended(&Ending::Expired));
        assert_eq!(newly, Some(Ending::Expired));
        assert_eq!(sessions.lookup("a", &browser, later).1, None);
        assert_eq!(sessions.sweep(later), vec![Ending::Expired], "b only");
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_browser_holds_a_few_pending_sessions_the_oldest_giving_way() {
        let now = Instant::now();
        let browser = Browser::random();
        let mut sessions = Sessions::new(TTL);
        for n in 0..MAX_PENDING_PER_BROWSER {
            let at = now + Duration::from_secs(n as u64);
            let (_, endings) = sessions.insert(format!("tx{n}"), &browser, at).unwrap();
            assert!(endings.is_empty());
        }
        let at = now + Duration::from_secs(60);
        let (_, endings) = sessions.insert("newest".into(), &browser, at).unwrap();
        assert_eq!(endings, vec![Ending::Expired]);
        assert_eq!(sessions.lookup("tx0", &browser, at).0, Lookup::Unknown);
        assert_eq!(sessions.len(), MAX_PENDING_PER_BROWSER);
        // Another browser is not affected.
        let (_, endings) = sessions.insert("x".into(), &Browser::random(), at).unwrap();
        assert!(endings.is_empty());
    }

    #[test]
    fn the_table_is_bounded() {
        let now = Instant::now();
        let mut sessions = Sessions::new(TTL);
        for n in 0..MAX_SESSIONS {
            sessions
                .insert(format!("tx{n}"), &Browser::random(), now)
                .unwrap();
        }
        assert!(!sessions.has_room());
        assert_eq!(
            sessions.insert("one-more".into(), &Browser::random(), now),
            Err(Full)
        );
    }

    #[test]
    fn only_cookie_values_lanyard_could_have_set_are_taken() {
        let browser = Browser::random();
        assert_eq!(Browser::from_cookie(browser.as_str()), Some(browser));
        for bad in ["", "abc", &"z".repeat(32), &"a".repeat(33)] {
            assert_eq!(Browser::from_cookie(bad), None, "{bad}");
        }
    }
}
