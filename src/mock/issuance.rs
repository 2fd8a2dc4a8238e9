//! The issuance operations of docs/service.md §5.5 on credential items, under
//! `.../organizations/{ORG_ID}/projects/{PROJECT_ID}/credentials`.
//!
//! docs/service.md gives only the scopes (§4.4, §3.2); paths, payloads, states and
//! moves here are illustrative. States: `pending` (created, awaiting
//! approval), `issued`, `on_hold`, `revoked` (final).
//!
//! It owns its table ([`Credentials`]); the API authenticates, authorizes
//! and reads the body before a handler here runs.

use std::collections::HashMap;
use std::sync::MutexGuard;

use bytes::Bytes;
use http::{Response, StatusCode};
use http_body_util::Full;
use serde_json::{Map, Value, json};

use super::surface::{Answer, Refusal, Scope, error, json, not_found, unix_now};
use super::table::Table;

/// Bounds the credential table of a long demo.
const MAX_CREDENTIALS: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Pending,
    Issued,
    OnHold,
    Revoked,
}

impl Status {
    fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Issued => "issued",
            Status::OnHold => "on_hold",
            Status::Revoked => "revoked",
        }
    }
}

/// A state move, posted to `.../credentials/{id}/{action}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    Approve,
    Hold,
    Revoke,
    Resend,
}

impl Action {
    pub(super) fn parse(segment: &str) -> Option<Action> {
        match segment {
            "approve" => Some(Action::Approve),
            "hold" => Some(Action::Hold),
            "revoke" => Some(Action::Revoke),
            "resend" => Some(Action::Resend),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Action::Approve => "approve",
            Action::Hold => "hold",
            Action::Revoke => "revoke",
            Action::Resend => "resend",
        }
    }

    /// The state after this move from `from`, or why the move is refused.
    fn apply(self, from: Status) -> Result<Status, &'static str> {
        match (self, from) {
            (_, Status::Revoked) => Err("a revoked credential is final"),
            (Action::Approve, Status::Pending | Status::OnHold) => Ok(Status::Issued),
            (Action::Approve, Status::Issued) => Err("the credential is already issued"),
            (Action::Hold, Status::Issued) => Ok(Status::OnHold),
            (Action::Hold, Status::Pending) => {
                Err("only an issued credential can be held; approve it first")
            }
            (Action::Hold, Status::OnHold) => Err("the credential is already on hold"),
            (Action::Revoke, Status::Issued | Status::OnHold) => Ok(Status::Revoked),
            (Action::Revoke, Status::Pending) => {
                Err("only an issued credential can be revoked; delete a pending one instead")
            }
            (Action::Resend, Status::Issued) => Ok(Status::Issued),
            (Action::Resend, _) => Err("only an issued credential has a notification to resend"),
        }
    }
}

/// The issuance surface's table: credential items by id, across
/// projects, each knowing its own.
#[derive(Debug, Default)]
pub(super) struct Credentials(Table<Items>);

#[derive(Debug, Default)]
struct Items {
    by_id: HashMap<String, Credential>,
    /// Orders listings by creation.
    seq: u64,
}

impl Credentials {
    fn lock(&self) -> MutexGuard<'_, Items> {
        self.0.lock()
    }
}

#[derive(Debug, Clone)]
struct Credential {
    organization_id: String,
    project_id: String,
    status: Status,
    attributes: Map<String, Value>,
    created_at: u64,
    updated_at: u64,
    /// Delivery notifications: one on issue, one per resend.
    notifications_sent: u64,
    /// Creation order, for listings.
    seq: u64,
}

impl Credential {
    fn view(&self, credential_id: &str) -> Value {
        json!({
            "credential_id": credential_id,
            "organization_id": self.organization_id,
            "project_id": self.project_id,
            "status": self.status.as_str(),
            "attributes": self.attributes,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "notifications_sent": self.notifications_sent,
        })
    }

    fn in_scope(&self, scope: Scope<'_>) -> bool {
        self.organization_id == scope.organization_id && self.project_id == scope.project_id
    }
}

fn unknown(scope: Scope<'_>, credential_id: &str) -> Refusal {
    not_found(format!(
        "no credential {credential_id} in project {}",
        scope.project_id
    ))
}

fn body_required(body: Option<Map<String, Value>>) -> Result<Map<String, Value>, Refusal> {
    body.ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "the body must be a JSON object of the credential's attributes",
        )
    })
}

/// `POST .../credentials`: issues a new credential, `pending` until
/// approved. The body is the credential's attributes.
pub(super) fn create(
    credentials: &Credentials,
    scope: Scope<'_>,
    body: Option<Map<String, Value>>,
) -> Answer {
    let attributes = body_required(body)?;
    let credential_id = uuid::Uuid::new_v4().to_string();
    let now = unix_now();
    let mut inner = credentials.lock();
    if inner.by_id.len() >= MAX_CREDENTIALS {
        drop(inner);
        return Err(error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_credentials",
            format!("the mock holds at most {MAX_CREDENTIALS} credentials; delete some"),
        ));
    }
    inner.seq += 1;
    let credential = Credential {
        organization_id: scope.organization_id.to_string(),
        project_id: scope.project_id.to_string(),
        status: Status::Pending,
        attributes,
        created_at: now,
        updated_at: now,
        notifications_sent: 0,
        seq: inner.seq,
    };
    let view = credential.view(&credential_id);
    inner.by_id.insert(credential_id, credential);
    drop(inner);
    Ok(json(StatusCode::CREATED, &view))
}

/// `GET .../credentials`: the project's credentials, oldest first.
pub(super) fn list(credentials: &Credentials, scope: Scope<'_>) -> Answer {
    let mut found: Vec<(u64, Value)> = credentials
        .lock()
        .by_id
        .iter()
        .filter(|(_, c)| c.in_scope(scope))
        .map(|(id, c)| (c.seq, c.view(id)))
        .collect();
    found.sort_by_key(|(seq, _)| *seq);
    let views: Vec<Value> = found.into_iter().map(|(_, view)| view).collect();
    Ok(json(StatusCode::OK, &json!({ "credentials": views })))
}

/// `GET .../credentials/{id}`: status and metadata.
pub(super) fn read(credentials: &Credentials, scope: Scope<'_>, credential_id: &str) -> Answer {
    let view = credentials
        .lock()
        .by_id
        .get(credential_id)
        .filter(|c| c.in_scope(scope))
        .map(|c| c.view(credential_id));
    let view = view.ok_or_else(|| unknown(scope, credential_id))?;
    Ok(json(StatusCode::OK, &view))
}

/// `PATCH .../credentials/{id}`: merges the body into the attributes as a
/// JSON merge patch (RFC 7396, one level): `null` removes an attribute.
pub(super) fn update(
    credentials: &Credentials,
    scope: Scope<'_>,
    credential_id: &str,
    body: Option<Map<String, Value>>,
) -> Answer {
    let patch = body_required(body)?;
    change(credentials, scope, credential_id, |credential| {
        if credential.status == Status::Revoked {
            return Err(refused_move(
                "update",
                Status::Revoked,
                "a revoked credential is final; its attributes cannot change",
            ));
        }
        for (name, value) in patch {
            if value.is_null() {
                credential.attributes.remove(&name);
            } else {
                credential.attributes.insert(name, value);
            }
        }
        Ok(())
    })
}

/// `DELETE .../credentials/{id}`: removes the record, in any state.
pub(super) fn delete(credentials: &Credentials, scope: Scope<'_>, credential_id: &str) -> Answer {
    let mut inner = credentials.lock();
    let known = inner
        .by_id
        .get(credential_id)
        .is_some_and(|c| c.in_scope(scope));
    if known {
        inner.by_id.remove(credential_id);
    }
    drop(inner);
    if !known {
        return Err(unknown(scope, credential_id));
    }
    let mut reply = Response::new(Full::new(Bytes::new()));
    *reply.status_mut() = StatusCode::NO_CONTENT;
    Ok(reply)
}

/// `POST .../credentials/{id}/{approve|hold|revoke|resend}`.
pub(super) fn act(
    credentials: &Credentials,
    scope: Scope<'_>,
    credential_id: &str,
    action: Action,
) -> Answer {
    change(credentials, scope, credential_id, |credential| {
        let from = credential.status;
        let to = action
            .apply(from)
            .map_err(|why| refused_move(action.as_str(), from, why))?;
        // Issuing notifies the holder; a resend notifies again.
        if action == Action::Resend || (from == Status::Pending && to == Status::Issued) {
            credential.notifications_sent += 1;
        }
        credential.status = to;
        Ok(())
    })
}

/// Applies `edit` to the project's credential `credential_id` under the
/// lock and answers with what it became: every change to a credential is
/// found, scoped and stamped the same way. 404 for a credential the
/// project does not have; `edit`'s refusal leaves it as it was.
fn change(
    credentials: &Credentials,
    scope: Scope<'_>,
    credential_id: &str,
    edit: impl FnOnce(&mut Credential) -> Result<(), Refusal>,
) -> Answer {
    let mut inner = credentials.lock();
    let Some(credential) = inner
        .by_id
        .get_mut(credential_id)
        .filter(|c| c.in_scope(scope))
    else {
        drop(inner);
        return Err(unknown(scope, credential_id));
    };
    edit(credential)?;
    credential.updated_at = unix_now();
    let view = credential.view(credential_id);
    drop(inner);
    Ok(json(StatusCode::OK, &view))
}

/// 409: the move does not apply to the credential's state.
fn refused_move(action: &str, status: Status, why: &str) -> Refusal {
    Refusal::with_body(
        StatusCode::CONFLICT,
        json!({
            "error": "conflict",
            "action": action,
            "status": status.as_str(),
            "message": format!("cannot {action} a credential that is {}: {why}", status.as_str()),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_follow_the_state_table() {
        use Action::*;
        use Status::*;
        assert_eq!(Approve.apply(Pending), Ok(Issued));
        assert_eq!(Approve.apply(OnHold), Ok(Issued));
        assert_eq!(Hold.apply(Issued), Ok(OnHold));
        assert_eq!(Revoke.apply(Issued), Ok(Revoked));
        assert_eq!(Revoke.apply(OnHold), Ok(Revoked));
        assert_eq!(Resend.apply(Issued), Ok(Issued));
        for refused in [
            (Approve, Issued),
            (Hold, Pending),
            (Hold, OnHold),
            (Revoke, Pending),
            (Resend, Pending),
            (Resend, OnHold),
        ] {
            assert!(refused.0.apply(refused.1).is_err(), "{refused:?}");
        }
        for action in [Approve, Hold, Revoke, Resend] {
            assert!(action.apply(Revoked).is_err(), "revoked is final");
        }
    }
}
