//! A guard against HTTP/2 control-frame floods, between a client's
//! connection and hyper's HTTP/2 server.
//!
//! h2 answers every PING and SETTINGS, applies every WINDOW_UPDATE, and
//! ignores PRIORITY, RST_STREAM for streams it has forgotten, and frame
//! types it does not know, each before it reads the next frame: memory
//! holds, but nothing bounds how many a client may send, so one client
//! can keep a core busy and delay every other request on its thread
//! (8.3 million buffered PINGs took a core for seven seconds, and h2 sent
//! no GOAWAY). What carries requests h2 bounds itself, and is not counted
//! here: empty DATA frames (GOAWAY after 100), tiny ones (a budget that
//! larger ones refill), CONTINUATION, streams reset before they were
//! accepted, and its own error resets.
//!
//! [`ControlFrames`] passes bytes through untouched. It follows frame
//! boundaries in both directions, keeping nine bytes at most and never a
//! payload: each frame the client sends that does no work for a request
//! draws on its kind's allowance (a `Rule`), which time refills up to a
//! burst and the connection's work adds to (each request the client
//! opens, each answer frame and KiB the server writes), so that what a
//! client may send is bounded by time and by the work done for it. A
//! client over any allowance gets a read error from then on, and hyper
//! ends the connection.

use std::cell::Cell;
use std::convert::Infallible;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

/// What a client sends before its first frame.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A frame header's size: length (3 bytes), type, flags, stream (4).
const HEADER_LEN: usize = 9;

/// The frame types this guard tells apart (RFC 9113 section 6).
mod frame {
    pub(super) const DATA: u8 = 0x0;
    pub(super) const HEADERS: u8 = 0x1;
    pub(super) const PRIORITY: u8 = 0x2;
    pub(super) const RST_STREAM: u8 = 0x3;
    pub(super) const SETTINGS: u8 = 0x4;
    pub(super) const PUSH_PROMISE: u8 = 0x5;
    pub(super) const PING: u8 = 0x6;
    pub(super) const GOAWAY: u8 = 0x7;
    pub(super) const WINDOW_UPDATE: u8 = 0x8;
    pub(super) const CONTINUATION: u8 = 0x9;
}

/// How many frames of one kind a connection may send. Time refills the
/// allowance up to `burst`; work adds to it without a cap, so that what
/// a client draws from it stays in proportion to what was done for it.
#[derive(Debug, Clone, Copy)]
struct Rule {
    /// The kind's name, for the log and the error.
    frames: &'static str,
    /// What a new connection may send at once, and the most that time
    /// alone gives back. Most kinds allow 100: ten times what the busiest
    /// client sends as it starts (Firefox: SETTINGS, WINDOW_UPDATE, six
    /// PRIORITY), and well under a millisecond of h2's time (about 0.85 µs
    /// a frame).
    burst: u64,
    /// What time gives back each second.
    per_second: u64,
    /// What each HEADERS frame from the client (a request, or its
    /// trailers) adds.
    per_request: u64,
    /// What each DATA or HEADERS frame the server writes adds.
    per_answer_frame: u64,
    /// What each KiB the server writes adds.
    per_kib_written: u64,
}

/// SETTINGS: one as a client starts, one to acknowledge the server's, and
/// a few as it grows its windows (gRPC's and hyper's bandwidth estimators:
/// about ten doublings up to 16 MiB). Each makes h2 write an
/// acknowledgement, and a new initial window makes it visit every stream.
const SETTINGS: Rule = Rule {
    frames: "SETTINGS",
    burst: 100,
    per_second: 1,
    per_request: 0,
    per_answer_frame: 0,
    per_kib_written: 0,
};

/// PING: keep-alive and liveness checks come seconds apart (gRPC
/// keep-alive's 10 s minimum, Go's ReadIdleTimeout, a browser's check
/// before it reuses an idle connection), as do acknowledgements of the
/// server's own keep-alive pings. Bandwidth probes come faster, but only
/// after data: grpc-go sends one with the first DATA frame it receives
/// after each answer, for as long as its estimate is below its limit (a
/// stream of small messages keeps it below for ever), and grpc-go's own
/// server never holds a ping against a client when data went out since
/// the last one. So each answer frame earns one.
const PING: Rule = Rule {
    frames: "PING",
    burst: 100,
    per_second: 10,
    per_request: 0,
    per_answer_frame: 1,
    per_kib_written: 0,
};

/// WINDOW_UPDATE: a client gives back window for what it has read, one
/// update for the stream and one for the connection at most per read,
/// and most wait for half a window (h2, nghttp2, browsers) or 4 KiB (Go).
/// Downloading at loopback speed, that is tens of thousands a second, so
/// time is the wrong measure: Envoy allows 20 per DATA frame it sent
/// (twice `max_inbound_window_update_frames_per_data_frame_sent`) and 2
/// per stream opened. 10 per answer frame covers a client that updates
/// both windows for every frame, however small; the KiB term, one that
/// raised its frame size past 16 KiB and gives back every 4 KiB it reads.
const WINDOW_UPDATE: Rule = Rule {
    frames: "WINDOW_UPDATE",
    burst: 100,
    per_second: 1,
    per_request: 2,
    per_answer_frame: 10,
    per_kib_written: 1,
};

/// RST_STREAM: a client resets each stream it opened at most once. h2
/// bounds resets of streams not yet accepted (the rapid-reset attack),
/// but ignores a reset of a stream it has forgotten, which then costs
/// nothing to send again and again.
const RST_STREAM: Rule = Rule {
    frames: "RST_STREAM",
    burst: 100,
    per_second: 1,
    per_request: 1,
    per_answer_frame: 0,
    per_kib_written: 0,
};

/// PRIORITY and frame types h2 does not know, both of which it ignores:
/// Firefox builds its priority tree with six PRIORITY frames as it
/// starts, and re-prioritises open streams as tabs change; RFC 9218
/// clients send PRIORITY_UPDATE (0x10) for a stream; Chrome sends a
/// reserved type as GREASE. Envoy allows 100 PRIORITY per stream; 10 per
/// request is still far above any client.
const HINTS: Rule = Rule {
    frames: "PRIORITY or extension",
    burst: 100,
    per_second: 1,
    per_request: 10,
    per_answer_frame: 0,
    per_kib_written: 0,
};

/// GOAWAY: a client sends one, or two when it closes gracefully, and h2
/// visits every stream for each.
const GOAWAY: Rule = Rule {
    frames: "GOAWAY",
    burst: 10,
    per_second: 0,
    per_request: 0,
    per_answer_frame: 0,
    per_kib_written: 0,
};

/// A kind of frame that draws on an allowance of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Settings,
    Ping,
    WindowUpdate,
    Reset,
    Hint,
    GoAway,
}

impl Kind {
    const ALL: [Kind; 6] = [
        Kind::Settings,
        Kind::Ping,
        Kind::WindowUpdate,
        Kind::Reset,
        Kind::Hint,
        Kind::GoAway,
    ];

    fn rule(self) -> &'static Rule {
        match self {
            Kind::Settings => &SETTINGS,
            Kind::Ping => &PING,
            Kind::WindowUpdate => &WINDOW_UPDATE,
            Kind::Reset => &RST_STREAM,
            Kind::Hint => &HINTS,
            Kind::GoAway => &GOAWAY,
        }
    }
}

/// What a frame from the client means to the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inbound {
    /// HEADERS: a request, which earns its followers an allowance.
    Request,
    /// A frame that does no work for a request.
    Counted(Kind),
    /// A frame h2 bounds itself (DATA, CONTINUATION), or refuses from a
    /// client (PUSH_PROMISE).
    Uncounted,
}

impl Inbound {
    fn of(frame_type: u8) -> Inbound {
        match frame_type {
            frame::HEADERS => Inbound::Request,
            frame::DATA | frame::CONTINUATION | frame::PUSH_PROMISE => Inbound::Uncounted,
            frame::SETTINGS => Inbound::Counted(Kind::Settings),
            frame::PING => Inbound::Counted(Kind::Ping),
            frame::WINDOW_UPDATE => Inbound::Counted(Kind::WindowUpdate),
            frame::RST_STREAM => Inbound::Counted(Kind::Reset),
            frame::GOAWAY => Inbound::Counted(Kind::GoAway),
            frame::PRIORITY => Inbound::Counted(Kind::Hint),
            // Types h2 does not know, which it skips like PRIORITY.
            _ => Inbound::Counted(Kind::Hint),
        }
    }
}

/// One frame in the budget's fixed-point unit, so that time and bytes
/// can add a fraction of one; a power of two, so a KiB's share is exact.
const ONE_FRAME: u64 = 1 << 30;

/// A connection's allowances, one per [`Kind`]: a pure function of the
/// frames, the work and the time it is told of.
#[derive(Debug)]
struct Budget {
    /// Frames each kind may still send, in [`ONE_FRAME`] units.
    spare: [u64; Kind::ALL.len()],
    /// When time last refilled `spare`.
    refilled_at: Instant,
}

impl Budget {
    fn new(now: Instant) -> Self {
        Budget {
            spare: Kind::ALL.map(|kind| kind.rule().burst.saturating_mul(ONE_FRAME)),
            refilled_at: now,
        }
    }

    /// The client sent a HEADERS frame.
    fn requested(&mut self) {
        self.earn(|rule| rule.per_request.saturating_mul(ONE_FRAME));
    }

    /// The server wrote a DATA or HEADERS frame.
    fn answered(&mut self) {
        self.earn(|rule| rule.per_answer_frame.saturating_mul(ONE_FRAME));
    }

    /// The server wrote `bytes` bytes.
    fn wrote(&mut self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        self.earn(|rule| {
            (ONE_FRAME / 1024)
                .saturating_mul(bytes)
                .saturating_mul(rule.per_kib_written)
        });
    }

    fn earn(&mut self, amount: impl Fn(&Rule) -> u64) {
        for (spare, kind) in self.spare.iter_mut().zip(Kind::ALL) {
            *spare = spare.saturating_add(amount(kind.rule()));
        }
    }

    /// Draws one frame of `kind` at `now`; false when its allowance is
    /// spent.
    fn admit(&mut self, kind: Kind, now: Instant) -> bool {
        if now > self.refilled_at {
            self.refill(now);
        }
        let Some(spare) = self.spare.get_mut(kind as usize) else {
            return false;
        };
        match spare.checked_sub(ONE_FRAME) {
            Some(left) => {
                *spare = left;
                true
            }
            None => false,
        }
    }

    /// Gives each kind what the time since the last refill earns, up to
    /// its burst; an allowance that work raised past it keeps what it has.
    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled_at).as_nanos();
        self.refilled_at = now;
        for (spare, kind) in self.spare.iter_mut().zip(Kind::ALL) {
            let rule = kind.rule();
            let cap = rule.burst.saturating_mul(ONE_FRAME);
            let gained = elapsed
                .saturating_mul(u128::from(rule.per_second))
                .saturating_mul(u128::from(ONE_FRAME))
                / 1_000_000_000;
            let gained = u64::try_from(gained).unwrap_or(u64::MAX);
            if *spare < cap {
                *spare = spare.saturating_add(gained).min(cap);
            }
        }
    }
}

/// A frame header's fields that the guard needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FrameHeader {
    length: u32,
    frame_type: u8,
}

/// Where a byte stream stands among HTTP/2 frames.
#[derive(Debug)]
enum Position {
    /// Within the client preface, this many bytes of it matched.
    Preface(usize),
    /// Within a frame header, its first `filled` bytes in `head`.
    Header {
        head: [u8; HEADER_LEN],
        filled: usize,
    },
    /// Within a frame's payload, this many bytes of it still to pass.
    Payload(u32),
    /// The stream did not begin with the preface: it is not HTTP/2, and
    /// there is nothing to follow.
    Lost,
}

/// Follows one direction of a connection from frame to frame, across
/// reads of any size, keeping no payload.
#[derive(Debug)]
struct FrameCursor {
    at: Position,
}

impl FrameCursor {
    /// A cursor for what a client sends: the preface, then frames.
    fn client() -> Self {
        FrameCursor {
            at: Position::Preface(0),
        }
    }

    /// A cursor for what a server sends: frames from the first byte.
    fn server() -> Self {
        FrameCursor {
            at: Self::next_header(),
        }
    }

    fn next_header() -> Position {
        Position::Header {
            head: [0; HEADER_LEN],
            filled: 0,
        }
    }

    /// Follows `bytes`, the stream's next stretch, calling `seen` with each
    /// frame header as it completes; stops at `seen`'s first error.
    fn follow<E>(
        &mut self,
        mut bytes: &[u8],
        mut seen: impl FnMut(FrameHeader) -> Result<(), E>,
    ) -> Result<(), E> {
        while !bytes.is_empty() {
            match &mut self.at {
                Position::Preface(matched) => {
                    let expected = PREFACE.get(*matched..).unwrap_or_default();
                    let n = expected.len().min(bytes.len());
                    if bytes[..n] != expected[..n] {
                        self.at = Position::Lost;
                        return Ok(());
                    }
                    *matched += n;
                    bytes = &bytes[n..];
                    if *matched == PREFACE.len() {
                        self.at = Self::next_header();
                    }
                }
                Position::Header { head, filled } => {
                    let n = (HEADER_LEN - *filled).min(bytes.len());
                    head[*filled..*filled + n].copy_from_slice(&bytes[..n]);
                    *filled += n;
                    bytes = &bytes[n..];
                    if *filled == HEADER_LEN {
                        let [l0, l1, l2, frame_type, ..] = *head;
                        let length = u32::from_be_bytes([0, l0, l1, l2]);
                        self.at = match length {
                            0 => Self::next_header(),
                            _ => Position::Payload(length),
                        };
                        seen(FrameHeader { length, frame_type })?;
                    }
                }
                Position::Payload(remaining) => {
                    let n = bytes.len().min(*remaining as usize);
                    // `n` is at most `remaining`, a u32.
                    *remaining -= n as u32;
                    bytes = &bytes[n..];
                    if *remaining == 0 {
                        self.at = Self::next_header();
                    }
                }
                Position::Lost => return Ok(()),
            }
        }
        Ok(())
    }
}

/// Whether the connection was closed for flooding control frames.
#[derive(Debug, Clone, Default)]
pub(super) struct Flooded(Rc<Cell<bool>>);

impl Flooded {
    /// True once the client has been caught flooding.
    pub(super) fn get(&self) -> bool {
        self.0.get()
    }
}

/// An HTTP/2 server connection's I/O that fails every read once the
/// client has sent more control frames than its allowances (see the
/// module's opening comment); bytes pass through untouched either way.
#[derive(Debug)]
pub(super) struct ControlFrames<R> {
    inner: R,
    inbound: FrameCursor,
    outbound: FrameCursor,
    budget: Budget,
    /// The kind the client flooded, once it has.
    flood: Option<Kind>,
    flooded: Flooded,
}

impl<R> ControlFrames<R> {
    /// Guards `inner`, a server's connection to a client, which must still
    /// hold the client preface: a stream that does not start with it is
    /// not followed at all.
    pub(super) fn new(inner: R) -> (Self, Flooded) {
        let flooded = Flooded::default();
        let guard = ControlFrames {
            inner,
            inbound: FrameCursor::client(),
            outbound: FrameCursor::server(),
            budget: Budget::new(Instant::now()),
            flood: None,
            flooded: flooded.clone(),
        };
        (guard, flooded)
    }

    /// Counts the client's frames in `arrived`, and notes a flood.
    fn received(&mut self, arrived: &[u8]) -> io::Result<()> {
        let budget = &mut self.budget;
        // The clock once per read, not per frame: a flood brings hundreds.
        let mut now = None;
        let verdict = self
            .inbound
            .follow(arrived, |header| match Inbound::of(header.frame_type) {
                Inbound::Request => {
                    budget.requested();
                    Ok(())
                }
                Inbound::Counted(kind) => {
                    let now = *now.get_or_insert_with(Instant::now);
                    if budget.admit(kind, now) {
                        Ok(())
                    } else {
                        Err(kind)
                    }
                }
                Inbound::Uncounted => Ok(()),
            });
        if let Err(kind) = verdict {
            tracing::debug!(
                frames = kind.rule().frames,
                "client flooded HTTP/2 control frames; closing the connection"
            );
            self.flood = Some(kind);
            self.flooded.0.set(true);
            return Err(flood_error(kind));
        }
        Ok(())
    }

    /// Credits the work in `sent`, the next bytes written to the client.
    fn sent(&mut self, sent: &[u8]) {
        let budget = &mut self.budget;
        budget.wrote(sent.len());
        let Ok(()) = self.outbound.follow(sent, |header| {
            if matches!(header.frame_type, frame::DATA | frame::HEADERS) {
                budget.answered();
            }
            Ok::<(), Infallible>(())
        });
    }
}

/// The read error for a client that flooded `kind`.
fn flood_error(kind: Kind) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "client flooded the connection with HTTP/2 {} frames",
            kind.rule().frames
        ),
    )
}

impl<R: AsyncRead + Unpin> AsyncRead for ControlFrames<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(kind) = self.flood {
            return Poll::Ready(Err(flood_error(kind)));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let arrived = buf.filled().get(before..).unwrap_or_default();
        Poll::Ready(self.received(arrived))
    }
}

impl<R: AsyncWrite + Unpin> AsyncWrite for ControlFrames<R> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.inner).poll_write(cx, buf))?;
        self.sent(buf.get(..written).unwrap_or(buf));
        Poll::Ready(Ok(written))
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = ready!(Pin::new(&mut self.inner).poll_write_vectored(cx, bufs))?;
        let mut left = written;
        for slice in bufs {
            if left == 0 {
                break;
            }
            let n = left.min(slice.len());
            self.sent(&slice[..n]);
            left -= n;
        }
        Poll::Ready(Ok(written))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
