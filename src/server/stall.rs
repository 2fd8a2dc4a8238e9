//! HTTP/2 streams whose client takes none of their answer: each stream
//! timed on its own, and reset once its client has taken nothing for
//! `LANYARD_SEND_TIMEOUT` (docs/proxy.md "Limits").
//!
//! A client that grants no flow-control window (`SETTINGS_INITIAL_WINDOW_SIZE`
//! 0) never makes lanyard's writes wait, so the socket's timing
//! (`super::io`) never sees it: hyper simply does not ask the answer's body
//! for data it has no window to send, and the client answers every PING,
//! so it looks alive. What shows it is an answer with data ready that
//! hyper has not asked for: the body ([`Answer`]) records when it is asked,
//! and the stream's task ([`StreamExecutor`]) times how long it has not
//! been. A body that is asked and has nothing yet (a slow upstream, a long
//! poll) is waiting for its source, not for the client, and is never cut.
//!
//! The task, not the body, ends the stream: a body hyper never polls
//! cannot act. Dropping the task drops hyper's handle on the stream, and h2
//! resets it (`RST_STREAM` `CANCEL`, RFC 9113 §6.4), freeing what it held.
//! So the task must live until the client has taken what was queued:
//! hyper ends it as soon as it has queued a frame that ends the stream,
//! and a stream whose end is queued is closed on lanyard's side, so that
//! dropping its handle no longer resets it; whatever h2 still held would
//! wait for the client's window with nothing timing it. An answer's end
//! is therefore handed to hyper only once what was queued before it is
//! on its way, whatever the answer's framing:
//!
//! - An answer of known end keeps back its last byte as a frame of its
//!   own. hyper waits for window before it queues a frame, and h2 has
//!   window for a stream's next byte only once every byte queued before
//!   it has some: the last byte waits, timed, until the client has made
//!   room for all of the answer, which then goes out in one write. It
//!   costs one frame header (9 bytes) per answer, no write of its own.
//! - An answer whose end shows only as it comes (an upstream's chunked
//!   one) has handed over its last frame before its end is known. Its
//!   bytes go to hyper as [`Queued`], the body's own buffer counting the
//!   stream's bytes down as h2 writes them out (or drops them, on a
//!   reset), and the end waits, timed, until none are left. hyper ends
//!   such an answer with an empty `END_STREAM` frame in any case; when the
//!   end comes while bytes are still queued, the wait costs one more wake
//!   of the stream's task, and that frame goes out in a write of its own
//!   rather than with the bytes before it.
//!
//! Progress is seen about once per frame, so a client is counted as taking
//! bytes if it takes a frame (16 KiB) per `LANYARD_SEND_TIMEOUT`: about
//! 550 bytes a second at the default.

use std::cell::Cell;
use std::future::Future;
use std::io::IoSlice;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::{Buf, Bytes};
use http::HeaderMap;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::activity::{Activity, ActivityGuard};

/// The largest data frame an answer hands hyper at once on HTTP/2. hyper
/// sends a frame once it has *any* window (one byte will do), queueing the
/// whole frame in h2 until the client's window lets it out: an answer of
/// 250 KiB in one frame would sit in h2 whole. Split into frames of
/// HTTP/2's default frame size (RFC 9113 §6.5.2), at most a frame waits in
/// h2 and one in hyper, and the body is asked for the next only once the
/// client has taken the last. The split is a slice of the same buffer,
/// never a copy.
const MAX_DATA_FRAME: usize = 16 * 1024;

/// How long a stream whose client has taken some of its answer waits for
/// the client's window before its connection counts it as stalled (idle,
/// for eviction): a client with a small window waits a moment for every
/// frame, and must not be evicted mid-answer for it.
const STALL_GRACE: Duration = Duration::from_secs(1);

tokio::task_local! {
    /// The stream whose task is running: what its answer reports to.
    static STREAM: Rc<StreamWatch>;
}

/// Where one HTTP/2 stream's answer stands, as its body sees it.
#[derive(Default)]
pub(super) struct StreamWatch {
    /// Bumped each time hyper asks the answer's body for more.
    asked: Cell<u64>,
    /// The body has handed hyper an answer or a frame and not been asked
    /// for more since, or holds back the answer's end until what was
    /// queued drains: either way, it waits for the client.
    waiting: Cell<bool>,
    /// Bytes of the answer handed to hyper that h2 has not yet written
    /// out (or dropped, on a reset): counted down by [`Queued`].
    queued: Cell<usize>,
    /// The answer's end, held back until `queued` drains.
    drained: Cell<Option<Waker>>,
}

impl StreamWatch {
    /// The watch of the HTTP/2 stream whose task is running; `None` on an
    /// HTTP/1.1 connection.
    pub(super) fn current() -> Option<Rc<StreamWatch>> {
        STREAM.try_with(Rc::clone).ok()
    }

    fn asked(&self) {
        self.asked.set(self.asked.get().wrapping_add(1));
        self.waiting.set(false);
    }

    /// `bytes`, counted as queued until h2 has written them out.
    fn queue(self: &Rc<Self>, bytes: Bytes) -> Queued {
        self.queued.set(self.queued.get() + bytes.len());
        Queued {
            bytes,
            stream: Some(self.clone()),
        }
    }

    fn taken(&self, n: usize) {
        let left = self.queued.get().saturating_sub(n);
        self.queued.set(left);
        if left == 0
            && let Some(waker) = self.drained.take()
        {
            waker.wake();
        }
    }

    /// The answer's end (`None`, or its trailers), once every byte queued
    /// before it has been written out: hyper ends the stream's task as it
    /// hands the end to h2, and what h2 still held then would wait for
    /// the client's window with nothing timing it. Until then the body
    /// waits for the client, timed as a frame waiting for window is, and
    /// a wake-up with bytes still queued is no progress.
    fn end_once_drained<E>(
        &self,
        end: &mut Option<Option<HeaderMap>>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Queued>, E>>> {
        if self.queued.get() > 0 {
            self.drained.set(Some(cx.waker().clone()));
            self.waiting.set(true);
            return Poll::Pending;
        }
        let trailers = end.as_mut().and_then(Option::take);
        Poll::Ready(trailers.map(|trailers| Ok(Frame::trailers(trailers))))
    }
}

/// An answer's bytes as hyper and h2 hold them: the body's own buffer
/// (written from, never copied), which on HTTP/2 counts its stream's
/// queued bytes down as h2 writes them out, or as it drops them when the
/// stream is reset.
pub(super) struct Queued {
    bytes: Bytes,
    stream: Option<Rc<StreamWatch>>,
}

impl Queued {
    /// Bytes no stream counts: HTTP/1.1's, whose socket's writes are
    /// timed instead (`super::io`).
    fn untimed(bytes: Bytes) -> Queued {
        Queued {
            bytes,
            stream: None,
        }
    }

    fn taken(&self, n: usize) {
        if let Some(stream) = &self.stream {
            stream.taken(n);
        }
    }
}

impl Buf for Queued {
    fn remaining(&self) -> usize {
        self.bytes.len()
    }

    fn chunk(&self) -> &[u8] {
        &self.bytes
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        self.bytes.chunks_vectored(dst)
    }

    fn advance(&mut self, n: usize) {
        self.bytes.advance(n);
        self.taken(n);
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        let bytes = self.bytes.copy_to_bytes(len);
        self.taken(len);
        bytes
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.bytes.is_empty() {
            self.taken(self.bytes.len());
        }
    }
}

/// What a connection's stream tasks report to: the connection's activity
/// (a connection whose every stream waits for its client counts as idle,
/// so that eviction may take it), and where stalls are counted.
pub(super) struct ConnectionWatch {
    pub(super) activity: Arc<Activity>,
    pub(super) stalled: Option<prometheus::IntCounter>,
}

pin_project_lite::pin_project! {
    /// An answer's body as the server sends it: it keeps its connection
    /// busy (not idle, not evictable) until it has been sent or dropped,
    /// and on HTTP/2 reports when hyper asks it for more.
    pub(super) struct Answer<B> {
        #[pin]
        inner: B,
        // Released as the answer is sent or dropped: the connection's
        // request in flight, and the stream's place in its group.
        held: (Option<ActivityGuard>, Option<OwnedSemaphorePermit>),
        stream: Option<Rc<StreamWatch>>,
        // Of a data frame split at `MAX_DATA_FRAME`, what is still to go.
        rest: Option<Bytes>,
        // The end, once the inner body has given it (`Some(None)`: no
        // trailers), held back until what was queued drains.
        end: Option<Option<HeaderMap>>,
    }
}

impl<B> Answer<B> {
    /// `inner`, answered on the stream or connection whose task is running.
    pub(super) fn new(
        inner: B,
        held: (Option<ActivityGuard>, Option<OwnedSemaphorePermit>),
    ) -> Self {
        let stream = StreamWatch::current();
        if let Some(stream) = &stream {
            // hyper sends the head, then asks for data once it has window.
            stream.waiting.set(true);
        }
        Answer {
            inner,
            held,
            stream,
            rest: None,
            end: None,
        }
    }
}

impl<B> Body for Answer<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Queued;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Queued>, B::Error>>> {
        let mut this = self.project();
        let Some(stream) = this.stream.as_ref() else {
            let frame = std::task::ready!(this.inner.poll_frame(cx));
            return Poll::Ready(frame.map(|frame| frame.map(|f| f.map_data(Queued::untimed))));
        };
        if this.end.is_some() {
            return stream.end_once_drained(this.end, cx);
        }
        stream.asked();
        let mut data = match this.rest.take() {
            Some(rest) => rest,
            None => match std::task::ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(frame) => {
                        *this.end = Some(frame.into_trailers().ok());
                        return stream.end_once_drained(this.end, cx);
                    }
                },
                Some(Err(err)) => return Poll::Ready(Some(Err(err))),
                None => {
                    *this.end = Some(None);
                    return stream.end_once_drained(this.end, cx);
                }
            },
        };
        if data.len() > MAX_DATA_FRAME {
            *this.rest = Some(data.split_off(MAX_DATA_FRAME));
        } else if this.rest.is_none() && this.inner.is_end_stream() && data.len() > 1 {
            // The last frame keeps back its last byte, sent on its own once
            // the client's window has room for it (the module's opening).
            *this.rest = Some(data.split_off(data.len() - 1));
        }
        stream.waiting.set(true);
        Poll::Ready(Some(Ok(Frame::data(stream.queue(data)))))
    }

    fn is_end_stream(&self) -> bool {
        self.rest.is_none() && self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let rest = self.rest.as_ref().map_or(0, |rest| rest.len() as u64);
        let inner = self.inner.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(inner.lower() + rest);
        if let Some(upper) = inner.upper() {
            hint.set_upper(upper + rest);
        }
        hint
    }
}

/// Runs each HTTP/2 stream of a connection as a task of its own on the
/// connection's thread (a handler's futures need not be `Send`), timed
/// as the module says.
#[derive(Clone)]
pub(super) struct StreamExecutor {
    pub(super) send_timeout: Duration,
    pub(super) connection: Rc<ConnectionWatch>,
}

impl<F> hyper::rt::Executor<F> for StreamExecutor
where
    F: Future<Output: 'static> + 'static,
{
    fn execute(&self, future: F) {
        let watch = Rc::new(StreamWatch::default());
        let task = TimedStream {
            connection: self.connection.clone(),
            stream: watch.clone(),
            inner: STREAM.scope(watch, future),
            limit: self.send_timeout,
            timer: None,
            watched: None,
            marked: false,
        };
        tokio::task::spawn_local(task);
    }
}

/// A wait of the answer for its client's window, as the task times it.
#[derive(Clone, Copy)]
struct Wait {
    /// The body's `asked` count: asked since, the client took bytes, and
    /// this wait is over.
    asked: u64,
    since: Instant,
}

pin_project_lite::pin_project! {
    /// One stream's task, ended once its client has taken none of its
    /// answer for `limit`.
    struct TimedStream<F> {
        connection: Rc<ConnectionWatch>,
        stream: Rc<StreamWatch>,
        #[pin]
        inner: tokio::task::futures::TaskLocalFuture<Rc<StreamWatch>, F>,
        limit: Duration,
        // Armed once the answer first waits, and then moved only when it
        // fires, to what the wait it finds calls for: one timer for the
        // stream's life, not one per frame.
        timer: Option<Pin<Box<Sleep>>>,
        watched: Option<Wait>,
        // Counted as stalled in the connection's activity.
        marked: bool,
    }

    impl<F> PinnedDrop for TimedStream<F> {
        fn drop(this: Pin<&mut Self>) {
            let this = this.project();
            if *this.marked {
                this.connection.activity.unstall();
            }
        }
    }
}

impl<F: Future> Future for TimedStream<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.inner.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let mark = |marked: &mut bool, stalled: bool| {
            if *marked != stalled {
                *marked = stalled;
                match stalled {
                    true => this.connection.activity.stall(),
                    false => this.connection.activity.unstall(),
                }
            }
        };
        if !this.stream.waiting.get() {
            *this.watched = None;
            mark(this.marked, false);
            return Poll::Pending;
        }
        let asked = this.stream.asked.get();
        let wait = match *this.watched {
            Some(wait) if wait.asked == asked => wait,
            _ => {
                mark(this.marked, false);
                let wait = Wait {
                    asked,
                    since: Instant::now(),
                };
                *this.watched = Some(wait);
                wait
            }
        };
        // An answer its client has taken nothing of (a window of zero from
        // the start, as no client that means to read sets) is stalled at
        // once; one it has been taking, after the grace. hyper asks for
        // the first frame before it has window for it, so a body asked
        // once has had nothing taken yet.
        let grace = match wait.asked {
            0 | 1 => Duration::ZERO,
            _ => STALL_GRACE.min(*this.limit),
        };
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(wait.since + grace)));
        while timer.as_mut().poll(cx).is_ready() {
            let waited = wait.since.elapsed();
            if waited >= *this.limit {
                tracing::debug!(
                    "an HTTP/2 client took none of an answer for the send timeout; resetting its stream"
                );
                if let Some(counter) = &this.connection.stalled {
                    counter.inc();
                }
                return Poll::Ready(());
            }
            if waited >= grace {
                mark(this.marked, true);
            }
            let next = match *this.marked {
                true => wait.since + *this.limit,
                false => wait.since + grace,
            };
            timer.as_mut().reset(next);
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::convert::Infallible;

    /// A body of one frame whose end shows only when it is asked again, as
    /// an upstream's chunked answer's does.
    struct Chunked(Option<Bytes>);

    impl Body for Chunked {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            Poll::Ready(self.0.take().map(|data| Ok(Frame::data(data))))
        }
    }

    fn poll(answer: Pin<&mut Answer<Chunked>>) -> Poll<Option<Result<Frame<Queued>, Infallible>>> {
        answer.poll_frame(&mut Context::from_waker(Waker::noop()))
    }

    #[test]
    fn an_answer_of_unknown_length_ends_only_once_its_queued_bytes_are_written() {
        let stream = Rc::new(StreamWatch::default());
        let answer = Answer {
            inner: Chunked(Some(Bytes::from_static(&[b'x'; 4096]))),
            held: (None, None),
            stream: Some(stream.clone()),
            rest: None,
            end: None,
        };
        let mut answer = std::pin::pin!(answer);
        let Poll::Ready(Some(Ok(frame))) = poll(answer.as_mut()) else {
            panic!("the answer's frame");
        };
        let mut queued = frame.into_data().ok().expect("data");
        assert_eq!(stream.queued.get(), 4096, "whole, not one byte kept back");
        // The end has come, but the frame is still queued.
        assert!(poll(answer.as_mut()).is_pending());
        assert!(stream.waiting.get(), "timed as waiting for the client");
        let asked = stream.asked.get();
        assert!(poll(answer.as_mut()).is_pending());
        assert_eq!(stream.asked.get(), asked, "a wake-up is no progress");
        // h2 writes part of it, then the rest.
        queued.advance(4000);
        assert!(poll(answer.as_mut()).is_pending());
        assert_eq!(queued.copy_to_bytes(96).len(), 96);
        assert_eq!(stream.queued.get(), 0);
        assert!(matches!(poll(answer.as_mut()), Poll::Ready(None)));
    }

    #[test]
    fn bytes_dropped_unwritten_by_a_reset_are_no_longer_queued() {
        let stream = Rc::new(StreamWatch::default());
        let queued = stream.queue(Bytes::from_static(b"answer"));
        let waker = std::sync::Arc::new(Woken::default());
        stream.drained.set(Some(Waker::from(waker.clone())));
        drop(queued);
        assert_eq!(stream.queued.get(), 0);
        assert!(
            waker.0.load(std::sync::atomic::Ordering::Relaxed),
            "the end was woken"
        );
    }

    #[derive(Default)]
    struct Woken(std::sync::atomic::AtomicBool);

    impl std::task::Wake for Woken {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}
