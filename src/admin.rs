//! The admin listener: `/healthz`, `/readyz`, `/metrics`. It serves health
//! and metrics only, never a token.
//!
//! Readiness is a pure rule, [`readiness`], over facts read at one
//! instant, [`ReadinessFacts`]: the held token's time to retirement and
//! the renewal's progress, which the refresher publishes in its
//! [`RefreshState`]. The handler only gathers them and writes the answer
//! (docs/admin.md "Admin endpoints").

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Incoming;
use prometheus::{Encoder, Registry, TextEncoder};
use serde_json::json;
use tokio::time::Instant;

use crate::accounts::Accounts;
use crate::server::{Abort, Handler};
use crate::token::{RefreshState, Token, TokenHandle};

mod accounts;

/// A held token with less than this to go before it is retired keeps the
/// pod ready only while its renewal is on course: a request forwarded
/// just after the probe must still find a token lanyard will send. Short
/// tokens are renewed with less than this left (a 20 s token at 14-17 s,
/// retired at 18 s), so time alone cannot decide (docs/tokens.md "Token
/// lifetime").
pub const READY_MIN_REMAINING: Duration = Duration::from_secs(10);

/// How long a renewal may have been due with no token request sent yet
/// before it is overdue. The refresher sends the request the moment it
/// falls due and publishes that at once; the second absorbs a busy
/// runtime. A request in flight is never overdue, however long it takes:
/// the token request timeout ends it, and its failure then counts. So an
/// overdue renewal is one held back by the wait after an earlier failure
/// (a backoff, a `Retry-After`), or a refresher that no longer runs.
pub const OVERDUE_AFTER: Duration = Duration::from_secs(1);

/// What readiness is judged on, read at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadinessFacts {
    /// lanyard is shutting down.
    pub draining: bool,
    /// Time before the held token is retired; `None` when no usable token
    /// is held.
    pub retires_in: Option<Duration>,
    /// A token was obtained at some point: "none yet" is not "retired".
    pub ever_held: bool,
    pub renewal: RenewalFacts,
}

/// How the held token's renewal is going.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RenewalFacts {
    /// How long ago the renewal fell due; `None` while it is not due.
    pub due_for: Option<Duration>,
    /// Token requests that failed since it fell due.
    pub failures_since_due: u32,
    /// A token request is in flight.
    pub in_flight: bool,
    /// The refresher has stopped: nothing will renew the token.
    pub stopped: bool,
}

/// Where the renewal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Course {
    /// Not due yet: it comes on schedule.
    Scheduled,
    /// Due, with a token request in flight or about to be sent.
    Underway,
    /// A token request failed since it fell due.
    Failing,
    /// Due for more than [`OVERDUE_AFTER`], with no request sent.
    Overdue,
    /// The refresher has stopped.
    Stopped,
}

impl Course {
    /// A renewal on course will replace the token before it is retired,
    /// as far as anyone can tell yet.
    pub fn is_on_course(self) -> bool {
        matches!(self, Course::Scheduled | Course::Underway)
    }

    fn name(self) -> &'static str {
        match self {
            Course::Scheduled => "scheduled",
            Course::Underway => "underway",
            Course::Failing => "failing",
            Course::Overdue => "overdue",
            Course::Stopped => "stopped",
        }
    }
}

/// Where the renewal stands, from its facts alone.
pub fn course(renewal: &RenewalFacts) -> Course {
    if renewal.stopped {
        return Course::Stopped;
    }
    let Some(due_for) = renewal.due_for else {
        return Course::Scheduled;
    };
    if renewal.failures_since_due > 0 {
        Course::Failing
    } else if renewal.in_flight || due_for <= OVERDUE_AFTER {
        Course::Underway
    } else {
        Course::Overdue
    }
}

/// Why the pod is not ready; each has the sentence `/readyz` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotReady {
    ShuttingDown,
    NoTokenYet,
    Retired,
    RenewalFailing,
    RenewalOverdue,
    RefresherStopped,
}

impl NotReady {
    /// Fixed sentences: tests and scripts match them (the 10 s is
    /// [`READY_MIN_REMAINING`]).
    pub fn reason(self) -> &'static str {
        match self {
            NotReady::ShuttingDown => "shutting down",
            NotReady::NoTokenYet => "no token has been obtained yet",
            NotReady::Retired => {
                "the token has been retired (its expiry margin reached) and could not be renewed"
            }
            NotReady::RenewalFailing => {
                "the token has less than 10 s left before it is retired, and its renewal is failing"
            }
            NotReady::RenewalOverdue => {
                "the token has less than 10 s left before it is retired, and its renewal is overdue"
            }
            NotReady::RefresherStopped => {
                "the token has less than 10 s left before it is retired, and the token refresher has stopped"
            }
        }
    }
}

/// The readiness rule (docs/admin.md, `/readyz`): not ready while shutting down, while
/// no usable token is held, or while the held token has less than
/// [`READY_MIN_REMAINING`] to go and its renewal is not on course. A
/// renewal on schedule, however near the retirement, never makes the pod
/// unready: a Kubernetes readiness probe would take it out of its Service
/// in every renewal cycle of a short-lived token.
pub fn readiness(facts: &ReadinessFacts) -> Result<(), NotReady> {
    if facts.draining {
        return Err(NotReady::ShuttingDown);
    }
    let Some(left) = facts.retires_in else {
        return Err(if facts.ever_held {
            NotReady::Retired
        } else {
            NotReady::NoTokenYet
        });
    };
    if left >= READY_MIN_REMAINING {
        return Ok(());
    }
    match course(&facts.renewal) {
        Course::Scheduled | Course::Underway => Ok(()),
        Course::Failing => Err(NotReady::RenewalFailing),
        Course::Overdue => Err(NotReady::RenewalOverdue),
        Course::Stopped => Err(NotReady::RefresherStopped),
    }
}

impl ReadinessFacts {
    /// The facts at `now`: `token` is the held one if still usable,
    /// `stopped` whether the refresher has gone.
    pub fn read(
        token: Option<&Token>,
        state: &RefreshState,
        now: Instant,
        draining: bool,
        stopped: bool,
    ) -> ReadinessFacts {
        ReadinessFacts {
            draining,
            retires_in: token
                .map(|token| token.expires_at())
                .filter(|retired| *retired > now)
                .map(|retired| retired - now),
            ever_held: state.generation > 0,
            renewal: RenewalFacts {
                due_for: state
                    .renewal_due_at
                    .and_then(|due| now.checked_duration_since(due)),
                failures_since_due: state.failures_since_due,
                in_flight: state.in_flight_since.is_some(),
                stopped,
            },
        }
    }
}

/// Seconds from `now` to `at`, negative once past, to the millisecond.
fn seconds_from(now: Instant, at: Instant) -> f64 {
    let millis = if at >= now {
        (at - now).as_millis() as i64
    } else {
        -((now - at).as_millis() as i64)
    };
    millis as f64 / 1000.0
}

/// `/readyz`'s body, ready or not: the verdict and the facts behind it,
/// so that an operator sees a renewal going wrong before the pod turns
/// unready.
fn readiness_body(
    verdict: Result<(), NotReady>,
    token: Option<&Token>,
    state: &RefreshState,
    facts: &ReadinessFacts,
    now: Instant,
) -> serde_json::Value {
    let course = course(&facts.renewal);
    json!({
        "status": if verdict.is_ok() { "ready" } else { "not_ready" },
        "reason": verdict.err().map(NotReady::reason),
        "last_error": state.last_error.as_ref().map(ToString::to_string),
        "consecutive_failures": state.consecutive_failures,
        "token_expires_in_s": facts.retires_in.map(|left| left.as_secs()),
        "upstream_rejected_token": token.is_some_and(Token::is_rejected),
        "renewal": {
            "state": course.name(),
            "on_course": course.is_on_course(),
            "due_in_s": state.renewal_due_at.map(|due| seconds_from(now, due)),
            "in_flight": facts.renewal.in_flight,
            "next_attempt_in_s": state
                .next_attempt_at
                .map(|at| seconds_from(now, at).max(0.0)),
            "failures_since_due": state.failures_since_due,
        },
    })
}

/// One account's readiness facts, read now, with its state and token.
struct AccountFacts {
    token: Option<Arc<Token>>,
    state: RefreshState,
    facts: ReadinessFacts,
}

impl AccountFacts {
    fn read(tokens: &TokenHandle, now: Instant, draining: bool) -> AccountFacts {
        // The token before the state: the refresher stores a token, then
        // publishes, so the state read after is never older than the
        // token. A state older than the token would judge a fresh token by
        // its predecessor's failed renewal.
        let token = tokens.current();
        let watch = tokens.state();
        // The refresher task owns the sender: closed, it has stopped.
        let stopped = watch.has_changed().is_err();
        let state = watch.borrow().clone();
        let facts = ReadinessFacts::read(token.as_deref(), &state, now, draining, stopped);
        AccountFacts {
            token,
            state,
            facts,
        }
    }
}

/// The admin endpoints.
pub struct Admin {
    accounts: Accounts,
    registry: Registry,
    draining: Arc<AtomicBool>,
}

impl Admin {
    /// `draining` turns readiness off during shutdown.
    pub fn new(accounts: Accounts, registry: Registry, draining: Arc<AtomicBool>) -> Admin {
        Admin {
            accounts,
            registry,
            draining,
        }
    }

    /// `/readyz`'s status and JSON body, without a socket. The default
    /// account decides, as the one account always did; the directory's
    /// accounts are reported, never decisive (docs/accounts.md).
    pub fn readyz(&self) -> (StatusCode, serde_json::Value) {
        let now = Instant::now();
        let draining = self.draining.load(Ordering::Acquire);
        let routes = self.accounts.load();
        // An upstream 401 does not make the pod unready: lanyard still holds
        // a token within its lifetime and sends it, and a client could
        // otherwise take the pod out of service by calling one path that
        // answers 401 (docs/tokens.md "Token lifetime"). It is reported, not hidden.
        let (verdict, mut body) = match routes.default_account() {
            Some(account) => {
                let read = AccountFacts::read(account.tokens(), now, draining);
                let verdict = readiness(&read.facts);
                let body = readiness_body(
                    verdict,
                    read.token.as_deref(),
                    &read.state,
                    &read.facts,
                    now,
                );
                (verdict, body)
            }
            None => {
                let verdict = match draining {
                    true => Err(NotReady::ShuttingDown),
                    false => Ok(()),
                };
                let body = json!({
                    "status": if verdict.is_ok() { "ready" } else { "not_ready" },
                    "reason": verdict.err().map(NotReady::reason),
                });
                (verdict, body)
            }
        };
        if routes.by_path() {
            body["accounts"] = accounts::summary(&routes, now);
        }
        let status = match verdict {
            Ok(()) => StatusCode::OK,
            Err(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, body)
    }

    fn readiness_response(&self) -> Response<Full<Bytes>> {
        let (status, body) = self.readyz();
        json_response(status, &body)
    }

    fn metrics(&self) -> Response<Full<Bytes>> {
        let encoder = TextEncoder::new();
        let mut buffer = Vec::with_capacity(8 * 1024);
        if let Err(err) = encoder.encode(&self.registry.gather(), &mut buffer) {
            tracing::warn!(error = %err, "encoding metrics failed");
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "encoding metrics failed\n",
            );
        }
        let mut response = Response::new(Full::new(Bytes::from(buffer)));
        if let Ok(value) = HeaderValue::from_str(encoder.format_type()) {
            response.headers_mut().insert(header::CONTENT_TYPE, value);
        }
        response
    }
}

impl Handler for Admin {
    type Body = Full<Bytes>;

    async fn handle(
        &self,
        req: Request<Incoming>,
        _client: crate::server::Peer,
    ) -> Result<Response<Full<Bytes>>, Abort> {
        if req.method() != Method::GET && req.method() != Method::HEAD {
            let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
            response
                .headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            return Ok(response);
        }
        Ok(match req.uri().path() {
            "/healthz" => text(StatusCode::OK, "ok\n"),
            "/readyz" => self.readiness_response(),
            "/metrics" => self.metrics(),
            _ => text(
                StatusCode::NOT_FOUND,
                "not found: try /healthz, /readyz or /metrics\n",
            ),
        })
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests;
