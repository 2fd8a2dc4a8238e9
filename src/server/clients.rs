//! The connections each client holds, for a listener that caps them per
//! client: one address must not take the slots every other client needs.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};

/// A client as a per-client limit counts it: an IPv4 address, or an IPv6
/// /64, the block one subscriber is usually given (RFC 6177), so that one
/// network cannot pass for many clients. An IPv4-mapped IPv6 address is
/// its IPv4 address.
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

/// The connections each client holds across a group's accept loops.
///
/// The table holds only clients with a connection open, so it is bounded
/// by the connection limit.
#[derive(Debug)]
pub(super) struct PerClient {
    max: usize,
    held: Mutex<HashMap<Client, usize>>,
}

impl PerClient {
    pub(super) fn new(max: usize) -> Arc<PerClient> {
        Arc::new(PerClient {
            max,
            held: Mutex::new(HashMap::new()),
        })
    }

    /// One more connection for `peer`'s client, or `None` when it holds
    /// its cap already.
    pub(super) fn admit(self: &Arc<Self>, peer: IpAddr) -> Option<ClientSlot> {
        let client = Client::of(peer);
        let mut held = self.lock();
        let count = held.entry(client).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(ClientSlot {
            table: self.clone(),
            client,
        })
    }

    /// Clients holding a connection now.
    #[cfg(test)]
    fn clients(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Client, usize>> {
        // The table is consistent after every statement that changes it,
        // so a panic elsewhere while it was held leaves nothing half-done.
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One connection in its client's count, until dropped.
#[derive(Debug)]
pub(super) struct ClientSlot {
    table: Arc<PerClient>,
    client: Client,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let mut held = self.table.lock();
        if let Some(count) = held.get_mut(&self.client) {
            *count -= 1;
            if *count == 0 {
                held.remove(&self.client);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn an_ipv6_network_counts_as_one_client() {
        let a = Client::of(ip("2001:db8:1:2::1"));
        assert_eq!(a, Client::of(ip("2001:db8:1:2:ffff::9")));
        assert_ne!(a, Client::of(ip("2001:db8:1:3::1")));
        assert_eq!(
            Client::of(ip("::ffff:192.0.2.1")),
            Client::of(ip("192.0.2.1"))
        );
        assert_ne!(Client::of(ip("192.0.2.1")), Client::of(ip("192.0.2.2")));
    }

    #[test]
    fn a_client_at_its_cap_is_refused_until_one_of_its_connections_ends() {
        let table = PerClient::new(2);
        let first = table.admit(ip("192.0.2.1")).unwrap();
        let _second = table.admit(ip("192.0.2.1")).unwrap();
        assert!(table.admit(ip("192.0.2.1")).is_none());
        let _other = table.admit(ip("192.0.2.2")).expect("another client");
        drop(first);
        assert!(table.admit(ip("192.0.2.1")).is_some());
    }

    #[test]
    fn a_client_with_no_connection_is_forgotten() {
        let table = PerClient::new(4);
        let slots: Vec<_> = (0..3).map(|_| table.admit(ip("2001:db8::1"))).collect();
        assert_eq!(table.clients(), 1);
        drop(slots);
        assert_eq!(table.clients(), 0);
    }
}
