//! The HTTP/1 absolute-form check (docs/proxy.md): a request naming a
//! target in its request line is served only when that target is the
//! upstream itself or lanyard's own listener; any other authority would
//! get the token.

use std::net::SocketAddr;

use http::uri::Authority;

use crate::target::{TargetUrl, host_ip, is_loopback_host};

/// Whether an HTTP/1 absolute-form target may be served: it names the
/// upstream itself, or lanyard's own listener.
pub(super) fn accepts_target(
    upstream: &TargetUrl,
    target: &Authority,
    listen: Option<SocketAddr>,
) -> bool {
    let names_lanyard = listen.is_some_and(|listen| {
        target.port_u16() == Some(listen.port())
            && (is_loopback_host(target.host()) || host_ip(target.host()) == Some(listen.ip()))
    });
    upstream.is_named_by(target) || names_lanyard
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_form_targets_are_checked_against_the_upstream() {
        let up = TargetUrl::parse("https://api.example.com/v1", false).unwrap();
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
                accepts_target(&up, &target.parse().unwrap(), Some(listen)),
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
                !accepts_target(&up, &target.parse().unwrap(), Some(listen)),
                "{target}"
            );
        }
    }
}
