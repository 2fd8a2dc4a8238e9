//! Which account a request's path belongs to (docs/accounts.md,
//! docs/service.md §2.8, §4.3): the organization a path names,
//! read as strictly as an upstream might read it loosely, so that no path
//! reaches one organization with another's token.
//!
//! A path names an organization when its first segment reads
//! `organizations` in any way an upstream could read it: in any case,
//! percent-encoded (once or more: `%256f` is `%6f` is `o` to an upstream
//! that decodes twice), with `;parameters` (which some servers drop), or
//! after empty segments (which some collapse). Its organization is then the
//! next segment, which must be plain: not empty, no `%`, no `;`, only the
//! characters an organization id has. Anything else under an organization
//! path is refused, never taken for a path with no organization, which the
//! default account would serve.
//!
//! Dot-segments and encoded `/`, `\` and `.` are refused before this, for
//! every path (`crate::target::has_dot_segment`).

/// The first segment of an organization path, as the service writes it.
const ORGANIZATIONS: &str = "organizations";
/// Percent-decodings tried on the first segment: beyond three levels no
/// server decodes, and a longer chain is refused as it is.
const MAX_DECODINGS: usize = 3;
/// An organization id, at most.
const MAX_ORGANIZATION: usize = 128;

/// What a path's organization is.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/organizations/{id}/…`: that organization's account.
    Organization(&'a str),
    /// A path that names no organization: the default account's, if any.
    NoOrganization,
    /// An organization path whose organization cannot be read plainly;
    /// the reason, for a 400.
    Refused(&'static str),
}

/// The organization `path` (after the base URL's prefix, query removed)
/// names.
pub fn route(path: &str) -> Route<'_> {
    let mut segments = path.split('/');
    // A path begins with `/`: its first piece is empty. Empty segments
    // after it are what a collapsing upstream would drop.
    let mut first = None;
    for segment in segments.by_ref() {
        if !segment.is_empty() {
            first = Some(segment);
            break;
        }
    }
    let Some(first) = first else {
        return Route::NoOrganization;
    };
    match reads_as_organizations(first) {
        Reading::No => Route::NoOrganization,
        Reading::Unclear => Route::Refused(
            "the path's first segment is encoded past what lanyard reads; write it plainly",
        ),
        Reading::Yes => match segments.next() {
            None | Some("") => Route::Refused(
                "the path names no organization after /organizations/ (an empty segment)",
            ),
            Some(id) if is_organization_id(id) => Route::Organization(id),
            Some(_) => Route::Refused(
                "the path's organization is encoded or has characters no organization id has; write it as the service gives it",
            ),
        },
    }
}

enum Reading {
    Yes,
    No,
    Unclear,
}

/// Whether a first segment reads `organizations` to some upstream.
fn reads_as_organizations(segment: &str) -> Reading {
    let mut text = segment.to_string();
    for _ in 0..=MAX_DECODINGS {
        let bare = text.split(';').next().unwrap_or("");
        if bare.eq_ignore_ascii_case(ORGANIZATIONS) {
            return Reading::Yes;
        }
        if !text.contains('%') {
            return Reading::No;
        }
        match crate::percent::decode(&text).map(String::from_utf8) {
            Some(Ok(decoded)) if decoded != text => text = decoded,
            // A malformed escape, or bytes that are not text: not a
            // reading of `organizations` either.
            _ => return Reading::No,
        }
    }
    Reading::Unclear
}

/// An organization id as a path carries it plainly (docs/service.md
/// §2.8): RFC 3986 unreserved characters only.
fn is_organization_id(id: &str) -> bool {
    (1..=MAX_ORGANIZATION).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        && id != "."
        && id != ".."
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_organization_path_names_its_organization() {
        for (path, org) in [
            ("/organizations/org-A/projects/p/verifications/r", "org-A"),
            ("/organizations/A", "A"),
            ("/organizations/A/", "A"),
            ("//organizations/A/x", "A"),
            ("/ORGANIZATIONS/A/x", "A"),
            ("/Organizations/A/x", "A"),
            ("/%6frganizations/A/x", "A"),
            ("/%6Frganizations/A/x", "A"),
            ("/%256frganizations/A/x", "A"),
            ("/%25256frganizations/A/x", "A"),
            ("/organizations;jsessionid=1/A/x", "A"),
            ("/%4F%52%47%41%4E%49%5A%41%54%49%4F%4E%53/A", "A"),
        ] {
            assert_eq!(route(path), Route::Organization(org), "{path}");
        }
    }

    #[test]
    fn an_organization_that_cannot_be_read_plainly_is_refused() {
        for path in [
            "/organizations",
            "/organizations/",
            "/organizations//A/x",
            "/organizations/%41/x",
            "/organizations/A%2fB/x",
            "/organizations/A;x=1/x",
            "/organizations/A%3Bx/x",
            "/Organizations/%61/x",
            "/organizations/A B/x",
            "/organizations/Ä/x",
            &format!("/organizations/{}/x", "a".repeat(129)),
        ] {
            assert!(
                matches!(route(path), Route::Refused(_)),
                "{path}: {:?}",
                route(path)
            );
        }
        // Encoded past any server's decoding: refused, not "no organization".
        let deep = "/%2525256frganizations/A/x";
        assert!(
            matches!(route(deep), Route::Refused(_)),
            "{:?}",
            route(deep)
        );
    }

    #[test]
    fn other_paths_name_no_organization() {
        for path in [
            "/",
            "",
            "/health",
            "/organization/A/x",
            "/organizationsX/A/x",
            "/xorganizations/A/x",
            "/v1/organizations/A/x",
            "/%zz/organizations/A",
            "/%6frganization/A",
        ] {
            assert_eq!(route(path), Route::NoOrganization, "{path}");
        }
    }
}
