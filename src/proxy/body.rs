//! Request bodies on their way upstream: read whole when small enough to
//! replay after a 401, streamed otherwise (keeping a copy while it may
//! still fit), with a process-wide budget for the copies.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body_util::{Either, Full};
use hyper::body::{Frame, SizeHint};
use tokio::sync::oneshot;

use super::upload::UploadProgress;
use crate::client_body::{ClientBody, ClientBodyError};

/// A body up to this size can be replayed after a 401 or a connection
/// closed unanswered (docs/proxy.md); larger bodies are not retried.
pub const MAX_REPLAY_BODY: u64 = 64 * 1024;
/// Bytes all requests together may hold for replays.
const REPLAY_BUDGET: u64 = 32 * 1024 * 1024;

/// What the proxy sends upstream: a buffered, replayable body, or the
/// client's body streamed through.
pub type UpstreamBody = Either<Full<Bytes>, StreamedBody>;

/// A client body forwarded as it arrives: the `Body` hyper sends a
/// client's frames upstream through. When its length is unknown, the
/// first [`MAX_REPLAY_BODY`] bytes are also kept, so that a request whose
/// body turns out to fit can still be replayed after a 401 without the
/// upload waiting for 64 KiB first (a streaming or interactive client
/// would stall).
pub struct StreamedBody {
    /// Read already, sent first.
    prefix: Option<Bytes>,
    inner: ClientBody,
    copy: Option<BodyCopy>,
    progress: UploadProgress,
}

/// The kept copy, handed over once the body has ended within the limit.
struct BodyCopy {
    gathered: Gathered,
    done: oneshot::Sender<(Bytes, Reservation)>,
}

impl StreamedBody {
    /// A client body passed through as it arrives, never replayed.
    pub fn streaming(inner: ClientBody) -> Self {
        Self::after(None, inner)
    }

    fn after(prefix: Option<Bytes>, inner: ClientBody) -> Self {
        StreamedBody {
            prefix,
            inner,
            copy: None,
            progress: UploadProgress::new(),
        }
    }

    /// How far the body has gone upstream, for the upstream timeout.
    pub(super) fn progress(&self) -> UploadProgress {
        self.progress.clone()
    }

    /// A body whose copy arrives on the returned channel if it ends within
    /// the limit and the replay budget; the channel closes otherwise.
    fn copied(
        inner: ClientBody,
        budget: &ReplayBudget,
    ) -> (Self, oneshot::Receiver<(Bytes, Reservation)>) {
        let (done, copied) = oneshot::channel();
        let copy = BodyCopy {
            gathered: Gathered::new(budget, MAX_REPLAY_BODY as usize),
            done,
        };
        let body = StreamedBody {
            prefix: None,
            inner,
            copy: Some(copy),
            progress: UploadProgress::new(),
        };
        (body, copied)
    }

    fn keep(&mut self, data: &Bytes) {
        let Some(copy) = &mut self.copy else { return };
        // A closed channel: the answer was not a 401, or came too long ago.
        if copy.done.is_closed() || !copy.gathered.push(data) {
            self.copy = None;
        }
    }

    fn finish(&mut self) {
        if let Some(copy) = self.copy.take() {
            let _ = copy.done.send(copy.gathered.into_parts());
        }
    }
}

impl hyper::body::Body for StreamedBody {
    type Data = Bytes;
    type Error = ClientBodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        // Asked for more: the upstream's side took what came before.
        self.progress.asked();
        if let Some(prefix) = self.prefix.take() {
            return Poll::Ready(Some(Ok(Frame::data(prefix))));
        }
        let Poll::Ready(frame) = self.inner.poll_frame(cx) else {
            self.progress.waiting_on_client(true);
            return Poll::Pending;
        };
        self.progress.waiting_on_client(false);
        match &frame {
            Some(Ok(frame)) => match frame.data_ref() {
                Some(data) => self.keep(data),
                // Trailers cannot be replayed faithfully.
                None => self.copy = None,
            },
            Some(Err(_)) => self.copy = None,
            None => self.finish(),
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        // While a copy is kept, the end is only believed once the body says
        // so by ending: an HTTP/2 stream reset also reads as "ended".
        self.prefix.is_none() && self.copy.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let prefix = self.prefix.as_ref().map_or(0, |p| p.len() as u64);
        let rest = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + prefix);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + prefix);
        }
        hint
    }
}

/// A body's bytes gathered into one buffer, the replay budget charged for
/// the buffer's capacity: what is held, not what was sent. Keeping each
/// frame's `Bytes` instead would pin the read buffer it is a slice of, so a
/// body sent one byte per frame would hold thousands of them (see
/// `crate::collect`).
struct Gathered {
    buffer: BytesMut,
    limit: usize,
    /// The body's length is known to be `limit`: allocated whole at its
    /// first byte, never grown.
    known: bool,
    reservation: Reservation,
}

impl Gathered {
    /// A body of unknown length, kept while it is within `limit`.
    fn new(budget: &ReplayBudget, limit: usize) -> Self {
        Gathered {
            buffer: BytesMut::new(),
            limit,
            known: false,
            reservation: budget.empty(),
        }
    }

    /// A body of `len` bytes, as its `Content-Length` says.
    fn of_length(budget: &ReplayBudget, len: usize) -> Self {
        Gathered {
            known: true,
            ..Gathered::new(budget, len)
        }
    }

    /// Appends `data`; false, keeping nothing more, when that would pass
    /// the limit or the budget.
    fn push(&mut self, data: &[u8]) -> bool {
        let needed = self.buffer.len() + data.len();
        if needed > self.limit {
            return false;
        }
        let capacity = self.buffer.capacity();
        if needed > capacity {
            // Doubling, within the limit, so that small frames do not
            // reallocate for each one. Allocated exactly (`reserve` would
            // double past the limit), and charged before it is.
            let grown = match self.known {
                true => self.limit,
                false => needed.max(capacity.saturating_mul(2)).min(self.limit),
            };
            if !self.reservation.grow((grown - capacity) as u64) {
                return false;
            }
            let mut buffer = BytesMut::with_capacity(grown);
            buffer.extend_from_slice(&self.buffer);
            self.buffer = buffer;
        }
        self.buffer.extend_from_slice(data);
        true
    }

    fn into_parts(self) -> (Bytes, Reservation) {
        (self.buffer.freeze(), self.reservation)
    }
}

/// Bytes held for replays across all requests. Each replayable body is
/// small, but thousands of connections (and HTTP/2 streams) at once could
/// hold a lot; past the budget, bodies stream without a replay copy.
#[derive(Clone)]
pub(super) struct ReplayBudget(Arc<AtomicU64>);

impl ReplayBudget {
    pub(super) fn new() -> Self {
        ReplayBudget(Arc::new(AtomicU64::new(0)))
    }

    fn empty(&self) -> Reservation {
        Reservation {
            budget: self.clone(),
            bytes: 0,
        }
    }
}

/// Bytes of the replay budget held until dropped.
pub(super) struct Reservation {
    budget: ReplayBudget,
    bytes: u64,
}

impl Reservation {
    fn grow(&mut self, bytes: u64) -> bool {
        let held = self.budget.0.fetch_add(bytes, Ordering::Relaxed);
        if held + bytes > REPLAY_BUDGET {
            self.budget.0.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        self.bytes += bytes;
        true
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.0.fetch_sub(self.bytes, Ordering::Relaxed);
        }
    }
}

/// A request body, sorted by whether and when it can be sent twice.
pub(super) enum BodyPlan {
    /// Whole, at most [`MAX_REPLAY_BODY`] bytes, read before sending.
    Whole(Bytes, Option<Reservation>),
    /// Of unknown length: streamed, with a copy that arrives if it fits.
    Copied(StreamedBody, oneshot::Receiver<(Bytes, Reservation)>),
    /// Known to be larger than the limit, or past the replay budget:
    /// streamed, never replayed.
    Streaming(StreamedBody),
}

/// Reads a body of known small length whole; streams any other body at
/// once, keeping a replay copy of one of unknown length.
pub(super) async fn plan_body(
    mut body: ClientBody,
    budget: &ReplayBudget,
) -> Result<BodyPlan, ClientBodyError> {
    let Some(len) = body.size_hint().exact() else {
        let (body, copied) = StreamedBody::copied(body, budget);
        return Ok(BodyPlan::Copied(body, copied));
    };
    if len == 0 && body.is_end_stream() {
        return Ok(BodyPlan::Whole(Bytes::new(), None));
    }
    if len > MAX_REPLAY_BODY {
        return Ok(BodyPlan::Streaming(StreamedBody::streaming(body)));
    }
    // The budget is taken at the body's first byte, not as it is declared,
    // so a client that announces a body and sends nothing holds none of it.
    let mut gathered = Gathered::of_length(budget, len as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        // Request trailers have no place in a replayable body; dropped.
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if !gathered.push(&data) {
            // Past the budget: send what was read, then stream the rest.
            let (read, _) = gathered.into_parts();
            let prefix = [read, data].concat();
            return Ok(BodyPlan::Streaming(StreamedBody::after(
                Some(Bytes::from(prefix)),
                body,
            )));
        }
    }
    // hyper holds the client to its Content-Length, so what was read is
    // `len` bytes.
    let (whole, reservation) = gathered.into_parts();
    Ok(BodyPlan::Whole(whole, Some(reservation)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_budget_is_shared_and_given_back() {
        let budget = ReplayBudget::new();
        let mut big = budget.empty();
        assert!(big.grow(REPLAY_BUDGET - 10));
        assert!(!budget.empty().grow(11));
        let mut small = budget.empty();
        assert!(small.grow(10));
        assert!(!small.grow(1));
        drop(big);
        assert!(small.grow(1));
        drop(small);
        assert_eq!(budget.0.load(Ordering::Relaxed), 0);
    }
}
