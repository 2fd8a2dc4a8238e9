//! The rule path, `/organizations/{ORG}/projects/{PROJECT}/verifications/{RULE}`
//! (docs/service.md §4.3): what the verifier starts sessions on, what
//! `lanyard check` probes, and what the demo's banner shows. One type
//! formats it and decides whose organization it names, so that these
//! cannot drift apart.

use std::fmt;

use super::oidc::rules::Rule;
use super::verifier::path_segment_problem;

/// A verification rule's path: an organization, a project and a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePath {
    organization: String,
    project: String,
    rule: String,
}

/// A segment of a rule path, for a caller to name as its user gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Segment {
    Organization,
    Project,
    Rule,
}

impl RulePath {
    /// The rule `project`/`rule` of `org_id` when given (`ORG_ID`), else
    /// of the account's own organization, as `SA_ORGANIZATION_ID` falls
    /// back to `ORG_ID` (docs/verifier.md).
    pub fn new(org_id: Option<&str>, account: &str, project: &str, rule: &str) -> RulePath {
        RulePath {
            organization: org_id.unwrap_or(account).to_string(),
            project: project.to_string(),
            rule: rule.to_string(),
        }
    }

    /// The path of a client's rule (docs/oidc.md "Rules per client"):
    /// in this path's organization, the service account's.
    pub fn of_rule(&self, rule: &Rule) -> RulePath {
        RulePath {
            organization: self.organization.clone(),
            project: rule.project_id.clone(),
            rule: rule.rule_id.clone(),
        }
    }

    /// The first segment that cannot stand in a URL path as it is, and
    /// why; `None` when the path joins onto a base as written.
    pub fn problem(&self) -> Option<(Segment, &'static str)> {
        [
            (Segment::Organization, &self.organization),
            (Segment::Project, &self.project),
            (Segment::Rule, &self.rule),
        ]
        .into_iter()
        .find_map(|(segment, value)| Some((segment, path_segment_problem(value)?)))
    }

    /// The organization the path names.
    pub fn organization(&self) -> &str {
        &self.organization
    }
}

impl fmt::Display for RulePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RulePath {
            organization,
            project,
            rule,
        } = self;
        write!(
            f,
            "/organizations/{organization}/projects/{project}/verifications/{rule}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_organization_is_org_id_when_given_else_the_accounts() {
        let given = RulePath::new(Some("org-given"), "org-account", "p", "r");
        assert_eq!(
            given.to_string(),
            "/organizations/org-given/projects/p/verifications/r"
        );
        let fallen_back = RulePath::new(None, "org-account", "p", "r");
        assert_eq!(fallen_back.organization(), "org-account");
    }

    #[test]
    fn a_clients_rule_keeps_the_organization() {
        let deployment = RulePath::new(None, "org-a", "p", "r");
        let rule = Rule {
            scope: "age".into(),
            project_id: "p2".into(),
            rule_id: "r2".into(),
        };
        assert_eq!(
            deployment.of_rule(&rule).to_string(),
            "/organizations/org-a/projects/p2/verifications/r2"
        );
    }

    #[test]
    fn the_first_segment_that_is_no_path_segment_is_named() {
        let path = RulePath::new(Some("org a"), "x", "..", "r");
        assert_eq!(path.problem().map(|(s, _)| s), Some(Segment::Organization));
        let path = RulePath::new(None, "org", "..", "r");
        assert_eq!(path.problem().map(|(s, _)| s), Some(Segment::Project));
        assert_eq!(RulePath::new(None, "o", "p", "r").problem(), None);
    }
}
