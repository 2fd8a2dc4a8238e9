//! The HTTP/1.1 request stream's framing, judged before hyper reads it.
//!
//! hyper's HTTP/1 server reads framing more leniently than the load
//! balancers in front of lanyard may: it takes the last coding of the last
//! `Transfer-Encoding` field, drops `Content-Length` when both are sent,
//! and has no strict switch. Two readers that disagree on where a body
//! ends are how request smuggling starts, so [`Http1Framing`] reads the
//! raw stream first and hands hyper only heads whose framing has a single
//! reading: at most one `Transfer-Encoding` field, exactly `chunked`, on
//! HTTP/1.1; at most one `Content-Length`, plain digits; never both.
//!
//! A refused head never reaches hyper. In its place hyper reads a fixed
//! stand-in request, which the service, told by [`Refused`], answers with
//! the refusal and `connection: close`; nothing more is read. Heads hyper
//! would refuse itself (too large, too many fields, a target it cannot
//! hold) are refused here too, so that every such answer carries the
//! listener's headers rather than hyper's bare ones.
//!
//! Bodies pass through as they arrive, scanned where they landed in
//! hyper's read buffer; only a head or chunk line split across reads is
//! gathered here, so an upload costs no extra copy.

use std::cell::Cell;
use std::io;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BytesMut};
use http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use head::{body_framing, has_blank_line};

mod head;

/// What hyper reads in place of a refused head.
const STAND_IN: &[u8] = b"GET / HTTP/1.1\r\nhost: lanyard\r\n\r\n";

/// Fields a head may carry: hyper's own default, so that no head handed on
/// is one hyper refuses for its count.
const MAX_FIELDS: usize = 100;

/// Most bytes read at once into the adapter's own buffer, which is only
/// read into to finish a head or chunk line split across reads.
const HELD_READ_BYTES: usize = 8 * 1024;

/// Longest chunk size line, extensions included. Clients send a few hex
/// digits; hyper's only bound is 16 KiB of extensions over a whole body.
const MAX_CHUNK_LINE_BYTES: usize = 4 * 1024;

/// What was wrong with a request head the pre-parse refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadRefusal {
    /// Not an HTTP/1.x head httparse can read, or a target hyper cannot.
    Malformed,
    /// Body framing that could be read more than one way.
    Framing,
    /// A request target longer than hyper holds.
    UriTooLong,
    /// Over the listener's head size, or over 100 fields.
    TooLarge,
}

impl HeadRefusal {
    /// The status the refusal is answered with.
    pub fn status(self) -> StatusCode {
        match self {
            HeadRefusal::Malformed | HeadRefusal::Framing => StatusCode::BAD_REQUEST,
            HeadRefusal::UriTooLong => StatusCode::URI_TOO_LONG,
            HeadRefusal::TooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        }
    }

    /// A fixed sentence for logs and answer bodies.
    pub fn reason(self) -> &'static str {
        match self {
            HeadRefusal::Malformed => "the request head is malformed",
            HeadRefusal::Framing => {
                "the request's body framing is ambiguous: Transfer-Encoding may only be chunked, in one field and without Content-Length, and Content-Length only one field of digits"
            }
            HeadRefusal::UriTooLong => "the request target is too long",
            HeadRefusal::TooLarge => "the request head is too large",
        }
    }
}

/// The head the pre-parse refused on a connection, if any.
#[derive(Debug, Clone, Default)]
pub(super) struct Refused(Rc<Cell<Option<(u64, HeadRefusal)>>>);

impl Refused {
    /// Whether the connection's `index`th request (from 0) is the refused
    /// head's stand-in.
    pub(super) fn of(&self, index: u64) -> Option<HeadRefusal> {
        match self.0.get() {
            Some((at, refusal)) if at == index => Some(refusal),
            _ => None,
        }
    }
}

/// A client connection as hyper's HTTP/1 server should read it: heads
/// judged whole before hyper sees them, bodies passed through as framed,
/// a refused head replaced by a stand-in. Writes pass through untouched.
pub(super) struct Http1Framing<R> {
    inner: R,
    scanner: Scanner,
    /// Bytes read but not yet handed on: an unfinished head, chunk line or
    /// trailer line, and whatever arrived with it.
    held: BytesMut,
    /// How many of `held`'s first bytes are judged and may go to hyper.
    judged: usize,
}

impl<R> Http1Framing<R> {
    /// `inner` read with heads of at most `max_head_bytes`, and the handle
    /// on which a refusal is recorded for the service.
    pub(super) fn new(inner: R, max_head_bytes: usize) -> (Self, Refused) {
        let refused = Refused::default();
        let scanner = Scanner {
            place: Place::NEXT_HEAD,
            heads: 0,
            max_head_bytes,
            refused: refused.clone(),
        };
        let framing = Http1Framing {
            inner,
            scanner,
            held: BytesMut::new(),
            judged: 0,
        };
        (framing, refused)
    }
}

impl<R: AsyncRead + Unpin> Http1Framing<R> {
    /// Reads into `buf` and judges what landed there, keeping back what
    /// cannot be judged yet; `true` when some of it may go to hyper, or
    /// the stream ended.
    fn read_in_place(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<bool>> {
        let start = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        let end = buf.filled().len();
        if end == start {
            return Poll::Ready(Ok(true));
        }
        // `out` is where judged bytes end, `at` where unjudged ones begin;
        // they part only where empty lines before a head were dropped.
        let mut out = start;
        let mut at = start;
        while at < end {
            let landed = buf.filled().get(at..end).unwrap_or_default();
            match self.scanner.judge(landed) {
                Verdict::Pass(n) => {
                    if out != at {
                        buf.filled_mut().copy_within(at..at + n, out);
                    }
                    out += n;
                    at += n;
                }
                Verdict::Skip(n) => at += n,
                Verdict::Wait => {
                    // An unfinished element, which the scanner has bounded.
                    self.hold(landed);
                    break;
                }
                // What was judged before still goes to hyper: the requests
                // ahead of a refused head are served, and so are those ahead
                // of broken chunk framing, whose failure the next read reports.
                Verdict::Stop => break,
            }
        }
        buf.set_filled(out);
        Poll::Ready(Ok(out > start))
    }

    /// Judges what is held, reading more into it when an element there is
    /// unfinished; `true` when the stream ended.
    fn judge_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<bool>> {
        match self.scanner.judge(&self.held) {
            Verdict::Pass(n) => self.judged = n,
            Verdict::Skip(n) => {
                self.held.advance(n);
                self.release_if_empty();
            }
            Verdict::Stop => self.held = BytesMut::new(),
            Verdict::Wait => {
                let mut space = [MaybeUninit::<u8>::uninit(); HELD_READ_BYTES];
                let mut read = ReadBuf::uninit(&mut space);
                ready!(Pin::new(&mut self.inner).poll_read(cx, &mut read))?;
                if read.filled().is_empty() {
                    // An element cut off by the end of the stream is not
                    // passed on: hyper sees a clean end.
                    self.held = BytesMut::new();
                    self.scanner.place = Place::Ended;
                    return Poll::Ready(Ok(true));
                }
                self.hold(read.filled());
            }
        }
        Poll::Ready(Ok(false))
    }

    /// Keeps `bytes` of an unfinished element. The buffer grows by
    /// doubling but never past what the scanner lets an element be (a
    /// head of `max_head_bytes`) and one read: `BytesMut` left to itself
    /// could double past it, and a thousand slow heads would hold twice
    /// what docs/proxy.md "Limits" counts.
    fn hold(&mut self, bytes: &[u8]) {
        let needed = self.held.len() + bytes.len();
        if needed > self.held.capacity() {
            let most = self.scanner.max_head_bytes + HELD_READ_BYTES;
            let capacity = needed.max(self.held.capacity().saturating_mul(2).min(most));
            let mut grown = BytesMut::with_capacity(capacity);
            grown.extend_from_slice(&self.held);
            self.held = grown;
        }
        self.held.extend_from_slice(bytes);
    }

    /// Frees the held buffer once it is empty, so that an idle keep-alive
    /// connection holds nothing.
    fn release_if_empty(&mut self) {
        if self.held.is_empty() {
            self.held = BytesMut::new();
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Http1Framing<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.judged > 0 {
                let n = this.judged.min(buf.remaining()).min(this.held.len());
                buf.put_slice(&this.held[..n]);
                this.held.advance(n);
                this.judged -= n;
                this.release_if_empty();
                return Poll::Ready(Ok(()));
            }
            match this.scanner.place {
                Place::StandIn { sent } => {
                    let rest = STAND_IN.get(sent..).unwrap_or_default();
                    let n = rest.len().min(buf.remaining());
                    buf.put_slice(&rest[..n]);
                    this.scanner.place = match sent + n {
                        sent if sent < STAND_IN.len() => Place::StandIn { sent },
                        _ => Place::Silent,
                    };
                    return Poll::Ready(Ok(()));
                }
                // No waker is kept: nothing more is ever read. hyper closes
                // the connection once it has written the refusal.
                Place::Silent => return Poll::Pending,
                Place::Ended => return Poll::Ready(Ok(())),
                Place::Broken { why } => {
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, why)));
                }
                _ => {}
            }
            let step = match this.held.is_empty() {
                true => this.read_in_place(cx, buf),
                false => this.judge_held(cx),
            };
            if ready!(step)? {
                return Poll::Ready(Ok(()));
            }
        }
    }
}

impl<R: AsyncWrite + Unpin> AsyncWrite for Http1Framing<R> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
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

/// Where the request stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    /// A head, whose first `scanned` bytes hold no blank line; `line_ended`
    /// once a line end in it has been parsed.
    Head { scanned: usize, line_ended: bool },
    /// `left` bytes of a `Content-Length` body.
    Sized { left: u64 },
    /// A chunk size line.
    ChunkSize,
    /// `left` bytes of chunk data.
    ChunkData { left: u64 },
    /// The CRLF after chunk data.
    ChunkEnd,
    /// Trailer fields after the last chunk, `seen` bytes of them so far.
    Trailers { seen: usize },
    /// A refused head's stand-in, `sent` bytes of it handed on.
    StandIn { sent: usize },
    /// The stand-in has been handed on; nothing more is read.
    Silent,
    /// The stream ended inside an element; every read ends.
    Ended,
    /// The stream broke its body framing, as `why` says; every read fails.
    Broken { why: &'static str },
}

impl Place {
    const NEXT_HEAD: Place = Place::Head {
        scanned: 0,
        line_ended: false,
    };
}

/// What may be done with the bytes at the start of what was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The first `n` may go to hyper as they are.
    Pass(usize),
    /// The first `n` are empty lines before a head, dropped.
    Skip(usize),
    /// The element starting here is unfinished: more bytes are needed.
    Wait,
    /// The head starting here was refused and recorded, or the body
    /// framing broke here: this and all after it are dropped.
    Stop,
}

/// The request stream's state machine, judging one element at a time.
struct Scanner {
    place: Place,
    /// Heads judged so far: the index the next one will have.
    heads: u64,
    max_head_bytes: usize,
    refused: Refused,
}

impl Scanner {
    /// Judges the element at the start of `data`, the stream's next unjudged
    /// bytes, moving on past it when it may pass.
    fn judge(&mut self, data: &[u8]) -> Verdict {
        match self.place {
            Place::Head {
                scanned,
                line_ended,
            } => self.judge_head(data, scanned, line_ended),
            Place::Sized { left } => self.pass_body(data, left, |left| match left {
                0 => Place::NEXT_HEAD,
                left => Place::Sized { left },
            }),
            Place::ChunkData { left } => self.pass_body(data, left, |left| match left {
                0 => Place::ChunkEnd,
                left => Place::ChunkData { left },
            }),
            Place::ChunkSize => self.judge_chunk_size(data),
            Place::ChunkEnd => match data {
                [b'\r', b'\n', ..] => {
                    self.place = Place::ChunkSize;
                    Verdict::Pass(2)
                }
                [] | [b'\r'] => Verdict::Wait,
                _ => self.fail("chunk data not followed by CRLF"),
            },
            Place::Trailers { seen } => self.judge_trailer(data, seen),
            Place::StandIn { .. } | Place::Silent | Place::Ended | Place::Broken { .. } => {
                Verdict::Stop
            }
        }
    }

    /// Passes as much of `left` body bytes as `data` holds.
    fn pass_body(&mut self, data: &[u8], left: u64, then: fn(u64) -> Place) -> Verdict {
        let n = usize::try_from(left).map_or(data.len(), |left| left.min(data.len()));
        if n == 0 {
            return Verdict::Wait;
        }
        self.place = then(left - n as u64);
        Verdict::Pass(n)
    }

    /// Judges a head, passing it whole once it is complete and sound.
    fn judge_head(&mut self, data: &[u8], scanned: usize, line_ended: bool) -> Verdict {
        if scanned == 0 {
            // Empty lines before a request line are ignored (RFC 9112
            // §2.2). Dropping them here, not counting them into the head,
            // keeps a run of them from being re-parsed as it grows.
            match data {
                [b'\n', ..] => return Verdict::Skip(1),
                [b'\r', b'\n', ..] => return Verdict::Skip(2),
                [] | [b'\r'] => return Verdict::Wait,
                _ => {}
            }
        }
        // httparse starts over on every call, so a head arriving in many
        // reads is parsed only when a parse can tell something new: at the
        // first look (a garbage request line is refused at once), at its
        // first line end, and when a blank line may have ended it.
        let fresh = data.get(scanned..).unwrap_or_default();
        let first_line_end = !line_ended && fresh.contains(&b'\n');
        if scanned > 0 && !first_line_end && !has_blank_line(data, scanned) {
            return self.unfinished_head(data.len(), line_ended);
        }
        let line_ended = line_ended || first_line_end;
        let mut fields: [MaybeUninit<httparse::Header<'_>>; MAX_FIELDS] =
            [const { MaybeUninit::uninit() }; MAX_FIELDS];
        let mut req = httparse::Request::new(&mut []);
        match req.parse_with_uninit_headers(data, &mut fields) {
            Ok(httparse::Status::Complete(len)) if len > self.max_head_bytes => {
                self.refuse(HeadRefusal::TooLarge)
            }
            Ok(httparse::Status::Complete(len)) => match body_framing(&req) {
                Ok(next) => {
                    self.heads += 1;
                    self.place = next;
                    Verdict::Pass(len)
                }
                Err(refusal) => self.refuse(refusal),
            },
            Ok(httparse::Status::Partial) => self.unfinished_head(data.len(), line_ended),
            Err(httparse::Error::TooManyHeaders) => self.refuse(HeadRefusal::TooLarge),
            Err(_) => self.refuse(HeadRefusal::Malformed),
        }
    }

    /// Waits for more of a head `len` bytes long so far, unless it is
    /// already over the limit.
    fn unfinished_head(&mut self, len: usize, line_ended: bool) -> Verdict {
        if len > self.max_head_bytes {
            return self.refuse(HeadRefusal::TooLarge);
        }
        self.place = Place::Head {
            scanned: len,
            line_ended,
        };
        Verdict::Wait
    }

    /// Records the refusal of the head at hand; from here hyper reads the
    /// stand-in.
    fn refuse(&mut self, refusal: HeadRefusal) -> Verdict {
        self.refused.0.set(Some((self.heads, refusal)));
        self.heads += 1;
        self.place = Place::StandIn { sent: 0 };
        Verdict::Stop
    }

    /// Ends the stream: its body framing broke, as `why` says. hyper is
    /// handed an error, and closes the connection.
    fn fail(&mut self, why: &'static str) -> Verdict {
        self.place = Place::Broken { why };
        Verdict::Stop
    }

    /// Judges a chunk size line, passing it whole once it is complete.
    fn judge_chunk_size(&mut self, data: &[u8]) -> Verdict {
        let window = &data[..data.len().min(MAX_CHUNK_LINE_BYTES)];
        let Some(lf) = window.iter().position(|&b| b == b'\n') else {
            return match data.len() >= MAX_CHUNK_LINE_BYTES {
                true => self.fail("chunk size line too long"),
                false => Verdict::Wait,
            };
        };
        let line = &window[..=lf];
        // httparse reads a line with no digits as size 0, which hyper
        // refuses: the two would disagree on where the body ends.
        if !line.first().is_some_and(u8::is_ascii_hexdigit) {
            return self.fail("chunk size line without a size");
        }
        // httparse takes whitespace after the size with no extension
        // after it ("5 "), which RFC 9112 §7.1 does not: a reader that stops
        // at it, or reads the line as unsized, would end the chunk elsewhere.
        let mut rest = line.iter().skip_while(|b| b.is_ascii_hexdigit());
        let extension = rest.clone().find(|&&b| b != b' ' && b != b'\t') == Some(&b';');
        if !extension && (rest.next(), rest.next()) != (Some(&b'\r'), Some(&b'\n')) {
            return self.fail("malformed chunk size line");
        }
        // Anything short of the whole line ending in its one CRLF (a bare LF
        // as the line end or inside an extension) is refused: hyper refuses
        // those too, and a reader that took either for a line end would
        // start the chunk where hyper does not.
        match httparse::parse_chunk_size(line) {
            Ok(httparse::Status::Complete((len, size))) if len == line.len() => {
                self.place = match size {
                    0 => Place::Trailers { seen: 0 },
                    left => Place::ChunkData { left },
                };
                Verdict::Pass(len)
            }
            _ => self.fail("malformed chunk size line"),
        }
    }

    /// Judges one trailer line, or the empty line that ends the body.
    fn judge_trailer(&mut self, data: &[u8], seen: usize) -> Verdict {
        match data {
            [b'\r', b'\n', ..] => {
                self.place = Place::NEXT_HEAD;
                return Verdict::Pass(2);
            }
            [] | [b'\r'] => return Verdict::Wait,
            _ => {}
        }
        let budget = self.max_head_bytes.saturating_sub(seen);
        let window = &data[..data.len().min(budget)];
        let Some(lf) = window.iter().position(|&b| b == b'\n') else {
            return match data.len() >= budget {
                true => self.fail("chunked trailer section too large"),
                false => Verdict::Wait,
            };
        };
        // hyper ends trailer lines only at CRLF and reads a bare LF as part
        // of a line; a trailer with a bare CR or LF, or folded onto the
        // line before, is refused rather than read either way.
        let line = &window[..=lf];
        let field = line.strip_suffix(b"\r\n").unwrap_or_default();
        let folded = field.first().is_some_and(|&b| b == b' ' || b == b'\t');
        if field.is_empty() || folded || field.contains(&b'\r') {
            return self.fail("malformed chunked trailer line");
        }
        self.place = Place::Trailers {
            seen: seen + line.len(),
        };
        Verdict::Pass(line.len())
    }
}

#[cfg(test)]
mod tests;
