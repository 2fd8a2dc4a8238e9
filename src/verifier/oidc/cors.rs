//! Browser apps (docs/oidc.md, "Browser apps"): the token endpoint and
//! `userinfo` answer cross-origin requests (the Fetch standard's CORS)
//! from exactly the origins of the client's registered redirect URIs.
//! A preflight names no client, so it is granted to the origin of any
//! client's redirect URI, and the request itself decides.

use std::collections::BTreeSet;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use crate::config::oidc::{Client, Clients};

/// How long a browser may keep a granted preflight.
const PREFLIGHT_MAX_AGE: &str = "600";

/// The web origin of a redirect URI, as a browser writes it in `Origin`:
/// `scheme://host[:port]`, the default port left out; `None` for a
/// native app's own scheme, which no browser page has.
pub fn origin_of(uri: &str) -> Option<String> {
    let uri: http::Uri = uri.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let default = match scheme.as_str() {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let host = uri.host()?.to_ascii_lowercase();
    Some(match uri.port_u16() {
        Some(port) if port != default => format!("{scheme}://{host}:{port}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// Whether `origin` is one of `client`'s redirect URIs' origins.
pub fn allows(client: &Client, origin: &HeaderValue) -> bool {
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    client
        .redirect_uris
        .iter()
        .any(|uri| origin_of(uri).is_some_and(|o| o == origin))
}

/// Every registered client's redirect URIs' origins: what a preflight is
/// granted to.
pub fn all_origins(clients: &Clients) -> BTreeSet<String> {
    clients
        .iter()
        .flat_map(|client| client.redirect_uris.iter())
        .filter_map(|uri| origin_of(uri))
        .collect()
}

/// Lets `origin`'s page read the answer.
pub fn grant(headers: &mut HeaderMap, origin: &HeaderValue) {
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
}

/// The answer depends on `Origin`: caches must key on it.
pub fn vary(headers: &mut HeaderMap) {
    headers.append(header::VARY, HeaderValue::from_static("Origin"));
}

/// The answer to a preflight for the token endpoint or `userinfo`
/// (`methods`): granted to an origin some client registered, else
/// without the headers that would grant it.
pub fn preflight(
    origins: &BTreeSet<String>,
    request: &HeaderMap,
    methods: &'static str,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::NO_CONTENT;
    let headers = response.headers_mut();
    vary(headers);
    let origin = request.get(header::ORIGIN);
    if let Some(origin) = origin.filter(|o| o.to_str().is_ok_and(|o| origins.contains(o))) {
        grant(headers, origin);
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(methods),
        );
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("Authorization, Content-Type"),
        );
        headers.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static(PREFLIGHT_MAX_AGE),
        );
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirect_uris_origin_is_written_as_a_browser_writes_it() {
        for (uri, origin) in [
            ("https://shop.example/cb?x=1", Some("https://shop.example")),
            ("https://Shop.Example:443/cb", Some("https://shop.example")),
            (
                "https://shop.example:8443/cb",
                Some("https://shop.example:8443"),
            ),
            ("http://127.0.0.1:3000/cb", Some("http://127.0.0.1:3000")),
            ("http://[::1]/cb", Some("http://[::1]")),
            ("com.example.app:/cb", None),
        ] {
            assert_eq!(origin_of(uri).as_deref(), origin, "{uri}");
        }
    }
}
