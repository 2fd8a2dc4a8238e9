//! Answers whose end shows only as it comes (an upstream's chunked one)
//! through the proxy, to clients that stop taking them: an HTTP/2 stream
//! whose last frame waits behind a window of a byte is reset at
//! `LANYARD_SEND_TIMEOUT` and counted while its connection stays open,
//! as is one given its window a byte at a time and then none; a client
//! that reads through a one-byte window gets the whole answer; and an
//! HTTP/1.1 client that stops reading is closed and counted.

use crate::support;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use h2::{Reason, RecvStream};
use support::flood::{PROMPTLY, metric, non_reader, stalled_after, until_closed};
use support::h2raw::{ZeroWindow, assert_one_byte_then_cancelled};
use support::sidecar;
use support::upstream::TestUpstream;
use tokio::task::JoinSet;
use tokio::time::Instant;

const STALLED: &str = r#"lanyard_connections_stalled_total{listener="proxy"}"#;
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// Time past a deadline kept for a loaded CI machine to act on it: the
/// bounds below are "the timeout plus this", never a claim about speed.
const MARGIN: Duration = Duration::from_secs(15);
/// A few KiB: one chunk from the upstream, one frame to the client.
const ANSWER: usize = 4 * 1024;

const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A sidecar in front of a [`TestUpstream`], with its first token.
async fn sidecar(send_timeout: &str) -> (TestUpstream, sidecar::Running) {
    sidecar::echoing(&[("LANYARD_SEND_TIMEOUT", send_timeout)]).await
}

/// Reads `body`, giving back each byte's window for the first `released`
/// bytes (one WINDOW_UPDATE of a byte each, as the window is a byte) and
/// none after; the bytes received and the stream's reset reason, `None`
/// when it ended.
async fn read_releasing(mut body: RecvStream, released: usize) -> (usize, Option<Reason>) {
    let mut received = 0;
    loop {
        match body.data().await {
            Some(Ok(data)) => {
                let give = data.len().min(released.saturating_sub(received));
                received += data.len();
                if give > 0 {
                    body.flow_control().release_capacity(give).unwrap();
                }
            }
            Some(Err(err)) => return (received, err.reason()),
            None => return (received, None),
        }
    }
}

/// Opens `streams` streams for a chunked answer on one connection whose
/// window is a byte, each reading as [`read_releasing`]; what each got,
/// once every one has ended, and the connection.
async fn hold_chunked(
    running: &sidecar::Running,
    streams: usize,
    released: usize,
    limit: Duration,
) -> (Vec<(usize, Option<Reason>)>, ZeroWindow) {
    let proxy = running.process.proxy_addr.unwrap();
    let mut connection = ZeroWindow::with_window(CLIENT, proxy, 1).await;
    let mut readers = JoinSet::new();
    for _ in 0..streams {
        let path = format!("/chunked?bytes={ANSWER}");
        let held = connection
            .hold(&path, &[])
            .await
            .expect("the answer's head");
        assert_eq!(held.status, 200);
        readers.spawn(read_releasing(held.body, released));
    }
    let ended = tokio::time::timeout(limit, readers.join_all())
        .await
        .expect("every stream ended in time");
    (ended, connection)
}

#[tokio::test]
async fn a_chunked_answer_behind_a_one_byte_window_is_reset_and_counted() {
    const STREAMS: usize = 8;
    let (_upstream, running) = sidecar("2s").await;
    let began = Instant::now();
    let (ended, connection) = hold_chunked(&running, STREAMS, 0, SEND_TIMEOUT + MARGIN).await;
    assert_one_byte_then_cancelled(ended, began, SEND_TIMEOUT);
    assert_eq!(metric(&running.admin, STALLED).await, STREAMS as f64);
    assert!(
        !connection.is_closed(),
        "the streams reset, not the connection"
    );
}

#[tokio::test]
async fn a_chunked_answer_given_window_a_byte_at_a_time_then_none_is_reset_and_counted() {
    const RELEASED: usize = 100;
    let (_upstream, running) = sidecar("2s").await;
    let (ended, connection) = hold_chunked(&running, 1, RELEASED, SEND_TIMEOUT + MARGIN).await;
    assert_eq!(
        ended,
        [(RELEASED + 1, Some(Reason::CANCEL))],
        "each byte given back brought one more, then a reset"
    );
    assert_eq!(metric(&running.admin, STALLED).await, 1.0);
    assert!(!connection.is_closed());
}

#[tokio::test]
async fn a_chunked_answer_read_through_a_one_byte_window_arrives_whole() {
    // The default send timeout: a window of a byte costs a round trip per
    // byte, and the frame must drain within it.
    let (_upstream, running) = sidecar("30s").await;
    let (ended, _connection) = hold_chunked(&running, 1, usize::MAX, PROMPTLY).await;
    assert_eq!(ended, [(ANSWER, None)]);
    assert_eq!(metric(&running.admin, STALLED).await, 0.0);
}

#[tokio::test]
async fn an_http1_client_that_stops_reading_a_chunked_answer_is_closed_and_counted() {
    // Far more than the socket buffers between the upstream and the
    // client hold (a few MiB on loopback), so lanyard's writes wait.
    const BODY: usize = 64 * 1024 * 1024;
    let (_upstream, running) = sidecar("2s").await;
    let proxy = running.process.proxy_addr.unwrap();
    let request = format!("GET /chunked?bytes={BODY} HTTP/1.1\r\nhost: lanyard\r\n\r\n");
    let (mut client, began) = non_reader(proxy, &request).await;

    stalled_after(&running.admin, STALLED, began, SEND_TIMEOUT).await;
    // Reading now drains what the buffers held, then finds the end: the
    // answer was cut, not resumed.
    let received = until_closed(&mut client, PROMPTLY).await;
    assert!(received < BODY, "{received} bytes: the whole answer came");
    assert_eq!(metric(&running.admin, STALLED).await, 1.0);
}
