//! A body read whole, gathered into one buffer as its frames arrive.
//!
//! `http_body_util`'s `collect()` keeps every frame's `Bytes`, and a frame
//! that hyper read off a socket is a slice of that read's buffer (8 KiB or
//! more): a peer that sends a body one byte per TCP segment makes each byte
//! pin a buffer, so a 64 KiB cap on bytes becomes hundreds of megabytes
//! held. Copying each frame into one buffer and dropping it at once makes a
//! body cost the bytes received, however it is framed (docs/proxy.md "Limits").
//! Every body lanyard reads whole goes through here.

use std::pin::pin;

use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt;
use hyper::body::Body;

/// Why a body could not be read whole.
#[derive(Debug, thiserror::Error)]
pub enum CollectError<E> {
    /// Its length, declared or read so far, is over the limit.
    #[error("the body is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// The body itself failed (the peer left, a framing error).
    #[error("reading the body failed")]
    Read(#[source] E),
}

impl<E> CollectError<E> {
    /// Whether the body was refused for its size.
    pub fn is_too_large(&self) -> bool {
        matches!(self, CollectError::TooLarge { .. })
    }
}

/// Reads `body` to its end, at most `limit` bytes of data, into one buffer.
/// Trailers are dropped. A body that declares more than `limit` (its
/// `Content-Length`) is refused before any of it is read.
pub async fn collect<B>(body: B, limit: usize) -> Result<Bytes, CollectError<B::Error>>
where
    B: Body<Data = Bytes>,
{
    let mut body = pin!(body);
    let declared = body.size_hint().lower();
    if declared > limit as u64 {
        return Err(CollectError::TooLarge { limit });
    }
    // Sized for what is declared, so a body of known length is never
    // copied twice; one of unknown length grows as it comes.
    let mut gathered = BytesMut::with_capacity(declared as usize);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(CollectError::Read)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if gathered.len() + data.len() > limit {
            return Err(CollectError::TooLarge { limit });
        }
        gathered.extend_from_slice(&data);
    }
    Ok(gathered.freeze())
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Poll};

    use http_body_util::Full;
    use hyper::body::Frame;

    use super::*;

    /// A frame's backing buffer, as hyper's read buffer is: a large
    /// allocation of which the frame is a one-byte slice. Counts how many
    /// are alive.
    struct ReadBuffer {
        bytes: Vec<u8>,
        alive: Arc<AtomicUsize>,
    }

    impl AsRef<[u8]> for ReadBuffer {
        fn as_ref(&self) -> &[u8] {
            &self.bytes[..1]
        }
    }

    impl Drop for ReadBuffer {
        fn drop(&mut self) {
            self.alive.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A body of `left` one-byte frames, each in a buffer of its own.
    struct OneByteFrames {
        left: usize,
        alive: Arc<AtomicUsize>,
        most_alive: usize,
    }

    impl Body for OneByteFrames {
        type Data = Bytes;
        type Error = Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
            if self.left == 0 {
                return Poll::Ready(None);
            }
            self.left -= 1;
            let now = self.alive.fetch_add(1, Ordering::Relaxed) + 1;
            self.most_alive = self.most_alive.max(now);
            let mut bytes = vec![0u8; 8192];
            bytes[0] = (self.left % 251) as u8;
            let buffer = ReadBuffer {
                bytes,
                alive: self.alive.clone(),
            };
            Poll::Ready(Some(Ok(Frame::data(Bytes::from_owner(buffer)))))
        }
    }

    #[tokio::test]
    async fn one_byte_frames_are_gathered_and_each_frame_freed_as_it_is_read() {
        let alive = Arc::new(AtomicUsize::new(0));
        let mut body = OneByteFrames {
            left: 4096,
            alive: alive.clone(),
            most_alive: 0,
        };
        let whole = collect(&mut body, 4096).await.unwrap();
        assert_eq!(whole.len(), 4096);
        assert!(
            whole
                .iter()
                .rev()
                .enumerate()
                .all(|(i, b)| *b == (i % 251) as u8)
        );
        assert_eq!(alive.load(Ordering::Relaxed), 0);
        assert_eq!(body.most_alive, 1, "one read buffer held at a time");
    }

    #[tokio::test]
    async fn a_body_over_the_limit_is_refused_declared_or_read() {
        let declared = collect(Full::new(Bytes::from_static(b"12345")), 4).await;
        assert!(declared.unwrap_err().is_too_large());
        let mut frames = OneByteFrames {
            left: 5,
            alive: Arc::new(AtomicUsize::new(0)),
            most_alive: 0,
        };
        let read = collect(&mut frames, 4).await;
        assert!(matches!(read, Err(CollectError::TooLarge { limit: 4 })));
        let exact = collect(Full::new(Bytes::from_static(b"1234")), 4).await;
        assert_eq!(&exact.unwrap()[..], b"1234");
    }
}
