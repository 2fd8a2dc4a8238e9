//! A peer that sends a body one byte per frame costs lanyard the bytes it
//! sent, not a read buffer per byte (docs/proxy.md "Limits"): every body lanyard
//! reads whole is gathered into one buffer as its frames arrive. Each test
//! runs a `lanyard` child, so that its peak RSS (VmHWM) is its own, feeds
//! one of its readers a body in one-byte chunks (chunked encoding), each in
//! a write of its own with Nagle off and a pause after it so that lanyard
//! reads them one by one, and bounds the peak.
//!
//! A one-byte frame hyper reads off a socket is a slice of that read's
//! buffer. While frames are held, a buffer cannot be reused: the spare room
//! of the connection's first buffer takes the first thousand or so reads,
//! then each read gets an 8 KiB buffer of its own. The build before the
//! change kept every frame until the body ended, so a body of tens of
//! thousands of frames held that many buffers; each test says what that
//! build reached with what the test sends. (`/api/start` reads at most
//! 1 KiB: its frames fit in the first buffer's spare room, and that build
//! stayed as small there as this one.)

use crate::support;

use std::io::{self, Read as _, Write as _};
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use support::child::Process;
use support::sidecar::send;
use support::upstream::TestUpstream;
use support::{env, mock, settings, status_bytes};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

const MIB: u64 = 1024 * 1024;
/// Under the 64 KiB the readers tested here allow, with room for the JSON
/// around it.
const BODY_BYTES: usize = 60 * 1024;
/// `lanyard healthcheck` gives `/readyz` 5 s in all, so its answer is
/// smaller, and still far more frames than [`HEALTHCHECK_PEAK_LIMIT`]
/// allows held.
const READYZ_BYTES: usize = 16 * 1024;
/// Uploads through the proxy at once.
const UPLOADS: usize = 3;
/// A debug build idles near 23 MiB, and gathering a 64 KiB body costs it
/// little more.
const PEAK_LIMIT: u64 = 64 * MIB;
/// `lanyard healthcheck`, a debug build, peaks near 18 MiB.
const HEALTHCHECK_PEAK_LIMIT: u64 = 40 * MIB;
/// After each round of one-byte chunks: long enough that lanyard, in
/// another process, has read a chunk before the next arrives on its
/// connection (so that each comes in a read of its own), short enough that
/// 60 KiB of chunks take a few seconds. A sleep this short lasts 60 to
/// 100 µs on Linux (timer slack), which is what the tests were measured
/// with.
const PAUSE: Duration = Duration::from_micros(20);
/// Longer than any exchange here takes; a bound, not a wait.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(60);

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// Asserts that `pid`'s peak RSS stayed under `limit`, printing it beside
/// the RSS it had `before` the exchange.
fn assert_peak_under(limit: u64, what: &str, pid: u32, before: u64) {
    let peak = status_bytes(pid, "VmHWM:");
    println!(
        "{what}: RSS {:.1} MiB before, peak {:.1} MiB",
        mib(before),
        mib(peak)
    );
    assert!(
        peak < limit,
        "{what}: peak RSS {:.1} MiB ({:.1} MiB before) is over {} MiB",
        mib(peak),
        mib(before),
        limit / MIB
    );
}

/// Writes `body` on each of `streams` as chunked encoding's chunks of one
/// byte, each in a write of its own (the caller turned Nagle off): a chunk
/// to each stream in turn, then [`PAUSE`], so that a stream's next chunk
/// comes after lanyard has read the one before.
fn drip(streams: &mut [std::net::TcpStream], body: &[u8]) -> io::Result<()> {
    for &byte in body {
        for stream in &mut *streams {
            stream.write_all(&[b'1', b'\r', b'\n', byte, b'\r', b'\n'])?;
        }
        // Pacing, not waiting for something: the point is that lanyard
        // reads each chunk before the next is written.
        std::thread::sleep(PAUSE);
    }
    Ok(())
}

/// A JSON object with `fields` and a `pad` string that brings it to
/// `bytes`.
fn padded_json(fields: serde_json::Value, bytes: usize) -> Vec<u8> {
    let mut object = fields;
    let bare = object.to_string().len() + r#","pad":"""#.len();
    object["pad"] = "x".repeat(bytes - bare).into();
    let json = object.to_string().into_bytes();
    assert_eq!(json.len(), bytes);
    json
}

/// Accepts a connection and reads one request from it, its head and the
/// body its Content-Length announces: the connection, blocking, to answer
/// on with [`drip`].
async fn next_request(listener: &TcpListener) -> std::net::TcpStream {
    let (stream, _) = listener.accept().await.unwrap();
    stream.set_nodelay(true).unwrap();
    let mut reader = BufReader::new(stream);
    let mut length = 0;
    let mut line = String::new();
    loop {
        line.clear();
        assert!(reader.read_line(&mut line).await.unwrap() > 0, "no request");
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).await.unwrap();
    let stream = reader.into_inner().into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(EXCHANGE_LIMIT)).unwrap();
    stream
}

/// The head of an answer whose body comes in chunks, after which the
/// connection closes.
fn chunked_head(
    stream: &mut std::net::TcpStream,
    status: &str,
    content_type: &str,
) -> io::Result<()> {
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
    )
}

/// Ends a chunked body, then waits for the client to close the connection,
/// which it does once it has read the answer to its end.
fn finish_and_wait_for_close(stream: &mut std::net::TcpStream) -> io::Result<()> {
    stream.write_all(b"0\r\n\r\n")?;
    let mut rest = [0u8; 256];
    while stream.read(&mut rest)? > 0 {}
    Ok(())
}

/// A loopback HTTP/1.1 server answering every request `status` with `body`
/// one byte per chunk, one request per connection.
struct DrippingServer {
    url: String,
    /// Answers the client has read to their end so far.
    answered: watch::Receiver<usize>,
    _accepting: JoinSet<()>,
}

impl DrippingServer {
    async fn start(status: &'static str, content_type: &'static str, body: Vec<u8>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (count, answered) = watch::channel(0);
        let mut accepting = JoinSet::new();
        accepting.spawn(async move {
            let body = std::sync::Arc::new(body);
            let count = std::sync::Arc::new(count);
            loop {
                let mut stream = next_request(&listener).await;
                let (body, count) = (body.clone(), count.clone());
                tokio::task::spawn_blocking(move || {
                    let answer = chunked_head(&mut stream, status, content_type)
                        .and_then(|()| drip(std::slice::from_mut(&mut stream), &body))
                        .and_then(|()| finish_and_wait_for_close(&mut stream));
                    if answer.is_ok() {
                        count.send_modify(|n| *n += 1);
                    }
                });
            }
        });
        DrippingServer {
            url,
            answered,
            _accepting: accepting,
        }
    }

    /// Waits until `n` answers have been read to their end.
    async fn wait_for_answers(&self, n: usize) {
        let mut answered = self.answered.clone();
        tokio::time::timeout(EXCHANGE_LIMIT, answered.wait_for(|done| *done >= n))
            .await
            .expect("the answers were read in time")
            .unwrap();
    }
}

/// A credentials file for a service account whose token endpoint is
/// `token_uri`.
fn credentials_for(dir: &std::path::Path, token_uri: &str) -> String {
    let json = serde_json::json!({
        "type": "service_account",
        "organization_id": support::ORGANIZATION_ID,
        "client_id": support::CLIENT_ID,
        "private_key": support::fixture("rsa2048.pkcs8.pem"),
        "token_uri": token_uri,
        "iam_audience": "https://iam.example.com/",
    });
    let path = support::write(dir, "credentials.json", &json.to_string());
    path.to_str().unwrap().to_string()
}

// The build before the change, a release build idling at 10 MiB, peaked
// at 250 to 256 MiB here.
#[tokio::test]
async fn a_token_answer_sent_one_byte_per_frame_costs_its_bytes_not_a_buffer_per_byte() {
    let token = padded_json(
        serde_json::json!({
            "access_token": "one-byte-at-a-time",
            "token_type": "Bearer",
            "expires_in": 3600,
        }),
        BODY_BYTES,
    );
    let endpoint = DrippingServer::start("200 OK", "application/json", token).await;
    let dir = tempfile::tempdir().unwrap();
    let vars = env(&[
        (
            "SA_CREDENTIALS_FILE",
            &credentials_for(dir.path(), &endpoint.url),
        ),
        (
            "SERVICE_API_URL",
            &format!("http://{}", support::closed_port()),
        ),
        // The answer takes seconds to drip.
        ("LANYARD_TOKEN_TIMEOUT", "60s"),
    ]);
    let mut lanyard = Process::start(vars).await;
    let pid = lanyard.child.id().unwrap();
    let before = status_bytes(pid, "VmRSS:");

    let obtained = lanyard
        .wait_for_log_within("token obtained", EXCHANGE_LIMIT)
        .await;
    assert_eq!(obtained["fields"]["generation"], 1, "{obtained}");
    assert_peak_under(PEAK_LIMIT, "token endpoint", pid, before);
}

/// Sends `POST path` with `headers` on `connections` connections to
/// `addr` at once, each with `body` one byte per chunk: the answers, whole.
fn posts_dripping(
    addr: SocketAddr,
    connections: usize,
    path: &str,
    headers: &str,
    body: &[u8],
) -> io::Result<Vec<String>> {
    let mut streams = Vec::with_capacity(connections);
    for _ in 0..connections {
        let mut stream = std::net::TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(EXCHANGE_LIMIT))?;
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\n{headers}transfer-encoding: chunked\r\nconnection: close\r\n\r\n"
        )?;
        streams.push(stream);
    }
    drip(&mut streams, body)?;
    streams
        .iter_mut()
        .map(|stream| {
            stream.write_all(b"0\r\n\r\n")?;
            let mut answer = String::new();
            stream.read_to_string(&mut answer)?;
            Ok(answer)
        })
        .collect()
}

// The build before the change, a release build idling at 10 MiB, peaked
// at 670 to 720 MiB here: about 230 MiB per upload.
#[tokio::test]
async fn request_bodies_sent_one_byte_per_frame_cost_their_replay_copy_its_bytes() {
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    // The bodies take seconds to drip, longer than the default 30 s to
    // the answer's head on a busy machine.
    vars.insert("LANYARD_UPSTREAM_TIMEOUT".into(), "120s".into());
    let mut lanyard = Process::start(vars).await;
    lanyard.wait_for_log("token obtained").await;
    let pid = lanyard.child.id().unwrap();
    let before = status_bytes(pid, "VmRSS:");
    let proxy: SocketAddr = lanyard.proxy["http://".len()..].parse().unwrap();

    // At once: each copy is kept until the upstream has answered, which it
    // does after the whole body.
    let answers = tokio::task::spawn_blocking(move || {
        posts_dripping(proxy, UPLOADS, "/upload", "", &[b'u'; BODY_BYTES])
    })
    .await
    .unwrap()
    .unwrap();
    for answer in answers {
        assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
        assert!(
            answer.ends_with(&format!("\r\n\r\n{BODY_BYTES}")),
            "{answer}"
        );
    }
    assert_eq!(upstream.requests(), UPLOADS as u64);
    assert_peak_under(PEAK_LIMIT, "replay copies", pid, before);
}

/// Waits until the socket connected to `port` on loopback, the client's
/// end, holds nothing its process has not read (`ss`: Recv-Q).
async fn client_has_read_everything_from(port: u16) {
    tokio::time::timeout(EXCHANGE_LIMIT, async {
        loop {
            let output = tokio::process::Command::new("ss")
                .args(["-tnH", "state", "established", &format!("dport = :{port}")])
                .output()
                .await
                .expect("ss runs (Debian: apt-get install iproute2)");
            let unread: Option<u64> = support::text(&output.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next()?.parse().ok())
                .reduce(|a, b| a + b);
            if unread == Some(0) {
                return;
            }
            // `ss` has no way to wait for a queue to empty.
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the client read what was sent");
}

// The build before the change, a release build idling at 7 MiB, peaked
// at 72 MiB here.
#[tokio::test]
async fn healthcheck_reading_a_readyz_answer_sent_one_byte_per_frame_costs_its_bytes() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = listener.local_addr().unwrap();
    let mut healthcheck = Process::launch(
        &["healthcheck"],
        env(&[("LANYARD_ADMIN_LISTEN", &admin.to_string())]),
        "json",
        true,
    );
    let pid = healthcheck.child.id().unwrap();
    let mut stream = next_request(&listener).await;
    let before = status_bytes(pid, "VmRSS:");

    let readyz = padded_json(
        serde_json::json!({"ready": true, "token_expires_in_s": 3599}),
        READYZ_BYTES,
    );
    let (all_but_last, last) = readyz.split_at(readyz.len() - 1);
    let all_but_last = all_but_last.to_vec();
    let mut stream = tokio::task::spawn_blocking(move || {
        chunked_head(&mut stream, "200 OK", "application/json")?;
        drip(std::slice::from_mut(&mut stream), &all_but_last)?;
        Ok::<_, io::Error>(stream)
    })
    .await
    .unwrap()
    .unwrap();
    // Every frame but the last read, and the body not yet whole: what the
    // health check holds of it is held now.
    client_has_read_everything_from(admin.port()).await;
    assert_peak_under(HEALTHCHECK_PEAK_LIMIT, "healthcheck", pid, before);

    let last = last.to_vec();
    tokio::task::spawn_blocking(move || {
        drip(std::slice::from_mut(&mut stream), &last)?;
        finish_and_wait_for_close(&mut stream)
    })
    .await
    .unwrap()
    .unwrap();
    let said = healthcheck.stdout_through("ready").await;
    assert_eq!(said.trim(), "ready: the token expires in 3599 s");
    let (code, log) = healthcheck.finish().await;
    assert_eq!(code, Some(0), "{log}");
}

/// An `ExportTraceServiceResponse` of `BODY_BYTES`: its fields all unknown
/// (number 15, bytes), which a reader skips.
fn padded_export_answer() -> Vec<u8> {
    let pad = BODY_BYTES - 4;
    let mut answer = vec![15 << 3 | 2];
    // The pad's length as a protobuf varint: three bytes for 16 KiB to
    // 2 MiB.
    answer.extend([
        (pad as u8 & 0x7f) | 0x80,
        ((pad >> 7) as u8 & 0x7f) | 0x80,
        (pad >> 14) as u8,
    ]);
    answer.resize(BODY_BYTES, b'p');
    answer
}

// The build before the change, a release build idling at 10 MiB, peaked
// at 250 to 256 MiB here.
#[tokio::test]
async fn collector_answers_sent_one_byte_per_frame_cost_the_exporter_their_bytes() {
    let collector =
        DrippingServer::start("200 OK", "application/x-protobuf", padded_export_answer()).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.insert("OTEL_EXPORTER_OTLP_ENDPOINT".into(), collector.url.clone());
    // Batches go out at once rather than every 5 s, and each answer takes
    // seconds to drip.
    vars.insert("OTEL_BSP_SCHEDULE_DELAY".into(), "20".into());
    vars.insert("OTEL_EXPORTER_OTLP_TIMEOUT".into(), "60000".into());
    let mut lanyard = Process::start(vars).await;
    let pid = lanyard.child.id().unwrap();
    let before = status_bytes(pid, "VmRSS:");

    // The first export carries the first token request's span.
    lanyard.wait_for_log("token obtained").await;
    collector.wait_for_answers(1).await;
    assert_peak_under(PEAK_LIMIT, "OTLP exporter", pid, before);
}

/// `lanyard verifier` for a rule in the fixture account's project, its
/// tokens from `mock`, calling the service at `service`: the process, and
/// where its API listens.
async fn verifier(
    mock: &lanyard::mock::MockService,
    dir: &std::path::Path,
    service: &str,
) -> (Process, String) {
    let rule = "5a1b9c3e-7d2f-4e8a-b6c0-1f2e3d4c5b6a";
    let mut vars = settings(mock, dir, &[]);
    vars.extend(env(&[
        ("SERVICE_API_URL", service),
        ("PROJECT_ID", "proj-demo"),
        ("RULE_ID", rule),
        ("WALLET_BASE_URL", &mock.wallet_url()),
    ]));
    let mut process = Process::launch(&["verifier"], vars, "json", false);
    let started = process.wait_for_log("lanyard started").await;
    process.wait_for_log("token obtained").await;
    let api = format!("http://{}", started["fields"]["verifier"].as_str().unwrap());
    (process, api)
}

// The build before the change, a release build idling at 10 MiB, peaked
// at 236 to 253 MiB here.
#[tokio::test]
async fn a_session_start_the_service_sends_one_byte_per_frame_costs_the_verifier_its_bytes() {
    let service = DrippingServer::start(
        "200 OK",
        "application/json",
        padded_json(
            serde_json::json!({
                "transaction_id": "tx-one-byte",
                "request_uri": "https://service.example.com/requests/tx-one-byte",
            }),
            BODY_BYTES,
        ),
    )
    .await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let (verifier, api) = verifier(&mock, dir.path(), &service.url).await;
    let pid = verifier.child.id().unwrap();
    let before = status_bytes(pid, "VmRSS:");

    let started = send(
        Method::POST,
        &format!("{api}/api/start"),
        &[("content-type", "application/json")],
        Bytes::new(),
    )
    .await;
    assert_eq!(started.status, StatusCode::OK);
    assert_eq!(
        started.json()["request_uri"],
        "https://service.example.com/requests/tx-one-byte"
    );
    assert_peak_under(PEAK_LIMIT, "verifier's call to the service", pid, before);
}
