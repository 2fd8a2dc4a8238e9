//! How fast sessions may be started: per client, and in all (README "The
//! verifier", Limits). Each start costs a call to the service, whose rate
//! limits exist though the seed does not give them (docs/service.md §8),
//! and a session held for its lifetime; one client's flood must spend
//! neither. The limiter is governor's GCRA, keyed by client.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock, MonotonicClock};
use governor::state::keyed::HashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

/// Starts one client may make in a burst: a person restarting a few
/// times, or a few people behind one address.
const CLIENT_BURST: NonZeroU32 = NonZeroU32::new(10).unwrap();
/// After the burst, one start per client this often (10 a minute).
const CLIENT_PERIOD: Duration = Duration::from_secs(6);
/// Starts in all: a burst of this many ...
const GLOBAL_BURST: NonZeroU32 = NonZeroU32::new(50).unwrap();
/// ... then one this often (10 a second): well beyond one verifier's
/// visitors, and a ceiling on what it asks of the service.
const GLOBAL_PERIOD: Duration = Duration::from_millis(100);

/// A client as the limiter counts it: an IPv4 address, or an IPv6 /64,
/// the block one subscriber is usually given (RFC 6177), so one network
/// cannot pass for many clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Client(IpAddr);

impl Client {
    pub fn of(addr: IpAddr) -> Client {
        match addr {
            IpAddr::V4(v4) => Client(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Client(IpAddr::V4(v4)),
                None => {
                    let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                    Client(IpAddr::V6(prefix.into()))
                }
            },
        }
    }
}

/// The address a client connected from: the peer's, or, behind `hops`
/// trusted proxies, the one the outermost of them saw. Each proxy appends
/// the address it received from to `X-Forwarded-For`, so that one is
/// `hops` entries from the end; entries before it are the client's to
/// write, and are ignored. A request with fewer entries than that did not
/// come through the proxies, and is keyed on its peer.
pub fn client_address(headers: &http::HeaderMap, peer: IpAddr, hops: usize) -> IpAddr {
    if hops == 0 {
        return peer;
    }
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(str::trim)
        .collect();
    entries
        .len()
        .checked_sub(hops)
        .and_then(|at| parse_forwarded(entries[at]))
        .unwrap_or(peer)
}

/// An address as proxies write it: bare, or with a port.
fn parse_forwarded(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<std::net::SocketAddr>().ok().map(|a| a.ip()))
}

/// Why a start was not let through, and when one may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// This client started too many.
    Client { retry_after: Duration },
    /// Everyone together did.
    Everyone { retry_after: Duration },
}

/// The two limits.
pub struct StartLimits {
    clock: MonotonicClock,
    per_client: RateLimiter<Client, HashMapStateStore<Client>, MonotonicClock>,
    everyone: RateLimiter<NotKeyed, InMemoryState, MonotonicClock>,
}

impl Default for StartLimits {
    fn default() -> Self {
        StartLimits::new()
    }
}

impl StartLimits {
    pub fn new() -> StartLimits {
        let per_client = Quota::with_period(CLIENT_PERIOD)
            .map_or(Quota::per_minute(CLIENT_BURST), |q| {
                q.allow_burst(CLIENT_BURST)
            });
        let everyone = Quota::with_period(GLOBAL_PERIOD)
            .map_or(Quota::per_second(GLOBAL_BURST), |q| {
                q.allow_burst(GLOBAL_BURST)
            });
        StartLimits {
            clock: MonotonicClock,
            per_client: RateLimiter::hashmap_with_clock(per_client, MonotonicClock),
            everyone: RateLimiter::direct_with_clock(everyone, MonotonicClock),
        }
    }

    /// Takes one start for `client`, or says why not. The client's own
    /// limit is checked first, so a client over it spends nothing of the
    /// limit everyone shares.
    pub fn take(&self, client: Client) -> Result<(), Refused> {
        let now = self.clock.now();
        self.per_client
            .check_key(&client)
            .map_err(|wait| Refused::Client {
                retry_after: wait.wait_time_from(now),
            })?;
        self.everyone.check().map_err(|wait| Refused::Everyone {
            retry_after: wait.wait_time_from(now),
        })
    }

    /// Forgets clients whose limit has refilled, so the table holds only
    /// the clients of the last minute or so.
    pub fn forget_idle_clients(&self) {
        self.per_client.retain_recent();
        self.per_client.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_client_gets_its_burst_and_no_more() {
        let limits = StartLimits::new();
        let me = Client::of("192.0.2.1".parse().unwrap());
        for _ in 0..CLIENT_BURST.get() {
            limits.take(me).unwrap();
        }
        let Err(Refused::Client { retry_after }) = limits.take(me) else {
            panic!("an 11th start in a burst went through");
        };
        assert!(retry_after > Duration::ZERO && retry_after <= CLIENT_PERIOD);
        let other = Client::of("192.0.2.2".parse().unwrap());
        limits.take(other).unwrap();
    }

    #[test]
    fn everyone_together_is_bounded_too() {
        let limits = StartLimits::new();
        let refused = (0..=GLOBAL_BURST.get())
            .map(|n| Client::of(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n))))
            .filter(|client| limits.take(*client).is_err())
            .count();
        assert_eq!(refused, 1);
    }

    #[test]
    fn behind_trusted_proxies_the_client_is_what_the_outermost_one_saw() {
        let peer: IpAddr = "10.0.0.9".parse().unwrap();
        let mut headers = http::HeaderMap::new();
        assert_eq!(client_address(&headers, peer, 1), peer, "no header");
        headers.insert(
            "x-forwarded-for",
            http::HeaderValue::from_static("203.0.113.5, 198.51.100.7"),
        );
        assert_eq!(client_address(&headers, peer, 0), peer, "nothing trusted");
        assert_eq!(
            client_address(&headers, peer, 1),
            "198.51.100.7".parse::<IpAddr>().unwrap(),
            "the client's own entry (203.0.113.5) is not believed"
        );
        assert_eq!(
            client_address(&headers, peer, 2),
            "203.0.113.5".parse::<IpAddr>().unwrap()
        );
        assert_eq!(client_address(&headers, peer, 3), peer, "too few entries");
        headers.insert(
            "x-forwarded-for",
            http::HeaderValue::from_static("[2001:db8::1]:443"),
        );
        assert_eq!(
            client_address(&headers, peer, 1),
            "2001:db8::1".parse::<IpAddr>().unwrap()
        );
        headers.insert("x-forwarded-for", http::HeaderValue::from_static("unknown"));
        assert_eq!(client_address(&headers, peer, 1), peer);
    }

    #[test]
    fn an_ipv6_network_counts_as_one_client() {
        let a = Client::of("2001:db8:1:2::1".parse().unwrap());
        let b = Client::of("2001:db8:1:2:ffff::9".parse().unwrap());
        let c = Client::of("2001:db8:1:3::1".parse().unwrap());
        assert_eq!(a, b);
        assert_ne!(a, c);
        let mapped = Client::of("::ffff:192.0.2.1".parse().unwrap());
        assert_eq!(mapped, Client::of("192.0.2.1".parse().unwrap()));
    }
}
