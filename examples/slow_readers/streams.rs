//! HTTP/2 clients that read little or none of their answers: connections
//! from loopback source addresses, each with its streams, a window of
//! the caller's choosing, and what became of every stream counted.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::Request;
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::{FIRST_SOURCE, HEADS_WAIT, SETUP_WAIT};

/// How each stream's client reads: what it lets the server send, and
/// whether it sends a refused stream again.
#[derive(Clone, Copy)]
pub struct Reader {
    /// `SETTINGS_INITIAL_WINDOW_SIZE`: what a stream may be sent before
    /// its client gives any back.
    pub initial: u32,
    /// Give back what arrived this long after it arrived (a slow reader);
    /// `None` gives nothing back (the window stays shut once spent).
    pub give_back_after: Option<Duration>,
    /// Send a stream refused with `REFUSED_STREAM` again, [`RETRY_AFTER`]
    /// later, as RFC 9113 §8.7 lets a client, until its head arrives or
    /// [`HEADS_WAIT`] has passed.
    pub retry_refused: bool,
    /// Send a body of this many bytes with each request, as fast as the
    /// server's windows let it; counted in `body_bytes`.
    pub upload: Option<usize>,
}

/// What an upload's body is sliced from: no allocation per frame.
static ZEROS: [u8; 16 * 1024] = [0; 16 * 1024];

/// How long a client waits before it sends a refused stream again.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// What became of the streams, counted as it happens.
#[derive(Default)]
pub struct Counts {
    pub answered: AtomicU64,
    statuses: Mutex<BTreeMap<u16, u64>>,
    pub refused: AtomicU64,
    refused_reasons: Mutex<BTreeMap<String, u64>>,
    pub lost: AtomicU64,
    pub reset_later: AtomicU64,
    pub closed_later: AtomicU64,
    /// Answered, and their bodies read to the end.
    pub completed: AtomicU64,
    pub body_bytes: AtomicU64,
    pub connections_opened: AtomicU64,
    pub connections_closed: AtomicU64,
    /// Streams with neither a head nor an end yet.
    pub unresolved: AtomicU64,
    resolved: Notify,
}

impl Counts {
    pub fn new(streams: usize) -> Arc<Counts> {
        let counts = Counts::default();
        counts.unresolved.store(streams as u64, Ordering::Relaxed);
        Arc::new(counts)
    }

    pub fn resolve(&self) {
        self.unresolved.fetch_sub(1, Ordering::Relaxed);
        self.resolved.notify_one();
    }

    pub fn status(&self, status: u16) {
        self.answered.fetch_add(1, Ordering::Relaxed);
        let mut statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        *statuses.entry(status).or_default() += 1;
    }

    fn refuse(&self, reason: String) {
        self.refused.fetch_add(1, Ordering::Relaxed);
        let mut reasons = self
            .refused_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *reasons.entry(reason).or_default() += 1;
    }

    /// Until every stream has its head or has ended.
    pub async fn all_resolved(&self) {
        while self.unresolved.load(Ordering::Relaxed) > 0 {
            self.resolved.notified().await;
        }
    }

    /// The streams the server took: neither refused nor lost with a
    /// connection it did not take.
    pub fn accepted(&self, streams: usize) -> u64 {
        let n = |count: &AtomicU64| count.load(Ordering::Relaxed);
        (streams as u64).saturating_sub(n(&self.refused) + n(&self.lost))
    }

    pub fn line(&self) -> String {
        let n = |count: &AtomicU64| count.load(Ordering::Relaxed);
        let joined = |map: String| if map.is_empty() { "none".into() } else { map };
        let reasons = self
            .refused_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{r}:{n}")).collect();
        let statuses = self.statuses.lock().unwrap_or_else(|e| e.into_inner());
        let not_200: u64 = statuses
            .iter()
            .filter(|(s, _)| **s != 200)
            .map(|(_, n)| n)
            .sum();
        let statuses: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}:{n}")).collect();
        format!(
            "streams_answered={} streams_answered_not_200={not_200} statuses={} \
             streams_refused={} refused_reasons={} streams_reset_later={} streams_lost={} \
             streams_closed_later={} streams_completed={} streams_unresolved={} body_bytes={} \
             connections_opened={} connections_closed={}",
            n(&self.answered),
            joined(statuses.join(",")),
            n(&self.refused),
            joined(reasons.join(",")),
            n(&self.reset_later),
            n(&self.lost),
            n(&self.closed_later),
            n(&self.completed),
            n(&self.unresolved),
            n(&self.body_bytes),
            n(&self.connections_opened),
            n(&self.connections_closed),
        )
    }
}

/// The `n`th of `addresses` loopback source addresses from 127.0.0.10.
pub fn source(n: usize, addresses: usize) -> IpAddr {
    Ipv4Addr::new(127, 0, 0, FIRST_SOURCE + (n % addresses) as u8).into()
}

/// Opens `connections` connections to `to`, each from its turn of
/// `addresses` source addresses, and starts `streams` streams of
/// `request()` on each; what is returned keeps the connections open when
/// all their streams have ended.
pub async fn open_all(
    connections: usize,
    addresses: usize,
    streams: usize,
    to: SocketAddr,
    request: impl Fn() -> Request<()>,
    reader: Reader,
    counts: &Arc<Counts>,
) -> Vec<SendRequest<Bytes>> {
    let mut holders = Vec::with_capacity(connections);
    for n in 0..connections {
        let opened = open(source(n, addresses), to, reader, streams, counts.clone()).await;
        let Ok(requests) = opened else {
            for _ in 0..streams {
                counts.lost.fetch_add(1, Ordering::Relaxed);
                counts.resolve();
            }
            continue;
        };
        for _ in 0..streams {
            tokio::spawn(hold(requests.clone(), request(), reader, counts.clone()));
        }
        holders.push(requests);
    }
    holders
}

/// A connection from `source` whose streams get `window`: the handshake
/// does not wait for the server, so a refused connection shows as its
/// streams failing.
async fn open(
    source: IpAddr,
    to: SocketAddr,
    reader: Reader,
    streams: usize,
    counts: Arc<Counts>,
) -> Result<SendRequest<Bytes>, ()> {
    let connect = async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(to).await
    };
    let io: TcpStream = match tokio::time::timeout(SETUP_WAIT, connect).await {
        Ok(Ok(io)) => io,
        _ => return Err(()),
    };
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(reader.initial);
    if reader.give_back_after.is_some() {
        // Room for every stream's window at once, so that the connection's
        // own window never holds a slow reader's streams back.
        let all = reader.initial.saturating_mul(streams as u32).max(65_535);
        builder.initial_connection_window_size(all);
    }
    let handshake = builder.handshake::<_, Bytes>(io);
    let Ok(Ok((requests, connection))) = tokio::time::timeout(SETUP_WAIT, handshake).await else {
        return Err(());
    };
    counts.connections_opened.fetch_add(1, Ordering::Relaxed);
    tokio::spawn(async move {
        let _ = connection.await;
        counts.connections_closed.fetch_add(1, Ordering::Relaxed);
    });
    Ok(requests)
}

/// Sends `bytes` of body on `body` as fast as the server's windows let it;
/// stops at the end, or when the stream ends first.
async fn upload(mut body: h2::SendStream<Bytes>, bytes: usize, counts: Arc<Counts>) {
    let mut left = bytes;
    while left > 0 {
        body.reserve_capacity(left.min(ZEROS.len()));
        let Some(Ok(granted)) = std::future::poll_fn(|cx| body.poll_capacity(cx)).await else {
            return;
        };
        let chunk = granted.min(left).min(ZEROS.len());
        if chunk == 0 {
            continue;
        }
        left -= chunk;
        if body
            .send_data(Bytes::from_static(&ZEROS[..chunk]), left == 0)
            .is_err()
        {
            return;
        }
        counts.body_bytes.fetch_add(chunk as u64, Ordering::Relaxed);
    }
}

/// A copy of `request` (which has no body) to send.
fn again(request: &Request<()>) -> Request<()> {
    let mut copy = Request::new(());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.headers_mut() = request.headers().clone();
    copy
}

/// One stream: sent, its head awaited and counted, then held (reading
/// only what `window` lets through) until the server ends it or the
/// process does.
async fn hold(
    requests: SendRequest<Bytes>,
    request: Request<()>,
    reader: Reader,
    counts: Arc<Counts>,
) {
    let deadline = Instant::now() + HEADS_WAIT;
    let response = loop {
        let head = async {
            let mut ready = requests.clone().ready().await?;
            let (response, body) = ready.send_request(again(&request), reader.upload.is_none())?;
            if let Some(bytes) = reader.upload {
                tokio::spawn(upload(body, bytes, counts.clone()));
            }
            response.await
        };
        let err = match tokio::time::timeout_at(deadline, head).await {
            // Counted as unresolved.
            Err(_) => return,
            Ok(Ok(response)) => break response,
            Ok(Err(err)) => err,
        };
        match err.reason().filter(|_| err.is_reset() && err.is_remote()) {
            Some(reason) => {
                counts.refuse(format!("{reason:?}"));
                if reader.retry_refused && reason == h2::Reason::REFUSED_STREAM {
                    tokio::time::sleep(RETRY_AFTER).await;
                    continue;
                }
            }
            None => {
                counts.lost.fetch_add(1, Ordering::Relaxed);
            }
        }
        counts.resolve();
        return;
    };
    counts.status(response.status().as_u16());
    counts.resolve();
    let mut body = response.into_body();
    loop {
        match body.data().await {
            Some(Ok(data)) => {
                counts
                    .body_bytes
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
                if let Some(after) = reader.give_back_after {
                    tokio::time::sleep(after).await;
                    let _ = body.flow_control().release_capacity(data.len());
                }
            }
            Some(Err(err)) if err.is_reset() && err.is_remote() => {
                counts.reset_later.fetch_add(1, Ordering::Relaxed);
                return;
            }
            None => {
                counts.completed.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Some(Err(_)) => {
                counts.closed_later.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}
