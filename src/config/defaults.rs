//! The settings' defaults and bounds, each with why it is what it is. The
//! table (`settings.rs`) declares each setting with these; the loader and
//! other components read a few of them by name.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

/// Loopback only: anyone who can reach the proxy acts as the service account.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 8080));
/// All interfaces, so kubelet probes and Prometheus can reach it; it serves
/// health and metrics only, never a token.
pub const DEFAULT_ADMIN_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 9090));
/// `lanyard demo`'s admin listener, on loopback like the rest of the demo.
pub const DEMO_ADMIN_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 9090));
/// The reference application listens on 8080 in its container
/// (docs/service.md §8), on every interface: browsers reach it.
pub const DEFAULT_VERIFIER_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8080));
/// `lanyard demo` serves the verifier beside the proxy's 8080, on loopback:
/// its wallet is the mock's, which only this machine reaches.
pub const DEMO_VERIFIER_LISTEN: SocketAddr =
    SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(127, 0, 0, 1), 8081));
/// Long enough to find a phone, open the wallet and consent; short enough
/// that an abandoned session stops being polled and held soon.
pub const DEFAULT_VERIFIER_SESSION_TTL: Duration = Duration::from_secs(300);
/// docs/service.md suggests one hour, and its token endpoint refuses longer.
pub const DEFAULT_ASSERTION_TTL: Duration = Duration::from_secs(3600);
/// Upper bound of the assertion lifetime: the service refuses longer (see
/// docs/tokens.md "Token exchange").
pub const MAX_ASSERTION_TTL: Duration = Duration::from_secs(3600);
/// Backdating `iat` beyond this would hide a broken clock rather than
/// tolerate a drifting one.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(300);
/// Time to response headers; generous because some API calls do real work.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(30);
/// A token endpoint that has not answered in 10 s is better retried than
/// waited on; the held token keeps serving meanwhile.
pub const DEFAULT_TOKEN_TIMEOUT: Duration = Duration::from_secs(10);
/// A token is retired this long before the expiry its `expires_in` gives:
/// a JWT's `exp` is whole seconds (up to 1 s sooner), the request takes
/// its latency to arrive, and the API's clock may run ahead of ours. Ten
/// seconds covers all three with room; see docs/tokens.md "Token lifetime".
pub const DEFAULT_EXPIRY_MARGIN: Duration = Duration::from_secs(10);
/// Below Kubernetes' default 30 s termination grace period, so lanyard
/// finishes draining before the kubelet kills it.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(20);
/// A client that has not sent a request's headers by now, on a new or an
/// idle keep-alive connection, is disconnected, so slow or idle
/// connections cannot pile up.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// A request body silent this long is given up: the HTTP/1.1 connection is
/// closed, the HTTP/2 stream reset. Of the order of the header timeout, so
/// a client stalling its body holds a connection no longer than one
/// stalling its headers.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);
/// An answer whose client takes none of its bytes this long is given up:
/// the HTTP/1.1 connection is closed, the HTTP/2 stream reset. A client
/// that reads, however slowly, is never cut; one that stopped reading
/// holds its connection (and its place under the limits) no longer than
/// one stalling its headers or its body would.
pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// Request header bytes per connection (HTTP/1.1: the whole request head;
/// HTTP/2: each header list). Envoy allows 60 KiB and nginx 32 KiB; API
/// clients send a few KiB. With the connection limit it bounds memory
/// (docs/proxy.md "Limits").
pub const DEFAULT_MAX_HEADER_BYTES: usize = 64 * 1024;
/// hyper's smallest read buffer: a request head must fit in one.
pub const MIN_MAX_HEADER_BYTES: usize = 8 * 1024;
/// Beyond this a header limit is no limit.
pub const MAX_MAX_HEADER_BYTES: usize = 1024 * 1024;
/// One app's connection pool needs tens of connections; a thousand leaves
/// room for bursts while keeping memory and file descriptors bounded.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Far beyond what one app needs, and what one process can hold open.
pub const MAX_MAX_CONNECTIONS: usize = 1 << 20;
/// Upstream connections across all proxy threads: an app's concurrency is
/// tens of requests, and each HTTP/2 stream from a client no longer costs a
/// connection of its own; beyond it, requests wait for a pooled one.
pub const DEFAULT_MAX_UPSTREAM_CONNECTIONS: usize = 256;
/// More than one process should hold to one upstream.
pub const MAX_MAX_UPSTREAM_CONNECTIONS: usize = 65_536;
/// A sidecar shares its pod's CPUs with the app: by default one runtime
/// thread per CPU the process may use (cgroup quotas included), at most
/// this many, as Istio caps Envoy at two.
pub const DEFAULT_MAX_WORKER_THREADS: usize = 4;
/// More proxies in a row than any deployment puts in front of an app.
pub const MAX_FORWARDED_HOPS: usize = 8;
/// More threads than this is a typo, not a tuning.
pub const MAX_WORKER_THREADS: usize = 256;

/// One per CPU this process may use, up to [`DEFAULT_MAX_WORKER_THREADS`].
pub(super) fn default_worker_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, usize::from)
        .min(DEFAULT_MAX_WORKER_THREADS)
}
