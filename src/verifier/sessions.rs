//! The sessions the verifier has started: whose browser each belongs to,
//! where it stands, and when it ends. The table is bounded in size, in
//! sessions per browser, and in time (README "The verifier", Limits).
//!
//! Time is passed in, so the rules are tested without a clock.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use aws_lc_rs::hmac;
use aws_lc_rs::rand::SystemRandom;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

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

/// A browser, as its cookie names it: 128 random bits, hex. Its `Debug`
/// hides it: it is what binds a session to its browser.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Browser(String);

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Browser([redacted])")
    }
}

/// Signs the browser ids lanyard issues, so that only an id it issued
/// names a browser: a cookie planted by someone else (another subdomain,
/// or a network on plain http) cannot fix a victim's browser id to one the
/// planter knows. The key is made at start-up; a restart forgets every
/// session anyway.
pub struct CookieKey(hmac::Key);

impl CookieKey {
    pub fn random() -> Result<CookieKey, String> {
        hmac::Key::generate(hmac::HMAC_SHA256, &SystemRandom::new())
            .map(CookieKey)
            .map_err(|_| "cannot make the verifier's cookie key".to_string())
    }

    /// A new browser, and the cookie value that names it:
    /// `{id}.{HMAC-SHA256(id), base64url}`.
    pub fn issue(&self) -> (Browser, String) {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let tag = URL_SAFE_NO_PAD.encode(hmac::sign(&self.0, id.as_bytes()).as_ref());
        let value = format!("{id}.{tag}");
        (Browser(id), value)
    }

    /// The browser a cookie value names, if lanyard issued it.
    pub fn verify(&self, value: &str) -> Option<Browser> {
        let (id, tag) = value.split_once('.')?;
        let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
        let well_formed =
            id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        (well_formed && hmac::verify(&self.0, id.as_bytes(), &tag).is_ok())
            .then(|| Browser(id.to_string()))
    }
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// A call to the service about this session is in flight: however
    /// slow the service, one session has at most one.
    asking: bool,
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

/// Why a session was not taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The table is full.
    Full,
    /// The service gave an id a live session has already.
    Duplicate,
}

/// The sessions started, each with its browser and its state.
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

    /// Whether a start may go to the service: the table has room (sweep
    /// first, to count the sessions past their lifetime out).
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
    ) -> Result<(Instant, Vec<Ending>), Refused> {
        if self.by_id.len() >= MAX_SESSIONS {
            return Err(Refused::Full);
        }
        if self.by_id.contains_key(&id) {
            return Err(Refused::Duplicate);
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
                asking: false,
                ended: None,
            },
        );
        Ok((expires, endings))
    }

    /// What `browser` may know of session `id`. A pending session past its
    /// lifetime ends expired here (the ending is returned to be counted).
    /// When the service may be asked (no ask in flight, none within the
    /// spacing), the ask is booked: the caller reports its result with
    /// [`Sessions::record`] or [`Sessions::unanswered`].
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
        let ask = !session.asking && now >= session.next_poll;
        if ask {
            session.asking = true;
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

    /// Records what the service said of a session asked about, and
    /// returns where it now stands with the ending to count, if it ended
    /// now: by what the service said, or by its lifetime running out while
    /// the service was asked. A session gone meanwhile (given way to a
    /// newer one, or swept) is `Unknown`.
    pub fn record(
        &mut self,
        id: &str,
        progress: Progress,
        now: Instant,
    ) -> (Lookup<'_>, Option<Ending>) {
        let Some(session) = self.by_id.get_mut(id) else {
            return (Lookup::Unknown, None);
        };
        session.asking = false;
        let mut newly = None;
        if session.ended.is_none() {
            let ending = match progress {
                Progress::Pending if now >= session.expires => Some(Ending::Expired),
                Progress::Pending => None,
                Progress::Verified(claims) => Some(Ending::Verified(claims)),
                Progress::Declined => Some(Ending::Declined),
                Progress::Expired => Some(Ending::Expired),
                Progress::Failed => Some(Ending::Failed),
            };
            if let Some(ending) = ending {
                session.ended = Some(ending.clone());
                newly = Some(ending);
            }
        }
        let lookup = match &session.ended {
            Some(ending) => Lookup::Ended(ending),
            None => Lookup::Pending {
                ask: false,
                expires: session.expires,
            },
        };
        (lookup, newly)
    }

    /// The service gave no usable answer about a session asked about; the
    /// next poll after the spacing may ask again.
    pub fn unanswered(&mut self, id: &str) {
        if let Some(session) = self.by_id.get_mut(id) {
            session.asking = false;
        }
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

    fn claims() -> super::super::assumptions::Claims {
        let body = br#"{"status":"verified","claims":{"given_name":"Erika"}}"#;
        match super::super::assumptions::parse_progress(body).unwrap() {
            Progress::Verified(claims) => claims,
            other => panic!("{other:?}"),
        }
    }

    fn browser() -> Browser {
        CookieKey::random().unwrap().issue().0
    }

    fn asks(sessions: &mut Sessions, id: &str, browser: &Browser, at: Instant) -> bool {
        matches!(
            sessions.lookup(id, browser, at).0,
            Lookup::Pending { ask: true, .. }
        )
    }

    #[test]
    fn a_session_answers_only_its_own_browser() {
        let now = Instant::now();
        let (mine, theirs) = (browser(), browser());
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &mine, now).unwrap();
        assert!(asks(&mut sessions, "tx", &mine, now));
        assert_eq!(sessions.lookup("tx", &theirs, now).0, Lookup::Unknown);
        assert_eq!(sessions.lookup("other", &mine, now).0, Lookup::Unknown);
    }

    #[test]
    fn the_service_is_asked_once_a_second_and_once_at_a_time() {
        let now = Instant::now();
        let b = browser();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &b, now).unwrap();
        assert!(asks(&mut sessions, "tx", &b, now));
        assert!(!asks(
            &mut sessions,
            "tx",
            &b,
            now + Duration::from_millis(500)
        ));
        // Still in flight a minute later: a slow service gets no second ask.
        let later = now + Duration::from_secs(60);
        assert!(!asks(&mut sessions, "tx", &b, later));
        sessions.unanswered("tx");
        assert!(asks(&mut sessions, "tx", &b, later));
        sessions.record("tx", Progress::Pending, later);
        assert!(!asks(&mut sessions, "tx", &b, later));
        assert!(asks(&mut sessions, "tx", &b, later + SERVICE_POLL_SPACING));
    }

    #[test]
    fn an_ending_is_reported_once_and_then_kept_until_the_lifetime_ends() {
        let now = Instant::now();
        let b = browser();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &b, now).unwrap();
        assert_eq!(sessions.record("tx", Progress::Pending, now).1, None);
        let (view, newly) = sessions.record("tx", Progress::Verified(claims()), now);
        assert_eq!(view, Lookup::Ended(&Ending::Verified(claims())));
        assert_eq!(newly, Some(Ending::Verified(claims())));
        assert_eq!(sessions.record("tx", Progress::Declined, now).1, None);
        assert_eq!(
            sessions.lookup("tx", &b, now).0,
            Lookup::Ended(&Ending::Verified(claims()))
        );
        assert!(sessions.sweep(now + TTL).is_empty(), "counted already");
        assert!(sessions.is_empty(), "the claims are forgotten");
    }

    #[test]
    fn a_pending_session_past_its_lifetime_expires_once() {
        let now = Instant::now();
        let b = browser();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("a".into(), &b, now).unwrap();
        sessions.insert("b".into(), &b, now).unwrap();
        let later = now + TTL;
        let (lookup, newly) = sessions.lookup("a", &b, later);
        assert_eq!(lookup, Lookup::Ended(&Ending::Expired));
        assert_eq!(newly, Some(Ending::Expired));
        assert_eq!(sessions.lookup("a", &b, later).1, None);
        assert_eq!(sessions.sweep(later), vec![Ending::Expired], "b only");
        assert!(sessions.is_empty());
    }

    #[test]
    fn a_session_whose_lifetime_ends_while_the_service_is_asked_expires_once() {
        let now = Instant::now();
        let b = browser();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx".into(), &b, now).unwrap();
        let just_before = now + TTL - Duration::from_millis(1);
        assert!(asks(&mut sessions, "tx", &b, just_before));
        let (view, newly) = sessions.record("tx", Progress::Pending, now + TTL);
        assert_eq!(view, Lookup::Ended(&Ending::Expired));
        assert_eq!(newly, Some(Ending::Expired));
        assert!(sessions.sweep(now + TTL).is_empty(), "counted once");
    }

    #[test]
    fn a_browser_holds_a_few_pending_sessions_the_oldest_giving_way() {
        let now = Instant::now();
        let b = browser();
        let mut sessions = Sessions::new(TTL);
        for n in 0..MAX_PENDING_PER_BROWSER {
            let at = now + Duration::from_secs(n as u64);
            let (_, endings) = sessions.insert(format!("tx{n}"), &b, at).unwrap();
            assert!(endings.is_empty());
        }
        let at = now + Duration::from_secs(60);
        let (_, endings) = sessions.insert("newest".into(), &b, at).unwrap();
        assert_eq!(endings, vec![Ending::Expired]);
        assert_eq!(sessions.lookup("tx0", &b, at).0, Lookup::Unknown);
        assert_eq!(sessions.len(), MAX_PENDING_PER_BROWSER);
        // Another browser is not affected.
        let (_, endings) = sessions.insert("x".into(), &browser(), at).unwrap();
        assert!(endings.is_empty());
    }

    #[test]
    fn the_table_is_bounded_and_an_id_is_taken_once() {
        let now = Instant::now();
        let mut sessions = Sessions::new(TTL);
        sessions.insert("tx0".into(), &browser(), now).unwrap();
        assert_eq!(
            sessions.insert("tx0".into(), &browser(), now),
            Err(Refused::Duplicate)
        );
        for n in 1..MAX_SESSIONS {
            sessions.insert(format!("tx{n}"), &browser(), now).unwrap();
        }
        assert!(!sessions.has_room());
        assert_eq!(
            sessions.insert("one-more".into(), &browser(), now),
            Err(Refused::Full)
        );
    }

    #[test]
    fn only_cookies_lanyard_issued_name_a_browser() {
        let key = CookieKey::random().unwrap();
        let (browser, cookie) = key.issue();
        assert_eq!(key.verify(&cookie), Some(browser.clone()));
        let id = cookie.split_once('.').unwrap().0;
        let other_key = CookieKey::random().unwrap();
        for forged in [
            id.to_string(),
            format!("{id}."),
            format!("{id}.AAAA"),
            other_key.issue().1,
            cookie.to_uppercase(),
            String::new(),
        ] {
            assert_eq!(key.verify(&forged), None, "{forged}");
        }
        assert!(!format!("{browser:?}").contains(id));
    }
}
