//! The two calls of the verifier's API, `POST /api/start` and `GET
//! /api/status`, and what their answers are made of (docs/verifier.md).

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Uri, header};
use http_body_util::Full;
use hyper::body::Body;
use serde_json::json;
use tokio::time::Instant;

use super::assumptions::{self, Ending, Progress, Started, Unusable};
use super::binding::{BrowserId, KeyRing, Sealed, is_handle};
use super::clock::unix_now;
use super::errors::{Refusal, VerifierError};
use super::limits::{Client, TooManyStarts, client_address};
use super::page;
use super::polls::{self, Asking, Lookup};
use super::service::CallError;
use super::{COOKIE, Inner, SECURE_COOKIE, oidc};
use crate::config::oidc::rules::Rule;
use crate::server::Peer;

/// `/api/start` takes no input; a body beyond this is not the page's.
const MAX_START_BODY: usize = 1024;
/// The page sends `/api/start`'s small body with its head; a client that
/// announces one and holds it back is holding a connection, not starting a
/// session, and gets this long rather than `LANYARD_BODY_TIMEOUT`.
const START_BODY_TIMEOUT: Duration = Duration::from_secs(2);

type Result<T> = std::result::Result<T, Refusal>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Inner {
    /// `POST /api/start`: a session with the service, and the page's
    /// sealed handle for it, bound to this browser.
    pub(super) async fn start<B>(
        &self,
        req: Request<B>,
        client: Peer,
        base: &str,
    ) -> Result<Response<Full<Bytes>>>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let (parts, body) = req.into_parts();
        // A JSON content type makes another site's page send a CORS
        // preflight first, which lanyard never grants: the answer to
        // browsers that send no Fetch Metadata (see `cross_site`).
        if !is_json(&parts.headers) {
            return Err(VerifierError::NotJson.into());
        }
        // An OpenID Connect login's page starts its session with the
        // request it carries, checked before anything is spent on it.
        let login = self.login_of(parts.uri.query())?;
        // The limits come before the body is read: a client stalling its
        // body spends its own starts, not a connection's time for free.
        let address = client_address(&parts.headers, client.ip(), self.forwarded_hops);
        self.limits.take(Client::of(address)).map_err(|refused| {
            let (retry_after, who) = match refused {
                TooManyStarts::Client { retry_after } => (retry_after, "this client"),
                TooManyStarts::Everyone { retry_after } => (retry_after, "all clients together"),
            };
            tracing::debug!(client = %address, who, "verification start refused: rate limit");
            VerifierError::RateLimited { retry_after }
        })?;
        read_small_body(body).await?;

        let rule = login.as_ref().and_then(|(_, rule)| rule.as_ref());
        let Started {
            transaction_id,
            request_uri,
        } = self.start_session(rule).await?;
        let Some(qr_svg) = page::qr_svg(&request_uri) else {
            // request_uri's bound keeps it within a QR code's capacity.
            tracing::warn!("the service's request_uri does not fit a QR code");
            self.count("failed");
            return Err(VerifierError::ServiceFailed.into());
        };

        let authorization = login.map(|(text, _)| text);
        let (handle, set_cookie) =
            self.bind(&parts.headers, &transaction_id, authorization, base)?;
        self.count("started");
        tracing::info!(transaction_id, "verification session started");

        let body = json!({
            "transaction_id": handle,
            "request_uri": request_uri,
            "wallet_url": assumptions::wallet_url(&self.wallet, &request_uri),
            "qr_svg": qr_svg,
            "expires_in": self.session_ttl.as_secs(),
        });
        let mut response = json_answer(body.to_string());
        if let Some(cookie) = set_cookie {
            response.headers_mut().insert(header::SET_COOKIE, cookie);
        }
        Ok(response)
    }

    /// A session started with the service on `rule` (the deployment's
    /// when `None`), within the replica's budget and call slots.
    async fn start_session(&self, rule: Option<&Rule>) -> Result<Started> {
        if !self.budget.take() {
            tracing::debug!(
                "verification start refused: the replica's budget for service calls is spent"
            );
            return Err(VerifierError::Busy.into());
        }
        let rule = self.service.rule(rule);
        let started = match &rule {
            Ok(rule) => {
                // Waits for a call slot no longer than a call may take.
                let permit =
                    tokio::time::timeout(self.service.timeout(), self.calls.acquire()).await;
                let Ok(Ok(_permit)) = permit else {
                    return Err(VerifierError::Busy.into());
                };
                self.service.start(rule).await
            }
            Err(err) => Err(err.clone()),
        };
        started.map_err(|err| {
            self.log_call_failure("start", &err, rule.as_ref().ok());
            self.count("failed");
            VerifierError::from_call(&err).into()
        })
    }

    /// The page's sealed handle for the service's session `service_id`,
    /// bound to this browser, and the cookie to set when the browser has
    /// none of the current key (for the scheme it came over).
    fn bind(
        &self,
        headers: &HeaderMap,
        service_id: &str,
        authorization: Option<String>,
        base: &str,
    ) -> Result<(String, Option<HeaderValue>)> {
        let keys = self.keys.ring();
        let https = forwarded_https(headers, self.forwarded_hops);
        let cookie_name = if https { SECURE_COOKIE } else { COOKIE };
        let named: Vec<_> = browsers_of(headers, &keys)
            .filter(|(name, _, _)| *name == cookie_name)
            .collect();
        let known = named
            .iter()
            .find(|(_, _, current)| *current)
            .or(named.first())
            .copied();
        let (browser, new_cookie) = match known {
            Some((_, browser, true)) => (browser, None),
            // Signed with the previous key: the same browser, its cookie
            // signed anew, so that its other tabs' sessions stay its own.
            Some((_, browser, false)) => {
                let value = keys.cookie_for(&browser);
                (browser, Some(set_cookie(&value, https, base)))
            }
            None => {
                let (browser, value) = keys.issue_cookie().map_err(|why| self.internal(why))?;
                (browser, Some(set_cookie(&value, https, base)))
            }
        };
        let sealed = Sealed {
            service_id: service_id.to_string(),
            browser,
            expires_at: unix_now().saturating_add(self.session_ttl.as_secs()),
            authorization,
        };
        let handle = keys.seal(&sealed).map_err(|why| self.internal(why))?;
        Ok((handle, new_cookie))
    }

    /// `GET /api/status`: where the session the page's handle names
    /// stands, for the browser that started it, asking the service when
    /// it is due. Any replica answers: the handle and the cookie carry
    /// everything but the session's state, which the service holds.
    pub(super) async fn status<B>(&self, req: &Request<B>) -> Result<Response<Full<Bytes>>> {
        let handle = handle_of(req.uri().query())?;
        let keys = self.keys.ring();
        // Sealed under a key no replica holds any more (rotated out), or
        // not lanyard's: the same 404 as another browser's session.
        let Some(sealed) = keys.open(&handle) else {
            self.unopened_handle();
            return Err(VerifierError::UnknownSession.into());
        };
        // Any of the browser's cookies that names the handle's browser: a
        // cookie planted beside it cannot lock it out.
        if !browsers_of(req.headers(), &keys).any(|(_, browser, _)| browser == sealed.browser) {
            return Err(VerifierError::UnknownSession.into());
        }
        let id = sealed.service_id.as_str();
        let login = oidc::login_in(&sealed);
        let rule = self
            .service
            .rule(login.as_ref().and_then(|l| l.rule.as_ref()));
        let now = self.clock.now();
        let left = Duration::from_secs(sealed.expires_at.saturating_sub(unix_now()));
        let (expires, age) = (now + left, self.session_ttl.saturating_sub(left));
        let (lookup, newly) = polls::lock(&self.polls).lookup(id, expires, age, now);
        self.count_ending(newly.as_ref());
        self.count_login(login.as_ref(), newly.as_ref());
        match lookup {
            Lookup::Ended(ending) => return Ok(self.ended(&keys, &sealed, &ending)),
            Lookup::Pending => return Ok(pending(expires, &self.clock)),
            Lookup::Ask => {}
        }
        // Released when this poll ends however it ends: answered, failed,
        // or dropped mid-call because its client went away.
        let asking = Asking::new(&self.polls, id);
        // The replica's budget for calls spent, or every call slot busy
        // (the service slow for everyone): one more call would only queue,
        // so this poll answers what is known, and the page polls again.
        let Ok(_permit) = self.calls.try_acquire() else {
            return Ok(pending(expires, &self.clock));
        };
        if !self.budget.take() {
            return Ok(pending(expires, &self.clock));
        }
        let asked = match &rule {
            Ok(rule) => self.ask(rule, id).await,
            Err(err) => Err(err.clone()),
        };
        let progress = match asked {
            Ok(progress) => progress,
            Err(err) => {
                self.log_call_failure("poll", &err, rule.as_ref().ok());
                // The account is refused: polling again cannot help. Any
                // other failure may pass: the session stays pending, and
                // the page polls again.
                if let CallError::Answered(StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) = err {
                    let failed = asking.record(Progress::Ended(Ending::Failed), self.clock.now());
                    self.count_ending(failed.1.as_ref());
                }
                return Err(VerifierError::from_call(&err).into());
            }
        };
        let (view, newly) = asking.record(progress, self.clock.now());
        if let Some(ending) = &newly {
            tracing::info!(
                transaction_id = id,
                outcome = ending.outcome(),
                "verification session ended"
            );
        }
        self.count_ending(newly.as_ref());
        self.count_login(login.as_ref(), newly.as_ref());
        Ok(match view {
            Lookup::Ended(ending) => self.ended(&keys, &sealed, &ending),
            Lookup::Ask | Lookup::Pending => pending(expires, &self.clock),
        })
    }

    /// Where the service says session `id` stands, with the answers that
    /// end it read as endings: a 404 (the service no longer knows it) as
    /// expired, and an answer it can never use as failed, alike on every
    /// replica since asking again gives the same.
    async fn ask(&self, rule: &Uri, id: &str) -> std::result::Result<Progress, CallError> {
        match self.service.progress(rule, id).await {
            Err(CallError::Answered(StatusCode::NOT_FOUND)) => {
                self.log_failure_throttled(
                    "poll",
                    "the service answered 404 to a poll: the session ended there (expired). If every session ends so on its first poll, the poll request differs from docs/verifier.md, Assumptions 2",
                    Some(rule),
                );
                Ok(Progress::Ended(Ending::Expired))
            }
            Err(CallError::Unusable(why)) => {
                tracing::warn!(
                    transaction_id = id,
                    %rule,
                    "the service's answer {why}; the session ends failed (docs/verifier.md, \"Limits of the verifier\")"
                );
                Ok(Progress::Ended(Ending::Unusable {
                    presented: matches!(why, Unusable::Claims(_)),
                }))
            }
            other => other,
        }
    }

    /// The sealed login request of `/api/start?authorization=`, as the
    /// session handle is to carry it, and its rule; `None` for the page's
    /// own sessions.
    fn login_of(&self, query: Option<&str>) -> Result<Option<(String, Option<Rule>)>> {
        let mut given = form_urlencoded::parse(query.unwrap_or("").as_bytes())
            .filter(|(name, _)| name == "authorization")
            .map(|(_, value)| value.into_owned());
        let Some(sealed) = given.next() else {
            return Ok(None);
        };
        let Some(provider) = &self.oidc else {
            return Err(VerifierError::BadRequest("this verifier serves no logins").into());
        };
        let authorization = provider.take_authorization(&self.keys.ring(), &sealed)?;
        Ok(Some(authorization))
    }

    /// What the page is told of a session that ended: its claims, or for
    /// a login, where the browser goes next. A login's claims never reach
    /// the page, even on a replica set up without the provider.
    fn ended(&self, keys: &KeyRing, sealed: &Sealed, ending: &Ending) -> Response<Full<Bytes>> {
        if sealed.authorization.is_none() {
            return ended(ending);
        }
        // When the wallet presented, as far as this replica saw: its first
        // sight of the ending, however much later the code is made.
        let seen = polls::lock(&self.polls).verified_at(&sealed.service_id);
        let since = seen.map_or(0, |at| {
            self.clock.now().saturating_duration_since(at).as_secs()
        });
        let auth_time = unix_now().saturating_sub(since);
        let login = self
            .oidc
            .as_ref()
            .and_then(|p| p.ending(keys, sealed, ending, auth_time));
        match login {
            Some(login) => json_answer(login.answer()),
            None => {
                tracing::warn!(
                    "a login's session ended on a replica that cannot send it back: is LANYARD_OIDC_ISSUER set alike on every replica?"
                );
                ended(&Ending::Failed)
            }
        }
    }

    /// A login's ending, counted once per replica as sessions are.
    fn count_login(&self, login: Option<&oidc::Authorization>, newly: Option<&Ending>) {
        if let (Some(provider), Some(ending), Some(login)) = (&self.oidc, newly, login) {
            provider.count(ending.outcome(), &login.client_id);
        }
    }

    /// A failure of lanyard itself (no randomness): logged, and the page
    /// told to try again.
    fn internal(&self, why: String) -> Refusal {
        tracing::error!(problem = %why, "cannot answer a verification start");
        VerifierError::ServiceFailed.into()
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

/// Reads and drops a body of at most [`MAX_START_BODY`] bytes, within
/// [`START_BODY_TIMEOUT`].
async fn read_small_body<B>(body: B) -> Result<()>
where
    B: Body<Data = Bytes>,
{
    let read = crate::collect::collect(body, MAX_START_BODY);
    match tokio::time::timeout(START_BODY_TIMEOUT, read).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(err)) if err.is_too_large() => Err(VerifierError::BodyTooLarge.into()),
        // Gone, or stalled: no one to answer.
        Ok(Err(_)) | Err(_) => Err(Refusal::Abort),
    }
}

/// The `transactionId` query parameter, given once and shaped as the
/// handles `/api/start` gives.
pub(super) fn handle_of(query: Option<&str>) -> std::result::Result<String, VerifierError> {
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
    if !is_handle(&id) {
        return Err(VerifierError::BadRequest(
            "transactionId is malformed: give it as /api/start answered it",
        ));
    }
    Ok(id)
}

/// The browsers the request's cookies name, each with its cookie's name
/// and whether the current key signed it, where lanyard issued the
/// cookie: a browser may send several (one planted beside its own, or
/// both names after a move to https).
pub(super) fn browsers_of<'a>(
    headers: &'a HeaderMap,
    keys: &'a KeyRing,
) -> impl Iterator<Item = (&'a str, BrowserId, bool)> + 'a {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE || *name == SECURE_COOKIE)
        .filter_map(|(name, value)| {
            let (browser, current) = keys.verify_cookie(value)?;
            Some((name, browser, current))
        })
}

/// HttpOnly: the page's script never needs it. SameSite=Strict: another
/// site's page cannot send it. Over https (as a trusted proxy reports
/// it), `__Host-` with `Secure` and `Path=/`, which a sibling subdomain
/// cannot set; over plain http (the demo, on loopback) a browser would
/// drop a `Secure` cookie, and `Path=/api` keeps it to the API (under an
/// OpenID Connect issuer's path `base`, to the API there).
pub(super) fn set_cookie(value: &str, https: bool, base: &str) -> HeaderValue {
    let cookie = match https {
        true => format!("{SECURE_COOKIE}={value}; Path=/; Secure; HttpOnly; SameSite=Strict"),
        false => format!("{COOKIE}={value}; Path={base}/api; HttpOnly; SameSite=Strict"),
    };
    // Hex, base64url and fixed text only.
    HeaderValue::from_str(&cookie).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// Whether the browser came over https, as the trusted proxy nearest to
/// lanyard says in `X-Forwarded-Proto` (its last entry). Without a
/// trusted proxy the header is anyone's to send, and is ignored.
pub(super) fn forwarded_https(headers: &HeaderMap, hops: usize) -> bool {
    hops > 0
        && headers
            .get_all("x-forwarded-proto")
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .next_back()
            .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"))
}

fn pending(expires: Instant, clock: &super::Clock) -> Response<Full<Bytes>> {
    let left = expires.saturating_duration_since(clock.now()).as_secs();
    json_answer(json!({"status": "pending", "expires_in": left}).to_string())
}

fn ended(ending: &Ending) -> Response<Full<Bytes>> {
    match ending {
        // One answer shared by every poll of the session.
        Ending::Verified(claims) => json_answer(claims.answer()),
        // An id the page says in its language (docs/translations.md), not
        // a sentence: one answer serves every language.
        Ending::Unusable { presented } => {
            let reason = match presented {
                true => "claims-unusable",
                false => "answer-unreadable",
            };
            json_answer(json!({"status": "failed", "reason": reason}).to_string())
        }
        other => json_answer(json!({"status": other.outcome()}).to_string()),
    }
}

/// An API answer: JSON, never stored by a browser or a proxy, as a
/// verified one carries personal data.
fn json_answer(body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = StatusCode::OK;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handle_is_required_once_and_in_the_shape_start_gives() {
        assert_eq!(handle_of(Some("transactionId=abc-1_Z")).unwrap(), "abc-1_Z");
        let too_long = format!("transactionId={}", "A".repeat(super::super::MAX_HANDLE + 1));
        for (query, code) in [
            (None, "transactionId is missing"),
            (Some("transaction_id=abc"), "transactionId is missing"),
            (Some("transactionId=a&transactionId=b"), "more than once"),
            (Some("transactionId="), "malformed"),
            (Some("transactionId=..%2F..%2Fadmin"), "malformed"),
            (Some("transactionId=a.b"), "malformed"),
            (Some(too_long.as_str()), "malformed"),
        ] {
            let Err(VerifierError::BadRequest(why)) = handle_of(query) else {
                panic!("{query:?} was taken");
            };
            assert!(why.contains(code), "{query:?}: {why}");
        }
    }

    #[test]
    fn every_cookie_lanyard_issued_names_its_browser_and_others_none() {
        let keys = KeyRing::new(&[1; 32], None);
        let (mine, value) = keys.issue_cookie().unwrap();
        let (planted, planted_value) = keys.issue_cookie().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!(
                "other=1; {COOKIE}={planted_value}; {SECURE_COOKIE}={value}"
            ))
            .unwrap(),
        );
        let found: Vec<_> = browsers_of(&headers, &keys).collect();
        assert_eq!(
            found,
            vec![(COOKIE, planted, true), (SECURE_COOKIE, mine, true)]
        );
        let id = value.split_once('.').unwrap().0;
        headers.insert(
            header::COOKIE,
            HeaderValue::from_str(&format!("{COOKIE}={id}")).unwrap(),
        );
        assert_eq!(
            browsers_of(&headers, &keys).count(),
            0,
            "an id without its tag"
        );
    }

    #[test]
    fn the_cookie_is_http_only_same_site_and_host_only_behind_https() {
        let plain = set_cookie("v", false, "");
        let plain = plain.to_str().unwrap();
        assert_eq!(
            plain,
            "lanyard_verifier=v; Path=/api; HttpOnly; SameSite=Strict"
        );
        assert_eq!(
            set_cookie("v", true, "").to_str().unwrap(),
            "__Host-lanyard_verifier=v; Path=/; Secure; HttpOnly; SameSite=Strict"
        );
    }

    #[test]
    fn only_a_trusted_proxy_says_https() {
        let mut headers = HeaderMap::new();
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(!forwarded_https(&headers, 0), "anyone may send the header");
        assert!(forwarded_https(&headers, 1));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https, http"));
        assert!(!forwarded_https(&headers, 1), "the nearest proxy's entry");
        headers.remove("x-forwarded-proto");
        assert!(!forwarded_https(&headers, 1));
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
