//! Verification on the rule path of docs/service.md §4.3, and the simulated wallet
//! that completes a session.
//!
//! docs/service.md fixes only the rule path, `transaction_id`, a `status` and the
//! presented claims (§2.6); the methods, the other fields and the status
//! values here are illustrative: `pending`, then `verified` or `declined`.
//!
//! It owns its tables ([`Verifications`]): the API reaches the rule path
//! after its checks, the wallet under `/mock/wallet` without a token.

use std::collections::{HashMap, VecDeque};
use std::sync::MutexGuard;

use http::{Method, Request, StatusCode};
use hyper::body::Incoming;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::surface::{
    Answer, Refusal, Reply, Scope, WALLET_PREFIX, conflict, error, json, method_not_allowed,
    not_found, read_json, unix_now,
};
use super::table::Table;
use super::wallet_page;

/// Bounds the session table of a long demo.
const MAX_SESSIONS: usize = 10_000;
/// Bounds the record of the rule paths sessions were started on: the
/// latest are what a test asks about.
const MAX_STARTS_RECORDED: usize = 256;

/// The verification surface's tables, and the mock's base URL for the
/// wallet links it hands out.
#[derive(Debug)]
pub(super) struct Verifications {
    base_url: String,
    tables: Table<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    /// Rules by (project id, normalised rule id).
    rules: HashMap<(String, String), Rule>,
    /// Sessions by transaction id.
    sessions: HashMap<String, Session>,
    /// The rule paths of the latest sessions started, oldest first.
    started_on: VecDeque<String>,
}

impl Verifications {
    pub(super) fn new(base_url: String) -> Verifications {
        Verifications {
            base_url,
            tables: Table::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tables> {
        self.tables.lock()
    }

    /// Registers a rule in a project, published or a draft, whose
    /// sessions' wallet presents `claims` unless told others (`None`: the
    /// mock's full identity); registering an id again replaces it.
    pub(super) fn add_rule(
        &self,
        project_id: String,
        rule_id: String,
        published: bool,
        claims: Option<Map<String, Value>>,
    ) {
        let key = (project_id, normalise_rule_id(&rule_id));
        let status = match published {
            true => RuleStatus::Published,
            false => RuleStatus::Draft,
        };
        let rule = Rule {
            rule_id,
            status,
            claims,
        };
        self.lock().rules.insert(key, rule);
    }

    /// The rule paths the latest sessions were started on, oldest first,
    /// as `/organizations/{org}/projects/{project}/verifications/{rule}`.
    #[cfg(feature = "test-support")]
    pub(super) fn started_on(&self) -> Vec<String> {
        self.lock().started_on.iter().cloned().collect()
    }

    /// What the wallet presents for a session when told nothing: its
    /// rule's claims.
    fn claims_of(&self, transaction_id: &str) -> Map<String, Value> {
        let tables = self.lock();
        tables
            .sessions
            .get(transaction_id)
            .and_then(|s| {
                tables
                    .rules
                    .get(&(s.project_id.clone(), s.rule_key.clone()))
            })
            .and_then(|rule| rule.claims.clone())
            .unwrap_or_else(default_claims)
    }

    /// `{base}/mock/wallet/{transaction_id}{suffix}`.
    pub(super) fn wallet_url(&self, transaction_id: &str, suffix: &str) -> String {
        format!("{}{WALLET_PREFIX}/{transaction_id}{suffix}", self.base_url)
    }
}

/// Whether a rule can be used at runtime (docs/service.md §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RuleStatus {
    Draft,
    Published,
}

#[derive(Debug, Clone)]
struct Rule {
    /// As registered, for answers.
    rule_id: String,
    status: RuleStatus,
    /// What its sessions' wallet presents; `None`: [`default_claims`].
    claims: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SessionStatus {
    Pending,
    Verified,
    Declined,
}

impl SessionStatus {
    fn as_str(self) -> &'static str {
        match self {
            SessionStatus::Pending => "pending",
            SessionStatus::Verified => "verified",
            SessionStatus::Declined => "declined",
        }
    }
}

#[derive(Debug, Clone)]
struct Session {
    organization_id: String,
    project_id: String,
    /// Normalised, as the rule table's key.
    rule_key: String,
    rule_id: String,
    status: SessionStatus,
    /// As the wallet presented them, passed on verbatim: any JSON, so
    /// tests can present what a service might send (large numbers,
    /// claims that are not an object).
    claims: Option<Box<RawValue>>,
    created_at: u64,
    completed_at: Option<u64>,
}

impl Session {
    /// The poll result: `transaction_id`, `status` and, once verified, the
    /// presented `claims`.
    fn view<'a>(&'a self, transaction_id: &'a str) -> SessionView<'a> {
        SessionView {
            transaction_id,
            status: self.status.as_str(),
            rule_id: &self.rule_id,
            created_at: self.created_at,
            claims: self.claims.as_deref(),
            completed_at: self.completed_at,
        }
    }
}

/// A poll's answer; the claims' text goes out as it came in.
#[derive(serde::Serialize)]
struct SessionView<'a> {
    transaction_id: &'a str,
    status: &'a str,
    rule_id: &'a str,
    created_at: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    claims: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completed_at: Option<u64>,
}

/// Rule ids that are UUIDs compare in their canonical form, so a path in
/// upper case finds the rule.
fn normalise_rule_id(rule_id: &str) -> String {
    uuid::Uuid::parse_str(rule_id)
        .map(|u| u.hyphenated().to_string())
        .unwrap_or_else(|_| rule_id.to_string())
}

/// The published rule a path names, or the 404 that explains why not.
fn published_rule(
    verifications: &Verifications,
    scope: Scope<'_>,
    rule_id: &str,
) -> Result<(String, Rule), Refusal> {
    let key = normalise_rule_id(rule_id);
    let rule = verifications
        .lock()
        .rules
        .get(&(scope.project_id.to_string(), key.clone()))
        .cloned();
    match rule {
        Some(rule) if rule.status == RuleStatus::Published => Ok((key, rule)),
        Some(_) => Err(not_found(format!(
            "rule {rule_id} in project {} is a draft; only a published rule can be used at runtime (docs/service.md §3.1): publish it in the Portal",
            scope.project_id
        ))),
        None if rule_id.starts_with("ver_") => Err(not_found(format!(
            "no rule {rule_id} in project {}; paths take the rule's UUID from Generate ID, not the ver_ identifier shown on the rule screen",
            scope.project_id
        ))),
        None => Err(not_found(format!(
            "no published rule {rule_id} in project {}; RULE_ID must be the UUID of a published rule",
            scope.project_id
        ))),
    }
}

/// `GET` rule path: the rule, so `lanyard check` can probe it.
pub(super) fn get_rule(verifications: &Verifications, scope: Scope<'_>, rule_id: &str) -> Answer {
    let (_, rule) = published_rule(verifications, scope, rule_id)?;
    Ok(json(
        StatusCode::OK,
        &json!({
            "rule_id": rule.rule_id,
            "project_id": scope.project_id,
            "organization_id": scope.organization_id,
            "status": "published",
        }),
    ))
}

/// `POST` rule path: starts a session and answers what a backend needs to
/// show a QR code or a wallet button (docs/service.md §4.2 step 1). The body, if any,
/// must be a JSON object; the mock does not use it.
pub(super) fn start_session(
    verifications: &Verifications,
    scope: Scope<'_>,
    rule_id: &str,
    _body: Option<Map<String, Value>>,
) -> Answer {
    let (rule_key, rule) = published_rule(verifications, scope, rule_id)?;
    let transaction_id = uuid::Uuid::new_v4().to_string();
    let session = Session {
        organization_id: scope.organization_id.to_string(),
        project_id: scope.project_id.to_string(),
        rule_key,
        rule_id: rule.rule_id.clone(),
        status: SessionStatus::Pending,
        claims: None,
        created_at: unix_now(),
        completed_at: None,
    };
    {
        let mut tables = verifications.lock();
        if tables.sessions.len() >= MAX_SESSIONS {
            // Finished sessions go first; a table full of pending ones is
            // refused rather than grown.
            tables
                .sessions
                .retain(|_, s| s.status == SessionStatus::Pending);
        }
        if tables.sessions.len() >= MAX_SESSIONS {
            drop(tables);
            return Err(error(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_sessions",
                format!("the mock holds at most {MAX_SESSIONS} pending sessions"),
            ));
        }
        tables.sessions.insert(transaction_id.clone(), session);
        if tables.started_on.len() == MAX_STARTS_RECORDED {
            tables.started_on.pop_front();
        }
        tables.started_on.push_back(format!(
            "/organizations/{}/projects/{}/verifications/{}",
            scope.organization_id, scope.project_id, rule.rule_id
        ));
    }

    let wallet = verifications.wallet_url(&transaction_id, "");
    let request_uri: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("client_id", "lanyard-mock-verifier")
        .append_pair("request_uri", &wallet)
        .finish();
    Ok(json(
        StatusCode::CREATED,
        &json!({
            "transaction_id": transaction_id,
            "status": "pending",
            "rule_id": rule.rule_id,
            "project_id": scope.project_id,
            "organization_id": scope.organization_id,
            "request_uri": format!("openid4vp://?{request_uri}"),
            "mock_wallet_present_url": format!("{wallet}/present"),
        }),
    ))
}

/// `GET {rule path}/sessions/{transaction_id}`: the session's state.
pub(super) fn poll_session(
    verifications: &Verifications,
    scope: Scope<'_>,
    rule_id: &str,
    transaction_id: &str,
) -> Answer {
    let rule_key = normalise_rule_id(rule_id);
    let session = verifications.lock().sessions.get(transaction_id).cloned();
    match session {
        Some(s)
            if s.organization_id == scope.organization_id
                && s.project_id == scope.project_id
                && s.rule_key == rule_key =>
        {
            Ok(json(StatusCode::OK, &s.view(transaction_id)))
        }
        _ => Err(not_found(format!(
            "no verification session {transaction_id} for rule {rule_id} in project {}",
            scope.project_id
        ))),
    }
}

/// Illustrative claims of a presented credential, used when the wallet
/// call names none.
fn default_claims() -> Map<String, Value> {
    let Value::Object(claims) = json!({
        "given_name": "Erika",
        "family_name": "Mustermann",
        "birth_date": "1984-01-26",
        "age_over_18": true,
    }) else {
        return Map::new();
    };
    claims
}

/// The simulated wallet under [`WALLET_PREFIX`], without a token:
///
/// - `GET /mock/wallet/{transaction_id}`: the request a wallet would fetch.
/// - `POST /mock/wallet/{transaction_id}/present`: presents a credential,
///   with the claims in an optional JSON object body.
/// - `POST /mock/wallet/{transaction_id}/decline`: the holder declines.
/// - `GET /mock/wallet?request_uri=…`: the demo's wallet link.
///
/// A browser (asking for HTML) gets pages instead of JSON: see
/// `wallet_page`.
pub(super) async fn wallet(verifications: &Verifications, req: Request<Incoming>) -> Reply {
    wallet_dispatch(verifications, req)
        .await
        .unwrap_or_else(Reply::from)
}

async fn wallet_dispatch(verifications: &Verifications, req: Request<Incoming>) -> Answer {
    let (parts, body) = req.into_parts();
    let html = wallet_page::wants_html(&parts.headers);
    let rest = parts
        .uri
        .path()
        .strip_prefix(WALLET_PREFIX)
        .unwrap_or_default();
    if rest.is_empty() && parts.method == Method::GET {
        // The wallet button's link: the demo's WALLET_BASE_URL with the
        // OpenID4VP request's query.
        let Some(transaction_id) =
            wallet_page::transaction_of_link(parts.uri.query(), &verifications.base_url)
        else {
            return Ok(wallet_page::problem(
                StatusCode::BAD_REQUEST,
                "This wallet link names no request of this mock: it needs request_uri={mock}/mock/wallet/{transaction_id}.",
            ));
        };
        return wallet_request(verifications, &transaction_id, true);
    }
    let segments: Vec<&str> = rest.split('/').skip(1).collect();
    let (transaction_id, action) = match segments.as_slice() {
        [tx] if !tx.is_empty() => (*tx, None),
        [tx, action @ ("present" | "decline")] if !tx.is_empty() => (*tx, Some(*action)),
        _ => {
            return Err(not_found(
                "no such path on the mock wallet; it has /mock/wallet/{transaction_id}[/present|/decline]",
            ));
        }
    };
    let Some(action) = action else {
        if parts.method != Method::GET {
            return Err(method_not_allowed(&[Method::GET]));
        }
        return wallet_request(verifications, transaction_id, html);
    };
    if parts.method != Method::POST {
        return Err(method_not_allowed(&[Method::POST]));
    }
    let claims = read_json(body).await?;
    let (status, claims) = if action == "present" {
        let claims = claims.or_else(|| {
            let presented = verifications.claims_of(transaction_id);
            serde_json::value::to_raw_value(&Value::Object(presented)).ok()
        });
        (SessionStatus::Verified, claims)
    } else {
        (SessionStatus::Declined, None)
    };
    complete(verifications, transaction_id, status, claims, html)
}

/// Completes a pending session as the holder chose: a page for a browser,
/// the session's new state for a script.
fn complete(
    verifications: &Verifications,
    transaction_id: &str,
    status: SessionStatus,
    claims: Option<Box<RawValue>>,
    html: bool,
) -> Answer {
    let mut tables = verifications.lock();
    let Some(session) = tables.sessions.get_mut(transaction_id) else {
        drop(tables);
        if html {
            return Ok(wallet_page::problem(
                StatusCode::NOT_FOUND,
                "This mock holds no such request.",
            ));
        }
        return Err(not_found(format!(
            "no verification session {transaction_id}"
        )));
    };
    if session.status != SessionStatus::Pending {
        let current = session.status.as_str();
        drop(tables);
        if html {
            return Ok(wallet_page::consent(transaction_id, current, &Map::new()));
        }
        return Err(conflict(format!(
            "the session is already {current}; start a new one"
        )));
    }
    session.status = status;
    session.claims = claims;
    session.completed_at = Some(unix_now());
    if html {
        drop(tables);
        return Ok(wallet_page::done(status == SessionStatus::Verified));
    }
    // Answered while the table is held: the view borrows the session.
    Ok(json(StatusCode::OK, &session.view(transaction_id)))
}

/// What a wallet would fetch from the `request_uri` (illustrative), or
/// for a browser the page where a person presents or declines.
fn wallet_request(verifications: &Verifications, transaction_id: &str, html: bool) -> Answer {
    let session = verifications.lock().sessions.get(transaction_id).cloned();
    if html {
        return Ok(match session {
            Some(session) => {
                let claims = verifications.claims_of(transaction_id);
                wallet_page::consent(transaction_id, session.status.as_str(), &claims)
            }
            None => wallet_page::problem(StatusCode::NOT_FOUND, "This mock holds no such request."),
        });
    }
    let session =
        session.ok_or_else(|| not_found(format!("no verification session {transaction_id}")))?;
    Ok(json(
        StatusCode::OK,
        &json!({
            "transaction_id": transaction_id,
            "status": session.status.as_str(),
            "rule_id": session.rule_id,
            "present_url": verifications.wallet_url(transaction_id, "/present"),
            "decline_url": verifications.wallet_url(transaction_id, "/decline"),
        }),
    ))
}
