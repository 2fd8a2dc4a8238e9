//! The URL lanyard sends a token to: the upstream's base URL
//! (`SERVICE_API_URL`) and the token endpoint (`token_uri`). One type for
//! both, used by the settings, the proxy, the pool, `lanyard check` and the
//! token exchange: checked once when read, split once into scheme,
//! authority and path prefix so that the request path parses nothing, and
//! the one place that joins a request's target onto it and keeps it within
//! the prefix.

use std::fmt;
use std::net::IpAddr;

use bytes::Bytes;
use http::Uri;
use http::uri::{Authority, PathAndQuery, Scheme};

/// An absolute `http(s)` URL that lanyard sends the token to.
#[derive(Clone, PartialEq, Eq)]
pub struct TargetUrl {
    /// As given: the token request is sent to it whole, query included.
    uri: Uri,
    scheme: Scheme,
    authority: Authority,
    /// Path prefix without a trailing slash; empty for the root.
    prefix: String,
}

impl TargetUrl {
    /// Parses and checks a URL: absolute, `http` or `https`, no user info,
    /// no fragment, and `https` unless the host is a loopback address.
    /// The message does not repeat the value, which may carry a secret.
    pub fn parse(raw: &str, allow_query: bool) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.contains('#') {
            return Err("must not have a fragment (#...)".into());
        }
        let uri: Uri = raw
            .parse()
            .map_err(|_| "is not a valid absolute URL".to_string())?;
        let (Some(scheme), Some(authority)) = (uri.scheme(), uri.authority()) else {
            return Err("is not an absolute URL (expected https://host/...)".into());
        };
        if authority.as_str().contains('@') {
            return Err("must not carry user info (user:password@)".into());
        }
        if authority.host().is_empty() {
            return Err("has no host".into());
        }
        if !allow_query && uri.query().is_some() {
            return Err("must not have a query string".into());
        }
        match scheme.as_str() {
            "https" => {}
            "http" if is_loopback_host(authority.host()) => {}
            "http" => {
                return Err(
                    "must use https: the token would cross the network in clear text (plain http is accepted on loopback only)"
                        .into(),
                );
            }
            _ => return Err("must be an http or https URL".into()),
        }
        Ok(TargetUrl {
            scheme: scheme.clone(),
            authority: authority.clone(),
            prefix: uri.path().trim_end_matches('/').to_string(),
            uri,
        })
    }

    /// The URL as given, query included: where the token request goes.
    pub fn uri(&self) -> &Uri {
        &self.uri
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> &Scheme {
        &self.scheme
    }

    /// Host and port as given, with no user info.
    pub fn authority(&self) -> &Authority {
        &self.authority
    }

    /// Path prefix without a trailing slash (empty for the root).
    #[cfg(test)]
    pub fn path_prefix(&self) -> &str {
        &self.prefix
    }

    /// The authority as a `Host` header gives it: with its port only when
    /// that is not the scheme's default.
    pub fn host_header(&self) -> &str {
        match self.authority.port_u16() {
            Some(port) if port != default_port(&self.scheme) => self.authority.as_str(),
            _ => self.authority.host(),
        }
    }

    /// Whether `authority` names this URL's host and port, the host in any
    /// case and a missing port read as the scheme's default.
    pub fn is_named_by(&self, authority: &Authority) -> bool {
        let default_port = default_port(&self.scheme);
        authority.host().eq_ignore_ascii_case(self.authority.host())
            && authority.port_u16().unwrap_or(default_port)
                == self.authority.port_u16().unwrap_or(default_port)
    }

    /// The prefix joined with the request's path and query, with exactly
    /// one slash between them.
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
}

impl fmt::Display for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.uri, f)
    }
}

impl fmt::Debug for TargetUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.uri, f)
    }
}

/// The port a URL of this scheme has when it names none: the one rule for
/// the `Host` header and for an authority naming the target.
pub fn default_port(scheme: &Scheme) -> u16 {
    if *scheme == Scheme::HTTP { 80 } else { 443 }
}

/// True for `localhost`, `127.0.0.0/8` and `::1`.
pub fn is_loopback_host(host: &str) -> bool {
    unbracketed(host).eq_ignore_ascii_case("localhost")
        || host_ip(host).is_some_and(|ip| ip.is_loopback())
}

/// The address a host names, if it is an IP literal.
pub fn host_ip(host: &str) -> Option<IpAddr> {
    unbracketed(host).parse().ok()
}

/// An authority's IPv6 host comes in brackets.
fn unbracketed(host: &str) -> &str {
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Whether a path has a `.` or `..` segment (RFC 3986 §3.3), counting
/// `%2e` as a dot and `%2f`, `%5c` and `\\` as separators, as an upstream
/// that decodes before it normalises (RFC 3986 §5.2.4) would, and a
/// segment's `;parameters` (`..;x`, `.%3b`) as not part of it, as servlet
/// containers read them: such a path could resolve above the base URL's
/// prefix. Scans in place, since most paths have no dot or percent sign
/// at all.
pub fn has_dot_segment(path: &str) -> bool {
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
                    [b'3', b'b'] => (Some(b';'), 3),
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
            // The rest of the segment is its parameters.
            Some(b';') if !other && (dots == 1 || dots == 2) => return true,
            Some(_) => other = true,
        }
        i += width;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(url: &str) -> TargetUrl {
        TargetUrl::parse(url, false).unwrap()
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
            let got = parsed(base).uri_for(&path.parse().unwrap()).unwrap();
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
            "/..;/x",
            "/a/..;jsessionid=1/b",
            "/.;/x",
            "/a/.%3b/b",
            "/%2e%2e%3Bx/b",
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
            "/a;x/b",
            "/...;x",
            "/a.;x",
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
            let got = parsed(base).path_for(&target.parse().unwrap()).unwrap();
            assert_eq!(got.to_string(), want, "{base} + {target}");
            assert!(got.scheme().is_none() && got.authority().is_none());
        }
    }

    #[test]
    fn an_authority_names_the_target_by_host_in_any_case_and_port_or_its_default() {
        let https = parsed("https://api.example.com/v1");
        for named in ["api.example.com", "API.example.com:443"] {
            assert!(https.is_named_by(&named.parse().unwrap()), "{named}");
        }
        for other in [
            "evil.example.com",
            "api.example.com:8443",
            "api.example.com:80",
            "api.example.com.evil.com",
        ] {
            assert!(!https.is_named_by(&other.parse().unwrap()), "{other}");
        }
        let http = parsed("http://localhost:80");
        assert!(http.is_named_by(&"localhost".parse().unwrap()));
        assert!(!http.is_named_by(&"localhost:443".parse().unwrap()));
    }

    #[test]
    fn the_host_header_names_the_port_only_when_it_is_not_the_schemes_default() {
        let cases = [
            ("https://api.example.com/v1", "api.example.com"),
            ("https://api.example.com:443", "api.example.com"),
            ("https://api.example.com:8443", "api.example.com:8443"),
            ("http://127.0.0.1:80/x", "127.0.0.1"),
            ("http://127.0.0.1:443", "127.0.0.1:443"),
            ("http://[::1]:9000", "[::1]:9000"),
        ];
        for (url, host) in cases {
            assert_eq!(parsed(url).host_header(), host, "{url}");
        }
    }

    #[test]
    fn the_split_parts_are_the_urls_own() {
        let token =
            TargetUrl::parse("https://iam.example.com:8443/oauth2/token/?a=1", true).unwrap();
        assert_eq!(token.scheme(), &Scheme::HTTPS);
        assert_eq!(token.authority().as_str(), "iam.example.com:8443");
        assert_eq!(token.path_prefix(), "/oauth2/token");
        assert_eq!(
            token.uri().to_string(),
            "https://iam.example.com:8443/oauth2/token/?a=1",
            "the token request goes to the URL as given, query included"
        );
        assert_eq!(parsed("https://api.example.com/").path_prefix(), "");
    }

    #[test]
    fn the_default_port_follows_the_scheme() {
        assert_eq!(default_port(&Scheme::HTTP), 80);
        assert_eq!(default_port(&Scheme::HTTPS), 443);
    }
}
