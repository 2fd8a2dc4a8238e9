//! One accept loop: each new connection admitted under the per-client cap
//! and the connection limit (taking an idle connection's place when the
//! listener evicts), or refused; then the drain.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

use crate::throttle::{self, Throttle};

use super::activity::Activity;
use super::balance::{Held, Taken, take};
use super::clients::{ClientSlot, PerClient};
use super::connection::{Protocols, Serving, serve_connection};
use super::{Client, ConnectionMetrics, Drained, Handler, Limits, Listener, Member, Peer, Stream};

/// A failing `accept` (usually out of file descriptors) is retried after
/// this pause rather than in a busy loop.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(100);
/// A refused connection gets this long to take its 503 before it is
/// closed; reading the client's request meanwhile keeps the close from
/// turning into a reset that would discard the answer.
const REFUSAL_LINGER: Duration = Duration::from_millis(500);
/// RefusalAnswers being answered at once; beyond this, a flood is closed
/// without an answer rather than spending tasks on it.
const MAX_REFUSALS_IN_FLIGHT: usize = 64;
/// Turns of the thread's tasks an eviction waits, at most, for the evicted
/// connection to end. A turn runs up to 61 tasks (tokio's `LocalSet`), and
/// those queued before the evicted one are at most the connections and
/// refusals this thread holds: this covers 4096 of them with room to spare.
const EVICTION_TURNS: usize = 128;

pub(super) async fn accept_loop<H: Handler, S>(
    listener: Listener,
    handler: Rc<H>,
    shutdown: impl Future<Output = S>,
    grace: Duration,
    limits: Limits,
    metrics: Option<ConnectionMetrics>,
    mut share: Member,
) -> Drained {
    let mut shutdown = pin!(shutdown);
    // Asks every connection to finish what it is doing and close.
    let (stopping_tx, stopping) = watch::channel(false);
    let mut acceptor = Acceptor {
        handler,
        protocols: Rc::new(Protocols::new(&limits)),
        header_bytes: share.group.header_bytes.clone(),
        streams: share.group.streams.clone(),
        stopping,
        connections: JoinSet::new(),
        evictable: limits.evict_idle.then(VecDeque::new),
        refusals: RefusalAnswers::new(&limits),
        metrics,
        displaces_own: limits
            .per_client
            .as_ref()
            .is_some_and(|cap| cap.displaces_own),
    };
    let stopped = loop {
        let taken = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => acceptor.admit(stream, peer, &share).await,
                Err(err) => {
                    tracing::warn!(error = %err, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                    None
                }
            },
            Some(handed) = share.inbox.recv() => {
                acceptor.reap();
                take(handed)
            }
            stopped = &mut shutdown => break stopped,
        };
        if let Some(taken) = taken {
            acceptor.serve(taken);
        }
    };
    drop(listener);
    drop(stopped);
    // Connections handed over before this thread stopped are served as
    // those accepted here were; once the inbox is closed, a thread still
    // accepting keeps its connections.
    share.inbox.close();
    while let Ok(handed) = share.inbox.try_recv() {
        if let Some(taken) = take(handed) {
            acceptor.serve(taken);
        }
    }
    let _ = stopping_tx.send(true);
    acceptor.drain(grace).await
}

/// One accept loop's state: what it serves connections with, and the
/// connections it holds.
struct Acceptor<H> {
    handler: Rc<H>,
    protocols: Rc<Protocols>,
    /// The group's budget for HTTP/2 request headers in flight.
    header_bytes: Arc<Semaphore>,
    /// The group's budget for HTTP/2 streams in flight.
    streams: Arc<Semaphore>,
    stopping: watch::Receiver<bool>,
    /// Owned here so connections still open when the grace runs out are
    /// aborted, not left running detached.
    connections: JoinSet<()>,
    /// Every connection served here, oldest first, when the listener
    /// evicts idle ones at its limit.
    evictable: Option<VecDeque<Tracked>>,
    refusals: RefusalAnswers,
    metrics: Option<ConnectionMetrics>,
    /// `ClientCap::displaces_own`.
    displaces_own: bool,
}

/// A connection as eviction sees it: whether it has a request in flight,
/// and whose it is.
struct Tracked {
    task: AbortHandle,
    activity: Arc<Activity>,
    client: Client,
}

impl<H: Handler> Acceptor<H> {
    /// A new connection's place under the per-client cap and the
    /// connection limit, and the thread that serves it; `None` when it was
    /// refused or handed to another thread.
    async fn admit(&mut self, stream: Stream, peer: Peer, share: &Member) -> Option<Taken> {
        self.reap();
        // The cap comes first: a client over it must not evict anyone else.
        let client = match &share.group.clients {
            Some(clients) => match self.client_slot(clients, peer).await {
                Some(held) => Some(held),
                None => {
                    self.refuse(stream, peer, Refused::ClientCap);
                    return None;
                }
            },
            None => None,
        };
        let Some(slot) = self.slot(&share.group.slots).await else {
            self.refuse(stream, peer, Refused::Limit);
            return None;
        };
        share.place(stream, peer, Held { slot, client })
    }

    /// A place in `peer`'s client's count: a free one, or, when the
    /// listener evicts, one that an idle connection of the same client gave
    /// up. A client at its cap displaces only itself, so a neighbour that
    /// shares the kubelet's address (a host-network pod, NodePort traffic)
    /// cannot keep the probes out by holding connections it does not use.
    async fn client_slot(&mut self, clients: &Arc<PerClient>, peer: Peer) -> Option<ClientSlot> {
        if let Some(held) = clients.admit(peer.ip()) {
            return Some(held);
        }
        if !self.displaces_own {
            return None;
        }
        self.evict(Some(Client::of(peer.ip()))).await;
        clients.admit(peer.ip())
    }

    /// A slot under the connection limit: a free one, or, when the
    /// listener evicts, the one an idle connection gave up.
    async fn slot(&mut self, slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = slots.clone().try_acquire_owned() {
            return Some(slot);
        }
        self.evict(None).await;
        slots.clone().try_acquire_owned().ok()
    }

    /// Closes the connection (of `client`'s, when given) whose loss costs
    /// least, if the listener evicts and one has no request in flight, and
    /// waits for it to end.
    async fn evict(&mut self, client: Option<Client>) {
        let Some(evictable) = self.evictable.as_mut() else {
            return;
        };
        let Some(evicted) = evict_one(evictable, client) else {
            return;
        };
        if let Some(counter) = self.metrics.as_ref().and_then(|m| m.evicted.as_ref()) {
            counter.inc();
        }
        // The evicted connection gives its places back (and closes its
        // socket) once its task is dropped, which happens as this thread
        // runs the tasks queued before it: waiting for that, rather than
        // taking a place at once, keeps the sockets open within the limit.
        for _ in 0..EVICTION_TURNS {
            if evicted.is_finished() {
                break;
            }
            tokio::task::yield_now().await;
        }
    }

    /// Counts a refusal and answers it, while few are being answered.
    fn refuse(&mut self, stream: Stream, peer: Peer, why: Refused) {
        if let Some(refused) = self.metrics.as_ref().and_then(|m| m.refused.as_ref()) {
            refused.inc();
        }
        let Some((answer, permit)) = self.refusals.answer(why, peer) else {
            return;
        };
        self.connections.spawn_local(async move {
            refuse(stream, &answer).await;
            drop(permit);
        });
    }

    /// Serves a connection on this thread.
    fn serve(&mut self, taken: Taken) {
        let Taken {
            stream,
            peer,
            counted,
            held,
        } = taken;
        let activity = Arc::new(Activity::new());
        let metrics = self.metrics.as_ref();
        let open = metrics
            .and_then(|m| m.open.as_ref())
            .map(OpenConnection::new);
        let serving = Serving {
            handler: self.handler.clone(),
            protocols: self.protocols.clone(),
            header_bytes: self.header_bytes.clone(),
            streams: self.streams.clone(),
            activity: activity.clone(),
            stopping: self.stopping.clone(),
            stalled: metrics.and_then(|m| m.stalled.clone()),
            flooding: metrics.and_then(|m| m.flooding.clone()),
        };
        let connection = async move {
            serve_connection(stream, peer, serving).await;
            drop((open, held, counted));
        };
        let span = tracing::debug_span!("connection", %peer);
        let task = self.connections.spawn_local(connection.instrument(span));
        if let Some(evictable) = &mut self.evictable {
            evictable.push_back(Tracked {
                task,
                activity,
                client: Client::of(peer.ip()),
            });
        }
    }

    /// Forgets connections that have ended.
    fn reap(&mut self) {
        while self.connections.try_join_next().is_some() {}
        // Once half the entries may be of ended connections: a pass costs
        // each accept a constant on average.
        if let Some(evictable) = &mut self.evictable
            && evictable.len() > 2 * self.connections.len() + 16
        {
            evictable.retain(|tracked| !tracked.task.is_finished());
        }
    }

    /// Lets the open connections finish, for up to `grace`.
    async fn drain(mut self, grace: Duration) -> Drained {
        let connections = &mut self.connections;
        let drain = async { while connections.join_next().await.is_some() {} };
        match tokio::time::timeout(grace, drain).await {
            Ok(()) => Drained::Completely,
            Err(_) => {
                self.connections.abort_all();
                Drained::GraceExpired
            }
        }
    }
}

/// Ends the connection whose loss costs least: the oldest that has not
/// sent a whole request, else the one idle longest; `None` when every
/// connection has a request in flight.
fn evict_one(evictable: &mut VecDeque<Tracked>, client: Option<Client>) -> Option<AbortHandle> {
    evictable.retain(|tracked| !tracked.task.is_finished());
    let candidate = |t: &Tracked| client.is_none_or(|client| t.client == client);
    let waiting = evictable
        .iter()
        .position(|t| candidate(t) && !t.activity.started());
    let victim = waiting.or_else(|| {
        let idle = evictable.iter().enumerate().filter(|(_, t)| candidate(t));
        idle.filter_map(|(at, t)| Some((t.activity.idle_since()?, at)))
            .min()
            .map(|(_, at)| at)
    });
    let tracked = evictable.remove(victim?)?;
    tracked.task.abort();
    tracing::debug!(
        sent_a_request = tracked.activity.started(),
        "at the connection limit: closing a connection with no request in flight"
    );
    Some(tracked.task)
}

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refused {
    /// The listener holds its limit, none of it idle.
    Limit,
    /// The connection's client holds its cap.
    ClientCap,
}

/// The refusals' answers, how many are being answered, and when each kind
/// was last logged.
struct RefusalAnswers {
    in_flight: Arc<Semaphore>,
    at_limit: Bytes,
    over_cap: Bytes,
    max_connections: usize,
    max_per_client: usize,
    limit_logged: Throttle,
    cap_logged: Throttle,
}

impl RefusalAnswers {
    fn new(limits: &Limits) -> RefusalAnswers {
        let extra = &limits.extra_headers;
        let cap = limits.per_client.as_ref();
        RefusalAnswers {
            in_flight: Arc::new(Semaphore::new(MAX_REFUSALS_IN_FLIGHT)),
            at_limit: with_headers(&limits.refusal, extra),
            over_cap: cap.map_or_else(Bytes::new, |cap| with_headers(&cap.refusal, extra)),
            max_connections: limits.max_connections,
            max_per_client: cap.map_or(0, |cap| cap.max_connections),
            limit_logged: Throttle::new(throttle::EVERY_MINUTE),
            cap_logged: Throttle::new(throttle::EVERY_MINUTE),
        }
    }

    /// Logs the refusal (at most once a minute for each kind), and gives
    /// its answer with a place among those being answered, if there is one.
    fn answer(&mut self, why: Refused, peer: Peer) -> Option<(Bytes, OwnedSemaphorePermit)> {
        let logged = match why {
            Refused::Limit => &self.limit_logged,
            Refused::ClientCap => &self.cap_logged,
        };
        if let Some(held_back) = logged.due(Instant::now()) {
            match why {
                Refused::Limit => tracing::warn!(
                    max_connections = self.max_connections,
                    %peer,
                    held_back,
                    "connection limit reached: refusing new connections (logged at most once a minute)"
                ),
                Refused::ClientCap => tracing::warn!(
                    max_connections_per_client = self.max_per_client,
                    %peer,
                    held_back,
                    "a client holds as many connections as one may: refusing its new ones (logged at most once a minute)"
                ),
            }
        }
        let permit = self.in_flight.clone().try_acquire_owned().ok()?;
        let answer = match why {
            Refused::Limit => self.at_limit.clone(),
            Refused::ClientCap => self.over_cap.clone(),
        };
        Some((answer, permit))
    }
}

/// A raw HTTP/1.1 answer with `extra` headers after its status line.
fn with_headers(raw: &Bytes, extra: &HeaderMap) -> Bytes {
    let Some(line_end) = raw.windows(2).position(|w| w == b"\r\n") else {
        return raw.clone();
    };
    let mut answer = BytesMut::with_capacity(raw.len() + 1024);
    answer.extend_from_slice(&raw[..line_end + 2]);
    for (name, value) in extra {
        answer.extend_from_slice(name.as_str().as_bytes());
        answer.extend_from_slice(b": ");
        answer.extend_from_slice(value.as_bytes());
        answer.extend_from_slice(b"\r\n");
    }
    answer.extend_from_slice(&raw[line_end + 2..]);
    answer.freeze()
}

/// Counts a connection in the open gauge for as long as it lives.
struct OpenConnection(prometheus::IntGauge);

impl OpenConnection {
    fn new(open: &prometheus::IntGauge) -> Self {
        open.inc();
        OpenConnection(open.clone())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Answers a refused connection, best effort, then closes it.
async fn refuse(mut stream: Stream, refusal: &[u8]) {
    let answer = async {
        stream.write_all(refusal).await?;
        stream.shutdown().await?;
        // Read (and discard) until the client closes: closing with its
        // request unread would reset the connection and lose the answer.
        let mut sink = [0u8; 1024];
        while stream.read(&mut sink).await? > 0 {}
        Ok::<_, std::io::Error>(())
    };
    let _ = tokio::time::timeout(REFUSAL_LINGER, answer).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn eviction_takes_a_connection_that_sent_nothing_then_the_one_idle_longest() {
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async {
                let mut tasks = JoinSet::new();
                let mut evictable = VecDeque::new();
                let activities: Vec<_> = (0..4).map(|_| Arc::new(Activity::new())).collect();
                for activity in &activities {
                    let task = tasks.spawn_local(std::future::pending::<()>());
                    let activity = activity.clone();
                    let client = Client::of("192.0.2.1".parse().unwrap());
                    evictable.push_back(Tracked {
                        task,
                        activity,
                        client,
                    });
                }
                let [busy, idle_longer, idle, waiting] = &activities[..] else {
                    unreachable!()
                };
                let _in_flight = busy.enter(true);
                let answered = idle_longer.enter(true);
                tokio::time::advance(Duration::from_secs(1)).await;
                drop(answered);
                let answered = idle.enter(true);
                tokio::time::advance(Duration::from_secs(1)).await;
                drop(answered);
                let left = |evictable: &VecDeque<Tracked>| -> Vec<usize> {
                    let at =
                        |t: &Tracked| activities.iter().position(|a| Arc::ptr_eq(a, &t.activity));
                    evictable.iter().filter_map(at).collect()
                };
                assert!(!waiting.started());
                assert!(evict_one(&mut evictable, None).is_some());
                assert_eq!(left(&evictable), [0, 1, 2], "the one that sent nothing");
                assert!(evict_one(&mut evictable, None).is_some());
                assert_eq!(left(&evictable), [0, 2], "the one idle longest");
                let evicted = evict_one(&mut evictable, None).unwrap();
                assert!(
                    evict_one(&mut evictable, None).is_none(),
                    "a request in flight"
                );
                assert_eq!(left(&evictable), [0]);
                // Its task ends as the thread runs it.
                tokio::task::yield_now().await;
                assert!(evicted.is_finished());
            })
            .await;
    }

    #[test]
    fn extra_headers_follow_the_status_line_of_a_refusal() {
        let raw = Bytes::from_static(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno",
        );
        let mut extra = HeaderMap::new();
        extra.insert("x-frame-options", http::HeaderValue::from_static("DENY"));
        let answer = with_headers(&raw, &extra);
        assert_eq!(
            &answer[..],
            b"HTTP/1.1 503 Service Unavailable\r\nx-frame-options: DENY\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno"
        );
        assert_eq!(with_headers(&raw, &HeaderMap::new()), raw);
    }
}
