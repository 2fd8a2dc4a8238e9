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
//! resets it (`RST_STREAM` `CANCEL`), freeing what it held. So the task
//! must live until the client has taken the answer: hyper ends it as soon
//! as it has queued a frame that ends the stream, which would leave that
//! frame in h2 with nothing timing it. hyper waits for window before it
//! queues a frame, so an answer of known end keeps back its last byte as a
//! frame of its own: the frame before it is queued, and the last one waits,
//! timed, until the client has taken what was queued. (An answer whose end
//! shows only as it comes, an upstream's chunked one, has no last byte to
//! keep back: its last frame may stay queued after its task.)
//!
//! Progress is seen about once per frame, so a client is counted as taking
//! bytes if it takes a frame (16 KiB) per `LANYARD_SEND_TIMEOUT`: about
//! 550 bytes a second at the default.

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
        let mut this = self.project();
        let Some(stream) = this.stream.as_ref() else {
            return this.inner.poll_frame(cx);
        };
        stream.asked();
        let mut data = match this.rest.take() {
            Some(rest) => rest,
            None => match std::task::ready!(this.inner.as_mut().poll_frame(cx)) {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(trailers) => return Poll::Ready(Some(Ok(trailers))),
                },
                other => return Poll::Ready(other),
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
