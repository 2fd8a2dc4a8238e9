use super::head::{MAX_FIELD_NAME_BYTES, MAX_TARGET_BYTES};
use super::*;

use std::collections::VecDeque;
use std::task::Waker;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A client that sends its bytes in the given reads, then ends.
struct Client {
    reads: VecDeque<Vec<u8>>,
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(read) = self.reads.front_mut() {
            let n = read.len().min(buf.remaining());
            buf.put_slice(&read[..n]);
            read.drain(..n);
            if read.is_empty() {
                self.reads.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// How reading the adapter stopped.
#[derive(Debug, PartialEq)]
enum End {
    Eof,
    /// Pending with nothing left to come: the refused connection's silence.
    Silent,
    Failed,
}

/// What hyper would read, and what was left behind.
#[derive(Debug)]
struct Seen {
    bytes: Vec<u8>,
    end: End,
    refused: Option<(u64, HeadRefusal)>,
    /// The most the adapter's own buffer held at once, in capacity.
    most_held: usize,
}

/// Ways a stream may arrive: (bytes per client read, hyper's read size).
const DELIVERIES: [(usize, usize); 4] = [
    (usize::MAX, 64 * 1024),
    (1, 64 * 1024),
    (usize::MAX, 1),
    (7, 5),
];

const MAX_HEAD: usize = 8 * 1024;

fn read_through(input: &[u8], client_read: usize, hyper_read: usize, max_head: usize) -> Seen {
    let reads = input
        .chunks(client_read.min(input.len().max(1)))
        .map(<[u8]>::to_vec)
        .collect();
    let (mut framing, refused) = Http1Framing::new(Client { reads }, max_head);
    let mut cx = Context::from_waker(Waker::noop());
    let mut bytes = Vec::new();
    let mut most_held = 0;
    let mut space = vec![0u8; hyper_read];
    let end = loop {
        let mut buf = ReadBuf::new(&mut space);
        let polled = Pin::new(&mut framing).poll_read(&mut cx, &mut buf);
        most_held = most_held.max(framing.held.capacity());
        match polled {
            Poll::Ready(Ok(())) if buf.filled().is_empty() => break End::Eof,
            Poll::Ready(Ok(())) => bytes.extend_from_slice(buf.filled()),
            Poll::Ready(Err(err)) => {
                assert_eq!(err.kind(), io::ErrorKind::InvalidData);
                break End::Failed;
            }
            Poll::Pending => break End::Silent,
        }
    };
    Seen {
        bytes,
        end,
        refused: refused.0.get(),
        most_held,
    }
}

/// Reads `input` through every delivery, checking each with `check`.
fn for_each_delivery(input: &[u8], max_head: usize, check: impl Fn(&Seen, &str)) {
    for (client_read, hyper_read) in DELIVERIES {
        let seen = read_through(input, client_read, hyper_read, max_head);
        check(
            &seen,
            &format!("client reads of {client_read}, hyper reads of {hyper_read}"),
        );
    }
}

fn passes_unchanged(input: &[u8]) {
    for_each_delivery(input, MAX_HEAD, |seen, how| {
        assert_eq!(
            String::from_utf8_lossy(&seen.bytes),
            String::from_utf8_lossy(input),
            "{how}"
        );
        assert_eq!(seen.end, End::Eof, "{how}");
        assert_eq!(seen.refused, None, "{how}");
    });
}

fn refused_as(input: &[u8], max_head: usize, refusal: HeadRefusal) {
    refused_after(b"", input, 0, max_head, refusal);
}

/// `good` passes, then the head in `bad`, the `index`th, is refused and
/// none of it reaches hyper.
fn refused_after(good: &[u8], bad: &[u8], index: u64, max_head: usize, refusal: HeadRefusal) {
    let input = [good, bad].concat();
    let expected = [good, STAND_IN].concat();
    for_each_delivery(&input, max_head, |seen, how| {
        assert_eq!(
            String::from_utf8_lossy(&seen.bytes),
            String::from_utf8_lossy(&expected),
            "{how}"
        );
        assert_eq!(seen.end, End::Silent, "{how}");
        assert_eq!(seen.refused, Some((index, refusal)), "{how}");
    });
}

/// The framing of `input`, whose head is `head`, breaks in the body:
/// the head and what came before the break reach hyper, then an error.
fn fails(head: &str, body: &str, max_head: usize) {
    let input = format!("{head}{body}");
    for_each_delivery(input.as_bytes(), max_head, |seen, how| {
        assert_eq!(seen.end, End::Failed, "{how}");
        assert!(seen.bytes.starts_with(head.as_bytes()), "{how}");
        assert!(input.as_bytes().starts_with(&seen.bytes), "{how}");
        assert_eq!(seen.refused, None, "{how}");
    });
}

const GET: &[u8] = b"GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\n\r\n";
const POST: &[u8] = b"POST /form HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello=world";
const CHUNKED: &[u8] = b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked \r\n\r\n\
    5;name=value\r\nhello\r\nA ; x=\"y\"\r\n0123456789\r\n0\r\nDigest: abc\r\nX-Checksum: 1\r\n\r\n";

#[test]
fn a_plain_get_passes_byte_for_byte() {
    passes_unchanged(GET);
}

#[test]
fn pipelined_requests_pass_byte_for_byte_in_order() {
    passes_unchanged(&[GET, POST, CHUNKED, GET].concat());
    passes_unchanged(
        &[
            CHUNKED,
            b"POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
            GET,
        ]
        .concat(),
    );
}

#[test]
fn a_stream_split_anywhere_passes_the_same() {
    let input = [POST, CHUNKED, GET].concat();
    for at in 1..input.len() {
        let (first, second) = input.split_at(at);
        let reads = VecDeque::from([first.to_vec(), second.to_vec()]);
        let (mut framing, _) = Http1Framing::new(Client { reads }, MAX_HEAD);
        let mut seen = Vec::new();
        let mut cx = Context::from_waker(Waker::noop());
        let mut space = [0u8; 4096];
        loop {
            let mut buf = ReadBuf::new(&mut space);
            match Pin::new(&mut framing).poll_read(&mut cx, &mut buf) {
                Poll::Ready(Ok(())) if buf.filled().is_empty() => break,
                Poll::Ready(Ok(())) => seen.extend_from_slice(buf.filled()),
                other => panic!("split at {at}: {other:?}"),
            }
        }
        assert_eq!(seen, input, "split at {at}");
    }
}

#[test]
fn empty_lines_before_a_head_are_dropped() {
    let input = [b"\r\n\n".as_slice(), POST, b"\r\n", GET].concat();
    for_each_delivery(&input, MAX_HEAD, |seen, how| {
        assert_eq!(seen.bytes, [POST, GET].concat(), "{how}");
        assert_eq!(seen.end, End::Eof, "{how}");
    });
}

#[test]
fn framing_with_more_than_one_reading_is_refused() {
    let framing = HeadRefusal::Framing;
    let cases: [&[u8]; 14] = [
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
        b"POST / HTTP/1.1\r\nTransfer-Encoding:\r\n\r\n",
        b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nContent-Length:\r\n\r\n",
        b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n",
        // A length hyper keeps as a marker, answering it with a bare 431.
        b"POST / HTTP/1.1\r\nContent-Length: 18446744073709551615\r\n\r\n",
    ];
    for case in cases {
        refused_as(case, MAX_HEAD, framing);
    }
}

#[test]
fn a_refusal_after_two_good_requests_records_index_two() {
    let bad = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc";
    refused_after(
        &[POST, CHUNKED].concat(),
        bad,
        2,
        MAX_HEAD,
        HeadRefusal::Framing,
    );
}

#[test]
fn a_head_over_the_limit_is_refused_as_too_large() {
    let head = |value: usize| format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "a".repeat(value));
    let at_limit = head(1024 - head(0).len());
    assert_eq!(at_limit.len(), 1024);
    for_each_delivery(at_limit.as_bytes(), 1024, |seen, how| {
        assert_eq!(seen.bytes, at_limit.as_bytes(), "{how}");
    });
    refused_as(
        head(1024 + 1 - head(0).len()).as_bytes(),
        1024,
        HeadRefusal::TooLarge,
    );
    // Never finished: refused once past the limit, without waiting.
    let unfinished = format!("GET / HTTP/1.1\r\nX-Big: {}", "a".repeat(2048));
    refused_as(unfinished.as_bytes(), 1024, HeadRefusal::TooLarge);
}

#[test]
fn a_head_of_101_fields_is_refused_as_too_large() {
    let fields: String = (0..101).map(|i| format!("X-F{i}: v\r\n")).collect();
    refused_as(
        format!("GET / HTTP/1.1\r\n{fields}\r\n").as_bytes(),
        MAX_HEAD,
        HeadRefusal::TooLarge,
    );
    let fields: String = (0..100).map(|i| format!("X-F{i}: v\r\n")).collect();
    passes_unchanged(format!("GET / HTTP/1.1\r\n{fields}\r\n").as_bytes());
}

#[test]
fn a_target_over_hypers_limit_is_refused_as_too_long() {
    let head = |len: usize| format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(len - 1));
    refused_as(
        head(MAX_TARGET_BYTES + 1).as_bytes(),
        128 * 1024,
        HeadRefusal::UriTooLong,
    );
    let at_limit = head(MAX_TARGET_BYTES);
    for_each_delivery(at_limit.as_bytes(), 128 * 1024, |seen, how| {
        assert_eq!(seen.bytes, at_limit.as_bytes(), "{how}");
    });
}

#[test]
fn a_field_name_over_hypers_limit_is_refused_as_too_large() {
    let head = format!(
        "GET / HTTP/1.1\r\n{}: v\r\n\r\n",
        "x".repeat(MAX_FIELD_NAME_BYTES)
    );
    refused_as(head.as_bytes(), 128 * 1024, HeadRefusal::TooLarge);
}

#[test]
fn heads_httparse_or_hyper_cannot_read_are_refused_as_malformed() {
    let cases: [&[u8]; 7] = [
        b"GET / HTTP/1.1\r\nX-Folded: a\r\n b\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
        b"garbage\r\n\r\n",
        b"GET / HTTP/1.1\r\nX-Nul: a\0b\r\n\r\n",
        b"GET / HTTP/1.1\r\nBad Name: a\r\n\r\n",
        b"GET / HTTP/2.0\r\n\r\n",
        // httparse takes these targets; the `http` crate does not.
        b"GET /a<b HTTP/1.1\r\n\r\n",
    ];
    for case in cases {
        refused_as(case, MAX_HEAD, HeadRefusal::Malformed);
    }
    refused_as(
        b"GET http://[::1 HTTP/1.1\r\n\r\n",
        MAX_HEAD,
        HeadRefusal::Malformed,
    );
    passes_unchanged(b"GET http://example.com/a\"b?d=`e` HTTP/1.1\r\n\r\n");
    passes_unchanged(b"OPTIONS * HTTP/1.1\r\n\r\n");
}

#[test]
fn broken_chunk_framing_ends_the_connection() {
    let head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    let long_extension = format!(
        "5;{}\r\nhello\r\n0\r\n\r\n",
        "x".repeat(MAX_CHUNK_LINE_BYTES)
    );
    let bodies: [&str; 13] = [
        "zz\r\nhello\r\n0\r\n\r\n",
        // Whitespace after a size with no extension after it: not in RFC
        // 9112 §7.1's grammar, and read apart by readers that stop at it.
        "5 \r\nhello\r\n0\r\n\r\n",
        "5\t\r\nhello\r\n0\r\n\r\n",
        "5\r\nhello\r\n0 \r\n\r\n",
        "\r\n\r\n",
        ";ext\r\n\r\n",
        "5\nhello\r\n0\r\n\r\n",
        "5;a\nb\r\nhello\r\n0\r\n\r\n",
        "5\r\nhelloXX0\r\n\r\n",
        "11111111111111111\r\n",
        "0\r\nX-Bare-Lf: a\nb\r\n\r\n",
        "0\r\n folded: a\r\n\r\n",
        &long_extension,
    ];
    for body in bodies {
        fails(head, body, MAX_HEAD);
    }
    let trailers: String = (0..100)
        .map(|i| format!("X-T{i}: {}\r\n", "v".repeat(20)))
        .collect();
    fails(head, &format!("0\r\n{trailers}\r\n"), 1024);
}

#[test]
fn chunk_extensions_may_follow_whitespace() {
    let head = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    for body in [
        "5;a=b\r\nhello\r\n0\r\n\r\n",
        "5 ;a\r\nhello\r\n0\t;b\r\n\r\n",
    ] {
        passes_unchanged([head.as_bytes(), body.as_bytes(), GET].concat().as_slice());
    }
}

#[test]
fn a_large_body_passes_whole_and_nothing_large_is_held() {
    let body: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let head = format!(
        "PUT /blob HTTP/1.1\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let input = [head.as_bytes(), &body, GET].concat();
    let seen = read_through(&input, 64 * 1024, 64 * 1024, MAX_HEAD);
    assert!(seen.bytes == input, "the body changed on the way");
    assert_eq!(seen.end, End::Eof);
    assert_eq!(seen.most_held, 0);
    // Reads that end in the middle of a head: the held part is small.
    let seen = read_through(&input, 64 * 1024 - 10, 16 * 1024, MAX_HEAD);
    assert!(seen.bytes == input, "the body changed on the way");
    assert!(
        seen.most_held <= MAX_HEAD + HELD_READ_BYTES,
        "held {}",
        seen.most_held
    );
}

#[test]
fn a_large_chunked_body_passes_whole() {
    let chunk = vec![b'x'; 10_000];
    let mut input = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..100 {
        input.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        input.extend_from_slice(&chunk);
        input.extend_from_slice(b"\r\n");
    }
    input.extend_from_slice(b"0\r\n\r\n");
    input.extend_from_slice(GET);
    let seen = read_through(&input, 32 * 1024, 64 * 1024, MAX_HEAD);
    assert!(seen.bytes == input, "the body changed on the way");
    assert!(
        seen.most_held <= MAX_CHUNK_LINE_BYTES + HELD_READ_BYTES,
        "held {}",
        seen.most_held
    );
}

#[test]
fn an_idle_connection_holds_nothing_after_a_split_head() {
    let reads = POST.chunks(3).map(<[u8]>::to_vec).collect();
    let (mut framing, _) = Http1Framing::new(Client { reads }, MAX_HEAD);
    let mut cx = Context::from_waker(Waker::noop());
    let mut space = [0u8; 1024];
    let mut got = 0;
    while got < POST.len() {
        let mut buf = ReadBuf::new(&mut space);
        assert!(
            Pin::new(&mut framing)
                .poll_read(&mut cx, &mut buf)
                .is_ready()
        );
        got += buf.filled().len();
    }
    assert_eq!(framing.held.capacity(), 0);
}

#[test]
fn a_head_cut_off_by_the_end_of_the_stream_is_not_passed_on() {
    for_each_delivery(
        &[POST, b"GET / HTTP/1.1\r\nHost:"].concat(),
        MAX_HEAD,
        |seen, how| {
            assert_eq!(seen.bytes, POST, "{how}");
            assert_eq!(seen.end, End::Eof, "{how}");
        },
    );
}

#[test]
fn refusals_answer_with_their_status() {
    assert_eq!(HeadRefusal::Malformed.status(), StatusCode::BAD_REQUEST);
    assert_eq!(HeadRefusal::Framing.status(), StatusCode::BAD_REQUEST);
    assert_eq!(HeadRefusal::UriTooLong.status(), StatusCode::URI_TOO_LONG);
    assert_eq!(
        HeadRefusal::TooLarge.status(),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE
    );
    let refused = Refused::default();
    refused.0.set(Some((2, HeadRefusal::Framing)));
    assert_eq!(refused.of(1), None);
    assert_eq!(refused.of(2), Some(HeadRefusal::Framing));
}

#[tokio::test(start_paused = true)]
async fn reads_wait_for_the_client_and_writes_pass_through() {
    let (mut client, server) = tokio::io::duplex(64);
    let (mut framing, refused) = Http1Framing::new(server, MAX_HEAD);
    let sending = tokio::spawn(async move {
        for part in POST.chunks(10) {
            client.write_all(part).await.unwrap();
            tokio::task::yield_now().await;
        }
        client
            .write_all(b"GET / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx")
            .await
            .unwrap();
        let mut answer = [0u8; 8];
        client.read_exact(&mut answer).await.unwrap();
        answer
    });
    let mut seen = vec![0u8; POST.len() + STAND_IN.len()];
    framing.read_exact(&mut seen).await.unwrap();
    assert_eq!(seen, [POST, STAND_IN].concat());
    assert_eq!(refused.of(1), Some(HeadRefusal::Framing));
    framing.write_all(b"HTTP/1.1").await.unwrap();
    assert_eq!(&sending.await.unwrap(), b"HTTP/1.1");
    let mut more = [0u8; 1];
    let silent =
        tokio::time::timeout(std::time::Duration::from_secs(60), framing.read(&mut more)).await;
    assert!(silent.is_err(), "a refused connection reads nothing more");
}
