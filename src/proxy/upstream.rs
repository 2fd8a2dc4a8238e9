//! The upstream base URL as the proxy uses it: one type for its scheme,
//! authority and path prefix, joining request targets onto it, and the
//! checks that keep a request within it.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use http::Uri;
use http::uri::{Authority, PathAndQuery, Scheme};

use crate::config::{TargetUrl, is_loopback_host};

/// The upstream base URL, split once for joining paths onto it.
#[derive(Debug, Clone)]
pub struct Upstream {
    pub(super) scheme: Scheme,
    pub(super) authority: Authority,
    /// Path prefix without a trailing slash; empty for the root.
    prefix: String,
}

impl Upstream {
    pub fn new(url: &TargetUrl) -> Upstream {
        let uri = url.uri();
        Upstream {
            scheme: uri.scheme().cloned().unwrap_or(Scheme::HTTPS),
            authority: uri
                .authority()
                .cloned()
                .unwrap_or_else(|| Authority::from_static("localhost")),
            prefix: url.path_prefix().to_string(),
        }
    }

    /// The base URL's prefix joined with the request's path and query,
    /// with exactly one slash between them.
    pub fn uri_for(&self, request: &Uri) -> Result<Uri, http::Error> {
        let path = self.path_for(request)?;
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(path.path_and_query().map_or("/", PathAndQuery::as_str))
            .build()
    }

    /// [`Self::uri_for`] in origin form (`/path?query`), as an upstream
    /// request carries it; the common case, no prefix and an origin-form
    /// target, costs nothing.
    pub fn path_for(&self, request: &Uri) -> Result<Uri, http::Error> {
        let target = request.path_and_query().map_or("", PathAndQuery::as_str);
        // `OPTIONS *` and other non-path targets address the base itself;
        // an absolute-form target with no path (`http://host?q`) keeps its
        // query.
        let (slash, pq) = match target.as_bytes().first() {
            Some(b'/') => ("", target),
            Some(b'?') => ("/", target),
            _ => ("/", ""),
        };
        if self.prefix.is_empty() {
            if request.scheme().is_none() && slash.is_empty() {
                return Ok(request.clone());
            }
            return Ok(Uri::from_maybe_shared(Bytes::from(format!("{slash}{pq}")))?);
        }
        Ok(Uri::from_maybe_shared(Bytes::from(format!(
            "{}{slash}{pq}",
            self.prefix
        )))?)
    }

    /// Whether an HTTP/1 absolute-form target may be served: it names the
    /// upstream itself, or lanyard's own listener.
    pub(super) fn accepts_target(&self, target: &Authority, listen: SocketAddr) -> bool {
        let default_port = crate::outbound::default_port(&self.scheme);
        let names_upstream = target.host().eq_ignore_ascii_case(self.authority.host())
            && target.port_u16().unwrap_or(default_port)
                == self.authority.port_u16().unwrap_or(default_port);
        let names_lanyard = target.port_u16() == Some(listen.port())
            && (is_loopback_host(target.host())
                || target
                    .host()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip == listen.ip()));
        names_upstream || names_lanyard
    }
}

/// Whether a path has a `.` or `..` segment (RFC 3986 §3.3), counting
/// `%2e` as a dot and `%2f`, `%5c` and `\\` as separators, as an upstream
/// that decodes before it normalises (RFC 3986 §5.2.4) would: such a path
/// could resolve above the base URL's prefix. Scans in place, since most
/// paths have no dot or percent sign at all.
pub(super) fn has_dot_segment(path: &str) -> bool {
    let bytes = path.as_bytes();
    if !bytes.iter().any(|&b| b == b'.' || b == b'%') {
        return false;
    }
    let (mut dots, mut other) = (0usize, false);
    let mut i = 0;
    loop {
        // What the byte (or the %XX escape) at `i` stands for.
        let (token, width) = match bytes.get(i) {
            None => (None, 0),
            Some(b'%') if i + 3 <= bytes.len() => {
                match [
                    bytes[i + 1].to_ascii_lowercase(),
                    bytes[i + 2].to_ascii_lowercase(),
                ] {
                    [b'2', b'e'] => (Some(b'.'), 3),
                    [b'2', b'f'] | [b'5', b'c'] => (Some(b'/'), 3),
                    _ => (Some(b'%'), 1),
                }
            }
            Some(b'\\') => (Some(b'/'), 1),
            Some(&b) => (Some(b), 1),
        };
        match token {
            None | Some(b'/') => {
                if !other && (dots == 1 || dots == 2) {
                    return true;
                }
                if token.is_none() {
                    return false;
                }
                (dots, other) = (0, false);
            }
            Some(b'.') => dots += 1,
            Some(_) => other = true,
        }
        i += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream(url: &str) -> Upstream {
        Upstream::new(&TargetUrl::parse(url, false).unwrap())
    }

    #[test]
    fn prefix_and_path_are_joined_with_one_slash() {
        let cases = [
            (
                "https://api.example.com",
                "/v1/x?a=1",
                "https://api.example.com/v1/x?a=1",
            ),
            (
                "https://api.example.com/",
                "/x",
                "https://api.example.com/x",
            ),
            (
                "https://api.example.com/base",
                "/x?q",
                "https://api.example.com/base/x?q",
            ),
            (
                "https://api.example.com/base/",
                "/",
                "https://api.example.com/base/",
            ),
            (
                "https://api.example.com:8443/a/b",
                "/c",
                "https://api.example.com:8443/a/b/c",
            ),
        ];
        for (base, path, want) in cases {
            let got = upstream(base).uri_for(&path.parse().unwrap()).unwrap();
            assert_eq!(got.to_string(), want, "{base} + {path}");
        }
    }

    #[test]
    fn dot_segments_are_found_literal_encoded_and_behind_encoded_slashes() {
        for path in [
            "/..",
            "/../other",
            "/a/./b",
            "/a/..",
            "/..//x",
            "/%2e%2e/x",
            "/%2E%2e/x",
            "/.%2e/x",
            "/%2e/x",
            "/a%2f..%2fb",
            "/a%2F%2e%2e",
            "/a\\..\\b",
            "/a%5c..",
        ] {
            assert!(has_dot_segment(path), "{path}");
        }
        for path in [
            "/",
            "/v1/things",
            "/file.json",
            "/...",
            "/a/.../b",
            "/.well-known/x",
            "/a..b",
            "/%2e%2e%2e",
            "/100%25",
            "/%",
            "/%2",
            "/x%2",
        ] {
            assert!(!has_dot_segment(path), "{path}");
        }
    }

    #[test]
    fn upstream_targets_are_in_origin_form() {
        let cases = [
            ("http://127.0.0.1:9000", "/v1/x?a=1", "/v1/x?a=1"),
            ("http://127.0.0.1:9000", "/", "/"),
            ("http://127.0.0.1:9000", "*", "/"),
            ("http://127.0.0.1:9000", "http://127.0.0.1:9000/y?b", "/y?b"),
            (
                "http://127.0.0.1:9000",
                "http://127.0.0.1:9000?q=1",
                "/?q=1",
            ),
            (
                "http://127.0.0.1:9000/base",
                "http://127.0.0.1:9000?q",
                "/base/?q",
            ),
            ("http://127.0.0.1:9000/base", "/x?q", "/base/x?q"),
            ("http://127.0.0.1:9000/base", "*", "/base/"),
        ];
        for (base, target, want) in cases {
            let got = upstream(base).path_for(&target.parse().unwrap()).unwrap();
            assert_eq!(got.to_string(), want, "{base} + {target}");
            assert!(got.scheme().is_none() && got.authority().is_none());
        }
    }

    #[test]
    fn absolute_form_targets_are_checked_against_the_upstream() {
        let up = upstream("https://api.example.com/v1");
        let listen: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        let ok = [
            "api.example.com",
            "API.example.com:443",
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
        ];
        for target in ok {
            assert!(
                up.accepts_target(&target.parse().unwrap(), listen),
                "{target}"
            );
        }
        let refused = [
            "evil.example.com",
            "api.example.com:8443",
            "api.example.com.evil.com",
            "127.0.0.1:5432",
            "localhost",
        ];
        for target in refused {
            assert!(
                !up.accepts_target(&target.parse().unwrap(), listen),
                "{target}"
            );
        }
    }
}
