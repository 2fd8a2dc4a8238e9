//! Each listener's policy for the accept loop (`server::Limits`): the
//! proxy's from the settings, the admin listener's and the verifier's
//! fixed here for the clients each has, and the file descriptors they all
//! need (docs/proxy.md "Limits").

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use http_body_util::Full;

use crate::config::MIN_MAX_HEADER_BYTES;
use crate::config::{ProxyConfig, VerifierConfig};
use crate::error::{ProxyError, json_error, raw_http1};
use crate::server;

/// Probes and scrapes need a handful; the admin listener is often reachable
/// from the whole network, so a flood must not take file descriptors the
/// proxy needs. At the limit a new connection takes the place of one with
/// no request in flight (`server::Limits::evict_idle`), so a flood of
/// half-open connections cannot keep the probes out.
pub(super) const ADMIN_MAX_CONNECTIONS: usize = 64;
/// Connections one client (an IPv4 address or an IPv6 /64) may hold on the
/// admin listener. The kubelet's probes and a Prometheus scraper each use
/// one or two; 8 leaves room for both from one node, while a flood from one
/// address holds an eighth of the listener at most, and, with its
/// connections evictable once idle or stalled, not even that for long.
pub(super) const ADMIN_CONNECTIONS_PER_CLIENT: usize = 8;
/// Probes and scrapes send their request as they connect; a client that
/// has not within this is not one of them.
const ADMIN_HEADER_TIMEOUT: Duration = Duration::from_secs(5);

/// Browsers send a connection's first request as they open it (one they
/// opened ahead of need and left unused, they reopen at no cost to the
/// user); a connection with no whole request head within this holds a
/// slot for nothing, as a slowloris does.
pub const VERIFIER_FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// An idle keep-alive connection from a browser: nginx's default
/// `keepalive_timeout`, long enough for the page's polls (1 s to 5 s
/// apart) and a person reading a result to reuse their connection.
pub const VERIFIER_IDLE_TIMEOUT: Duration = Duration::from_secs(75);
/// An idle keep-alive connection from a trusted proxy
/// (`LANYARD_VERIFIER_FORWARDED_HOPS` > 0). A balancer pools connections
/// and must be the one to close an idle one: if lanyard closes it as the
/// balancer sends a request on it, that request fails (a 502). Google
/// Cloud's load balancers (GKE Ingress among them) keep a backend
/// connection for 600 s and ask backends to keep it longer; AWS ALB's
/// default is 60 s, ingress-nginx's 60 s, OCI's 300 s.
pub const VERIFIER_PROXIED_IDLE_TIMEOUT: Duration = Duration::from_secs(620);
/// Connections one client (an IPv4 address or an IPv6 /64) may hold on
/// the verifier's listener when browsers reach it directly. A browser
/// opens at most 6 to one origin over HTTP/1.1, so 32 lets five behind one
/// NAT (an office, a carrier's) load the page at once, while filling the
/// default 1024 connections takes 32 addresses, not one.
pub const VERIFIER_CONNECTIONS_PER_CLIENT: usize = 32;

/// HTTP/2 answers being sent on the verifier's listener, per connection of
/// its limit (`server::Limits::max_streams`).
pub const VERIFIER_ANSWERS_PER_CONNECTION: usize = 4;
/// HTTP/2 streams one connection may have open on the verifier's listener.
/// A browser loads the page's few files and polls one at a time; a
/// balancer opens more connections when one is full. One address's 32
/// connections then hold 256 streams, a small part of what the header
/// budget admits, so no one client can spend it for the others.
pub const VERIFIER_STREAMS_PER_CONNECTION: u32 = 8;
/// HTTP/2 streams one connection may have open on the proxy's listener at
/// most, as Envoy allows (nginx: 128): an app multiplexes its requests over
/// few connections.
const PROXY_MAX_STREAMS_PER_CONNECTION: u32 = 100;
/// The parts of `LANYARD_MAX_UPSTREAM_CONNECTIONS` one client connection
/// may hold at once ([`proxy_streams_per_connection`]).
const UPSTREAM_SHARES: usize = 8;
/// Streams a connection may have open however few upstream connections
/// there are: multiplexing stays worth an app's while, and a burst of
/// streams sent before the client has read lanyard's SETTINGS is refused
/// (`REFUSED_STREAM`) past this only.
const PROXY_MIN_STREAMS_PER_CONNECTION: u32 = 8;

/// HTTP/2 streams one connection may have open on the proxy's listener:
/// an eighth of the upstream connections, from 8 to 100. A stream holds an
/// upstream connection (or one of an HTTP/2 upstream's streams) until its
/// answer has been sent, however slowly its client reads, so a connection
/// whose client stops reading holds at most its share of them: three such
/// leave the pod's other apps five eighths (docs/proxy.md "Limits").
/// Clients keep further streams to themselves until one ends (RFC 9113
/// §5.1.2), so a busy app waits on its own streams, not on its neighbours'.
pub fn proxy_streams_per_connection(max_upstream_connections: usize) -> u32 {
    let share = u32::try_from(max_upstream_connections / UPSTREAM_SHARES).unwrap_or(u32::MAX);
    share.clamp(
        PROXY_MIN_STREAMS_PER_CONNECTION,
        PROXY_MAX_STREAMS_PER_CONNECTION,
    )
}
/// What an open HTTP/2 stream of the proxy costs beside its headers, all
/// told (h2's record of it, hyper's task, the proxy's future with its
/// upstream exchange, and its connection's own state spread over its
/// streams): about 20 KiB, measured by `bench/slow_readers.sh`'s proxy
/// scenarios (323 MiB over 16,430 streams). Charged, the group's header
/// budget bounds what open streams really hold (docs/proxy.md "Limits").
const PROXY_STREAM_STATE_BYTES: u32 = 20 * 1024;
/// The verifier's and the admin listener's handlers are smaller, and
/// their answers shared: about 4 KiB a stream, as measured by
/// `bench/slow_readers.sh`'s verifier scenarios.
const STREAM_STATE_BYTES: u32 = 4 * 1024;
/// Probes and scrapes ask one thing at a time.
const ADMIN_STREAMS_PER_CONNECTION: u32 = 4;

/// The proxy's: its clients are local apps, bounded by the settings.
pub(super) fn proxy_limits(config: &ProxyConfig, max_connections: usize) -> server::Limits {
    server::Limits {
        first_request_timeout: config.header_timeout,
        idle_timeout: config.header_timeout,
        send_timeout: config.send_timeout,
        max_connections,
        per_client: None,
        max_header_bytes: config.max_header_bytes,
        // Each holds up to 32 KiB of its answer queued: one per connection
        // keeps that term of docs/proxy.md "Limits" within the manifest's memory.
        max_streams: max_connections,
        streams_per_connection: proxy_streams_per_connection(config.max_upstream_connections),
        stream_state_bytes: PROXY_STREAM_STATE_BYTES,
        refusal: ProxyError::TooManyConnections.http1_bytes().into(),
        evict_idle: false,
        extra_headers: HeaderMap::new(),
        head_refusal,
    }
}

/// The admin listener's: a few probes and scrapes, from clients capped
/// one by one so that no one address can keep the probes out.
pub(super) fn admin_limits(send_timeout: Duration) -> server::Limits {
    server::Limits {
        first_request_timeout: ADMIN_HEADER_TIMEOUT,
        idle_timeout: ADMIN_HEADER_TIMEOUT,
        send_timeout,
        max_connections: ADMIN_MAX_CONNECTIONS,
        per_client: Some(server::ClientCap {
            max_connections: ADMIN_CONNECTIONS_PER_CLIENT,
            refusal: admin_cap_refusal(),
            displaces_own: true,
        }),
        max_header_bytes: MIN_MAX_HEADER_BYTES,
        max_streams: ADMIN_MAX_CONNECTIONS,
        streams_per_connection: ADMIN_STREAMS_PER_CONNECTION,
        stream_state_bytes: STREAM_STATE_BYTES,
        refusal: admin_refusal(),
        evict_idle: true,
        extra_headers: HeaderMap::new(),
        head_refusal,
    }
}

/// The verifier's: any browser on the internet, or the trusted proxies in
/// front of them (`LANYARD_VERIFIER_FORWARDED_HOPS` > 0), which carry every client's
/// connections and so are not capped as one client. Every answer the
/// listener makes itself carries the page's security headers.
pub(super) fn verifier_limits(config: &VerifierConfig, max_connections: usize) -> server::Limits {
    let proxied = config.forwarded_hops > 0;
    server::Limits {
        first_request_timeout: VERIFIER_FIRST_REQUEST_TIMEOUT,
        idle_timeout: match proxied {
            true => VERIFIER_PROXIED_IDLE_TIMEOUT,
            false => VERIFIER_IDLE_TIMEOUT,
        },
        send_timeout: config.send_timeout,
        max_connections,
        per_client: (!proxied).then(|| server::ClientCap {
            max_connections: VERIFIER_CONNECTIONS_PER_CLIENT,
            refusal: client_cap_refusal(),
            displaces_own: false,
        }),
        max_header_bytes: config.max_header_bytes,
        // Its answers are shared, not copied per stream (docs/proxy.md "Limits"),
        // so a stream costs its state alone; four per connection keep one
        // address (32 connections of 100 streams) from taking them all.
        max_streams: VERIFIER_ANSWERS_PER_CONNECTION * max_connections,
        streams_per_connection: VERIFIER_STREAMS_PER_CONNECTION,
        stream_state_bytes: STREAM_STATE_BYTES,
        refusal: ProxyError::TooManyConnections.http1_bytes().into(),
        evict_idle: true,
        extra_headers: crate::verifier::security_headers(),
        head_refusal,
    }
}

/// Every listener's answer to a request head the server refused: lanyard's
/// JSON error for a malformed or ambiguous head (400 `bad_request`) and an
/// over-long target (414 `uri_too_long`), plain text for one too large
/// (431), as docs/proxy.md "Errors made by lanyard itself" lists them.
fn head_refusal(refused: server::HeadRefusal) -> Response<Full<Bytes>> {
    use server::HeadRefusal;
    match refused {
        HeadRefusal::TooLarge => {
            let body = Bytes::from_static(b"request header fields too large\n");
            let mut response = Response::new(Full::new(body));
            *response.status_mut() = refused.status();
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            response
        }
        HeadRefusal::UriTooLong => json_error(refused.status(), "uri_too_long", refused.reason()),
        HeadRefusal::Malformed | HeadRefusal::Framing => {
            json_error(refused.status(), "bad_request", refused.reason())
        }
    }
}

/// What a connection beyond the admin listener's limit is told (only when
/// every one of its connections is busy with a request), naming its own
/// limit; its length is counted here, not by hand.
fn admin_refusal() -> Bytes {
    let body = format!(
        "the admin listener is answering its {ADMIN_MAX_CONNECTIONS} connections' requests already; retry soon\n"
    );
    Bytes::from(raw_http1(StatusCode::SERVICE_UNAVAILABLE, None, &body))
}

/// What a connection over the admin listener's per-client cap is told.
fn admin_cap_refusal() -> Bytes {
    let body = format!(
        "this address holds {ADMIN_CONNECTIONS_PER_CLIENT} admin connections, as many as one client may; reuse them\n"
    );
    Bytes::from(raw_http1(StatusCode::SERVICE_UNAVAILABLE, None, &body))
}

/// What a connection over the verifier's per-client cap is told: the
/// listener's `too_many_connections`, its message naming the cap rather
/// than `LANYARD_MAX_CONNECTIONS`, which is not what was reached.
fn client_cap_refusal() -> Bytes {
    let error = ProxyError::TooManyConnections;
    let body = serde_json::json!({
        "error": error.code(),
        "message": format!(
            "this address holds {VERIFIER_CONNECTIONS_PER_CLIENT} connections, as many as one client may; reuse them or retry"
        ),
    })
    .to_string();
    Bytes::from(raw_http1(error.status(), Some(error.code()), &body))
}

/// Descriptors beyond client, upstream and admin connections: the token
/// endpoint's connection, listeners, the credentials file, logs, refusals
/// being answered.
const SPARE_FILE_DESCRIPTORS: usize = 128;

/// The client listeners' connection limit once the open-file limit is
/// budgeted.
///
/// Client connections, upstream connections and the admin listener's
/// connections together must never exhaust the descriptors the process
/// has: when they run out, `accept` fails for every listener, the admin
/// probes included. The soft limit is raised toward the hard one as far as
/// the settings need (many runtimes start processes at 1024); if it cannot
/// go that far, the connection limit is lowered to what fits, with a
/// warning naming both settings.
pub(super) fn budget_file_descriptors(
    max_connections: usize,
    client_listeners: usize,
    outbound: usize,
) -> usize {
    let others = outbound + ADMIN_MAX_CONNECTIONS + SPARE_FILE_DESCRIPTORS;
    let wanted = max_connections
        .saturating_mul(client_listeners)
        .saturating_add(others);
    let limit = match rlimit::increase_nofile_limit(wanted as u64) {
        Ok(limit) => usize::try_from(limit).unwrap_or(usize::MAX),
        Err(err) => {
            tracing::warn!(error = %err, "cannot read or raise the open-file limit");
            return max_connections;
        }
    };
    if limit >= wanted {
        return max_connections;
    }
    let fits = (limit.saturating_sub(others) / client_listeners).max(1);
    tracing::warn!(
        open_file_limit = limit,
        wanted,
        max_connections = fits,
        "the open-file limit cannot hold LANYARD_MAX_CONNECTIONS and LANYARD_MAX_UPSTREAM_CONNECTIONS together; serving at most max_connections client connections. Raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower the settings"
    );
    fits
}

#[cfg(test)]
mod tests {
    use super::proxy_streams_per_connection;

    #[test]
    fn a_proxy_connection_may_hold_an_eighth_of_the_upstream_connections_from_8_to_100() {
        assert_eq!(proxy_streams_per_connection(256), 32);
        assert_eq!(proxy_streams_per_connection(64), 8);
        assert_eq!(proxy_streams_per_connection(8), 8);
        assert_eq!(proxy_streams_per_connection(1), 8);
        assert_eq!(proxy_streams_per_connection(4096), 100);
        assert_eq!(proxy_streams_per_connection(usize::MAX), 100);
    }

    use super::*;

    /// The head and body of a raw answer, checked for a length that is
    /// its body's.
    fn parts(raw: &[u8]) -> (String, String) {
        let text = std::str::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 503 "), "{head}");
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        (head.to_string(), body.to_string())
    }

    #[test]
    fn the_admin_refusal_declares_its_own_length_and_names_its_limit() {
        let (_, body) = parts(&admin_refusal());
        assert!(
            body.contains(&format!("its {ADMIN_MAX_CONNECTIONS} connections")),
            "{body}"
        );
    }

    #[test]
    fn the_client_cap_refusal_has_the_error_shape_and_names_the_cap() {
        let (head, body) = parts(&client_cap_refusal());
        assert!(
            head.contains("lanyard-error: too_many_connections"),
            "{head}"
        );
        let body: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"], "too_many_connections");
        let message = body["message"].as_str().unwrap();
        assert!(
            message.contains(&VERIFIER_CONNECTIONS_PER_CLIENT.to_string()),
            "{message}"
        );
    }
}
