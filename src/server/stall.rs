//! HTTP/2 streams whose client takes none of their answer: each stream
//! timed on its own, and reset once its client has taken nothing for
//! `LANYARD_SEND_TIMEOUT` (README "Limits").
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
//! resets it (`RST_STREAM` `CANCEL`), freeing what it held.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::{Instant, Sleep};

use super::activity::{Activity, ActivityGuard};

/// The largest data frame an answer hands hyper at once on HTTP/2. hyper
/// asks a body for data once it has *any* window (one byte will do) and
/// then queues the whole frame in h2, which holds it until the client's
/// window lets it out: an answer of 250 KiB in one frame, behind a window
/// of one byte, would sit in h2 with no task left to time it. Split into
/// frames of HTTP/2's default frame size (RFC 9113 §6.5.2), at most one
/// frame waits beyond the window, and the body is asked for the next only
/// once the client has taken the last. The split is a slice of the same
/// buffer, never a copy.
const MAX_DATA_FRAME: usize = 16 * 1024;

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
    /// for more since: hyper is waiting for the client's window.
    waiting: Cell<bool>,
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
        }
    }
}

impl<B> Body for Answer<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        let this = self.project();
        let Some(stream) = this.stream.as_ref() else {
            return this.inner.poll_frame(cx);
        };
        stream.asked();
        let mut data = match this.rest.take() {
            Some(rest) => rest,
            None => match std::task::ready!(this.inner.poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                other => return Poll::Ready(other),
            },
        };
        if data.len() > MAX_DATA_FRAME {
            *this.rest = Some(data.split_off(MAX_DATA_FRAME));
        }
        stream.waiting.set(true);
        Poll::Ready(Some(Ok(Frame::data(data))))
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
            inner: Box::pin(STREAM.scope(watch, future)),
            limit: self.send_timeout,
            timer: None,
            armed_at: None,
            marked: false,
        };
        tokio::task::spawn_local(task);
    }
}

/// One stream's task, ended once its client has taken none of its answer
/// for `limit`.
struct TimedStream<F> {
    connection: Rc<ConnectionWatch>,
    stream: Rc<StreamWatch>,
    inner: Pin<Box<F>>,
    limit: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    /// The body's `asked` count when the timer was armed: a body asked
    /// since has had its client take bytes, and the timer starts over.
    armed_at: Option<u64>,
    /// Counted as stalled in the connection's activity.
    marked: bool,
}

impl<F> TimedStream<F> {
    fn mark(&mut self, stalled: bool) {
        if self.marked == stalled {
            return;
        }
        self.marked = stalled;
        match stalled {
            true => self.connection.activity.stall(),
            false => self.connection.activity.unstall(),
        }
    }
}

impl<F: Future> Future for TimedStream<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        if !self.stream.waiting.get() {
            self.armed_at = None;
            self.mark(false);
            return Poll::Pending;
        }
        self.mark(true);
        let asked = self.stream.asked.get();
        if self.armed_at != Some(asked) {
            self.armed_at = Some(asked);
            let deadline = Instant::now() + self.limit;
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
        }
        let fired = self
            .timer
            .as_mut()
            .is_some_and(|timer| timer.as_mut().poll(cx).is_ready());
        if !fired {
            return Poll::Pending;
        }
        tracing::debug!(
            "an HTTP/2 client took none of an answer for the send timeout; resetting its stream"
        );
        if let Some(counter) = &self.connection.stalled {
            counter.inc();
        }
        Poll::Ready(())
    }
}

impl<F> Drop for TimedStream<F> {
    fn drop(&mut self) {
        self.mark(false);
    }
}
