//! One connection's socket as hyper sees it: the bytes read to tell the
//! protocols apart served again first, and writes the client does not take
//! timed, so that a client that stops reading holds its connection no
//! longer than `LANYARD_SEND_TIMEOUT` (docs/proxy.md "Limits").
//!
//! A client that never reads fills its socket's buffers, and then every
//! write lanyard makes to it waits: TCP back-pressure, seen here as a write
//! that returns `Pending`. hyper would wait for ever, keeping the
//! connection's request in flight, so that neither the idle rule nor
//! eviction could take it.

use std::cell::Cell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::Stream;

/// Since when the connection's writes have been waiting for the client to
/// take bytes, shared by the socket (which records it) and the task that
/// drives the connection (which ends it).
#[derive(Default)]
pub(super) struct Writes {
    blocked_since: Cell<Option<Instant>>,
    blocked: Notify,
}

impl Writes {
    /// Completes once writes have been waiting, with no byte taken, for
    /// `limit`.
    pub(super) async fn stalled_for(&self, limit: Duration) {
        loop {
            let Some(since) = self.blocked_since.get() else {
                self.blocked.notified().await;
                continue;
            };
            tokio::time::sleep_until(since + limit).await;
            // Still the same wait: no write has gone through since.
            if self.blocked_since.get() == Some(since) {
                return;
            }
        }
    }

    fn record<T>(&self, poll: &Poll<io::Result<T>>) {
        match poll {
            Poll::Pending => {
                if self.blocked_since.get().is_none() {
                    self.blocked_since.set(Some(Instant::now()));
                    self.blocked.notify_one();
                }
            }
            Poll::Ready(_) => {
                if self.blocked_since.get().is_some() {
                    self.blocked_since.set(None);
                }
            }
        }
    }
}

/// A client's stream, its first bytes (already read) served again first,
/// its writes recorded in [`Writes`].
pub(super) struct Rewind {
    start: Bytes,
    stream: Stream,
    writes: Rc<Writes>,
}

impl Rewind {
    pub(super) fn new(start: Bytes, stream: Stream) -> (Self, Rc<Writes>) {
        let writes = Rc::new(Writes::default());
        let io = Rewind {
            start,
            stream,
            writes: writes.clone(),
        };
        (io, writes)
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.start.has_remaining() {
            let n = self.start.len().min(buf.remaining());
            buf.put_slice(&self.start[..n]);
            self.start.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.writes.record(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.writes.record(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_flush(cx);
        self.writes.record(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.writes.record(&poll);
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn writes_stalled_for_the_limit_are_told_and_a_write_that_goes_through_restarts_it() {
        let writes = Writes::default();
        let limit = Duration::from_secs(30);
        let stalled = writes.stalled_for(limit);
        tokio::pin!(stalled);
        // Nothing waits yet: never stalled.
        assert!(
            tokio::time::timeout(Duration::from_secs(300), stalled.as_mut())
                .await
                .is_err()
        );
        writes.record::<usize>(&Poll::Pending);
        tokio::time::advance(Duration::from_secs(20)).await;
        writes.record(&Poll::Ready(Ok(1usize)));
        writes.record::<usize>(&Poll::Pending);
        let started = Instant::now();
        stalled.await;
        assert_eq!(
            started.elapsed(),
            limit,
            "counted from the last wait's start"
        );
    }
}
