//! The two calls of the verifier's API, `POST /api/start` and `GET
//! /api/status`, and what their answers are made of (README "The
//! verifier").

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use serde_json::json;

use super::assumptions::{self, Progress, Started};
use super::errors::VerifierError;
use super::limits::{Client, Refused, client_address};
use super::page;
use super::service::CallError;
use super::sessions::{Browser, CookieKey, Ending, Lookup, Refused as NotHeld};
use super::{COOKIE, Inner};

/// `/api/start` takes no input; a body beyond this is not the page's.
const MAX_START_BODY: usize = 1024;
/// A failing call to the service is logged at most this often, with how
/// many failed meanwhile: an outage must not become a line per session
/// per second.
const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What a call ends with when it is not a success.
pub(super) enum Answer {
    Error(VerifierError),
    /// The client is gone or stalled; close without an answer.
    Abort,
}

impl From<VerifierError> for Answer {
    fn from(error: VerifierError) -> Self {
        Answer::Error(error)
    }
}

type Result<T> = std::result::Result<T, Answer>;

impl Inner {
    /// `POST /api/start`: a session with the service, bound to this
    /// browser.
    pub(super) async fn start(
        &self,
        req: Request<Incoming>,
        client: SocketAddr,
    ) -> Result<Response<Full<Bytes>>> {
        let (parts, body) = req.into_parts();
        // A JSON content type makes another site's page send a CORS
        // preflight first, which lanyard never grants: the answer to
        // browsers that send no Fetch Metadata (see `cross_site`).
        if !is_json(&parts.headers) {
            return Err(VerifierError::NotJson.into());
        }
        read_small_body(body, &parts.headers, self.body_timeout).await?;
        let cookie = browser_of(&parts.headers, &self.cookies);

        let address = client_address(&parts.headers, client.ip(), self.forwarded_hops);
        self.limits.take(Client::of(address)).map_err(|refused| {
            let (retry_after, who) = match refused {
                Refused::Client { retry_after } => (retry_after, "this client"),
                Refused::Everyone { retry_after } => (retry_after, "all clients together"),
            };
            tracing::debug!(client = %address, who, "verification start refused: rate limit");
            VerifierError::RateLimited { retry_after }
        })?;
        {
            let mut sessions = self.sessions();
            if !sessions.has_room() {
                let endings = sessions.sweep(Instant::now());
                self.count_all(&endings);
            }
            if !sessions.has_room() {
                tracing::warn!(
                    sessions = sessions.len(),
                    "the verifier holds as many sessions as it allows; refusing new ones until some end"
                );
                return Err(VerifierError::Busy.into());
            }
        }

        let started = {
            // Waits for a call slot no longer than a call may take.
            let permit = tokio::time::timeout(self.service.timeout(), self.calls.acquire()).await;
            let Ok(Ok(_permit)) = permit else {
                return Err(VerifierError::Busy.into());
            };
            self.service.start().await
        };
        let Started {
            transaction_id,
            request_uri,
        } = started.map_err(|err| {
            self.log_call_failure("start", &err);
            self.count("failed");
            VerifierError::from_call(&err)
        })?;
        let Some(qr_svg) = page::qr_svg(&request_uri) else {
            // request_uri's bound keeps it within a QR code's capacity.
            tracing::warn!("the service's request_uri does not fit a QR code");
            self.count("failed");
            return Err(VerifierError::ServiceFailed.into());
        };
        let (browser, new_cookie) = match cookie {
            Some(browser) => (browser, None),
            None => {
                let (browser, value) = self.cookies.issue();
                (browser, Some(value))
            }
        };
        let now = Instant::now();
        let inserted = self
            .sessions()
            .insert(transaction_id.clone(), &browser, now);
        let (expires, endings) = inserted.map_err(|refused| {
            self.count("failed");
            match refused {
                NotHeld::Full => VerifierError::Busy,
                NotHeld::Duplicate => {
                    tracing::warn!(
                        transaction_id,
                        "the service started a session with the id of one still held; refusing it"
                    );
                    VerifierError::ServiceFailed
                }
            }
        })?;
        self.count("started");
        self.count_all(&endings);
        tracing::info!(transaction_id, "verification session started");

        let body = json!({
            "transaction_id": transaction_id,
            "request_uri": request_uri,
            "wallet_url": assumptions::wallet_url(&self.wallet, &request_uri),
            "qr_svg": qr_svg,
            "expires_in": expires.saturating_duration_since(now).as_secs(),
        });
        let mut response = json_answer(body.to_string());
        if let Some(value) = new_cookie {
            let secure = forwarded_https(&parts.headers);
            response
                .headers_mut()
                .insert(header::SET_COOKIE, set_cookie(&value, secure));
        }
        Ok(response)
    }

    /// `GET /api/status`: where this browser's session stands, asking the
    /// service when it is due.
    pub(super) async fn status(&self, req: &Request<Incoming>) -> Result<Response<Full<Bytes>>> {
        let id = transaction_id_of(req.uri().query())?;
        let browser =
            browser_of(req.headers(), &self.cookies).ok_or(VerifierError::UnknownSession)?;
        {
            let mut sessions = self.sessions();
            let (lookup, newly) = sessions.lookup(&id, &browser, Instant::now());
            self.count_all(newly.as_slice());
            match lookup {
                Lookup::Unknown => return Err(VerifierError::UnknownSession.into()),
                Lookup::Ended(ending) => return Ok(ended(ending)),
                Lookup::Pending {
                    ask: false,
                    expires,
                } => return Ok(pending(expires)),
                Lookup::Pending { ask: true, .. } => {}
            }
        }
        // Every call slot busy: the service is slow for everyone, and one
        // more call would only queue; this poll answers what is known.
        let Ok(_permit) = self.calls.try_acquire() else {
            self.sessions().unanswered(&id);
            return Ok(self.known(&id, &browser));
        };
        let progress = match self.service.progress(&id).await {
            Ok(progress) => progress,
            // The service no longer knows the session: it ended there.
            Err(CallError::Refused(StatusCode::NOT_FOUND)) => {
                self.log_failure_throttled(
                    "poll",
                    "the service answered 404 to a poll: the session ended there (expired). If every session ends so on its first poll, the poll request differs from README \"The verifier\", Assumptions 2",
                );
                Progress::Expired
            }
            // The account is refused: polling again cannot help.
            Err(err @ CallError::Refused(StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)) => {
                self.log_call_failure("poll", &err);
                let (_, newly) = self
                    .sessions()
                    .record(&id, Progress::Failed, Instant::now());
                self.count_all(newly.as_slice());
                return Err(VerifierError::from_call(&err).into());
            }
            // Perhaps passing: the session stays pending, and the page
            // polls again.
            Err(err) => {
                self.log_call_failure("poll", &err);
                self.sessions().unanswered(&id);
                return Err(VerifierError::from_call(&err).into());
            }
        };
        let mut sessions = self.sessions();
        let (view, newly) = sessions.record(&id, progress, Instant::now());
        if let Some(ending) = &newly {
            tracing::info!(
                transaction_id = id,
                outcome = ending.outcome(),
                "verification session ended"
            );
        }
        self.count_all(newly.as_slice());
        Ok(match view {
            Lookup::Ended(ending) => ended(ending),
            Lookup::Pending { expires, .. } => pending(expires),
            // Given way to a newer session, or swept, while the service
            // was asked.
            Lookup::Unknown => ended(&Ending::Expired),
        })
    }

    /// What is known of a session without asking the service.
    fn known(&self, id: &str, browser: &Browser) -> Response<Full<Bytes>> {
        let mut sessions = self.sessions();
        let (lookup, newly) = sessions.lookup(id, browser, Instant::now());
        self.count_all(newly.as_slice());
        match lookup {
            Lookup::Ended(ending) => ended(ending),
            Lookup::Pending { ask: true, expires } => {
                sessions.unanswered(id);
                pending(expires)
            }
            Lookup::Pending { expires, .. } => pending(expires),
            Lookup::Unknown => ended(&Ending::Expired),
        }
    }

    /// The operator's line: what failed and what to check, never what the
    /// service's body said.
    fn log_call_failure(&self, call: &'static str, err: &CallError) {
        let rule = self.service.rule();
        match err {
            CallError::Refused(StatusCode::UNAUTHORIZED) => tracing::warn!(
                call, %rule,
                "the service answered 401 even to a renewed token: check that the credentials belong to the environment SERVICE_API_URL names"
            ),
            CallError::Refused(StatusCode::FORBIDDEN) => tracing::warn!(
                call, %rule,
                "the service answered 403: the service account likely lacks the role verifications.api or membership of the project's group (seed §5.4, §7)"
            ),
            CallError::Refused(StatusCode::NOT_FOUND) => tracing::warn!(
                call, %rule,
                "the service answered 404 on the rule path: RULE_ID must be the UUID of a published rule of PROJECT_ID (seed §2.5, §3.1)"
            ),
            CallError::Malformed(why) => self.log_failure_throttled(
                call,
                &format!("the service's answer {why}: not what lanyard assumes (README \"The verifier\", Assumptions)"),
            ),
            other => self.log_failure_throttled(call, &format!("a call to the verification service failed: {other}")),
        }
    }

    /// A warning that may repeat for every session (an outage, a payload
    /// unlike the assumptions), at most once a [`FAILURE_LOG_INTERVAL`].
    fn log_failure_throttled(&self, call: &'static str, what: &str) {
        let mut last = self
            .failure_logged
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        last.1 += 1;
        if last
            .0
            .is_none_or(|at| now.duration_since(at) >= FAILURE_LOG_INTERVAL)
        {
            let failures = last.1;
            *last = (Some(now), 0);
            drop(last);
            let rule = self.service.rule();
            tracing::warn!(call, %rule, failures, "{what}; logged at most once a minute");
        }
    }
}

/// Whether the request says its body is JSON.
fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"))
}

/// Reads and drops a body of at most [`MAX_START_BODY`] bytes.
async fn read_small_body(body: Incoming, headers: &HeaderMap, timeout: Duration) -> Result<()> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_START_BODY as u64) {
        return Err(VerifierError::BodyTooLarge.into());
    }
    match tokio::time::timeout(timeout, Limited::new(body, MAX_START_BODY).collect()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) if err.is::<http_body_util::LengthLimitError>() => {
            Err(VerifierError::BodyTooLarge.into())
        }
        // Gone, or stalled: no one to answer.
        Ok(Err(_)) | Err(_) => Err(Answer::Abort),
    }
}

/// The `transactionId` query parameter, given once and well-formed.
pub(super) fn transaction_id_of(query: Option<&str>) -> std::result::Result<String, VerifierError> {
    let mut ids = form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .filter(|(name, _)| name == "transactionId")
        .map(|(_, value)| value.into_owned());
    let id = ids.next().ok_or(VerifierError::BadRequest(
        "transactionId is missing: GET /api/status?transactionId=<the id /api/start answered>",
    ))?;
    if ids.next().is_some() {
        return Err(VerifierError::BadRequest(
            "transactionId is given more than once.",
        ));
    }
    if !assumptions::is_transaction_id(&id) {
        return Err(VerifierError::BadRequest(
            "transactionId is malformed: 1 to 128 of A-Z a-z 0-9 - . _ ~",
        ));
    }
    Ok(id)
}

/// The browser the request's cookie names, if it carries one lanyard
/// issued.
pub(super) fn browser_of(headers: &HeaderMap, key: &CookieKey) -> Option<Browser> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE)
        .find_map(|(_, value)| key.verify(value))
}

/// HttpOnly: the page's script never needs it. SameSite=Strict: another
/// site's page cannot send it. Path=/api: only the API reads it. Secure
/// when a proxy in front says the browser came over https; a browser on
/// plain http (the demo, on loopback) would otherwise drop it.
pub(super) fn set_cookie(value: &str, secure: bool) -> HeaderValue {
    let cookie = format!(
        "{COOKIE}={value}; Path=/api; HttpOnly; SameSite=Strict{}",
        if secure { "; Secure" } else { "" }
    );
    // Hex, base64url and fixed text only.
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn forwarded_https(headers: &HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .is_some_and(|proto| proto.as_bytes().eq_ignore_ascii_case(b"https"))
}

fn pending(expires: Instant) -> Response<Full<Bytes>> {
    let left = expires.saturating_duration_since(Instant::now()).as_secs();
    json_answer(json!({"status": "pending", "expires_in": left}).to_string())
}

fn ended(ending: &Ending) -> Response<Full<Bytes>> {
    match ending {
        // The claims are held as JSON text and go out as they are.
        Ending::Verified(claims) => json_answer(format!(
            "{{\"status\":\"verified\",\"claims\":{}}}",
            claims.json()
        )),
        other => json_answer(json!({"status": other.outcome()}).to_string()),
    }
}

/// An API answer: JSON, never stored by a browser or a proxy, as a
/// verified one carries personal data.
fn json_answer(body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    page::secure(headers);
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transaction_id_is_required_once_and_well_formed() {
        assert_eq!(
            transaction_id_of(Some("transactionId=abc-1")).unwrap(),
            "abc-1"
        );
        for (query, code) in [
            (None, "transactionId is missing"),
            (Some("transaction_id=abc"), "transactionId is missing"),
            (Some("transactionId=a&transactionId=b"), "more than once"),
            (Some("transactionId="), "malformed"),
            (Some("transactionId=..%2F..%2Fadmin"), "malformed"),
        ] {
            let Err(VerifierError::BadRequest(why)) = transaction_id_of(query) else {
                panic!("{query:?} was taken");
            };
            assert!(why.contains(code), "{query:?}: {why}");
        }
    }

    #[test]
    fn only_a_cookie_lanyard_issued_names_a_browser() {
        let key = CookieKey::random().unwrap();
        let (browser, value) = key.issue();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("other=1; {COOKIE}={value}")).unwrap(),
        );
        assert_eq!(browser_of(&headers, &key), Some(browser));
        let id = value.split_once('.').unwrap().0;
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{COOKIE}={id}")).unwrap(),
        );
        assert_eq!(browser_of(&headers, &key), None, "an id without its tag");
    }

    #[test]
    fn the_cookie_is_http_only_same_site_and_secure_behind_https() {
        let plain = set_cookie("v", false);
        let plain = plain.to_str().unwrap();
        assert!(
            plain.contains("HttpOnly") && plain.contains("SameSite=Strict"),
            "{plain}"
        );
        assert!(!plain.contains("Secure"));
        assert!(
            set_cookie("v", true)
                .to_str()
                .unwrap()
                .ends_with("; Secure")
        );
    }

    #[test]
    fn only_a_json_body_is_taken() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, json) in [
            ("application/json", true),
            ("application/json; charset=utf-8", true),
            ("Application/JSON", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&headers), json, "{value}");
        }
    }
}
