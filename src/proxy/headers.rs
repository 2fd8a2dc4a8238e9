//! Hop-by-hop headers (RFC 9110 §7.6.1), dropped both ways, and a
//! request's headers as the upstream gets them.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::token::Token;

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// plus `Proxy-Authorization`, which is for lanyard if for anyone, and
/// `Upgrade`, as lanyard does not tunnel upgrades.
const HOP_BY_HOP: [HeaderName; 9] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the few names present finds which hop-by-hop ones are
    // there (most messages carry none; an HTTP/1.1 upstream's answers carry
    // `Connection: keep-alive`), so that only those are removed: removing
    // each of nine names hashed every one of them, on every answer.
    let present = headers
        .keys()
        .filter_map(hop_by_hop_index)
        .fold(0u16, |present, index| present | 1 << index);
    if present == 0 {
        return;
    }
    // Names listed in `Connection` are compared as they are, not parsed
    // into new header names: parsing allocates, and a name that is not
    // present needs no removing. The usual `keep-alive` is hop-by-hop
    // anyway, removed below if present.
    let mut named = Vec::new();
    // `Connection` is the first of them.
    let connection = match present & 1 {
        0 => None,
        _ => Some(headers.get_all(header::CONNECTION)),
    };
    for value in connection.into_iter().flatten() {
        let Ok(value) = value.to_str() else { continue };
        for token in value.split(',').map(str::trim) {
            if token.eq_ignore_ascii_case("keep-alive") {
                continue;
            }
            if let Some(name) = headers
                .keys()
                .find(|name| name.as_str().eq_ignore_ascii_case(token))
            {
                named.push(name.clone());
            }
        }
    }
    for name in named {
        headers.remove(name);
    }
    for (index, name) in HOP_BY_HOP.iter().enumerate() {
        if present & 1 << index != 0 {
            headers.remove(name);
        }
    }
}

/// Where `name` is in [`HOP_BY_HOP`], if it is hop-by-hop.
fn hop_by_hop_index(name: &HeaderName) -> Option<usize> {
    HOP_BY_HOP.iter().position(|hop| hop == name)
}

/// A client's headers as the upstream gets them (docs/proxy.md): hop-by-hop
/// ones dropped, `Host` left to the pool, the token in `Authorization`.
pub(super) fn upstream_headers(headers: &mut HeaderMap, token: &Token) {
    // `TE: trailers` is hop-by-hop but says the client takes trailers,
    // which gRPC servers require; HTTP/2 allows just that value.
    let trailers = headers
        .get(header::TE)
        .is_some_and(|te| te.as_bytes().eq_ignore_ascii_case(b"trailers"));
    strip_hop_by_hop(headers);
    if trailers {
        headers.insert(header::TE, HeaderValue::from_static("trailers"));
    }
    // Host is the upstream's: the pool sets it for HTTP/1.1.
    headers.remove(header::HOST);
    headers.insert(header::AUTHORIZATION, token.authorization().clone());
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;
    #[test]
    fn hop_by_hop_headers_and_those_named_in_connection_are_dropped() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "close, X-Private,x-also ,x-absent"),
            ("x-private", "1"),
            ("x-also", "2"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic Zm9v"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "websocket"),
            ("x-kept", "yes"),
        ] {
            headers.insert(HeaderName::from_static(name), value.parse().unwrap());
        }
        strip_hop_by_hop(&mut headers);
        let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        assert_eq!(left, ["x-kept"]);
    }

    #[test]
    fn a_message_without_hop_by_hop_headers_is_left_alone() {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        headers.append("x-many", HeaderValue::from_static("1"));
        headers.append("x-many", HeaderValue::from_static("2"));
        let before = headers.clone();
        strip_hop_by_hop(&mut headers);
        assert_eq!(headers, before);
    }
}
