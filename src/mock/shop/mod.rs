//! "The shop": a relying party on the mock's listener, under
//! [`SHOP_PREFIX`], that logs a person in with OpenID Connect's
//! authorization code flow (with PKCE, and `iss` in the answer, RFC 9207)
//! and shows the claims of the ID token. `lanyard demo` registers it as a
//! client of the verifier's provider, so the demo has a site to log in to.
//!
//! It is a client, not a second provider: it makes none of the checks on
//! the provider's side, and the provider's code is not used here, so a
//! mistake in either shows as a login that fails. Everything it remembers
//! is bounded in count and time (`memory`).
//!
//! - this file: [`ShopClient`], the shop's state and its routes.
//! - `login`: a login's `state`, `nonce` and PKCE verifier, and the
//!   authorization request.
//! - `provider`: the requests to the provider (discovery, token, keys).
//! - `id_token`: the ID token's checks.
//! - `page`: the pages and redirects.
//! - `memory`: a bounded map whose entries expire.

mod id_token;
mod login;
mod memory;
mod page;
mod provider;
#[cfg(test)]
mod tests;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use serde_json::{Map, Value};
use tokio::time::Instant;

use super::surface::{Reply, SHOP_PREFIX};
use super::table::Table;
use id_token::{Expected, Refused};
use login::{Login, NoRandomness, random_token};
use memory::Memory;
pub use page::AGE_SCOPE;
use page::{CALLBACK_PATH, HOME_PATH, LOGIN_PATH, LOGOUT_PATH, STYLESHEET_PATH};
use provider::{Credentials, Http, Provider, ProviderError, with_code};

/// Logins begun and not yet come back. Far more than a demo has at once;
/// a flood evicts the oldest (`memory`).
const MAX_PENDING_LOGINS: usize = 1_000;
/// Longer than a person takes to scan a QR code and present, and as long
/// as it is worth keeping a login someone walked away from.
const LOGIN_LIFETIME: Duration = Duration::from_secs(10 * 60);
const MAX_SESSIONS: usize = 1_000;
/// A demo's sitting.
const SESSION_LIFETIME: Duration = Duration::from_secs(60 * 60);
/// A provider restarted on the same address (another `lanyard demo` run)
/// is read again within this.
const DISCOVERY_LIFETIME: Duration = Duration::from_secs(5 * 60);

/// Binds a login to the browser that began it (RFC 6749 §10.12): the
/// callback's `state` must be this cookie's.
const LOGIN_COOKIE: &str = "shop_login";
const SESSION_COOKIE: &str = "shop_session";

/// The shop's registration with its provider. Its `Debug` hides the secret.
#[derive(Clone, PartialEq, Eq)]
pub struct ShopClient {
    /// The provider's issuer identifier; its discovery document is at
    /// `{issuer}/.well-known/openid-configuration`. Plain http on a
    /// loopback host: the shop fetches nothing else.
    pub issuer: String,
    pub client_id: String,
    /// Sent with `client_secret_basic`.
    pub client_secret: String,
}

impl fmt::Debug for ShopClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShopClient")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &"[redacted]")
            .finish()
    }
}

/// The shop's state, each part behind its own lock.
pub(super) struct Shop {
    /// The mock's base URL: the redirect URI and cookies derive from it.
    base_url: String,
    client: Table<Option<Arc<ShopClient>>>,
    discovered: Table<Option<Discovered>>,
    pending: Table<Memory<Started>>,
    sessions: Table<Memory<Arc<Map<String, Value>>>>,
    http: Http,
}

/// A provider's discovery document as read, and when.
struct Discovered {
    issuer: String,
    provider: Arc<Provider>,
    read_at: Instant,
}

/// A login sent to the provider, with the registration and endpoints it
/// began with, so the callback finishes it the same way.
struct Started {
    login: Login,
    client: Arc<ShopClient>,
    provider: Arc<Provider>,
}

impl Shop {
    pub(super) fn new(base_url: String) -> Shop {
        Shop {
            base_url,
            client: Table::new(None),
            discovered: Table::new(None),
            pending: Table::new(Memory::new(MAX_PENDING_LOGINS, LOGIN_LIFETIME)),
            sessions: Table::new(Memory::new(MAX_SESSIONS, SESSION_LIFETIME)),
            http: Http::new(),
        }
    }

    /// Registers the shop with a provider, replacing any before; the
    /// provider's discovery document is read again at the next login.
    pub(super) fn set_client(&self, client: ShopClient) {
        *self.client.lock() = Some(Arc::new(client));
        *self.discovered.lock() = None;
    }

    /// Whether a provider is registered.
    pub(super) fn configured(&self) -> bool {
        self.client.lock().is_some()
    }

    /// `{base}/shop/`.
    pub(super) fn url(&self) -> String {
        format!("{}{HOME_PATH}", self.base_url)
    }

    /// `{base}/shop/callback`, the redirect URI to register.
    pub(super) fn redirect_uri(&self) -> String {
        format!("{}{CALLBACK_PATH}", self.base_url)
    }

    /// Answers a request under [`SHOP_PREFIX`]. No body is read: the
    /// only POST, logging out, carries none.
    pub(super) async fn handle<B>(&self, req: Request<B>) -> Reply {
        let path = req.uri().path();
        if path == SHOP_PREFIX {
            return page::see_other(HeaderValue::from_static(HOME_PATH), &[]);
        }
        let (allowed, allow) = match path {
            HOME_PATH | LOGIN_PATH | CALLBACK_PATH | STYLESHEET_PATH => (Method::GET, "GET, HEAD"),
            LOGOUT_PATH => (Method::POST, "POST"),
            _ => return page::outcome(StatusCode::NOT_FOUND, "The shop has no such page."),
        };
        let method = req.method();
        if method != allowed && !(allowed == Method::GET && method == Method::HEAD) {
            let mut reply = page::outcome(
                StatusCode::METHOD_NOT_ALLOWED,
                "The shop's pages are not used that way.",
            );
            let allow = HeaderValue::from_static(allow);
            reply.headers_mut().insert(header::ALLOW, allow);
            return reply;
        }
        if path == STYLESHEET_PATH {
            return page::stylesheet();
        }
        let Some(client) = self.client.lock().clone() else {
            return page::not_set_up();
        };
        let headers = req.headers();
        match path {
            HOME_PATH => page::home(self.session(headers).as_deref()),
            LOGIN_PATH => {
                let rule = rule_asked(req.uri().query());
                self.login(client, rule)
                    .await
                    .unwrap_or_else(LoginFailed::page)
            }
            CALLBACK_PATH => self.callback(headers, req.uri().query()).await,
            _ => self.logout(headers),
        }
    }

    /// The claims of the browser's session, if it has a live one.
    fn session(&self, headers: &HeaderMap) -> Option<Arc<Map<String, Value>>> {
        let id = cookie(headers, SESSION_COOKIE)?;
        self.sessions.lock().get(id, Instant::now()).cloned()
    }

    /// Begins a login: remembers its secrets and sends the browser to the
    /// provider.
    async fn login(
        &self,
        client: Arc<ShopClient>,
        rule: Option<&'static str>,
    ) -> Result<Reply, LoginFailed> {
        let provider = self
            .provider(&client)
            .await
            .map_err(LoginFailed::Discovery)?;
        let login = Login::new()?;
        let url = login.authorization_url(
            &provider.authorization_endpoint,
            &client.client_id,
            &self.redirect_uri(),
            rule,
        );
        let location = HeaderValue::from_str(&url)
            .map_err(|_| LoginFailed::Discovery(ProviderError::BadEndpoint))?;
        let cookie = self.cookie(LOGIN_COOKIE, &login.state, LOGIN_LIFETIME);
        let state = login.state.clone();
        let started = Started {
            login,
            client,
            provider,
        };
        self.pending.lock().insert(state, started, Instant::now());
        Ok(page::see_other(location, &[cookie]))
    }

    /// The provider's endpoints, read once per [`DISCOVERY_LIFETIME`].
    async fn provider(&self, client: &ShopClient) -> Result<Arc<Provider>, ProviderError> {
        let now = Instant::now();
        if let Some(discovered) = &*self.discovered.lock()
            && discovered.issuer == client.issuer
            && now.duration_since(discovered.read_at) < DISCOVERY_LIFETIME
        {
            return Ok(discovered.provider.clone());
        }
        let provider = Arc::new(self.http.discover(&client.issuer).await?);
        *self.discovered.lock() = Some(Discovered {
            issuer: client.issuer.clone(),
            provider: provider.clone(),
            read_at: now,
        });
        Ok(provider)
    }

    /// The provider's answer: a logged-in session, or a page saying what
    /// happened. Either way the login is over, and its cookie goes.
    async fn callback(&self, headers: &HeaderMap, query: Option<&str>) -> Reply {
        let forget_login = self.cookie(LOGIN_COOKIE, "", Duration::ZERO);
        match self.finish(headers, query).await {
            Ok(session) => {
                let cookie = self.cookie(SESSION_COOKIE, &session, SESSION_LIFETIME);
                let home = HeaderValue::from_static(HOME_PATH);
                page::see_other(home, &[cookie, forget_login])
            }
            Err(failed) => {
                let mut reply = failed.page();
                if let Ok(value) = HeaderValue::from_str(&forget_login) {
                    reply.headers_mut().insert(header::SET_COOKIE, value);
                }
                reply
            }
        }
    }

    /// Checks the answer, redeems its code and verifies the ID token,
    /// answering the new session's id.
    async fn finish(
        &self,
        headers: &HeaderMap,
        query: Option<&str>,
    ) -> Result<String, LoginFailed> {
        let answer = Answer::parse(query)?;
        let state = answer.state.ok_or(LoginFailed::UnknownLogin)?;
        // Taken before any other check, so an answer is tried once.
        let started = self.pending.lock().take(&state, Instant::now());
        let Started {
            login,
            client,
            provider,
        } = started.ok_or(LoginFailed::UnknownLogin)?;
        if cookie(headers, LOGIN_COOKIE) != Some(state.as_str()) {
            return Err(LoginFailed::OtherBrowser);
        }
        // RFC 9207 §2.4: before anything else of the answer is believed.
        if answer.iss.as_deref() != Some(client.issuer.as_str()) {
            return Err(LoginFailed::WrongIssuer);
        }
        if let Some(error) = answer.error {
            return Err(match error.as_str() {
                "access_denied" => LoginFailed::Declined,
                other => LoginFailed::Refused(known_error(other)),
            });
        }
        let code = answer.code.ok_or(LoginFailed::NoCode)?;
        let redirect_uri = self.redirect_uri();
        let credentials = Credentials {
            client_id: &client.client_id,
            client_secret: &client.client_secret,
            redirect_uri: &redirect_uri,
        };
        let id_token = self
            .http
            .redeem(&provider, credentials, &code, &login.code_verifier)
            .await
            .map_err(LoginFailed::Redeem)?;
        let keys = self.http.keys(&provider).await.map_err(LoginFailed::Keys)?;
        let expected = Expected {
            issuer: &client.issuer,
            client_id: &client.client_id,
            nonce: &login.nonce,
        };
        let claims = id_token::verify(&id_token, &keys, &expected)?;
        let session = random_token()?;
        let claims = Arc::new(claims);
        self.sessions
            .lock()
            .insert(session.clone(), claims, Instant::now());
        Ok(session)
    }

    fn logout(&self, headers: &HeaderMap) -> Reply {
        if let Some(id) = cookie(headers, SESSION_COOKIE) {
            self.sessions.lock().take(id, Instant::now());
        }
        let forget = self.cookie(SESSION_COOKIE, "", Duration::ZERO);
        page::see_other(HeaderValue::from_static(HOME_PATH), &[forget])
    }

    /// A `Set-Cookie` value for the shop's pages only, out of scripts'
    /// reach (there are none, but a cookie outlives a page's policy), and
    /// sent back on the provider's top-level redirect to the callback
    /// (`Lax`), not on another site's form posts.
    fn cookie(&self, name: &str, value: &str, max_age: Duration) -> String {
        let secure = match self.base_url.starts_with("https:") {
            true => "; Secure",
            false => "",
        };
        format!(
            "{name}={value}; Path={HOME_PATH}; Max-Age={}; HttpOnly; SameSite=Lax{secure}",
            max_age.as_secs()
        )
    }
}

/// The value of the first cookie named `name`.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(found, _)| *found == name)
        .map(|(_, value)| value)
}

/// The callback's parameters (OpenID Connect Core §3.1.2.5, §3.1.2.6).
#[derive(Debug, Default)]
struct Answer {
    state: Option<String>,
    code: Option<String>,
    iss: Option<String>,
    error: Option<String>,
}

impl Answer {
    /// RFC 6749 §3.1: no parameter twice; which of two would count is
    /// exactly what an attacker would like to choose.
    fn parse(query: Option<&str>) -> Result<Answer, LoginFailed> {
        let mut answer = Answer::default();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            let slot = match &*name {
                "state" => &mut answer.state,
                "code" => &mut answer.code,
                "iss" => &mut answer.iss,
                "error" => &mut answer.error,
                _ => continue,
            };
            if slot.replace(value.into_owned()).is_some() {
                return Err(LoginFailed::Repeated);
            }
        }
        Ok(answer)
    }
}

/// The error codes of an authorization answer (RFC 6749 §4.1.2.1, OpenID
/// Connect Core §3.1.2.6): a provider's code is shown only as one of these.
fn known_error(code: &str) -> Option<&'static str> {
    [
        "invalid_request",
        "unauthorized_client",
        "unsupported_response_type",
        "invalid_scope",
        "server_error",
        "temporarily_unavailable",
        "interaction_required",
        "login_required",
        "account_selection_required",
        "consent_required",
        "invalid_request_uri",
        "invalid_request_object",
        "request_not_supported",
        "request_uri_not_supported",
        "registration_not_supported",
    ]
    .into_iter()
    .find(|known| *known == code)
}

/// Why a login did not end logged in. Each is a fixed sentence of the
/// shop's own: no claim, secret or text of the provider's reaches a page.
#[derive(Debug, thiserror::Error)]
enum LoginFailed {
    #[error("The shop could not begin the login: {0}.")]
    Discovery(ProviderError),
    #[error("This login is unknown, already used, or older than ten minutes. Start again.")]
    UnknownLogin,
    #[error("The answer repeats a parameter, so the shop cannot tell which to believe.")]
    Repeated,
    #[error("This login was not begun in this browser. Start again.")]
    OtherBrowser,
    #[error("The answer does not come from the shop's provider (its iss is missing or another).")]
    WrongIssuer,
    #[error("You declined, or the wallet did not present in time: nothing was shared.")]
    Declined,
    #[error("The provider refused the login{}.", with_code(*.0))]
    Refused(Option<&'static str>),
    #[error("The provider's answer carries no code to redeem.")]
    NoCode,
    #[error("The shop could not redeem the login at the provider: {0}.")]
    Redeem(ProviderError),
    #[error("The shop could not read the provider's keys: {0}.")]
    Keys(ProviderError),
    #[error("The shop refused the provider's ID token: {0}.")]
    IdToken(#[from] Refused),
    #[error("The shop could not make a random value; nothing was remembered.")]
    NoRandomness(#[from] NoRandomness),
}

impl LoginFailed {
    fn status(&self) -> StatusCode {
        match self {
            LoginFailed::Declined => StatusCode::OK,
            LoginFailed::UnknownLogin
            | LoginFailed::Repeated
            | LoginFailed::OtherBrowser
            | LoginFailed::WrongIssuer
            | LoginFailed::NoCode => StatusCode::BAD_REQUEST,
            LoginFailed::NoRandomness(_) => StatusCode::INTERNAL_SERVER_ERROR,
            _ => StatusCode::BAD_GATEWAY,
        }
    }

    fn page(self) -> Reply {
        tracing::info!(outcome = %self, "shop: a login did not complete");
        page::outcome(self.status(), &self.to_string())
    }
}

/// The rule scope a login link asks for: the age-only one, or none (the
/// client's default). Nothing else a query says reaches the request.
fn rule_asked(query: Option<&str>) -> Option<&'static str> {
    form_urlencoded::parse(query.unwrap_or_default().as_bytes())
        .any(|(name, value)| name == "scope" && value == AGE_SCOPE)
        .then_some(AGE_SCOPE)
}
