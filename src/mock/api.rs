//! The mock's API under `/api`: bearer-token authentication, the
//! authorization model of docs/service.md §5.4, routing, and dispatch to
//! the verification and issuance handlers, whose tables it holds. The
//! JSON conventions they share are `surface`'s.
//!
//! Order of checks, so each answer names the first thing wrong: the token
//! (401), the path (404), the method (405), the organization, role and
//! project group (403), the body (400, 413), then the resource itself.

use std::time::SystemTime;

use http::{HeaderMap, Method, Request, StatusCode, Version, header};
use hyper::body::Incoming;
use serde_json::json;

use super::accounts::{Accounts, MockAccount};
use super::issuance::{self, Credentials};
use super::surface::{
    API_PREFIX, Answer, MAX_BODY, Refusal, Reply, Scope, error, json, method_not_allowed,
    not_found, read_json_object,
};
use super::table::Table;
use super::verification::{self, Verifications};

/// The role that grants the verification API (docs/service.md §5.4).
pub const VERIFICATIONS_ROLE: &str = "verifications.api";
/// The role that grants the issuance API (docs/service.md §5.4).
pub const CREDENTIALS_ROLE: &str = "credentials.api";

/// What the mock saw of the most recent API request, for tests to inspect
/// what a proxy forwarded.
/// Its `Debug` leaves out `authorization`, so a failing test does not
/// print a token.
#[derive(Clone)]
pub struct ApiRequestLog {
    pub method: Method,
    /// Path and query as they arrived, `/api` prefix included.
    pub path_and_query: String,
    /// HTTP/1.1 or HTTP/2, as negotiated on the mock's side.
    pub version: Version,
    pub headers: HeaderMap,
}

impl std::fmt::Debug for ApiRequestLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| match *name {
                http::header::AUTHORIZATION => (name.as_str(), "[redacted]"),
                _ => (name.as_str(), value.to_str().unwrap_or("[not text]")),
            })
            .collect();
        f.debug_struct("ApiRequestLog")
            .field("method", &self.method)
            .field("path_and_query", &self.path_and_query)
            .field("version", &self.version)
            .field("headers", &headers)
            .finish()
    }
}

/// Which API surface a path belongs to, and so which role it needs.
#[derive(Debug, Clone, Copy)]
enum Area {
    Verification,
    Issuance,
}

impl Area {
    fn role(self) -> &'static str {
        match self {
            Area::Verification => VERIFICATIONS_ROLE,
            Area::Issuance => CREDENTIALS_ROLE,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Area::Verification => "verification",
            Area::Issuance => "issuance",
        }
    }
}

/// A resource of the API, parsed from the path after `API_PREFIX`.
#[derive(Debug)]
enum Route<'a> {
    /// `/`: who the token belongs to.
    Root,
    /// `.../verifications/{rule}`
    Rule(Scope<'a>, &'a str),
    /// `.../verifications/{rule}/sessions/{transaction_id}`
    Session(Scope<'a>, &'a str, &'a str),
    /// `.../credentials`
    Credentials(Scope<'a>),
    /// `.../credentials/{id}`
    Credential(Scope<'a>, &'a str),
    /// `.../credentials/{id}/{action}`
    CredentialAction(Scope<'a>, &'a str, issuance::Action),
}

impl<'a> Route<'a> {
    fn parse(path: &'a str) -> Option<Route<'a>> {
        let rest = path.strip_prefix(API_PREFIX)?;
        if rest.is_empty() || rest == "/" {
            return Some(Route::Root);
        }
        let segments: Vec<&str> = rest.strip_prefix('/')?.split('/').collect();
        if segments.iter().any(|s| s.is_empty()) {
            return None;
        }
        let [
            "organizations",
            organization_id,
            "projects",
            project_id,
            rest @ ..,
        ] = segments.as_slice()
        else {
            return None;
        };
        let scope = Scope {
            organization_id,
            project_id,
        };
        Some(match rest {
            ["verifications", rule] => Route::Rule(scope, rule),
            ["verifications", rule, "sessions", transaction] => {
                Route::Session(scope, rule, transaction)
            }
            ["credentials"] => Route::Credentials(scope),
            ["credentials", id] => Route::Credential(scope, id),
            ["credentials", id, action] => {
                Route::CredentialAction(scope, id, issuance::Action::parse(action)?)
            }
            _ => return None,
        })
    }

    fn methods(&self) -> &'static [Method] {
        match self {
            Route::Root | Route::Session(..) => &[Method::GET],
            Route::Rule(..) | Route::Credentials(..) => &[Method::GET, Method::POST],
            Route::Credential(..) => &[Method::GET, Method::PATCH, Method::DELETE],
            Route::CredentialAction(..) => &[Method::POST],
        }
    }

    fn scope(&self) -> Option<(Scope<'a>, Area)> {
        match *self {
            Route::Root => None,
            Route::Rule(scope, _) | Route::Session(scope, ..) => Some((scope, Area::Verification)),
            Route::Credentials(scope)
            | Route::Credential(scope, _)
            | Route::CredentialAction(scope, ..) => Some((scope, Area::Issuance)),
        }
    }
}

/// The API: the most recent request, for tests, and the tables of the
/// surfaces it serves.
#[derive(Debug)]
pub(super) struct Api {
    last_request: Table<Option<ApiRequestLog>>,
    verifications: Verifications,
    credentials: Credentials,
}

impl Api {
    pub(super) fn new(base_url: String) -> Api {
        Api {
            last_request: Table::default(),
            verifications: Verifications::new(base_url),
            credentials: Credentials::default(),
        }
    }

    /// The verification sessions, which the wallet completes too.
    pub(super) fn verifications(&self) -> &Verifications {
        &self.verifications
    }

    #[cfg(feature = "test-support")]
    pub(super) fn last_request(&self) -> Option<ApiRequestLog> {
        self.last_request.lock().clone()
    }

    pub(super) async fn handle(&self, accounts: &Accounts, req: Request<Incoming>) -> Reply {
        let log = ApiRequestLog {
            method: req.method().clone(),
            path_and_query: req
                .uri()
                .path_and_query()
                .map(|pq| pq.as_str().to_string())
                .unwrap_or_else(|| req.uri().path().to_string()),
            version: req.version(),
            headers: req.headers().clone(),
        };
        // The log is in place before the counter moves, so a test that
        // awaits the counter finds the request it waited for.
        *self.last_request.lock() = Some(log);
        accounts.count(|c| c.api_requests += 1);
        self.dispatch(accounts, req)
            .await
            .unwrap_or_else(Reply::from)
    }

    async fn dispatch(&self, accounts: &Accounts, req: Request<Incoming>) -> Answer {
        let (parts, body) = req.into_parts();
        let account = match authenticate(accounts, &parts.headers) {
            Ok(account) => account,
            Err(refusal) => {
                // Read what the client is still sending, as a server behind
                // a load balancer would: closing on an unread body resets
                // the connection, and the 401 can be lost with it.
                let _ = crate::collect::collect(body, MAX_BODY).await;
                return Err(refusal);
            }
        };
        let route = Route::parse(parts.uri.path()).ok_or_else(|| {
            not_found("no such path on the mock service's API; see docs/mock-service.md")
        })?;
        if !route.methods().contains(&parts.method) {
            return Err(method_not_allowed(route.methods()));
        }
        if let Some((scope, area)) = route.scope() {
            authorize(&account, scope, area)?;
        }
        let method = &parts.method;
        let body = if *method == Method::POST || *method == Method::PATCH {
            read_json_object(body).await?
        } else {
            None
        };

        let (v, c) = (&self.verifications, &self.credentials);
        match route {
            Route::Root => Ok(json(
                StatusCode::OK,
                &json!({
                    "service": "lanyard mock service (illustrative)",
                    "client_id": account.client_id,
                    "organization_id": account.organization_id,
                    "roles": account.roles,
                    "projects": account.projects,
                }),
            )),
            Route::Rule(scope, rule) if *method == Method::GET => {
                verification::get_rule(v, scope, rule)
            }
            Route::Rule(scope, rule) => verification::start_session(v, scope, rule, body),
            Route::Session(scope, rule, tx) => verification::poll_session(v, scope, rule, tx),
            Route::Credentials(scope) if *method == Method::GET => issuance::list(c, scope),
            Route::Credentials(scope) => issuance::create(c, scope, body),
            Route::Credential(scope, id) if *method == Method::GET => issuance::read(c, scope, id),
            Route::Credential(scope, id) if *method == Method::PATCH => {
                issuance::update(c, scope, id, body)
            }
            Route::Credential(scope, id) => issuance::delete(c, scope, id),
            Route::CredentialAction(scope, id, action) => issuance::act(c, scope, id, action),
        }
    }
}

/// Why a request's token was refused.
fn unauthorized(message: &str) -> Refusal {
    error(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

/// The account behind the request's bearer token.
fn authenticate(accounts: &Accounts, headers: &HeaderMap) -> Result<MockAccount, Refusal> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(unauthorized(
            "the Authorization header is missing; send Authorization: Bearer <token>",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|token| !token.is_empty());
    let Some(token) = token else {
        return Err(unauthorized(
            "the Authorization header is not a bearer token; send Authorization: Bearer <token>",
        ));
    };
    let registry = accounts.lock();
    let Some(issued) = registry.tokens.get(token) else {
        return Err(unauthorized(
            "the bearer token is unknown or revoked; fetch a new one from the token endpoint",
        ));
    };
    if issued.expires_at <= SystemTime::now() {
        return Err(unauthorized(
            "the bearer token has expired; fetch a new one from the token endpoint",
        ));
    }
    registry
        .accounts
        .get(&issued.client_id)
        .cloned()
        .ok_or_else(|| unauthorized("the bearer token's service account no longer exists"))
}

/// docs/service.md §5.4: the path's organization is the account's, the account holds
/// the area's role, and it belongs to the project's group, in that order.
fn authorize(account: &MockAccount, scope: Scope<'_>, area: Area) -> Result<(), Refusal> {
    if scope.organization_id != account.organization_id {
        return Err(Refusal::with_body(
            StatusCode::FORBIDDEN,
            json!({
                "error": "forbidden",
                "missing": "organization",
                "organization_id": scope.organization_id,
                "message": format!(
                    "the service account belongs to organization {}, not {}",
                    account.organization_id, scope.organization_id
                ),
            }),
        ));
    }
    let role = area.role();
    if !account.roles.iter().any(|r| r == role) {
        return Err(Refusal::with_body(
            StatusCode::FORBIDDEN,
            json!({
                "error": "forbidden",
                "missing": "role",
                "required_role": role,
                "message": format!(
                    "the service account does not hold the role {role}, which the {} API requires (docs/service.md §5.4); assign it to the account in the Portal",
                    area.name()
                ),
            }),
        ));
    }
    if !account.projects.iter().any(|p| p == scope.project_id) {
        return Err(Refusal::with_body(
            StatusCode::FORBIDDEN,
            json!({
                "error": "forbidden",
                "missing": "project_group",
                "project_id": scope.project_id,
                "message": format!(
                    "the service account is not a member of the group of project {}; add it to the project's group (docs/service.md §7)",
                    scope.project_id
                ),
            }),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_parse_into_routes() {
        let base = "/api/organizations/o/projects/p";
        assert!(matches!(Route::parse("/api"), Some(Route::Root)));
        assert!(matches!(Route::parse("/api/"), Some(Route::Root)));
        assert!(matches!(
            Route::parse(&format!("{base}/verifications/r")),
            Some(Route::Rule(s, "r")) if s.organization_id == "o" && s.project_id == "p"
        ));
        assert!(matches!(
            Route::parse(&format!("{base}/verifications/r/sessions/t")),
            Some(Route::Session(_, "r", "t"))
        ));
        assert!(matches!(
            Route::parse(&format!("{base}/credentials")),
            Some(Route::Credentials(_))
        ));
        assert!(matches!(
            Route::parse(&format!("{base}/credentials/c/approve")),
            Some(Route::CredentialAction(_, "c", issuance::Action::Approve))
        ));
    }

    #[test]
    fn unknown_or_malformed_paths_do_not_parse() {
        for path in [
            "/api/organizations",
            "/api/organizations/o/projects/p",
            "/api/organizations/o/projects/p/verifications",
            "/api/organizations/o/projects/p/verifications/",
            "/api/organizations//projects/p/credentials",
            "/api/organizations/o/projects/p/credentials/c/frobnicate",
            "/api/organizations/o/projects/p/credentials/c/approve/x",
            "/api//",
        ] {
            assert!(Route::parse(path).is_none(), "{path}");
        }
    }
}
