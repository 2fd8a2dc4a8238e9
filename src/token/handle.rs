//! How the rest of lanyard reaches the refresher: it reads the token and
//! the refresher's published state, and reports what it saw. It decides
//! nothing; every decision is the refresher's (docs/tokens.md "Renewal and
//! retries").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use tokio::sync::{Notify, watch};
use tokio::time::Instant;

use super::cell::{Token, TokenCell};
use super::demand::Demand;
use super::exchange::ExchangeError;

/// What the refresher has done, published after each of its decisions;
/// callers waiting for a renewal read their answer here.
#[derive(Debug, Clone, Default)]
pub struct RefreshState {
    /// Generation of the newest token obtained (0: none yet). A renewal is
    /// done when the cell holds a token newer than the rejected one.
    pub generation: u64,
    /// Token requests completed, successful or not.
    pub attempts: u64,
    /// Failures since the last success.
    pub consecutive_failures: u32,
    /// The last failure, cleared by a success.
    pub last_error: Option<ExchangeError>,
    /// Forced renewals declined: too soon after the last one, while
    /// backing off from failures, or within the token endpoint's
    /// `Retry-After`.
    pub forced_declined: u64,
    /// When the held token's scheduled renewal falls due (none before the
    /// first token). Readiness asks whether a renewal that fell due is on
    /// course, so that scheduled renewal alone never makes a pod unready
    /// (docs/tokens.md "Token lifetime").
    pub renewal_due_at: Option<Instant>,
    /// Token requests that failed since `renewal_due_at` passed, counted
    /// when they ended; cleared by a success. Failures before it (a forced
    /// renewal after an upstream 401) say nothing about the renewal.
    pub failures_since_due: u32,
    /// When the token request in flight was sent; none while the
    /// refresher waits.
    pub in_flight_since: Option<Instant>,
    /// When the refresher means to send its next token request, while it
    /// waits (none while one is in flight). A forced renewal may come
    /// sooner.
    pub next_attempt_at: Option<Instant>,
    /// An on-demand account not renewing: no request has used it lately,
    /// or yet ([`super::demand`]).
    pub idle: bool,
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

/// What a handle tells the refresher. Facts, not requests: the refresher
/// alone decides what follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Report {
    /// The upstream answered 401 to the token of this generation.
    Rejected { generation: u64 },
    /// The credentials file changed and the new one is in use.
    CredentialsChanged,
}

/// What every handle shares with the refresher: the token it publishes,
/// the state it publishes, and where reports go.
pub(super) struct RefresherLink {
    pub(super) cell: TokenCell,
    pub(super) reports: Reports,
    /// The refresher task owns the sender, so waiters learn when it stops.
    pub(super) state: watch::Receiver<RefreshState>,
    /// `Some` for an account kept on demand.
    pub(super) demand: Option<Arc<Demand>>,
}

/// The reports not yet read, merged as the refresher reads them: the
/// newest generation reported rejected, and whether the credentials
/// changed. However many requests report, it holds two words and a
/// wake-up, rather than a queue of reports, whose first block every
/// account of a directory would carry (docs/accounts.md "Memory").
#[derive(Debug, Default)]
pub(super) struct Reports {
    /// One more than the newest generation reported rejected; 0: none.
    rejected: AtomicU64,
    credentials_changed: AtomicBool,
    arrived: Notify,
}

impl Reports {
    pub(super) fn send(&self, report: Report) {
        match report {
            Report::Rejected { generation } => {
                self.rejected
                    .fetch_max(generation.saturating_add(1), Ordering::SeqCst);
            }
            Report::CredentialsChanged => self.credentials_changed.store(true, Ordering::SeqCst),
        }
        // A report sent while the refresher is busy leaves a permit: its
        // next wait ends at once, and it reads the report then.
        self.arrived.notify_one();
    }

    /// Completes once a report may have arrived since the last one read.
    pub(super) async fn arrived(&self) {
        self.arrived.notified().await;
    }

    /// The reports sent since the last take: none, or one of each kind.
    pub(super) fn take(&self) -> impl Iterator<Item = Report> + use<> {
        let rejected = match self.rejected.swap(0, Ordering::SeqCst) {
            0 => None,
            after => Some(Report::Rejected {
                generation: after - 1,
            }),
        };
        let changed = self
            .credentials_changed
            .swap(false, Ordering::SeqCst)
            .then_some(Report::CredentialsChanged);
        rejected.into_iter().chain(changed)
    }
}

/// Cheap to clone; every clone sees the same token.
#[derive(Clone)]
pub struct TokenHandle {
    link: Arc<RefresherLink>,
}

impl std::fmt::Debug for TokenHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenHandle")
            .field("token", &self.link.cell.load())
            .finish()
    }
}

impl TokenHandle {
    pub(super) fn new(link: Arc<RefresherLink>) -> Self {
        TokenHandle { link }
    }

    /// The held token, if it is still valid. Lock-free.
    pub fn current(&self) -> Option<Arc<Token>> {
        self.link.cell.valid()
    }

    /// The refresher's progress, to watch or inspect.
    pub fn state(&self) -> watch::Receiver<RefreshState> {
        self.link.state.clone()
    }

    /// A token for a request: the held one while usable. When the upstream
    /// has rejected it, the shared renewal's result; when no new token can
    /// be had (the endpoint down or failing, renewals throttled), the held
    /// one still, so that the upstream judges each request: one replica's
    /// 401 must not become an outage of lanyard's own making (docs/tokens.md
    /// "Renewal and retries").
    pub async fn get(&self) -> Result<Arc<Token>, Unavailable> {
        let Some(token) = self.link.cell.valid() else {
            return self.first_needed().await;
        };
        if let Some(demand) = &self.link.demand {
            demand.used();
        }
        // The refresher marks the held token once it has read a report of
        // its rejection; until then, this is one load and one flag.
        if !token.is_rejected() {
            return Ok(token);
        }
        match self.renew_after_rejection(&token).await {
            Ok(fresh) => Ok(fresh),
            Err(_) => self.link.cell.valid().ok_or(Unavailable::NoToken),
        }
    }

    /// No valid token is held. An on-demand account is asked for one, and
    /// the request waits for it, at most `LANYARD_TOKEN_TIMEOUT`; any other
    /// has none to give.
    async fn first_needed(&self) -> Result<Arc<Token>, Unavailable> {
        let Some(demand) = &self.link.demand else {
            return Err(Unavailable::NoToken);
        };
        let mut state = self.link.state.clone();
        let attempts_before = state.borrow_and_update().attempts;
        demand.used();
        // Awake and waiting out a failure's backoff past the wait: nothing
        // will come in time, and a single account would answer at once
        // too. A token stored since `get` looked is served: the refresher
        // stores it before it publishes the state read here.
        {
            let now = state.borrow();
            let beyond_wait = Instant::now() + demand.first_wait;
            let backing_off = !demand.is_dormant()
                && now.in_flight_since.is_none()
                && now.next_attempt_at.is_some_and(|at| at > beyond_wait);
            if let (true, Some(err)) = (backing_off, &now.last_error) {
                return match self.link.cell.valid() {
                    Some(token) => Ok(token),
                    None => Err(Unavailable::RenewalFailed(err.clone())),
                };
            }
        }
        let arrived = async {
            loop {
                // The refresher stores a new token before it publishes.
                if let Some(token) = self.link.cell.valid() {
                    return Ok(token);
                }
                {
                    let now = state.borrow_and_update();
                    if now.attempts > attempts_before
                        && let Some(err) = &now.last_error
                    {
                        return Err(Unavailable::RenewalFailed(err.clone()));
                    }
                }
                state.changed().await.map_err(|_| Unavailable::Stopped)?;
            }
        };
        tokio::time::timeout(demand.first_wait, arrived)
            .await
            .unwrap_or(Err(Unavailable::NoToken))
    }

    /// Whether this account is kept on demand and is not renewing now.
    pub fn is_idle(&self) -> bool {
        self.link.demand.as_ref().is_some_and(|d| d.is_dormant())
    }

    /// Whether this account is kept on demand.
    pub fn on_demand(&self) -> bool {
        self.link.demand.is_some()
    }

    /// Asks for a token with new credentials now, past any backoff: a
    /// failure so far may have been the old credentials' fault. The held
    /// token keeps serving until the new one arrives.
    pub fn renew_for_new_credentials(&self) {
        // A stopped refresher has nothing to renew.
        self.link.reports.send(Report::CredentialsChanged);
    }

    /// Reports that the upstream answered 401 to `rejected`, and waits for
    /// the refresher's answer: its replacement, or why there is none yet.
    /// Concurrent callers for the same token share one token request; a
    /// caller whose token was already replaced gets the replacement at once.
    pub async fn renew_after_rejection(&self, rejected: &Token) -> Result<Arc<Token>, Unavailable> {
        let generation = rejected.generation();
        let mut state = self.link.state.clone();
        // Taken before the report, so that every answer the refresher
        // publishes after reading it shows as a change from here.
        let (attempts_before, declined_before) = {
            let now = state.borrow_and_update();
            (now.attempts, now.forced_declined)
        };
        if let Some(token) = self.newer_than(generation) {
            return Ok(token);
        }
        // A stopped refresher reads no report: the wait below ends with
        // its published state.
        self.link.reports.send(Report::Rejected { generation });
        loop {
            state.changed().await.map_err(|_| Unavailable::Stopped)?;
            // The refresher stores a new token before it publishes.
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
        self.link
            .cell
            .valid()
            .filter(|token| token.generation() > generation)
    }

    /// Waits until a token is held or an attempt fails, for commands that
    /// need exactly one answer.
    pub async fn first_outcome(&self) -> Result<Arc<Token>, Unavailable> {
        let mut state = self.link.state.clone();
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
