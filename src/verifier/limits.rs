//! How fast sessions may be started, per client and in all, and how fast
//! one replica calls the service, starts and polls together (docs/verifier.md
//! "Limits of the verifier"). The service's rate limits exist though docs/service.md
//! does not give them (docs/service.md §8); one client's flood must not
//! spend them. The limiters are governor's GCRA, the starts keyed by
//! client; the rates are settings (`LANYARD_VERIFIER_CLIENT_STARTS`,
//! `LANYARD_VERIFIER_STARTS`, `LANYARD_VERIFIER_SERVICE_CALLS`).

use std::net::IpAddr;
use std::time::Duration;

use governor::clock::Clock;
use governor::state::keyed::HashMapStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};

use crate::config::{Rate, VerifierRates};

/// A client as the limiter counts it: the listener's own key (an IPv4
/// address, or an IPv6 /64), so the two limits agree on who one client is.
pub use crate::server::Client;

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
pub enum TooManyStarts {
    /// This client started too many.
    Client { retry_after: Duration },
    /// Everyone together did.
    Everyone { retry_after: Duration },
}

/// The two start limits.
pub struct StartLimits {
    clock: TokioClock,
    per_client: RateLimiter<Client, HashMapStateStore<Client>, TokioClock>,
    everyone: RateLimiter<NotKeyed, InMemoryState, TokioClock>,
}

/// governor's time, read from tokio's clock (docs/tests.md), so that the
/// limits run on the paused clock in tests like every other timing rule.
/// governor counts in `std::time::Instant`s; tokio's converts to one.
#[derive(Debug, Clone, Copy, Default)]
pub struct TokioClock;

#[allow(
    clippy::disallowed_types,
    reason = "governor's instants are std's; the time is tokio's"
)]
impl Clock for TokioClock {
    type Instant = std::time::Instant;

    fn now(&self) -> Self::Instant {
        tokio::time::Instant::now().into_std()
    }
}

/// A GCRA quota for a rate: its burst at once, then one a period.
fn quota(rate: Rate) -> Quota {
    Quota::with_period(rate.period())
        .map_or(Quota::per_second(rate.burst), |q| q.allow_burst(rate.burst))
}

impl StartLimits {
    pub fn new(rates: &VerifierRates) -> StartLimits {
        StartLimits {
            clock: TokioClock,
            per_client: RateLimiter::hashmap_with_clock(quota(rates.client_starts), TokioClock),
            everyone: RateLimiter::direct_with_clock(quota(rates.starts), TokioClock),
        }
    }

    /// Takes one start for `client`, or says why not. The client's own
    /// limit is checked first, so a client over it spends nothing of the
    /// limit everyone shares.
    pub fn take(&self, client: Client) -> Result<(), TooManyStarts> {
        let now = self.clock.now();
        self.per_client
            .check_key(&client)
            .map_err(|wait| TooManyStarts::Client {
                retry_after: wait.wait_time_from(now),
            })?;
        self.everyone
            .check()
            .map_err(|wait| TooManyStarts::Everyone {
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

/// The calls one replica may make to the service, starts and polls
/// together: whatever the number of sessions, their polls cannot ask the
/// service faster than this.
pub struct ServiceBudget {
    calls: RateLimiter<NotKeyed, InMemoryState, TokioClock>,
}

impl ServiceBudget {
    pub fn new(rate: Rate) -> ServiceBudget {
        ServiceBudget {
            calls: RateLimiter::direct_with_clock(quota(rate), TokioClock),
        }
    }

    /// Takes one call, or says it is spent for now.
    pub fn take(&self) -> bool {
        self.calls.check().is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rates() -> VerifierRates {
        VerifierRates::default()
    }

    #[test]
    fn one_client_gets_its_burst_and_no_more() {
        let rates = rates();
        let limits = StartLimits::new(&rates);
        let me = Client::of("192.0.2.1".parse().unwrap());
        for _ in 0..rates.client_starts.burst.get() {
            limits.take(me).unwrap();
        }
        let Err(TooManyStarts::Client { retry_after }) = limits.take(me) else {
            panic!("an 11th start in a burst went through");
        };
        assert!(retry_after > Duration::ZERO && retry_after <= rates.client_starts.period());
        let other = Client::of("192.0.2.2".parse().unwrap());
        limits.take(other).unwrap();
    }

    #[test]
    fn everyone_together_is_bounded_too() {
        let rates = rates();
        let limits = StartLimits::new(&rates);
        let refused = (0..=rates.starts.burst.get())
            .map(|n| Client::of(IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + n))))
            .filter(|client| limits.take(*client).is_err())
            .count();
        assert_eq!(refused, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_client_gets_one_more_start_each_period_after_its_burst() {
        let rates = rates();
        let limits = StartLimits::new(&rates);
        let me = Client::of("192.0.2.1".parse().unwrap());
        for _ in 0..rates.client_starts.burst.get() {
            limits.take(me).unwrap();
        }
        let Err(TooManyStarts::Client { retry_after }) = limits.take(me) else {
            panic!("a start past the burst went through");
        };
        assert_eq!(retry_after, rates.client_starts.period());
        tokio::time::advance(retry_after - Duration::from_millis(1)).await;
        assert!(limits.take(me).is_err(), "not a moment early");
        tokio::time::advance(Duration::from_millis(1)).await;
        limits.take(me).unwrap();
        assert!(limits.take(me).is_err(), "one, not two");
    }

    #[tokio::test(start_paused = true)]
    async fn the_service_budget_refills_at_its_rate() {
        let budget = ServiceBudget::new(Rate::parse("2/1s").unwrap());
        assert_eq!((0..5).filter(|_| budget.take()).count(), 2);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert!(budget.take());
        assert!(!budget.take());
    }

    #[test]
    fn the_service_budget_lets_its_burst_through_then_refuses() {
        let rate = Rate::parse("3/1h").unwrap();
        let budget = ServiceBudget::new(rate);
        let taken = (0..10).filter(|_| budget.take()).count();
        assert_eq!(taken, 3);
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
}
