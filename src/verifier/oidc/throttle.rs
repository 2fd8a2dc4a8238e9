//! Failed client authentications at the token endpoint, counted per
//! client and per address (docs/oidc.md, "Client authentication"), so
//! that a client secret cannot be guessed at the speed of the network.
//!
//! Each count is a leaky bucket of failures: one more per failure, and it
//! drains at its budget per minute. Past its budget, an address gets 429
//! for every token request until a failure has drained. A client's own
//! bucket never locks the client out from everywhere: past its budget,
//! only addresses with a failure of their own still draining are refused,
//! and a failure for that client fills the address's bucket at once, so
//! that each address of many guesses at most once a minute while a right
//! secret from an address with no failures passes.
//!
//! Per replica, in memory, on tokio's clock; the address table is bounded
//! ([`MAX_ADDRESSES`]), and the client table holds registered clients
//! only. The bucket and the bounded table serve `userinfo_limit` too.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::verifier::limits::Client as Address;

/// Failures one client may have a minute before addresses with failures
/// of their own are refused for it: more than a misconfigured relying
/// party's retries, far fewer than guessing needs.
pub const CLIENT_FAILURES_PER_MINUTE: u32 = 10;
/// Failures one address (an IPv4 address, an IPv6 /64) may have a minute,
/// for any clients: a few relying parties behind one NAT mistyping a
/// secret stay under it.
pub const ADDRESS_FAILURES_PER_MINUTE: u32 = 20;
/// Addresses with failures still draining that one replica remembers;
/// past it, drained ones go first, then those with the fewest failures.
pub const MAX_ADDRESSES: usize = 10_000;

const MINUTE: Duration = Duration::from_secs(60);

/// Events (failures, calls) not yet drained, as of `at`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Bucket {
    level: f64,
    at: Instant,
}

impl Bucket {
    pub(super) fn empty(now: Instant) -> Bucket {
        Bucket {
            level: 0.0,
            at: now,
        }
    }

    /// The level at `now`, drained at `budget` a minute.
    pub(super) fn level(&self, budget: u32, now: Instant) -> f64 {
        let drained = now.saturating_duration_since(self.at).as_secs_f64() * rate(budget);
        (self.level - drained).max(0.0)
    }

    pub(super) fn add(&mut self, amount: f64, budget: u32, now: Instant) {
        self.level = (self.level(budget, now) + amount).min(f64::from(budget));
        self.at = now;
    }
}

/// Failures drained per second.
fn rate(budget: u32) -> f64 {
    f64::from(budget) / MINUTE.as_secs_f64()
}

/// How long until `level` drains to `to`.
pub(super) fn until(level: f64, to: f64, budget: u32) -> Duration {
    Duration::from_secs_f64(((level - to).max(0.0) / rate(budget)).min(MINUTE.as_secs_f64()))
}

/// The two counts.
#[derive(Debug, Default)]
pub struct Throttle {
    clients: Mutex<HashMap<String, Bucket>>,
    addresses: Mutex<HashMap<Address, Bucket>>,
}

impl Throttle {
    /// Whether a token request from `address` for `client` (registered,
    /// or `None` when it names none) may be authenticated now; else how
    /// long to wait.
    pub fn check(
        &self,
        client: Option<&str>,
        address: Address,
        now: Instant,
    ) -> Result<(), Duration> {
        let own = lock(&self.addresses)
            .get(&address)
            .map_or(0.0, |b| b.level(ADDRESS_FAILURES_PER_MINUTE, now));
        let budget = f64::from(ADDRESS_FAILURES_PER_MINUTE);
        let mut wait = Duration::ZERO;
        if own > budget - 1.0 {
            wait = until(own, budget - 1.0, ADDRESS_FAILURES_PER_MINUTE);
        }
        let client_level = client
            .and_then(|id| lock(&self.clients).get(id).copied())
            .map_or(0.0, |b| b.level(CLIENT_FAILURES_PER_MINUTE, now));
        if client_level > f64::from(CLIENT_FAILURES_PER_MINUTE) - 1.0 && own > 0.0 {
            wait = wait.max(until(own, 0.0, ADDRESS_FAILURES_PER_MINUTE));
        }
        match wait.is_zero() {
            true => Ok(()),
            false => Err(wait),
        }
    }

    /// A failed authentication from `address`, for `client` when the
    /// request named a registered one.
    pub fn failed(&self, client: Option<&str>, address: Address, now: Instant) {
        let mut weight = 1.0;
        if let Some(id) = client {
            let mut clients = lock(&self.clients);
            let bucket = clients.entry(id.to_string()).or_insert(Bucket::empty(now));
            let budget = CLIENT_FAILURES_PER_MINUTE;
            if bucket.level(budget, now) > f64::from(budget) - 1.0 {
                // The client is being guessed at: this address is done
                // for a minute.
                weight = f64::from(ADDRESS_FAILURES_PER_MINUTE);
            }
            bucket.add(1.0, budget, now);
        }
        let mut addresses = lock(&self.addresses);
        let budget = ADDRESS_FAILURES_PER_MINUTE;
        make_room(&mut addresses, &address, (budget, MAX_ADDRESSES), now);
        addresses
            .entry(address)
            .or_insert(Bucket::empty(now))
            .add(weight, budget, now);
    }

    /// Forgets the buckets that drained.
    pub fn sweep(&self, now: Instant) {
        lock(&self.addresses).retain(|_, b| b.level(ADDRESS_FAILURES_PER_MINUTE, now) > 0.0);
        lock(&self.clients).retain(|_, b| b.level(CLIENT_FAILURES_PER_MINUTE, now) > 0.0);
    }

    #[cfg(test)]
    fn addresses(&self) -> usize {
        lock(&self.addresses).len()
    }
}

/// Room in `table`, of buckets draining at `budget` a minute and at most
/// `max` of them, for `key` when it is not there yet: the drained ones go,
/// or else the one with the lowest level.
pub(super) fn make_room<K: Hash + Eq + Clone>(
    table: &mut HashMap<K, Bucket>,
    key: &K,
    (budget, max): (u32, usize),
    now: Instant,
) {
    if table.contains_key(key) || table.len() < max {
        return;
    }
    table.retain(|_, b| b.level(budget, now) > 0.0);
    if table.len() < max {
        return;
    }
    let least = table
        .iter()
        .map(|(key, b)| (key, b.level(budget, now)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(key, _)| key.clone());
    if let Some(least) = least {
        table.remove(&least);
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(n: u32) -> Address {
        Address::of(std::net::IpAddr::V4(std::net::Ipv4Addr::from(
            0x0a00_0000 + n,
        )))
    }

    fn close(a: Duration, b: Duration) -> bool {
        a.abs_diff(b) < Duration::from_millis(1)
    }

    #[tokio::test(start_paused = true)]
    async fn an_address_past_its_budget_waits_until_a_failure_drained() {
        let throttle = Throttle::default();
        let now = Instant::now();
        for n in 0..ADDRESS_FAILURES_PER_MINUTE {
            // Unknown clients: the address alone counts.
            assert_eq!(throttle.check(None, at(1), now), Ok(()), "failure {n}");
            throttle.failed(None, at(1), now);
        }
        let wait = throttle.check(None, at(1), now).unwrap_err();
        assert!(
            close(wait, MINUTE / ADDRESS_FAILURES_PER_MINUTE),
            "{wait:?}"
        );
        assert_eq!(throttle.check(None, at(2), now), Ok(()), "another address");
        let later = now + wait + Duration::from_millis(1);
        assert_eq!(throttle.check(None, at(1), later), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_guessed_client_still_authenticates_from_an_address_without_failures() {
        let throttle = Throttle::default();
        let now = Instant::now();
        for n in 0..CLIENT_FAILURES_PER_MINUTE {
            throttle.failed(Some("shop"), at(n), now);
        }
        // Past the client's budget: an address that failed is refused for
        // it, one that did not passes, and a failure from a new address
        // ends that address's tries for a minute.
        assert!(throttle.check(Some("shop"), at(0), now).is_err());
        assert_eq!(throttle.check(Some("shop"), at(100), now), Ok(()));
        throttle.failed(Some("shop"), at(101), now);
        let wait = throttle.check(Some("shop"), at(101), now).unwrap_err();
        assert!(close(wait, MINUTE), "{wait:?}");
        let other = throttle.check(Some("other"), at(101), now).unwrap_err();
        assert!(
            close(other, MINUTE / ADDRESS_FAILURES_PER_MINUTE),
            "{other:?}"
        );
        assert_eq!(throttle.check(Some("other"), at(0), now), Ok(()));
    }

    #[tokio::test(start_paused = true)]
    async fn the_address_table_is_bounded_and_drained_ones_are_forgotten() {
        let throttle = Throttle::default();
        let now = Instant::now();
        for n in 0..MAX_ADDRESSES as u32 + 10 {
            throttle.failed(None, at(n), now);
        }
        assert_eq!(throttle.addresses(), MAX_ADDRESSES);
        throttle.sweep(now + MINUTE);
        assert_eq!(throttle.addresses(), 0);
    }
}
