//! What a lenient upstream makes of a segment, beyond percent-decoding:
//! trimming whitespace and control characters (IIS, older Spring MVC),
//! Unicode spaces and invisible characters, IIS's `%uXXXX` escapes,
//! Unicode case folding (Go's `strings.EqualFold`, Java's
//! `equalsIgnoreCase`: `ſ` is `s`, `K` is `k`), NFKC compatibility forms
//! (fullwidth `ｏ`, `．`, `／`, `＼`; `․`; mathematical letters; `㎱` for
//! `ns`) and overlong UTF-8 (`%C0%AE` for `.`). lanyard never reads a path
//! that way: it refuses a path that such a reading would move
//! (docs/accounts.md, "Which account a request gets").

use unicode_normalization::UnicodeNormalization;

/// Why a segment before the organization, or at its place, is refused.
pub const WHITESPACE: &str = "a segment before the organization holds whitespace or a control character (perhaps percent-encoded), which an upstream may trim into `organizations` or collapse into another path; lanyard does not forward it";
pub const UNICODE_FORM: &str = "a segment before the organization holds a Unicode space, an invisible character, or a compatibility or case form of an ASCII character (such as ſ for s, or fullwidth letters), which an upstream may read as `organizations`; lanyard does not forward it";
pub const DOTS: &str = "a segment before the organization is dots alone, which an upstream may drop or read as .. (RFC 3986 §5.2.4); lanyard does not forward it";
/// Why a segment anywhere in the path is refused.
pub const PERCENT_U: &str = "the path holds a %uXXXX escape, which IIS decodes into any character; lanyard does not forward it";
pub const OVERLONG: &str = "the path holds an overlong UTF-8 form (such as %C0%AE), which a lenient decoder reads as an ASCII character; lanyard does not forward it";
pub const SEPARATOR: &str = "the path has an encoded / or \\, a \\, or a compatibility or look-alike form of either (／, ＼, ∕, ⁄, ∖), which an upstream could read as another organization's path; lanyard does not forward it";
pub const HIDDEN_DOT: &str = "the path has a dot-segment hidden by encoding, whitespace, a control character or a compatibility form of . (．, ․, ‥), which an upstream could resolve into another organization's path (RFC 3986 §5.2.4); lanyard does not forward it";
/// The same, for a path not routed by organization.
pub const HIDDEN_DOT_BASE: &str = "the path has a dot-segment hidden by encoding, whitespace, a control character or a compatibility form of . (．, ․, ‥), which an upstream could resolve above the service's base path (RFC 3986 §5.2.4); lanyard does not forward it";

/// Why one decoding of a segment before the organization, or at its
/// place, could read as another segment to a lenient upstream: any
/// whitespace or control character, and any character that is not ASCII
/// but that an upstream could trim, drop, or fold into ASCII. Text that
/// is not ASCII and folds into none (`é`, `日本`) is read as it is.
pub fn leading_form(text: &[u8]) -> Option<&'static str> {
    // One pass over the bytes: the common segment is plain ASCII.
    if !text.iter().any(|&b| b <= b' ' || b >= 0x7f) {
        return None;
    }
    if text.iter().any(|&b| b <= b' ' || b == 0x7f) {
        return Some(WHITESPACE);
    }
    String::from_utf8_lossy(text)
        .chars()
        .any(|c| !c.is_ascii() && (vanishes(c) || reads_as_ascii(c)))
        .then_some(UNICODE_FORM)
}

/// Why one decoding of any segment of the path could hide a separator or
/// a dot-segment from lanyard's reading. `plain_dots` says the segment as
/// sent is dots alone (`...`), which is read as it is past the
/// organization.
pub fn hidden_form(text: &[u8], depth: usize, plain_dots: bool) -> Option<&'static str> {
    if text.contains(&b'\\') || (depth > 0 && text.contains(&b'/')) {
        return Some(SEPARATOR);
    }
    if has_percent_u(text) {
        return Some(PERCENT_U);
    }
    if has_overlong(text) {
        return Some(OVERLONG);
    }
    if !text.is_ascii()
        && (String::from_utf8_lossy(text)
            .nfkc()
            .any(|c| c == '/' || c == '\\')
            || String::from_utf8_lossy(text)
                .chars()
                .any(|c| BEST_FIT_SEPARATORS.contains(&c)))
    {
        return Some(SEPARATOR);
    }
    match dots(text) {
        Some(1 | 2) => Some(HIDDEN_DOT),
        Some(_) if !plain_dots => Some(HIDDEN_DOT),
        _ => None,
    }
}

/// Slashes that NFKC leaves alone but Windows' best-fit mapping (a
/// server converting a path to an ANSI code page) turns into `/` or `\`:
/// ∕ (U+2215), ⁄ (U+2044), ∖ (U+2216), ⧵ (U+29F5), ⧸ (U+29F8), ⧹ (U+29F9).
const BEST_FIT_SEPARATORS: [char; 6] = [
    '\u{2215}', '\u{2044}', '\u{2216}', '\u{29F5}', '\u{29F8}', '\u{29F9}',
];

/// How many dots the segment is to an upstream that normalises it (NFKC),
/// drops its `;parameters` and ignores whitespace, control and invisible
/// characters in it, when it is dots alone.
fn dots(text: &[u8]) -> Option<usize> {
    if !text.iter().any(|&b| b == b'.' || b >= 0x80) {
        return None;
    }
    let normal: String = String::from_utf8_lossy(text).nfkc().collect();
    let bare = normal.split(';').next().unwrap_or_default();
    let mut dots = 0;
    for c in bare.chars() {
        match c {
            '.' => dots += 1,
            c if vanishes(c) => {}
            _ => return None,
        }
    }
    (dots > 0).then_some(dots)
}

/// Whitespace (Unicode's White_Space, `char::is_whitespace`), control
/// characters, and the default-ignorable characters, which a reader may
/// trim or drop as nothing.
fn vanishes(c: char) -> bool {
    c.is_whitespace() || c.is_control() || is_default_ignorable(c)
}

/// Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt):
/// invisible characters (zero-width space, joiners, the byte order mark,
/// variation selectors, bidi controls, soft hyphen).
fn is_default_ignorable(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{061C}'
            | '\u{115F}'..='\u{1160}'
            | '\u{17B4}'..='\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{FFF0}'..='\u{FFF8}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// A character that is not ASCII but that an upstream could read as
/// ASCII: its compatibility form (NFKC: `ｏ`, `𝐨`, `㎱`, `․`, `／`) or its
/// case (`ſ` upper-cases to `S`, `K` lower-cases to `k`, `İ` to `i`).
fn reads_as_ascii(c: char) -> bool {
    std::iter::once(c).nfkc().any(|d| d.is_ascii())
        || c.to_lowercase().any(|d| d.is_ascii())
        || c.to_uppercase().any(|d| d.is_ascii())
}

/// `%u` and four hex digits, in any case: IIS's escape for a UTF-16 unit.
fn has_percent_u(text: &[u8]) -> bool {
    text.windows(6).any(|w| {
        w[0] == b'%' && w[1].eq_ignore_ascii_case(&b'u') && w[2..].iter().all(u8::is_ascii_hexdigit)
    })
}

/// A byte that starts an overlong UTF-8 form (RFC 3629 §3 forbids them):
/// `C0` and `C1`, which only ever encode ASCII, and `E0 80-9F` and
/// `F0 80-8F`.
fn has_overlong(text: &[u8]) -> bool {
    text.iter().any(|&b| b == 0xc0 || b == 0xc1)
        || text.windows(2).any(|w| {
            (w[0] == 0xe0 && (0x80..=0x9f).contains(&w[1]))
                || (w[0] == 0xf0 && (0x80..=0x8f).contains(&w[1]))
        })
}
