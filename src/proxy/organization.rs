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
//! Dot-segments (`.`, `..`, encoded, with `;parameters`) are refused
//! before this, for every path (`crate::target::has_dot_segment`). Here,
//! for a sidecar of many accounts, an encoded `/` or `\\`, or a raw `\\`,
//! anywhere in the path is refused too: an upstream that decodes before
//! it routes would read `/organizations%2FA/x` as organization A's.

use std::borrow::Cow;

use crate::config::accounts::is_organization_id;
use crate::target::has_dot_segment;

/// The first segment of an organization path, as the service writes it.
const ORGANIZATIONS: &str = "organizations";
/// Percent-decodings tried on the first segment: beyond three levels no
/// server decodes, and a longer chain is refused as it is.
const MAX_DECODINGS: usize = 3;

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
    if has_hidden_separator(path) {
        return Route::Refused(
            "the path has an encoded / or \\, a \\, or a dot-segment encoded more than once, which an upstream could read as another organization's path; lanyard does not forward it",
        );
    }
    let mut segments = path.split('/');
    // A path begins with `/`: its first piece is empty. Empty segments
    // after it are what a collapsing upstream would drop, and so is a
    // segment of parameters alone (`/;x/`), once a servlet container has
    // dropped them.
    let mut first = None;
    for segment in segments.by_ref() {
        match reads_as_organizations(segment) {
            Reading::Empty => continue,
            reading => {
                first = Some(reading);
                break;
            }
        }
    }
    let Some(first) = first else {
        return Route::NoOrganization;
    };
    match first {
        Reading::No | Reading::Empty => Route::NoOrganization,
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
    /// Empty to some upstream: nothing, or parameters alone.
    Empty,
}

/// Whether a leading segment reads `organizations` to some upstream, or
/// nothing at all.
fn reads_as_organizations(segment: &str) -> Reading {
    let mut text = Cow::Borrowed(segment.as_bytes());
    for _ in 0..=MAX_DECODINGS {
        if text.iter().any(u8::is_ascii_control) {
            return Reading::Unclear;
        }
        let bare = text.split(|&b| b == b';').next().unwrap_or_default();
        if bare.is_empty() {
            return Reading::Empty;
        }
        // Some servers drop a segment's trailing dots and spaces (IIS).
        let trimmed = match bare.iter().rposition(|&b| b != b'.' && b != b' ') {
            Some(last) => &bare[..=last],
            None => &bare[..0],
        };
        if trimmed.eq_ignore_ascii_case(ORGANIZATIONS.as_bytes()) {
            return Reading::Yes;
        }
        if !text.contains(&b'%') {
            return Reading::No;
        }
        match decoded(&text) {
            Some(next) => text = Cow::Owned(next),
            None => return Reading::No,
        }
    }
    Reading::Unclear
}

/// A `\`, a `/` or `\` percent-encoded, or a dot-segment hidden by
/// encoding, at any depth an upstream decodes to. (Dot-segments in the
/// path as sent are refused for every path, before this.)
fn has_hidden_separator(path: &str) -> bool {
    let mut text = Cow::Borrowed(path.as_bytes());
    for depth in 0..=MAX_DECODINGS {
        if text.contains(&b'\\') {
            return true;
        }
        if depth > 0 && has_dot_segment(&String::from_utf8_lossy(&text)) {
            return true;
        }
        // Nothing encoded is nothing hidden: the common path stops here.
        if !text.contains(&b'%') {
            return false;
        }
        if has_escape(&text, b"2f") || has_escape(&text, b"5c") {
            return true;
        }
        match decoded(&text) {
            Some(next) => text = Cow::Owned(next),
            None => return false,
        }
    }
    // Encoded past what lanyard reads: an upstream might read more.
    true
}

/// `text` decoded once as the most lenient upstream decodes it: every
/// well-formed escape decoded, anything else (`%zz`, a lone `%`) kept as
/// it is, the bytes taken whether or not they are text. `None` when no
/// escape was decoded, so a malformed one elsewhere in the path hides
/// nothing from the next look.
fn decoded(text: &[u8]) -> Option<Vec<u8>> {
    match Cow::from(percent_encoding::percent_decode(text)) {
        Cow::Owned(next) => Some(next),
        Cow::Borrowed(_) => None,
    }
}

/// Whether `text` holds the escape `%` followed by `hex`, in any case.
fn has_escape(text: &[u8], hex: &[u8; 2]) -> bool {
    text.windows(3)
        .any(|w| w[0] == b'%' && w[1..].eq_ignore_ascii_case(hex))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_separator_or_a_backslash_anywhere_is_refused() {
        for path in [
            "/organizations%2FA/projects/p",
            "/organizations%2fA/x",
            "/organizations%5CA/x",
            "/organizations%252FA/x",
            "/organizations%25252fA/x",
            "/%2F/organizations/A/x",
            "/organizations\\A/x",
            "/v1/a%2fb",
            "/x/%255c",
            // A malformed escape or bytes that are not text elsewhere hide
            // nothing: a lenient upstream decodes the rest.
            "/organizations%252FA/x%zz",
            "/organizations%252fA/x%ff",
            "/%zz/organizations%25255cA/x",
            // Dot-segments encoded more than once, which an upstream that
            // decodes twice resolves.
            "/x/%252e%252e/organizations/A/y",
            "/x/%25252E%25252e/organizations/A/y",
            "/x/.%252e;p/organizations/A/y",
        ] {
            assert!(
                matches!(route(path), Route::Refused(_)),
                "{path}: {:?}",
                route(path)
            );
        }
    }

    #[test]
    fn leading_segments_of_parameters_alone_are_skipped_as_empty_ones() {
        for path in [
            "/;/organizations/A/x",
            "/;x=1/organizations/A/x",
            "/%3b/organizations/A/x",
            "//;/organizations/A",
        ] {
            assert_eq!(route(path), Route::Organization("A"), "{path}");
        }
        for path in [
            "/organizations%00/A",
            "/organizations%09/A",
            "/%0aorganizations/A",
        ] {
            assert!(matches!(route(path), Route::Refused(_)), "{path}");
        }
    }

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
            ("/organizations./A/x", "A"),
            ("/organizations%2e/A/x", "A"),
            ("/organizations%20/A/x", "A"),
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
