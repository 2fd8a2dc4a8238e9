//! The operator's lines about calls to the service: what failed, on which
//! rule path, and what to check, never what the service's body said (it
//! may quote personal data); failures that repeat for every session at
//! most once a minute.

use http::{StatusCode, Uri};
use tokio::time::Instant;

use super::Inner;
use super::service::CallError;
use crate::error::FORBIDDEN_HINT;

impl Inner {
    /// The line for a failed `call` on `rule` (`None`: a login's rule
    /// path that could not be formed, which the error says).
    pub(super) fn log_call_failure(&self, call: &'static str, err: &CallError, on: Option<&Uri>) {
        let rule = shown(on);
        match err {
            CallError::Answered(StatusCode::UNAUTHORIZED) => tracing::warn!(
                call, %rule,
                "the service answered 401 even to a renewed token: check that the credentials belong to the environment SERVICE_API_URL names"
            ),
            CallError::Answered(StatusCode::FORBIDDEN) => tracing::warn!(
                call, %rule,
                "the service answered 403: {FORBIDDEN_HINT}"
            ),
            CallError::Answered(StatusCode::NOT_FOUND) => tracing::warn!(
                call, %rule,
                "the service answered 404 on the rule path: RULE_ID must be the UUID of a published rule of PROJECT_ID, as a client's rule_id of its project_id in LANYARD_OIDC_CLIENTS_FILE (docs/service.md §2.5, §3.1)"
            ),
            CallError::Malformed(why) => self.log_failure_throttled(
                call,
                &format!("the service's answer {why}: not what lanyard assumes (docs/verifier.md, Assumptions)"),
                on,
            ),
            other => self.log_failure_throttled(
                call,
                &format!("a call to the verification service failed: {other}"),
                on,
            ),
        }
    }

    /// A warning that may repeat for every session (an outage, a payload
    /// unlike the assumptions), at most once a minute.
    pub(super) fn log_failure_throttled(&self, call: &'static str, what: &str, rule: Option<&Uri>) {
        if let Some(held_back) = self.repeating.due(Instant::now()) {
            let rule = shown(rule);
            tracing::warn!(call, %rule, held_back, "{what}; logged at most once a minute");
        }
    }
}

/// A rule path as a log line shows it.
fn shown(rule: Option<&Uri>) -> String {
    rule.map_or_else(|| "none".into(), Uri::to_string)
}
