//! A raw HTTP/2 client (the `h2` crate) that grants lanyard no
//! flow-control window (`SETTINGS_INITIAL_WINDOW_SIZE` 0) and never
//! releases any: its answers' heads arrive (HEADERS are not flow
//! controlled), none of their bodies. Its connection is driven in a task of
//! its own, so PINGs are answered and the client looks alive: what a client
//! that holds streams open without reading them looks like.

use std::net::{IpAddr, SocketAddr};

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{Reason, RecvStream};
use http::{Request, StatusCode};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::flood::connect_from;

/// One zero-window HTTP/2 connection from a chosen address.
pub struct ZeroWindow {
    to: SocketAddr,
    requests: SendRequest<Bytes>,
    closed: watch::Receiver<bool>,
}

impl ZeroWindow {
    /// Connects from `source` and sends the preface with a zero initial
    /// window. The handshake does not wait for lanyard's SETTINGS, so a
    /// connection lanyard refuses (with a raw HTTP/1.1 503) shows only as
    /// its first request failing.
    pub async fn open(source: IpAddr, to: SocketAddr) -> ZeroWindow {
        ZeroWindow::with_window(source, to, 0).await
    }

    /// As [`ZeroWindow::open`], granting each stream `window` bytes that
    /// it never gives back.
    pub async fn with_window(source: IpAddr, to: SocketAddr, window: u32) -> ZeroWindow {
        let io = connect_from(source, to).await;
        let (requests, connection) = h2::client::Builder::new()
            .initial_window_size(window)
            .handshake::<_, Bytes>(io)
            .await
            .expect("the HTTP/2 preface is written");
        let (closed_tx, closed) = watch::channel(false);
        tokio::spawn(async move {
            // Ended by lanyard (a close, a GOAWAY, a refusal) or by the
            // test dropping its handles; either way, no longer held.
            let _ = connection.await;
            closed_tx.send_replace(true);
        });
        ZeroWindow {
            to,
            requests,
            closed,
        }
    }

    /// Sends `GET path` with `headers` and waits for the answer's head;
    /// its body is held behind the zero window. An error when lanyard
    /// refused the connection or reset the stream before answering.
    pub async fn hold(&mut self, path: &str, headers: &[(&str, &str)]) -> Result<Held, h2::Error> {
        let mut request = Request::get(format!("http://{}{path}", self.to));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request.body(()).unwrap();
        let mut ready = self.requests.clone().ready().await?;
        let (answer, _) = ready.send_request(request, true)?;
        let answer = answer.await?;
        Ok(Held {
            status: answer.status(),
            body: answer.into_body(),
        })
    }

    /// Whether the connection has ended.
    pub fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Completes when the connection ends.
    pub fn closed(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut closed = self.closed.clone();
        async move {
            let _ = closed.wait_for(|closed| *closed).await;
        }
    }
}

/// Completes when the first of `connections` ends.
pub async fn any_closed(connections: &[ZeroWindow]) {
    let mut waits = JoinSet::new();
    for connection in connections {
        waits.spawn(connection.closed());
    }
    waits.join_next().await;
}

/// An answer whose head has arrived and whose body waits behind a zero
/// window.
pub struct Held {
    pub status: StatusCode,
    pub body: RecvStream,
}

impl Held {
    /// Waits for the stream to end, and returns lanyard's reset reason;
    /// `None` when it ended otherwise (the body ended, or the whole
    /// connection went without a reset of this stream). Data arriving
    /// through a zero window fails the test.
    pub async fn reset(mut self) -> Option<Reason> {
        match self.body.data().await {
            Some(Ok(data)) => panic!("{} bytes arrived through a zero window", data.len()),
            Some(Err(err)) if err.is_reset() && err.is_remote() => err.reason(),
            Some(Err(_)) | None => None,
        }
    }
}

/// Each of `ended` (the bytes its stream received, and how it ended)
/// took the one byte of its window and no more, then lanyard's reset
/// (CANCEL), none sooner than `timeout` after `began`.
pub fn assert_one_byte_then_cancelled(
    ended: Vec<(usize, Option<Reason>)>,
    began: tokio::time::Instant,
    timeout: std::time::Duration,
) {
    for (received, reason) in ended {
        assert_eq!(received, 1, "the one byte of window, and no more");
        assert_eq!(reason, Some(Reason::CANCEL), "reset, not ended");
    }
    assert!(began.elapsed() >= timeout, "cut before the send timeout");
}
