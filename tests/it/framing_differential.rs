//! Request framing read two ways: by lanyard, and by a strict reader of
//! RFC 9112 §6 written here as the model. Generated heads carry the
//! `Transfer-Encoding` and `Content-Length` fields that front ends and
//! back ends read differently (case, spacing, signs, lists, duplicates,
//! both at once) and bodies whose chunk lines do the same, followed on the
//! same connection by a canary request. Whatever lanyard forwards, the
//! strict reader reads the same way: the canary reaches the upstream only
//! when the strict reader sees it as a request of its own, and a body
//! reaches it with the strict reader's length. Where two readers could
//! differ, lanyard refuses (docs/proxy.md, "Errors made by lanyard itself").

use crate::support;

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use support::sidecar;
use support::upstream::TestUpstream;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sent after each generated request, on the same connection.
const CANARY: &[u8] = b"GET /smuggled HTTP/1.1\r\nhost: lanyard\r\nconnection: close\r\n\r\n";

const TE_NAMES: &[&str] = &[
    "transfer-encoding",
    "Transfer-Encoding",
    "TRANSFER-ENCODING",
    "transfer-encoding ",
    "transfer_encoding",
    "x-transfer-encoding",
];
const TE_VALUES: &[&str] = &[
    "chunked",
    "Chunked",
    " chunked",
    "chunked ",
    "\tchunked",
    "chunked, chunked",
    "chunked,",
    ",chunked",
    "identity",
    "gzip, chunked",
    "chunked, gzip",
    "chunked;q=1",
    "xchunked",
    "chunk",
    "",
];
const CL_NAMES: &[&str] = &[
    "content-length",
    "Content-Length",
    "content-length ",
    "content_length",
    "x-content-length",
];
const CL_VALUES: &[&str] = &[
    "5",
    "05",
    "+5",
    "-5",
    " 5",
    "5 ",
    "5,5",
    "5, 5",
    "0x5",
    "5.0",
    "",
    "0",
    "4",
    "6",
    "18446744073709551621",
];
/// Chunk-size lines for a 5-byte chunk, or ones that only look like one.
const CHUNK_SIZES: &[&str] = &[
    "5",
    "05",
    "5;ext=1",
    "5;",
    "5 ;x",
    "0x5",
    " 5",
    "+5",
    "5\t",
    "-5",
    "5 ",
    "fffffffffffffffff5",
];
const LAST_CHUNKS: &[&str] = &[
    "0\r\n\r\n",
    "0\r\nx-trailer: y\r\n\r\n",
    "00\r\n\r\n",
    "0;x\r\n\r\n",
    "0\n\n",
    "0\r\n\n",
];
const LINE_ENDS: &[&str] = &["\r\n", "\n", "\r"];

/// One generated request: its framing fields, in order, and its body.
#[derive(Debug, Clone)]
struct Case {
    fields: Vec<(&'static str, &'static str)>,
    body: Vec<u8>,
}

impl Case {
    fn bytes(&self) -> Vec<u8> {
        let mut out = b"POST /upload HTTP/1.1\r\nhost: lanyard\r\n".to_vec();
        for (name, value) in &self.fields {
            out.extend_from_slice(format!("{name}:{value}\r\n").as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out.extend_from_slice(CANARY);
        out
    }
}

fn case() -> impl Strategy<Value = Case> {
    let field = prop_oneof![
        (select(TE_NAMES), select(TE_VALUES)),
        (select(CL_NAMES), select(CL_VALUES)),
    ];
    let chunked = (select(CHUNK_SIZES), select(LINE_ENDS), select(LAST_CHUNKS))
        .prop_map(|(size, end, last)| format!("{size}{end}hello\r\n{last}").into_bytes());
    let body = prop_oneof![Just(b"hello".to_vec()), Just(Vec::new()), chunked];
    (prop::collection::vec(field, 0..3), body).prop_map(|(fields, body)| Case { fields, body })
}

/// How the strict reader reads a request stream.
#[derive(Debug, PartialEq)]
enum Reading {
    /// Its framing has more than one reading, or none: in its head's
    /// fields (`head`), or in a chunk line, which a proxy streaming the
    /// body meets after it has forwarded the head.
    Refused { head: bool },
    /// One request with a body of this length (`None`: the stream ends
    /// inside it), and whether a request for the canary's target follows.
    Read { body: Option<usize>, canary: bool },
}

/// RFC 9112 §6.1-6.3 and §7.1, read strictly: at most one
/// `Transfer-Encoding` field, exactly `chunked`; at most one
/// `Content-Length`, plain digits; never both; chunk lines of hex digits,
/// optional extensions, CRLF.
fn strict_reading(stream: &[u8]) -> Reading {
    let mut fields = [httparse::EMPTY_HEADER; 16];
    let mut request = httparse::Request::new(&mut fields);
    let Ok(httparse::Status::Complete(head_len)) = request.parse(stream) else {
        return Reading::Refused { head: true };
    };
    let values = |name: &str| -> Vec<&[u8]> {
        let fields = request.headers.iter();
        let named = fields.filter(|f| f.name.eq_ignore_ascii_case(name));
        named.map(|f| f.value.trim_ascii()).collect()
    };
    let (te, cl) = (values("transfer-encoding"), values("content-length"));
    let rest = &stream[head_len..];
    let (body, after) = match (te.as_slice(), cl.as_slice()) {
        ([], []) => (Some(0), rest),
        ([coding], []) if coding.eq_ignore_ascii_case(b"chunked") => match chunked(rest) {
            Some((len, after)) => (Some(len), after),
            None => return Reading::Refused { head: false },
        },
        ([], [length]) if !length.is_empty() && length.iter().all(u8::is_ascii_digit) => {
            let Some(len) = std::str::from_utf8(length)
                .ok()
                .and_then(|l| l.parse::<usize>().ok())
            else {
                return Reading::Refused { head: true };
            };
            match rest.get(len..) {
                Some(after) => (Some(len), after),
                None => (None, &[][..]),
            }
        }
        _ => return Reading::Refused { head: true },
    };
    Reading::Read {
        body,
        canary: reads_canary(after),
    }
}

/// Whether `data` starts with a request for the canary's target: a
/// stray body before it makes its method longer, not its target other.
fn reads_canary(data: &[u8]) -> bool {
    let mut fields = [httparse::EMPTY_HEADER; 16];
    let mut request = httparse::Request::new(&mut fields);
    matches!(request.parse(data), Ok(httparse::Status::Complete(_)))
        && request.path == Some("/smuggled")
}

/// A chunked body at the start of `data`: its length and what follows
/// it; `None` for any line the strict reader does not take.
fn chunked(mut data: &[u8]) -> Option<(usize, &[u8])> {
    let mut total = 0usize;
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n")?;
        let line = &data[..end];
        if line.contains(&b'\n') || line.contains(&b'\r') {
            return None;
        }
        // Whitespace may come before an extension's `;` (RFC 9112 §7.1.1's
        // BWS), not after the size alone.
        let digits = match line.iter().position(|&b| b == b';') {
            Some(semicolon) => line[..semicolon].trim_ascii_end(),
            None => line,
        };
        if digits.is_empty() || digits.len() > 16 || !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        let size = usize::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()?;
        data = &data[end + 2..];
        if size == 0 {
            return trailers(data).map(|after| (total, after));
        }
        let chunk_end = data.get(size..size + 2)?;
        if chunk_end != b"\r\n" {
            return None;
        }
        total += size;
        data = &data[size + 2..];
    }
}

/// The trailer section after the last chunk: what follows it.
fn trailers(mut data: &[u8]) -> Option<&[u8]> {
    loop {
        let end = data.windows(2).position(|w| w == b"\r\n")?;
        let line = &data[..end];
        if line.is_empty() {
            return Some(&data[2..]);
        }
        if line.contains(&b'\n') || line.contains(&b'\r') || !line.contains(&b':') {
            return None;
        }
        data = &data[end + 2..];
    }
}

/// What lanyard made of one case, as its client and its upstream saw it.
#[derive(Debug)]
struct Seen {
    /// The body length the upstream answered `/upload` with, if it did.
    upload: Option<usize>,
    canary_forwarded: bool,
    requests_forwarded: u64,
}

async fn through_lanyard(proxy: &str, upstream: &TestUpstream, case: &Case) -> Seen {
    let before = upstream.requests();
    let mut stream = TcpStream::connect(proxy.trim_start_matches("http://"))
        .await
        .unwrap();
    // lanyard may answer and close before reading it all. The stream is
    // not half-closed: hyper would then drop the pipelined canary. A body
    // or head the stream ends inside is given up at the sidecar's 1 s
    // timeouts.
    let _ = stream.write_all(&case.bytes()).await;
    let mut answers = Vec::new();
    tokio::time::timeout(std::time::Duration::from_secs(10), async {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = stream.read(&mut buf).await {
            answers.extend_from_slice(&buf[..n]);
        }
    })
    .await
    .expect("lanyard closes the connection in time");
    let answers = String::from_utf8_lossy(&answers);
    let upload = answers
        .split_once("\r\n\r\n")
        .filter(|(head, _)| head.starts_with("HTTP/1.1 200"))
        .and_then(|(_, body)| {
            let digits: String = body.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        });
    Seen {
        upload,
        canary_forwarded: answers.contains("/smuggled"),
        requests_forwarded: upstream.requests() - before,
    }
}

fn agrees(case: &Case, seen: &Seen) -> Result<(), TestCaseError> {
    let stream = case.bytes();
    let reading = strict_reading(&stream);
    let shown = String::from_utf8_lossy(&stream);
    let reads_canary = matches!(reading, Reading::Read { canary: true, .. });
    prop_assert!(
        !seen.canary_forwarded || reads_canary,
        "lanyard forwarded the canary, which the strict reader reads as no request of its own ({reading:?}): {shown:?}"
    );
    if let (
        Some(answered),
        Reading::Read {
            body: Some(len), ..
        },
    ) = (seen.upload, &reading)
    {
        prop_assert_eq!(answered, *len, "the body's length differs: {:?}", shown);
    }
    if let Reading::Refused { head } = reading {
        prop_assert!(
            seen.upload.is_none(),
            "a body with no single reading was answered: {shown:?}"
        );
        prop_assert!(
            !head || seen.requests_forwarded == 0,
            "a head with no single reading was forwarded: {shown:?}"
        );
    }
    Ok(())
}

#[test]
fn whatever_lanyard_forwards_a_strict_reader_reads_the_same_way() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (upstream, running) = runtime.block_on(sidecar::echoing(&[
        ("LANYARD_HEADER_TIMEOUT", "1s"),
        ("LANYARD_BODY_TIMEOUT", "1s"),
    ]));
    let config = Config {
        cases: 1024,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&case(), |case| {
        let seen = runtime.block_on(through_lanyard(&running.proxy, &upstream, &case));
        agrees(&case, &seen)
    });
    if let Err(failure) = outcome {
        panic!("{failure}");
    }
}

/// The model itself, on the cases it must get right.
#[test]
fn the_strict_reader_reads_plain_framing_and_refuses_the_rest() {
    let read = |fields: Vec<(&'static str, &'static str)>, body: &[u8]| {
        strict_reading(
            &Case {
                fields,
                body: body.to_vec(),
            }
            .bytes(),
        )
    };
    let whole = |len| Reading::Read {
        body: Some(len),
        canary: true,
    };
    assert_eq!(read(vec![("content-length", "5")], b"hello"), whole(5));
    assert_eq!(
        read(
            vec![("transfer-encoding", "chunked")],
            b"5\r\nhello\r\n0\r\n\r\n"
        ),
        whole(5)
    );
    assert_eq!(read(vec![], b""), whole(0));
    // The stray "o" makes the canary's method "oGET": still a request for
    // its target, as a back end would read it.
    assert_eq!(read(vec![("content-length", "4")], b"hello"), whole(4));
    assert_eq!(
        read(vec![("content-length", "9")], b"hello"),
        Reading::Read {
            body: Some(9),
            canary: false
        }
    );
    for refused in [
        vec![("content-length", "+5")],
        vec![("content-length", "5"), ("content-length", "5")],
        vec![("transfer-encoding", "chunked"), ("content-length", "5")],
        vec![("transfer-encoding", "gzip, chunked")],
    ] {
        assert_eq!(read(refused, b"hello"), Reading::Refused { head: true });
    }
    assert_eq!(
        read(
            vec![("transfer-encoding", "chunked")],
            b"0x5\r\nhello\r\n0\r\n\r\n"
        ),
        Reading::Refused { head: false }
    );
}
