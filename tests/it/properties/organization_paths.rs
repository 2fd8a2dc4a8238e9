//! The organization a path names (`lanyard::accounts::organization::route`),
//! against a model of what a lenient upstream could read in it: a path
//! built of segments written every way an upstream may read loosely is
//! read by a family of upstreams, each some combination of the readings
//! docs/accounts.md lists (percent-decoding up to three times, IIS's
//! `%uXXXX` and overlong UTF-8, NFKC and Unicode case folding, trimming
//! whitespace and invisible characters, dropping `;parameters`, collapsing
//! empty segments, dropping or resolving dots-alone segments, then
//! RFC 3986 §5.2.4's dot-segment removal). Whenever one of them reads
//! `/organizations/X/…`, lanyard refuses the path or routes it to X.

use super::*;
use lanyard::accounts::organization::{Route, route};
use lanyard::target::has_dot_segment;
use unicode_normalization::UnicodeNormalization;

/// How one upstream reads a path.
#[derive(Debug, Clone, Copy)]
struct Reader {
    decodings: usize,
    /// `%uXXXX` (IIS) and overlong UTF-8 decoded.
    iis: bool,
    case: Case,
    trim: bool,
    drop_params: bool,
    collapse: bool,
    dots_alone: DotsAlone,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Case {
    Exact,
    Ascii,
    /// NFKC, then Unicode case folding.
    Unicode,
}

/// What a reader makes of a leading segment of three dots or more.
#[derive(Debug, Clone, Copy, PartialEq)]
enum DotsAlone {
    Kept,
    Parent,
    Dropped,
}

fn readers() -> impl Iterator<Item = Reader> {
    let mut all = Vec::new();
    for decodings in 0..=3 {
        for iis in [false, true] {
            for case in [Case::Exact, Case::Ascii, Case::Unicode] {
                for bits in 0..8u8 {
                    for dots_alone in [DotsAlone::Kept, DotsAlone::Parent, DotsAlone::Dropped] {
                        all.push(Reader {
                            decodings,
                            iis,
                            case,
                            trim: bits & 1 != 0,
                            drop_params: bits & 2 != 0,
                            collapse: bits & 4 != 0,
                            dots_alone,
                        });
                    }
                }
            }
        }
    }
    all.into_iter()
}

impl Reader {
    /// The organization this reader finds in `path`, folded as it folds.
    fn organization(&self, path: &str) -> Option<String> {
        let mut bytes = path.as_bytes().to_vec();
        for _ in 0..self.decodings {
            bytes = self.decode(&bytes);
        }
        let mut text = self.utf8(&bytes);
        if self.case == Case::Unicode {
            text = text.nfkc().collect();
        }
        let mut segments: Vec<String> = Vec::new();
        let mut leading = true;
        for raw in text.split(['/', '\\']).skip(1) {
            let mut segment = self.segment(raw);
            let dots = segment.len() >= 3 && segment.chars().all(|c| c == '.');
            if leading && dots {
                match self.dots_alone {
                    DotsAlone::Kept => {}
                    DotsAlone::Parent => segment = "..".into(),
                    DotsAlone::Dropped => segment.clear(),
                }
            }
            if leading && !segment.is_empty() && !dots {
                leading = false;
            }
            if self.collapse && segment.is_empty() {
                continue;
            }
            match segment.as_str() {
                "." => {}
                ".." => {
                    segments.pop();
                }
                _ => segments.push(segment),
            }
        }
        match segments.as_slice() {
            [first, organization, ..] if *first == self.segment("organizations") => {
                Some(organization.clone())
            }
            _ => None,
        }
    }

    /// A segment as this reader reads it: parameters dropped, trimmed,
    /// case folded.
    fn segment(&self, raw: &str) -> String {
        let mut segment = raw.to_string();
        if self.drop_params {
            segment.truncate(segment.find(';').unwrap_or(segment.len()));
        }
        if self.trim {
            segment = segment.trim_matches(vanishes).to_string();
            if !segment.chars().all(|c| c == '.') {
                segment = segment.trim_end_matches(['.', ' ']).to_string();
            }
        }
        self.fold(&segment)
    }

    fn fold(&self, segment: &str) -> String {
        match self.case {
            Case::Exact => segment.to_string(),
            Case::Ascii => segment.to_ascii_lowercase(),
            Case::Unicode => segment
                .chars()
                .flat_map(char::to_uppercase)
                .flat_map(char::to_lowercase)
                .filter(|&c| c != '\u{307}')
                .collect(),
        }
    }

    /// One percent-decoding, `%uXXXX` too for IIS.
    fn decode(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let hex = |from: usize, len: usize| {
                let digits = bytes.get(from..from + len)?;
                if !digits.iter().all(u8::is_ascii_hexdigit) {
                    return None;
                }
                u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
            };
            if bytes[i] == b'%' {
                if self.iis
                    && matches!(bytes.get(i + 1), Some(b'u' | b'U'))
                    && let Some(c) = hex(i + 2, 4).and_then(char::from_u32)
                {
                    out.extend(c.to_string().as_bytes());
                    i += 6;
                    continue;
                }
                if let Some(byte) = hex(i + 1, 2) {
                    out.push(byte as u8);
                    i += 3;
                    continue;
                }
            }
            out.push(bytes[i]);
            i += 1;
        }
        out
    }

    /// Bytes as text: overlong two-byte forms read as their ASCII by IIS.
    fn utf8(&self, bytes: &[u8]) -> String {
        if !self.iis {
            return String::from_utf8_lossy(bytes).into_owned();
        }
        let mut fixed = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match (bytes[i], bytes.get(i + 1)) {
                (0xc0 | 0xc1, Some(&next)) if next & 0xc0 == 0x80 => {
                    fixed.push(((bytes[i] & 0x1f) << 6) | (next & 0x3f));
                    i += 2;
                }
                (byte, _) => {
                    fixed.push(byte);
                    i += 1;
                }
            }
        }
        String::from_utf8_lossy(&fixed).into_owned()
    }
}

fn vanishes(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{feff}' | '\u{ad}')
}

/// `organizations` written some way an upstream may read loosely.
fn organizations_word() -> impl Strategy<Value = String> {
    let letter = |c: char| {
        let upper = c.to_ascii_uppercase();
        let fullwidth = char::from_u32(u32::from(c) + 0xfee0).unwrap();
        let mut ways = vec![
            c.to_string(),
            upper.to_string(),
            format!("%{:02X}", u32::from(c)),
            format!("%25{:02x}", u32::from(c)),
            format!("%u{:04x}", u32::from(c)),
            fullwidth.to_string(),
            encoded(&fullwidth.to_string()),
        ];
        match c {
            's' => ways.extend(["ſ".into(), "%C5%BF".into()]),
            'i' => ways.extend(["ı".into(), "%C4%B0".into()]),
            'o' => ways.extend(["𝐨".into(), "%C1%AF".into()]),
            _ => {}
        }
        select(ways)
    };
    // Mostly plain, so that each loose letter stands out.
    let letters: Vec<_> = "organizations"
        .chars()
        .map(|c| (Just(c), letter(c), prop::bool::weighted(0.15)))
        .collect();
    letters.prop_map(|letters| {
        letters
            .into_iter()
            .map(|(c, way, loose)| if loose { way } else { c.to_string() })
            .collect()
    })
}

fn encoded(text: &str) -> String {
    text.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// What may stand around a segment: whitespace, invisible characters,
/// dots and parameters, as sent or encoded.
fn junk() -> impl Strategy<Value = &'static str> {
    select(vec![
        "",
        "",
        "",
        "%20",
        "%09",
        "%0d%0a",
        "%C2%A0",
        "\u{a0}",
        "%E3%80%80",
        "%EF%BB%BF",
        "%E2%80%8B",
        "%2520",
        ".",
        "...",
        ";v=1",
        "%3b",
        "%u0020",
    ])
}

/// A segment before the organization, or one after it.
fn other_segment() -> impl Strategy<Value = &'static str> {
    select(vec![
        "",
        "x",
        ";x",
        "%20",
        "...",
        "%2e%2e%2e",
        "..",
        "..%20",
        ".%20.",
        "..%09",
        "..%C2%A0",
        "%EF%BC%8E%EF%BC%8E",
        "%E2%80%A5",
        "%u002e%u002e",
        "%C0%AE%C0%AE",
        "\u{ff0e}\u{ff0e}",
        "%E2%80%A4",
        "organizations",
        "B",
        "C",
        "x%EF%BC%8F..%EF%BC%8F..",
        "%2e",
    ])
}

fn organization_path() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(other_segment(), 0..3),
        (
            junk(),
            prop_oneof![
                organizations_word(),
                select(vec!["organization".to_string(), "x".to_string()])
            ],
            junk(),
        ),
        (select(vec!["A", "B", "org-B"]), junk()),
        prop::collection::vec(other_segment(), 0..4),
    )
        .prop_map(|(before, (lead, word, trail), (org, org_trail), after)| {
            let mut path = String::new();
            for segment in before {
                path.push('/');
                path.push_str(segment);
            }
            path.push_str(&format!("/{lead}{word}{trail}/{org}{org_trail}"));
            for segment in after {
                path.push('/');
                path.push_str(segment);
            }
            path
        })
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn a_path_any_upstream_reads_as_an_organization_is_refused_or_routed_to_it(
        path in organization_path(),
    ) {
        // The proxy refuses a dot-segment as sent before it routes.
        let routed = match route(&path) {
            _ if has_dot_segment(&path) => return Ok(()),
            Route::Refused(_) => return Ok(()),
            Route::Organization(id) => Some(id),
            Route::NoOrganization => None,
        };
        for reader in readers() {
            let Some(read) = reader.organization(&path) else { continue };
            // The organization lanyard routes to, as this reader reads
            // its id.
            prop_assert!(
                routed.is_some_and(|id| reader.segment(id) == read),
                "{path}: lanyard routes it to {routed:?}, while {reader:?} reads organization {read:?}"
            );
        }
    }
}
