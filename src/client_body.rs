//! A client's request body, bounded in time, with its failures told apart
//! from the upstream's.
//!
//! The header timeout ends once a request's headers are in; without a
//! bound of its own, a body announced and never sent would hold its
//! connection (or HTTP/2 stream) for ever. And when a body breaks off
//! while it is being forwarded, the upstream request fails with it: that
//! failure is the client's, answered 400 when an answer can still reach
//! it, and never counted or logged as the upstream's (docs/tokens.md "Failure
//! behaviour", clients of the proxy).
//!
//! It is read, never sent as it is: what carries its frames upstream wraps
//! it and is the `hyper::body::Body`, so this type is only the bounded
//! read, and a client's frames pass through one `Body` impl, not two.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body as _, Frame, Incoming, SizeHint};
use tokio::time::{Instant, Sleep};

/// A request body that fails once it has been silent for `idle`.
pub struct ClientBody {
    inner: Incoming,
    idle: Duration,
    /// Made at the first wait only: a body that arrives with its headers,
    /// as most small ones do, costs no timer.
    timer: Option<Pin<Box<Sleep>>>,
}

/// Why a client's body could not be read to its end.
#[derive(Debug, thiserror::Error)]
pub enum ClientBodyError {
    #[error("the request body was silent for longer than LANYARD_BODY_TIMEOUT")]
    Stalled,
    #[error("the client closed the connection or stream before its body ended")]
    Gone(#[source] hyper::Error),
    #[error("the request body is malformed")]
    Malformed(#[source] hyper::Error),
}

impl ClientBodyError {
    fn new(err: hyper::Error) -> Self {
        // An HTTP/1.1 connection closed mid-body, or an HTTP/2 stream the
        // client reset: nobody is left to answer.
        if err.is_incomplete_message() || err.is_canceled() || err.is_closed() {
            ClientBodyError::Gone(err)
        } else {
            ClientBodyError::Malformed(err)
        }
    }

    /// Whether a 400 can still tell the client what went wrong; otherwise
    /// the exchange is simply ended.
    pub fn answerable(&self) -> bool {
        matches!(self, ClientBodyError::Malformed(_))
    }

    /// This error, if it is somewhere in `err`'s chain: a request sent
    /// upstream fails with its body's error as the cause.
    pub fn find<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a ClientBodyError> {
        crate::outbound::causes(err).find_map(|cause| cause.downcast_ref::<ClientBodyError>())
    }
}

impl ClientBody {
    pub fn new(inner: Incoming, idle: Duration) -> Self {
        ClientBody {
            inner,
            idle,
            timer: None,
        }
    }

    /// The next frame, `None` at the end.
    pub async fn frame(&mut self) -> Option<Result<Frame<Bytes>, ClientBodyError>> {
        std::future::poll_fn(|cx| self.poll_frame(cx)).await
    }

    /// As [`hyper::body::Body::poll_frame`]: the next frame, or the error
    /// that ends the body, [`ClientBodyError::Stalled`] after `idle` of
    /// silence.
    pub fn poll_frame(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, ClientBodyError>>> {
        match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let idle = self.idle;
                if let Some(timer) = &mut self.timer {
                    timer.as_mut().reset(Instant::now() + idle);
                }
                Poll::Ready(frame.map(|frame| frame.map_err(ClientBodyError::new)))
            }
            Poll::Pending => {
                let idle = self.idle;
                let timer = self
                    .timer
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                match timer.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Some(Err(ClientBodyError::Stalled))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    pub fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    pub fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
