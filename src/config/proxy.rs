//! The proxy's configuration (docs/proxy.md), and its settings read
//! straight into it: a new setting of the proxy's is declared in the
//! table (`settings`), given a field and a line here, and used.

use std::time::Duration;

use super::settings::{
    ALLOW_REMOTE, BODY_TIMEOUT, HEADER_TIMEOUT, LISTEN, LISTEN_MODE, MAX_CONNECTIONS,
    MAX_HEADER_BYTES, MAX_UPSTREAM_CONNECTIONS, SEND_TIMEOUT, UPSTREAM_TIMEOUT, WORKER_THREADS,
};
use super::sources::{Layers, Sourced};
use super::values::{FileMode, ListenAddr, Shown};

/// The proxy's (docs/proxy.md); where it forwards to is the command's
/// (`SERVICE_API_URL`, or the demo's mock). Nothing in it is optional.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// `LANYARD_LISTEN`: loopback unless allowed otherwise, or a Unix socket.
    pub listen: ListenAddr,
    /// The Unix socket's permissions, when `listen` is one.
    pub listen_mode: FileMode,
    /// Time to the upstream's response headers (`LANYARD_UPSTREAM_TIMEOUT`).
    pub upstream_timeout: Duration,
    /// Longest silence within a request body (`LANYARD_BODY_TIMEOUT`).
    pub body_timeout: Duration,
    /// Upstream connections, all threads (`LANYARD_MAX_UPSTREAM_CONNECTIONS`).
    pub max_upstream_connections: usize,
    /// Threads, one runtime each (`LANYARD_WORKER_THREADS`).
    pub worker_threads: usize,
    /// A client's time to send a request head, and a kept-alive
    /// connection's idle time (`LANYARD_HEADER_TIMEOUT`).
    pub header_timeout: Duration,
    /// How long a client may take none of an answer (`LANYARD_SEND_TIMEOUT`).
    pub send_timeout: Duration,
    pub max_header_bytes: usize,
    /// Client connections (`LANYARD_MAX_CONNECTIONS`), before open files lower it.
    pub max_connections: usize,
}

impl ProxyConfig {
    /// The proxy's settings beside its address ([`listen`], read first,
    /// as its problem is reported first), in the order their problems are
    /// reported; the verifier and the admin listener take the ones they
    /// share (timeouts, header size, connections) from here, read once.
    pub(super) fn read(
        l: &mut Layers<'_>,
        (listen, listen_mode): (ListenAddr, FileMode),
    ) -> ProxyConfig {
        ProxyConfig {
            listen,
            listen_mode,
            upstream_timeout: l.value(&UPSTREAM_TIMEOUT),
            header_timeout: l.value(&HEADER_TIMEOUT),
            body_timeout: l.value(&BODY_TIMEOUT),
            send_timeout: l.value(&SEND_TIMEOUT),
            max_header_bytes: l.value(&MAX_HEADER_BYTES).0,
            max_upstream_connections: l.value(&MAX_UPSTREAM_CONNECTIONS),
            max_connections: l.value(&MAX_CONNECTIONS),
            worker_threads: l.value(&WORKER_THREADS),
        }
    }
}

/// The proxy's address: loopback unless `LANYARD_ALLOW_REMOTE` says
/// otherwise, since anyone who reaches it acts as the service account; or
/// a Unix socket, with its permissions.
pub(super) fn listen(l: &mut Layers<'_>) -> (ListenAddr, FileMode) {
    let allow_remote = l.value(&ALLOW_REMOTE);
    let mode = l.optional(&LISTEN_MODE);
    let listen = match l.optional(&LISTEN) {
        Some(Sourced {
            value: ListenAddr::Tcp(addr),
            source,
        }) if !addr.ip().is_loopback() && !allow_remote => {
            let why = format!(
                "{addr} is not a loopback address; anyone who can reach the proxy acts as the service account. Set {}=true to allow it, or listen on a Unix socket (unix:/path)",
                ALLOW_REMOTE.env
            );
            l.problem(LISTEN.env, &source, &why);
            LISTEN.default_value()
        }
        Some(listen) => listen.value,
        None => LISTEN.default_value(),
    };
    // A mode other than the default, given for a TCP listener, is a
    // mistake worth a word; the default itself changes nothing.
    if let (ListenAddr::Tcp(_), Some(mode)) = (&listen, &mode)
        && mode.value != LISTEN_MODE.default_value()
    {
        l.warnings.push(format!(
            "{} ({}): applies to a Unix socket only; {} is a TCP address, so it is ignored",
            LISTEN_MODE.env,
            mode.source,
            listen.shown()
        ));
    }
    (
        listen,
        mode.map_or_else(|| LISTEN_MODE.default_value(), |mode| mode.value),
    )
}
