//! The verifier as an OpenID Connect provider (docs/oidc.md): a relying
//! party sends the browser to the authorization endpoint, which shows the
//! verification page; once the wallet has presented, the browser goes
//! back with a code, which the relying party's backend redeems for an ID
//! token that lanyard signed over the presented claims.
//!
//! Nothing is kept between the steps but what one replica remembers to
//! enforce single use: the request rides sealed in the session's handle,
//! the code and the access token are sealed too, the claims are asked of
//! the service again by whichever replica redeems the code, as
//! `/api/status` would (docs/verifier.md "Running many"), and `userinfo`
//! answers them from the access token, asking the service nothing.
//!
//! - this file: the [`Provider`], its endpoints, discovery and the JWK
//!   set, and the authorization endpoint's page.
//! - `authorize`: the authorization request, checked, and its refusals.
//! - `session`: what a login changes in `/api/start` and `/api/status`.
//! - `token`: the token endpoint and `userinfo`.
//! - `claims`: the presented claims as relying parties read them.
//! - `subject`: `sub`, public or pairwise.
//! - `throttle`: failed client authentications, counted and bounded.
//! - `userinfo_limit`: `userinfo` calls, counted per access token.
//! - `cors`: which browser pages may call the token endpoint and
//!   `userinfo`.
//! - `sealed`: the request, the code and the access token, sealed.
//! - `signer`: the ID token's signature and the JWK set.

mod authorize;
mod claims;
mod cors;
mod sealed;
mod session;
mod signer;
mod subject;
mod throttle;
mod token;
mod userinfo_limit;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Body;
use serde_json::json;

use super::Inner;
use super::clock::unix_now;
use super::errors::Refusal;
use super::errors::VerifierError;
use super::i18n::Asked;
use super::limits::{Client as Address, client_address};
use super::page::ErrorPage;
use crate::config::issuer::Issuer;
use crate::config::oidc::rules;
use crate::config::oidc::subject::SubjectType;
use crate::config::oidc::{Clients, OidcConfig};
use crate::metrics::{OidcMetrics, UNKNOWN_CLIENT};

pub use authorize::Refused;
pub use sealed::Authorization;
pub use sealed::MAX_ACCESS_TOKEN;
pub use session::login_in;
pub use userinfo_limit::USERINFO_PER_MINUTE;

use claims::Naming;
use signer::Signer;
use subject::Subjects;
use throttle::Throttle;
use token::Redeemed;
use userinfo_limit::UserinfoLimit;

/// How long a code may wait to be redeemed (OpenID Connect Core §3.1.2.5
/// says short; RFC 6749 §4.1.2 recommends at most ten minutes).
pub const CODE_LIFETIME: u64 = 60;
/// How long ID tokens and access tokens live.
pub const TOKEN_LIFETIME: u64 = 300;

/// The provider: its settings, made ready once.
pub struct Provider {
    issuer: Issuer,
    clients: Arc<Clients>,
    signer: Signer,
    naming: Naming,
    subjects: Subjects,
    /// Codes this replica has redeemed, until they expire, and the logins
    /// revoked here because a code of theirs came again.
    redeemed: Mutex<Redeemed>,
    /// Failed client authentications at the token endpoint.
    throttle: Throttle,
    /// `userinfo` calls per access token.
    userinfo_limit: UserinfoLimit,
    /// Claims left out of access tokens, said once a minute: a rule that
    /// asks for a portrait leaves it out of every login's.
    left_out: crate::throttle::Throttle,
    /// Every client's redirect URIs' origins, which a CORS preflight is
    /// granted to.
    origins: BTreeSet<String>,
    /// Every client's rule scopes, which a request's scope is read for.
    rule_scopes: BTreeSet<String>,
    discovery: Bytes,
    metrics: OidcMetrics,
}

/// An endpoint of the provider, under the issuer's path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Discovery,
    Jwks,
    Authorize,
    Token,
    Userinfo,
}

impl Endpoint {
    /// The endpoint at `path`, which is under the issuer's path.
    pub fn of(path: &str) -> Option<Endpoint> {
        Some(match path {
            "/.well-known/openid-configuration" => Endpoint::Discovery,
            "/jwks" => Endpoint::Jwks,
            "/authorize" => Endpoint::Authorize,
            "/token" => Endpoint::Token,
            "/userinfo" => Endpoint::Userinfo,
            _ => return None,
        })
    }
}

impl Provider {
    pub fn new(
        config: &OidcConfig,
        signing_limit: Duration,
        metrics: OidcMetrics,
    ) -> Result<Provider, String> {
        let signer = Signer::new(config.key.clone(), config.previous.as_ref(), signing_limit)?;
        let rule_scopes = rules::all_scopes(&config.clients);
        metrics.register_clients(config.clients.iter().map(|client| client.id.as_str()));
        Ok(Provider {
            discovery: discovery(&config.issuer, &subject_types(config), &rule_scopes),
            rule_scopes,
            issuer: config.issuer.clone(),
            clients: config.clients.clone(),
            signer,
            naming: Naming {
                map: config.claims_map.clone(),
            },
            subjects: Subjects::new(&config.sub_claims, config.pairwise_key.as_ref()),
            redeemed: Mutex::new(Redeemed::default()),
            throttle: Throttle::default(),
            userinfo_limit: UserinfoLimit::default(),
            left_out: crate::throttle::Throttle::new(crate::throttle::EVERY_MINUTE),
            origins: cors::all_origins(&config.clients),
            metrics,
        })
    }

    fn redeemed(&self) -> MutexGuard<'_, Redeemed> {
        self.redeemed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Forgets the redeemed codes, revocations and throttle counts past
    /// their time; called by the verifier's sweeper.
    pub fn sweep(&self) {
        self.redeemed().sweep(unix_now());
        let now = tokio::time::Instant::now();
        self.throttle.sweep(now);
        self.userinfo_limit.sweep(now);
    }

    /// The issuer's path, under which every endpoint is: `""` or
    /// `/wallet`.
    pub fn path(&self) -> &str {
        self.issuer.path()
    }

    /// A login's ending (or `started`), in
    /// `lanyard_oidc_authorizations_total`, for client `client_id`.
    pub fn count(&self, outcome: &str, client_id: &str) {
        let client = self.client_label(Some(client_id));
        self.metrics
            .authorizations
            .with_label_values(&[outcome, client])
            .inc();
    }

    /// A refused request, for the client it named, if any.
    fn refused(&self, reason: &'static str, client_id: Option<&str>) {
        let client = self.client_label(client_id);
        self.metrics
            .refusals
            .with_label_values(&[reason, client])
            .inc();
    }

    /// A metric's `client_id`: a registered client's id, else
    /// [`UNKNOWN_CLIENT`], so that the clients file bounds the series
    /// and no request makes one of its own (docs/admin.md).
    fn client_label<'a>(&'a self, client_id: Option<&str>) -> &'a str {
        client_id
            .and_then(|id| self.clients.get(id))
            .map_or(UNKNOWN_CLIENT, |client| client.id.as_str())
    }
}

/// The subject types the clients get (OpenID Connect Core §8): with
/// claims that name the person, each client's, pairwise first; without,
/// a fresh `sub` per login, which is no client's in particular and is
/// said as `public`, as it always was.
fn subject_types(config: &OidcConfig) -> Vec<&'static str> {
    if config.sub_claims.is_empty() {
        return vec![SubjectType::Public.as_str()];
    }
    [SubjectType::Pairwise, SubjectType::Public]
        .into_iter()
        .filter(|kind| config.clients.iter().any(|c| c.subject_type == *kind))
        .map(SubjectType::as_str)
        .collect()
}

/// The discovery document (OpenID Connect Discovery §3): what is served,
/// and nothing that is not.
fn discovery(issuer: &Issuer, subject_types: &[&str], rule_scopes: &BTreeSet<String>) -> Bytes {
    let scopes: Vec<&str> = std::iter::once("openid")
        .chain(rule_scopes.iter().map(String::as_str))
        .collect();
    let document = json!({
        "issuer": issuer.as_str(),
        "authorization_endpoint": issuer.endpoint("/authorize"),
        "token_endpoint": issuer.endpoint("/token"),
        "userinfo_endpoint": issuer.endpoint("/userinfo"),
        "jwks_uri": issuer.endpoint("/jwks"),
        "scopes_supported": scopes,
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code"],
        "subject_types_supported": subject_types,
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic", "client_secret_post", "none"],
        "code_challenge_methods_supported": ["S256"],
        "claims_parameter_supported": false,
        "request_parameter_supported": false,
        "request_uri_parameter_supported": false,
        "authorization_response_iss_parameter_supported": true,
        "prompt_values_supported": ["login", "consent"],
        "claims_supported": ["iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "given_name", "family_name", "birthdate", "email", "phone_number"],
    });
    Bytes::from(document.to_string())
}

type Answer = Result<Response<Full<Bytes>>, Refusal>;

impl Inner {
    /// A request for one of the provider's endpoints; `base` is the
    /// issuer's path, under which the page's files and API are too.
    pub(super) async fn oidc<B>(
        &self,
        provider: &Provider,
        endpoint: Endpoint,
        req: Request<B>,
        peer: std::net::IpAddr,
    ) -> Answer
    where
        B: Body<Data = Bytes>,
        B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        let method = req.method().clone();
        let head = method == Method::HEAD;
        match (endpoint, &method) {
            (Endpoint::Discovery, &Method::GET | &Method::HEAD) => {
                Ok(public_json(provider.discovery.clone(), head))
            }
            (Endpoint::Jwks, &Method::GET | &Method::HEAD) => {
                Ok(public_json(provider.signer.jwks(), head))
            }
            (Endpoint::Discovery | Endpoint::Jwks, &Method::OPTIONS) => Ok(preflight()),
            (Endpoint::Discovery | Endpoint::Jwks, _) => Err(VerifierError::MethodNotAllowed {
                allow: "GET, HEAD, OPTIONS",
            }
            .into()),
            (Endpoint::Authorize, &Method::GET) => {
                let query = req.uri().query().unwrap_or("").as_bytes().to_vec();
                Ok(self.authorize(provider, &query, req.headers()))
            }
            (Endpoint::Authorize, &Method::POST) => {
                let headers = req.headers().clone();
                let form = token::read_form(req).await?;
                Ok(self.authorize(provider, &form, &headers))
            }
            (Endpoint::Authorize, _) => {
                Err(VerifierError::MethodNotAllowed { allow: "GET, POST" }.into())
            }
            (Endpoint::Token, &Method::POST) => {
                let address = client_address(req.headers(), peer, self.forwarded_hops);
                Ok(self.token(provider, req, Address::of(address)).await)
            }
            (Endpoint::Token, &Method::OPTIONS) => {
                Ok(cors::preflight(&provider.origins, req.headers(), "POST"))
            }
            (Endpoint::Token, _) => Err(VerifierError::MethodNotAllowed {
                allow: "POST, OPTIONS",
            }
            .into()),
            (Endpoint::Userinfo, &Method::GET | &Method::POST) => {
                Ok(self.userinfo(provider, req.headers()))
            }
            (Endpoint::Userinfo, &Method::OPTIONS) => Ok(cors::preflight(
                &provider.origins,
                req.headers(),
                "GET, POST",
            )),
            (Endpoint::Userinfo, _) => Err(VerifierError::MethodNotAllowed {
                allow: "GET, POST, OPTIONS",
            }
            .into()),
        }
    }

    /// The authorization endpoint: the page, carrying the request sealed,
    /// or the request's refusal.
    fn authorize(
        &self,
        provider: &Provider,
        query: &[u8],
        headers: &http::HeaderMap,
    ) -> Response<Full<Bytes>> {
        let (lang, ui_locales) = asked_language(query);
        let asked = Asked {
            lang: lang.as_deref(),
            ui_locales: ui_locales.as_deref(),
            accept_language: headers
                .get(header::ACCEPT_LANGUAGE)
                .and_then(|value| value.to_str().ok()),
        };
        let shown = match switched(query) {
            Some(sealed) => self.reopened(provider, sealed, asked),
            None => self.requested(provider, query, asked),
        };
        let (authorization, sealed) = match shown {
            Ok(shown) => shown,
            Err(refusal) => return *refusal,
        };
        let client = provider.clients.get(&authorization.client_id);
        let branded = self.client_brands.get(&authorization.client_id);
        let name = client
            .and_then(|c| c.name.as_deref())
            .or(branded.map(|b| b.brand.name.as_str()))
            .unwrap_or(&authorization.client_id);
        let rendered = self.pages.choose(asked);
        // The client's own brand, from the sealed request's client: the
        // same on every replica with the same clients file.
        let rebranded = branded.and_then(|branded| self.pages.rebrand(rendered, branded));
        let rendered = rebranded.as_ref().unwrap_or(rendered);
        let request = authorization.fingerprint();
        // The host the login returns to, beside the QR code: a person
        // shown the code on another site can tell (docs/oidc.md,
        // "Threats"). A native app's own scheme has none.
        let site = authorization
            .redirect_uri
            .parse::<http::Uri>()
            .ok()
            .and_then(|uri| uri.host().map(str::to_string));
        super::page::login_page(
            rendered,
            provider.path(),
            &sealed,
            &request,
            name,
            site.as_deref(),
        )
    }

    /// A relying party's authorization request, checked and sealed for
    /// the page to carry.
    fn requested(
        &self,
        provider: &Provider,
        query: &[u8],
        asked: Asked<'_>,
    ) -> Result<(Authorization, String), Box<Response<Full<Bytes>>>> {
        let checked = authorize::check(query, &provider.clients, &provider.rule_scopes, unix_now());
        let authorization = match checked {
            Ok(authorization) => authorization,
            Err(refused) => {
                provider.refused(refused.reason(), named_client(query).as_deref());
                tracing::debug!(reason = refused.reason(), "authorization request refused");
                return Err(Box::new(match refused {
                    Refused::Page(why) => self.refused_page(why, asked, provider),
                    Refused::Redirect(redirect) => found(&provider.error_location(&redirect)),
                }));
            }
        };
        let keys = self.keys.ring();
        let Ok(sealed) = sealed::seal(&keys, &provider.issuer, &authorization) else {
            return Err(Box::new(self.refused_page(
                "refused-unavailable",
                asked,
                provider,
            )));
        };
        provider.count("started", &authorization.client_id);
        Ok((authorization, sealed))
    }

    /// The request the page's language switch carries, sealed as the page
    /// had it: the same login, shown again.
    fn reopened(
        &self,
        provider: &Provider,
        sealed: String,
        asked: Asked<'_>,
    ) -> Result<(Authorization, String), Box<Response<Full<Bytes>>>> {
        match provider.reopen(&self.keys.ring(), &sealed) {
            Some(authorization) => Ok((authorization, sealed)),
            None => {
                tracing::debug!("a language switch's sealed request refused");
                Err(Box::new(self.refused_page(
                    "refused-stale",
                    asked,
                    provider,
                )))
            }
        }
    }

    /// lanyard's own page for a login it cannot go on with: `why`'s
    /// message and what to do, in the language `asked` chooses, as 400.
    fn refused_page(
        &self,
        why: &str,
        asked: Asked<'_>,
        provider: &Provider,
    ) -> Response<Full<Bytes>> {
        let page = ErrorPage {
            title: "refused-title",
            text: &[why, "refused-advice"],
            switch: false,
        };
        super::page::error_page(
            self.pages.error(&page, asked, provider.path()),
            StatusCode::BAD_REQUEST,
        )
    }
}

/// The sealed request of the page's language switch
/// (`authorization=…&lang=…`), which no relying party's request has: the
/// switch carries the request sealed rather than its parameters, so that
/// a request posted to keep `state` and `nonce` out of URLs stays so.
fn switched(query: &[u8]) -> Option<String> {
    form_urlencoded::parse(query)
        .find(|(name, _)| name == "authorization")
        .map(|(_, value)| value.into_owned())
}

/// The language the login page is asked in: the page's switch (`lang`),
/// and the client's `ui_locales` (OpenID Connect Core §3.1.2.1), tags
/// separated by spaces.
fn asked_language(query: &[u8]) -> (Option<String>, Option<String>) {
    let mut lang = None;
    let mut ui_locales = None;
    for (name, value) in form_urlencoded::parse(query) {
        match &*name {
            "lang" => lang = Some(value.into_owned()),
            "ui_locales" => ui_locales = Some(value.into_owned()),
            _ => {}
        }
    }
    (lang, ui_locales)
}

/// The `client_id` a request names, for its refusal's metric.
fn named_client(query: &[u8]) -> Option<String> {
    form_urlencoded::parse(query)
        .find(|(name, _)| name == "client_id")
        .map(|(_, value)| value.into_owned())
}

/// A 303 to `location`.
fn found(location: &str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    if let Ok(location) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// Discovery and the JWK set: public, for any origin's script (CORS `*`),
/// cacheable for a few minutes so that a key rotation reaches relying
/// parties well within an ID token's lifetime.
fn public_json(body: Bytes, head: bool) -> Response<Full<Bytes>> {
    let length = body.len();
    let mut response = Response::new(Full::new(match head {
        true => Bytes::new(),
        false => body,
    }));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if head {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    cors(headers);
    response
}

fn cors(headers: &mut http::HeaderMap) {
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
}

/// A CORS preflight for discovery or the JWK set.
fn preflight() -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    cors(headers);
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, HEAD"),
    );
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    response
}
