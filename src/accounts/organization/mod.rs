//! Which account a request's path belongs to (docs/accounts.md,
//! docs/service.md §2.8, §4.3): the organization a path names,
//! read as strictly as an upstream might read it loosely, so that no path
//! reaches one organization with another's token, nor with the default
//! account's.
//!
//! A path names an organization when its first segment reads
//! `organizations` in any way an upstream could read it: in any ASCII
//! case, percent-encoded (once or more: `%256f` is `%6f` is `o` to an
//! upstream that decodes twice), with `;parameters` (which some servers
//! drop), with trailing dots (which IIS drops), or after empty segments
//! (which some collapse). Its organization is then the next segment, which
//! must be plain: not empty, no `%`, no `;`, only the characters an
//! organization id has. Anything else under an organization path is
//! refused, never taken for a path with no organization, which the
//! default account would serve.
//!
//! Readings lanyard does not follow fail closed: a segment before the
//! organization, or at its place, that an upstream could trim, drop, or
//! fold into another (whitespace, control characters, Unicode spaces and
//! invisible characters, compatibility and case forms of ASCII, dots
//! alone) is refused, naming it (`lenient`).
//!
//! Dot-segments as sent (`.`, `..`, `%2e`, with `;parameters`) are
//! refused before this, for every path (`crate::target::has_dot_segment`).
//! Here, for a sidecar of many accounts, a path with an escape, a `\` or
//! any character beyond ASCII is looked at segment by segment: an encoded
//! `/` or `\`, a `\`, their compatibility forms (`／`, `＼`), a `%uXXXX`
//! escape, an overlong UTF-8 form, or a dot-segment hidden by any of these
//! or by whitespace, is refused: an upstream that decodes before it
//! routes would read `/organizations%2FA/x` as organization A's.

mod lenient;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use crate::config::accounts::is_organization_id;

/// The first segment of an organization path, as the service writes it.
const ORGANIZATIONS: &str = "organizations";
/// Percent-decodings tried on a segment: beyond three levels no server
/// decodes, and a longer chain is refused as it is.
const MAX_DECODINGS: usize = 3;
/// The characters of a refused segment a message shows: enough to find
/// it, never a path's worth.
const SHOWN_CHARS: usize = 64;

const ENCODED_PAST: &str = "the path is encoded past what lanyard reads (more than three percent-decodings); write it plainly";
const NO_ORGANIZATION: &str =
    "the path names no organization after /organizations/ (an empty segment)";
const NOT_AN_ID: &str = "the path's organization is encoded or has characters no organization id has; write it as the service gives it";

/// What a path's organization is.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `/organizations/{id}/…`: that organization's account.
    Organization(&'a str),
    /// A path that names no organization: the default account's, if any.
    NoOrganization,
    /// A path whose organization cannot be read plainly, or that an
    /// upstream could read as naming one that lanyard would not; for a 400.
    Refused(Unreadable<'a>),
}

/// Why a path is refused, and the segment of it that makes it so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unreadable<'a> {
    /// A fixed sentence.
    pub why: &'static str,
    /// The segment as sent, when one segment is the reason.
    pub segment: Option<&'a str>,
}

impl Unreadable<'_> {
    /// The segment as a message may show it: at most `SHOWN_CHARS` (64)
    /// characters, each printable ASCII character but `` ` `` as it is,
    /// any other as `\u{…}`, so a control character or an invisible one
    /// is seen, never sent on.
    pub fn shown_segment(&self) -> Option<Box<str>> {
        let segment = self.segment?;
        let mut shown = String::new();
        for c in segment.chars().take(SHOWN_CHARS) {
            if c.is_ascii_graphic() && c != '`' {
                shown.push(c);
            } else {
                shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
        }
        if segment.chars().nth(SHOWN_CHARS).is_some() {
            shown.push('…');
        }
        Some(shown.into())
    }
}

fn refused<'a>(why: &'static str, segment: Option<&'a str>) -> Route<'a> {
    Route::Refused(Unreadable { why, segment })
}

/// The organization `path` (after the base URL's prefix, query removed)
/// names.
pub fn route(path: &str) -> Route<'_> {
    // A path of ASCII with no escape and no `\` hides nothing: the common
    // path takes these scans and the first segment's reading, no more.
    let plain = path.is_ascii() && !path.contains('\\') && !path.contains('%');
    if !plain && let Some(refusal) = hidden_segment(path) {
        return Route::Refused(refusal);
    }
    let mut segments = path.split('/');
    // A path begins with `/`: its first piece is empty. Empty segments
    // after it are what a collapsing upstream would drop, and so is a
    // segment of parameters alone (`/;x/`), once a servlet container has
    // dropped them.
    let mut first = None;
    for segment in segments.by_ref() {
        match reading(segment) {
            Reading::Empty => continue,
            reading => {
                first = Some((segment, reading));
                break;
            }
        }
    }
    let Some((segment, first)) = first else {
        return Route::NoOrganization;
    };
    match first {
        Reading::No | Reading::Empty => Route::NoOrganization,
        Reading::Unclear => refused(ENCODED_PAST, Some(segment)),
        Reading::Lenient(why) => refused(why, Some(segment)),
        Reading::Yes => match segments.next() {
            None | Some("") => refused(NO_ORGANIZATION, None),
            Some(id) if is_organization_id(id) => Route::Organization(id),
            Some(id) => refused(NOT_AN_ID, Some(id)),
        },
    }
}

enum Reading {
    Yes,
    No,
    /// Encoded past what lanyard reads.
    Unclear,
    /// Empty to some upstream: nothing, or parameters alone.
    Empty,
    /// Another segment to some lenient upstream; why.
    Lenient(&'static str),
}

/// Whether a leading segment reads `organizations` to some upstream, or
/// nothing at all, or something lanyard does not follow.
fn reading(segment: &str) -> Reading {
    let mut text = Cow::Borrowed(segment.as_bytes());
    for _ in 0..=MAX_DECODINGS {
        if let Some(why) = lenient::leading_form(&text) {
            return Reading::Lenient(why);
        }
        let bare = text.split(|&b| b == b';').next().unwrap_or_default();
        if bare.is_empty() {
            return Reading::Empty;
        }
        // Some servers drop a segment's trailing dots (IIS); dots alone
        // are then nothing, or `..` to others.
        let Some(last) = bare.iter().rposition(|&b| b != b'.') else {
            return Reading::Lenient(lenient::DOTS);
        };
        if bare[..=last].eq_ignore_ascii_case(ORGANIZATIONS.as_bytes()) {
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

/// The first segment of `path` that hides a dot-segment from a strict
/// reading, at any depth an upstream decodes to (whitespace or control
/// characters around dots, compatibility forms of `.`, IIS's `%u`
/// escapes, overlong UTF-8, escapes past what lanyard reads), and why: the
/// rule for a path not routed by organization, which such a segment could
/// take above the base URL's prefix. Encoded separators pass, as APIs name
/// things with them; an organization's path refuses them in [`route`].
pub fn hidden_dot_segment(path: &str) -> Option<Unreadable<'_>> {
    let plain = path.is_ascii() && !path.contains('%');
    if plain {
        return None;
    }
    path.split('/').find_map(|segment| {
        let why = match hidden_in(segment)? {
            lenient::SEPARATOR => return None,
            lenient::HIDDEN_DOT => lenient::HIDDEN_DOT_BASE,
            why => why,
        };
        Some(Unreadable {
            why,
            segment: Some(segment),
        })
    })
}

/// The first segment of `path` that hides a separator or a dot-segment
/// from a strict reading, at any depth an upstream decodes to, and why.
/// (Dot-segments as sent are refused for every path, before this.)
fn hidden_segment(path: &str) -> Option<Unreadable<'_>> {
    path.split('/').find_map(|segment| {
        let why = hidden_in(segment)?;
        Some(Unreadable {
            why,
            segment: Some(segment),
        })
    })
}

fn hidden_in(segment: &str) -> Option<&'static str> {
    let plain_dots = segment.bytes().all(|b| b == b'.');
    let mut text = Cow::Borrowed(segment.as_bytes());
    for depth in 0..=MAX_DECODINGS {
        if let Some(why) = lenient::hidden_form(&text, depth, plain_dots) {
            return Some(why);
        }
        // Nothing encoded is nothing hidden.
        if !text.contains(&b'%') {
            return None;
        }
        match decoded(&text) {
            Some(next) => text = Cow::Owned(next),
            None => return None,
        }
    }
    // Encoded past what lanyard reads: an upstream might read more.
    Some(ENCODED_PAST)
}

/// `text` decoded once as the most lenient upstream decodes it: every
/// well-formed escape decoded, anything else (`%zz`, a lone `%`) kept as
/// it is, the bytes taken whether or not they are text. `None` when no
/// escape was decoded, so a malformed one hides nothing from the next
/// look.
fn decoded(text: &[u8]) -> Option<Vec<u8>> {
    match Cow::from(percent_encoding::percent_decode(text)) {
        Cow::Owned(next) => Some(next),
        Cow::Borrowed(_) => None,
    }
}
