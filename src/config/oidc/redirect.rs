//! Redirect URIs (docs/oidc.md, "Redirect URIs"): the canonical form a
//! registered one must have, and how an authorization request's is
//! matched against it. Matching is string comparison (RFC 6749 §3.1.2.3,
//! RFC 9700 §4.1.3), so that a URI a browser would read differently
//! (a user name before the host, a fragment, a port written `:05000`)
//! never matches; the one exception is a native app's loopback IP
//! redirect URI registered without a port, which matches the same URI on
//! any port (RFC 8252 §7.3). `localhost` is matched exactly only: RFC
//! 8252 §8.3 recommends the IP literals, since a name can resolve
//! elsewhere.

/// The loopback IP literals RFC 8252 §7.3 names, as a URI writes them.
const LOOPBACK_LITERALS: [&str; 2] = ["127.0.0.1", "[::1]"];

/// Whether the authorization request's `given` redirect URI is the
/// `registered` one: the same string, or for a loopback IP literal
/// registered without a port, the same string with a port added.
pub fn matches(registered: &str, given: &str) -> bool {
    registered == given || on_another_port(registered, given)
}

/// `given` is `registered` (`http://127.0.0.1/…`, `http://[::1]/…`, no
/// port) with `:PORT` after the host, PORT in canonical decimal.
fn on_another_port(registered: &str, given: &str) -> bool {
    let Some((host, rest)) = portless_loopback(registered) else {
        return false;
    };
    let Some(after) = given
        .strip_prefix("http://")
        .and_then(|given| given.strip_prefix(host))
        .and_then(|given| given.strip_prefix(':'))
    else {
        return false;
    };
    let digits = after
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(after.len());
    let (port, tail) = after.split_at(digits);
    is_canonical_port(port) && tail == rest
}

/// The host and what follows it, of a plain-http URI to a loopback IP
/// literal with no port.
fn portless_loopback(uri: &str) -> Option<(&'static str, &str)> {
    let after = uri.strip_prefix("http://")?;
    LOOPBACK_LITERALS.iter().find_map(|host| {
        let rest = after.strip_prefix(host)?;
        (rest.is_empty() || rest.starts_with(['/', '?'])).then_some((*host, rest))
    })
}

/// 1 to 65535 in decimal, without a sign or a leading zero.
fn is_canonical_port(port: &str) -> bool {
    !port.starts_with('0') && port.len() <= 5 && port.parse::<u16>().is_ok_and(|port| port > 0)
}

/// Why an http(s) URI's authority and path (what follows `scheme://`) are
/// not in the one form an authorization request can match exactly: a
/// user name, a host not in lower case, a port that is empty, zero, has a
/// leading zero, or is the scheme's default, a `.` or `..` segment, or a
/// percent escape in lower case (RFC 3986 §6.2.2, §6.2.3).
pub fn non_canonical(scheme: &str, after_scheme: &str) -> Option<String> {
    let rest = after_scheme.strip_prefix("//")?;
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(end);
    if authority.contains('@') {
        return Some("has a user name before its host; a redirect URI names none".into());
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => (host, Some(port)),
        _ => (authority, None),
    };
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        return Some("has upper-case letters in its host; write the host in lower case".into());
    }
    let default = if scheme == "https" { "443" } else { "80" };
    match port {
        Some(port) if !is_canonical_port(port) => {
            return Some(
                "has a port that is empty, zero, or written with a sign or leading zeros".into(),
            );
        }
        Some(port) if port == default => {
            return Some(format!(
                "names the scheme's default port :{default}; leave it out"
            ));
        }
        _ => {}
    }
    let path = path_and_query.split('?').next().unwrap_or_default();
    if path
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return Some("has a `.` or `..` segment in its path".into());
    }
    let lower_escape = path_and_query.match_indices('%').any(|(at, _)| {
        path_and_query[at + 1..]
            .bytes()
            .take(2)
            .any(|b| b.is_ascii_lowercase())
    });
    if lower_escape {
        return Some("has a percent escape in lower case; write it %2F, not %2f".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_portless_loopback_ip_matches_on_any_canonical_port() {
        for (registered, given) in [
            ("http://127.0.0.1/cb", "http://127.0.0.1:51234/cb"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:1/cb"),
            ("http://127.0.0.1/cb", "http://127.0.0.1:65535/cb"),
            ("http://[::1]/cb?x=1", "http://[::1]:8080/cb?x=1"),
            ("http://127.0.0.1", "http://127.0.0.1:8080"),
            ("http://127.0.0.1/cb", "http://127.0.0.1/cb"),
            ("http://localhost/cb", "http://localhost/cb"),
            ("https://app.example/cb", "https://app.example/cb"),
        ] {
            assert!(matches(registered, given), "{registered} {given}");
        }
    }

    #[test]
    fn anything_else_matches_exactly_or_not_at_all() {
        let cb = "http://127.0.0.1/cb";
        for (registered, given) in [
            (cb, "http://user@127.0.0.1:5000/cb"),
            (cb, "http://127.0.0.1:5000@evil.example/cb"),
            (cb, "http://127.0.0.1:5000/cb#frag"),
            (cb, "HTTP://127.0.0.1:5000/cb"),
            (cb, "http://127.0.0.1:0/cb"),
            (cb, "http://127.0.0.1:05000/cb"),
            (cb, "http://127.0.0.1:65536/cb"),
            (cb, "http://127.0.0.1:/cb"),
            (cb, "http://127.0.0.1:+5/cb"),
            (cb, "http://127.0.0.1:5000/cb/"),
            (cb, "http://127.0.0.1:5000/CB"),
            (cb, "http://127.0.0.1:5000/cb?x=1"),
            (cb, "http://127.0.0.2:5000/cb"),
            (cb, "http://[::1]:5000/cb"),
            (cb, "https://127.0.0.1:5000/cb"),
            ("http://[::1]/cb", "http://[0:0:0:0:0:0:0:1]:5000/cb"),
            ("http://localhost/cb", "http://localhost:5000/cb"),
            ("https://127.0.0.1/cb", "https://127.0.0.1:5000/cb"),
            ("http://127.0.0.1:8000/cb", "http://127.0.0.1:8001/cb"),
            ("http://127.0.0.1:8000/cb", "http://127.0.0.1/cb"),
            ("http://127.0.0.1/cbx", "http://127.0.0.1:5/cb"),
            (
                "http://127.0.0.1.evil.example/cb",
                "http://127.0.0.1.evil.example:5/cb",
            ),
        ] {
            assert!(!matches(registered, given), "{registered} {given}");
        }
    }

    #[test]
    fn a_registered_uri_in_another_form_than_the_canonical_one_is_named() {
        for (uri, why) in [
            ("//user@app.example/cb", "user name"),
            ("//user:pw@127.0.0.1/cb", "user name"),
            ("//App.example/cb", "lower case"),
            ("//app.example:/cb", "port that is empty"),
            ("//app.example:0/cb", "port that is empty"),
            ("//app.example:0443/cb", "leading zeros"),
            ("//app.example:443/cb", "default port :443"),
            ("//app.example/a/../cb", "`..`"),
            ("//app.example/./cb", "`..`"),
            ("//app.example/a%2fb", "lower case"),
        ] {
            let found = non_canonical("https", uri);
            assert!(
                found.as_deref().is_some_and(|f| f.contains(why)),
                "{uri}: {found:?}"
            );
        }
        for uri in [
            "//app.example/cb",
            "//app.example:8443/cb?a=%2F",
            "//[::1]/cb",
            "//[::1]:3000/cb",
            "//127.0.0.1",
        ] {
            assert_eq!(non_canonical("https", uri), None, "{uri}");
        }
        assert!(non_canonical("http", "//127.0.0.1:80/cb").is_some());
    }
}
