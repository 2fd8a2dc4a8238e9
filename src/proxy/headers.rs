//! Hop-by-hop headers (RFC 9110 §7.6.1), dropped both ways, and a
//! request's headers as the upstream gets them.

use http::{HeaderMap, HeaderName, HeaderValue, header};

use crate::token::Token;

/// Headers that describe one connection, not the message (RFC 9110 §7.6.1),
/// plus `Proxy-Authorization`, which is for lanyard if for anyone.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

/// Removes hop-by-hop headers, including those the `Connection` header names.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // Most messages carry none: one pass over the few names present finds
    // that out, where removing each of nine names would hash every one.
    if !headers.keys().any(is_hop_by_hop) {
        return;
    }
    // Names listed in `Connection` are compared as they are, not parsed
    // into new header names: parsing allocates, and a name that is not
    // present needs no removing.
    let mut named = Vec::new();
    for value in headers.get_all(header::CONNECTION) {
        let Ok(value) = value.to_str() else { continue };
        for token in value.split(',').map(str::trim) {
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
    for name in &HOP_BY_HOP {
        headers.remove(name);
    }
    headers.remove(header::UPGRADE);
}

fn is_hop_by_hop(name: &HeaderName) -> bool {
    // `Upgrade` is hop-by-hop too; lanyard does not tunnel upgrades.
    HOP_BY_HOP.contains(name) || name == header::UPGRADE
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
