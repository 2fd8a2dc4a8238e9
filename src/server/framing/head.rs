//! A parsed request head judged: where its body ends, or why hyper could
//! not take it (docs/proxy.md "Errors made by lanyard itself").

use super::{HeadRefusal, Place};

/// hyper's longest request target; a longer one gets its bare 414.
pub(super) const MAX_TARGET_BYTES: usize = u16::MAX as usize - 1;

/// hyper answers a field name this long with its bare 431.
pub(super) const MAX_FIELD_NAME_BYTES: usize = 1 << 16;

/// The largest `Content-Length` hyper can hold: it keeps the two largest
/// `u64`s as markers and answers those with its bare 431.
const MAX_CONTENT_LENGTH: u64 = u64::MAX - 2;

/// Where a parsed head's body leaves the stream, or why its framing (or
/// anything else hyper would refuse it for) is refused.
pub(super) fn body_framing(req: &httparse::Request<'_, '_>) -> Result<Place, HeadRefusal> {
    let target = req.path.unwrap_or_default();
    if target.len() > MAX_TARGET_BYTES {
        return Err(HeadRefusal::UriTooLong);
    }
    if !is_uri_hyper_takes(target) {
        return Err(HeadRefusal::Malformed);
    }
    let mut chunked_fields = 0;
    let mut length_fields = 0;
    let mut length = 0;
    for field in req.headers.iter() {
        if field.name.len() >= MAX_FIELD_NAME_BYTES {
            return Err(HeadRefusal::TooLarge);
        }
        if field.name.eq_ignore_ascii_case("transfer-encoding") {
            // Only `chunked` alone: any other coding list is one that
            // readers take apart differently.
            if !field.value.trim_ascii().eq_ignore_ascii_case(b"chunked") {
                return Err(HeadRefusal::Framing);
            }
            chunked_fields += 1;
        } else if field.name.eq_ignore_ascii_case("content-length") {
            length = content_length(field.value).ok_or(HeadRefusal::Framing)?;
            length_fields += 1;
        }
    }
    // HTTP/1.0 has no chunked coding (RFC 9112 §6.1), so a 1.0 hop in
    // between would read such a body to the connection's end.
    let is_http_10 = req.version != Some(1);
    match (chunked_fields, length_fields) {
        (0, 0) => Ok(Place::NEXT_HEAD),
        (0, 1) if length == 0 => Ok(Place::NEXT_HEAD),
        (0, 1) => Ok(Place::Sized { left: length }),
        (1, 0) if !is_http_10 => Ok(Place::ChunkSize),
        _ => Err(HeadRefusal::Framing),
    }
}

/// A `Content-Length` value: plain ASCII digits, within what hyper holds.
fn content_length(value: &[u8]) -> Option<u64> {
    let digits = value.trim_ascii();
    if digits.is_empty() {
        return None;
    }
    digits
        .iter()
        .try_fold(0u64, |n, &b| match b {
            b'0'..=b'9' => n.checked_mul(10)?.checked_add(u64::from(b - b'0')),
            _ => None,
        })
        .filter(|&n| n <= MAX_CONTENT_LENGTH)
}

/// Whether hyper's URI parser (the `http` crate's) takes `target`, which
/// would otherwise get hyper's bare 400. A path of plain URI characters
/// always parses; anything else (absolute or authority form, `*`, bytes
/// that parser is particular about) is put to the parser itself, which
/// costs a copy of the target.
fn is_uri_hyper_takes(target: &str) -> bool {
    let plain = target.starts_with('/') && target.bytes().all(|b| PLAIN_URI[usize::from(b)]);
    plain || http::Uri::try_from(target).is_ok()
}

/// Unreserved and sub-delim characters, and those that separate a path's
/// parts and its query (RFC 3986): what every URI parser takes in a path.
static PLAIN_URI: [bool; 256] = {
    let plain =
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$&'()*+,;=:@/?%";
    let mut table = [false; 256];
    let mut i = 0;
    while i < plain.len() {
        table[plain[i] as usize] = true;
        i += 1;
    }
    table
};

/// Whether a blank line (LF LF, or LF CR LF) ends in `data` after its
/// first `scanned` bytes, which are known to hold none.
pub(super) fn has_blank_line(data: &[u8], scanned: usize) -> bool {
    let from = scanned.saturating_sub(2);
    let tail = data.get(from..).unwrap_or_default();
    tail.iter().enumerate().any(|(i, &b)| {
        b == b'\n'
            && match tail.get(i + 1) {
                Some(b'\n') => true,
                Some(b'\r') => tail.get(i + 2) == Some(&b'\n'),
                _ => false,
            }
    })
}
