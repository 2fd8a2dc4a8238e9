//! A client's `rules` and `default_rule` in `LANYARD_OIDC_CLIENTS_FILE`
//! (docs/oidc.md, "Rules per client"): which verification rule a login
//! asks for, picked by a scope of the authorization request. Each rule
//! path is checked as `PROJECT_ID` and `RULE_ID` are, and no message
//! quotes a value the file holds but a scope, which names nothing secret
//! and is checked to be a plain scope token first.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::Clients;
use crate::config::path_segment_problem;
use crate::config::verifier::unusable_rule_id;

/// Rules per client, at most: a relying party's apps, each a scope.
pub const MAX_RULES: usize = 32;
/// A rule scope, at most: it rides in every authorization request.
pub const MAX_SCOPE: usize = 64;
/// A project id, at most: a path segment the session handle carries.
pub const MAX_PROJECT_ID: usize = 128;

/// A verification rule of the deployment's organization: the rule path
/// `/organizations/{ORG}/projects/{project_id}/verifications/{rule_id}`
/// (docs/service.md §4.3). Sealed into a login's handle and code with
/// short names, so that any replica polls the rule the session was
/// started on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    /// The scope that picked it.
    #[serde(rename = "s")]
    pub scope: String,
    #[serde(rename = "p")]
    pub project_id: String,
    #[serde(rename = "r")]
    pub rule_id: String,
}

/// A client's rules, by scope, and the one its logins get when their
/// request names none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    by_scope: BTreeMap<String, Rule>,
    default: Option<String>,
}

/// Why an authorization request's scope picks no rule: RFC 6749
/// §4.1.2.1's `invalid_scope`, with its description.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidScope(pub &'static str);

impl Rules {
    /// Rules made in code (the demo's shop), `default` one of their
    /// scopes.
    pub fn of(rules: impl IntoIterator<Item = Rule>, default: Option<&str>) -> Rules {
        let by_scope: BTreeMap<String, Rule> = rules
            .into_iter()
            .map(|rule| (rule.scope.clone(), rule))
            .collect();
        let default = default
            .filter(|scope| by_scope.contains_key(*scope))
            .map(str::to_string);
        Rules { by_scope, default }
    }

    pub fn is_empty(&self) -> bool {
        self.by_scope.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Rule> {
        self.by_scope.values()
    }

    /// The rule a request's `scope` picks, given every client's rule
    /// scopes (`known`): the one rule scope it names, which must be this
    /// client's; else the client's default; `None` for the deployment's
    /// own `PROJECT_ID`/`RULE_ID`. Other scopes (`profile`, `email`) are
    /// not rules and are left alone, as RFC 6749 §3.3 allows.
    pub fn pick(
        &self,
        scope: &str,
        known: &BTreeSet<String>,
    ) -> Result<Option<&Rule>, InvalidScope> {
        let mut named = BTreeSet::new();
        for token in scope.split(' ').filter(|token| known.contains(*token)) {
            named.insert(token);
        }
        let mut named = named.into_iter();
        match (named.next(), named.next()) {
            (Some(_), Some(_)) => Err(InvalidScope(
                "the scope names more than one verification rule; name one",
            )),
            (Some(scope), None) => self.by_scope.get(scope).map(Some).ok_or(InvalidScope(
                "the scope names a verification rule this client does not have",
            )),
            (None, _) => Ok(self.default.as_ref().and_then(|d| self.by_scope.get(d))),
        }
    }

    /// The client's `rules` and `default_rule`, with each problem
    /// recorded under the field it is in (`rules.age.rule_id`).
    pub fn parse(fields: &Map<String, Value>, problem: &mut impl FnMut(&str, String)) -> Rules {
        let mut rules = Rules::default();
        match fields.get("rules") {
            None => {}
            Some(Value::Object(map)) if map.len() <= MAX_RULES => {
                for (scope, rule) in map {
                    if let Some(rule) = parse_rule(scope, rule, problem) {
                        rules.by_scope.insert(scope.clone(), rule);
                    }
                }
            }
            Some(_) => problem(
                "rules",
                format!(
                    "must be an object of at most {MAX_RULES} rules, each a scope and its rule: {{\"age\": {{\"project_id\": …, \"rule_id\": …}}}}"
                ),
            ),
        }
        match fields.get("default_rule") {
            None => {}
            Some(Value::String(scope)) if map_has(fields, scope) => {
                rules.default = Some(scope.clone());
            }
            Some(_) => problem(
                "default_rule",
                "must be one of the scopes of this client's `rules`".into(),
            ),
        }
        rules
    }
}

/// Whether the entry's `rules` has `scope`, well formed or not: a
/// default naming a rule with a problem of its own is not refused twice.
fn map_has(fields: &Map<String, Value>, scope: &str) -> bool {
    matches!(fields.get("rules"), Some(Value::Object(map)) if map.contains_key(scope))
}

/// One rule, or `None` with its problems recorded.
fn parse_rule(scope: &str, rule: &Value, problem: &mut impl FnMut(&str, String)) -> Option<Rule> {
    if let Some(why) = scope_problem(scope) {
        problem("rules", why);
        return None;
    }
    let at = format!("rules.{scope}");
    let Value::Object(rule) = rule else {
        problem(
            &at,
            "must be an object: {\"project_id\": …, \"rule_id\": …}".into(),
        );
        return None;
    };
    if let Some(name) = rule.keys().find(|k| *k != "project_id" && *k != "rule_id") {
        let name: String = name.chars().take(40).collect();
        problem(
            &at,
            format!("has a field lanyard does not know, `{name}` (it reads project_id, rule_id)"),
        );
    }
    let project_id = match rule.get("project_id") {
        Some(Value::String(id)) if id.len() > MAX_PROJECT_ID => {
            problem(
                &format!("{at}.project_id"),
                format!("is longer than {MAX_PROJECT_ID} characters"),
            );
            None
        }
        Some(Value::String(id)) => match path_segment_problem(id) {
            None => Some(id.clone()),
            Some(why) => {
                problem(&format!("{at}.project_id"), why.into());
                None
            }
        },
        _ => {
            problem(
                &format!("{at}.project_id"),
                "must be a string: the verification project's id".into(),
            );
            None
        }
    };
    let rule_id = match rule.get("rule_id") {
        Some(Value::String(id)) => match unusable_rule_id(id) {
            None => Some(id.clone()),
            Some(why) => {
                problem(&format!("{at}.rule_id"), why.into());
                None
            }
        },
        _ => {
            problem(
                &format!("{at}.rule_id"),
                "must be a string: the UUID of the published rule".into(),
            );
            None
        }
    };
    Some(Rule {
        scope: scope.to_string(),
        project_id: project_id?,
        rule_id: rule_id?,
    })
}

/// Why `scope` cannot be a rule's scope, without quoting it: a scope
/// token of RFC 6749 §3.3, and not `openid`, which every request names.
fn scope_problem(scope: &str) -> Option<String> {
    let token = (1..=MAX_SCOPE).contains(&scope.len())
        && scope
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
    match scope {
        "openid" => Some("has the scope `openid`, which every request names; give each rule a scope of its own (`age`)".into()),
        _ if !token => Some(format!(
            "has a scope that is not 1 to {MAX_SCOPE} printable ASCII characters without spaces, quotes or backslashes (RFC 6749 §3.3)"
        )),
        _ => None,
    }
}

/// Every client's rule scopes: what discovery's `scopes_supported` lists
/// beside `openid`, and what a request's scope is read for.
pub fn all_scopes(clients: &Clients) -> BTreeSet<String> {
    clients
        .iter()
        .flat_map(|client| client.rules.by_scope.keys().cloned())
        .collect()
}

#[cfg(test)]
mod tests;
