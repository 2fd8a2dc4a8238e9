//! Memory under clients that read little or none of what they are sent:
//! `bench/slow_readers.sh` runs this against a release `lanyard` (and a
//! baseline) as a child process, at a scale the integration tests
//! (`tests/it/slow_clients.rs`, `tests/it/memory.rs`) do not reach
//! in-process. Two listeners, each with its shapes (`--shape`):
//!
//! ```text
//! slow_readers --lanyard PATH [--shape verifier|h2|h1|neighbour]
//!     [--connections N] [--addresses A] [--streams S] [--hold SECONDS]
//!     [--rss-limit-mib M] [--env K=V]...
//!     verifier: [--claims-kib K]
//!     h2, h1, neighbour: [--answer-kib K] [--chunked] [--window BYTES]
//!         [--retry-refused] [--recv-buffer BYTES] [--read-every MS]
//!         [--neighbours N] [--upload-kib K]
//! ```
//!
//! One process: the embedded mock as the token service (and, for the
//! verifier, the service and its wallet), and `PATH verifier` or `PATH
//! run` started against it on loopback with the shipped defaults and
//! `--env` settings on top; the child's VmRSS once it is ready (and has
//! served one request) is `rss_before_kib`.
//!
//! - `verifier` (the default): a session is started as a browser starts
//!   it (`POST /api/start`, the cookie kept), the mock's wallet presents
//!   claims of `--claims-kib` KiB (default 250), and the session is
//!   polled until verified. Then `--connections` (default 32) HTTP/2
//!   connections send `--streams` (default 100) polls each of that
//!   verified status with the cookie, granting a window of zero.
//! - `h2`: `lanyard run` forwards to an upstream in this process
//!   (`upstream.rs`) whose answers are `--answer-kib` KiB (default 256),
//!   with a `Content-Length`, or chunked with `--chunked`.
//!   `--connections` HTTP/2 connections send `--streams` GETs each,
//!   granting each stream a window of `--window` bytes (default 0) and
//!   never more: the answers' heads arrive, their bodies do not. With
//!   `--retry-refused`, a stream refused with `REFUSED_STREAM` is sent
//!   again a second later (each refusal counted), until its head arrives
//!   or 60 s have passed. With `--upload-kib K`, each stream is instead a
//!   POST of a K KiB body to `/sink`, where the upstream reads nothing
//!   and never answers: the client sends as much of the body as
//!   lanyard's windows let it (`body_bytes` counts it), so what lanyard
//!   holds of request bodies that do not move shows in its RSS.
//! - `h1`: `--connections` HTTP/1.1 connections, each with a receive
//!   buffer of `--recv-buffer` bytes if given (`SO_RCVBUF`; the kernel's
//!   default otherwise), send one GET of a large answer, read its head
//!   and no more.
//! - `neighbour`: first a neighbour's GETs of a small answer, timed
//!   alone for 2 s: `--neighbours` (default 4) keep-alive HTTP/1.1
//!   clients from 127.0.0.9, one GET after another. Then `--connections`
//!   HTTP/2 connections read `--streams` large answers each slowly: a
//!   window of `--window` bytes per stream, given back `--read-every` ms
//!   (default 1000) after it arrives. Up to 2 s later the neighbour comes
//!   back for `--hold` seconds; its GETs under way then are waited for.
//!
//! Each client connection comes from its turn of the `--addresses`
//! (default 1) loopback source addresses from 127.0.0.10 up; each HTTP/2
//! connection is driven in a task, so PINGs are answered. Once every
//! stream (or HTTP/1.1 connection) has its head or has ended (within
//! 60 s), the shape is held for `--hold` seconds (default 10); the
//! child's VmRSS is read every 100 ms throughout, from the first stream
//! on, so the peak covers the opening too. One line of `key=value`
//! results follows on stdout:
//!
//! - `streams_answered`: streams (for `h1`, connections) whose answer's
//!   head arrived, with `statuses` the count of each status;
//! - `streams_refused`: reset before any head, with `refused_reasons`
//!   the reset codes;
//! - `streams_reset_later`: answered, then reset within the hold;
//!   `streams_closed_later`: answered, then their connection ended;
//!   `streams_completed`: answered and read to the end;
//! - `streams_lost`: ended before a head without a reset of their own (a
//!   connection refused, evicted or closed); `streams_unresolved`:
//!   neither head nor end within 60 s;
//! - `connections_opened`, `connections_closed` (within the hold);
//! - `rss_before_kib`, `rss_peak_kib` (the highest sample or VmHWM, which
//!   is also the start's), `rss_end_kib` (the last sample), `vm_hwm_kib`,
//!   `tcp_mem_peak_kib` (the machine's TCP buffers at their highest, from
//!   `/proc/net/sockstat`: lanyard's sockets and its peers');
//!   for the proxy's shapes, `kib_per_stream` (peak less before, over the
//!   streams neither refused nor lost; `-` with `--retry-refused`) or,
//!   for `h1`, `kib_per_connection`;
//! - `neighbour_alone_*` and `neighbour_beside_*`: the neighbour's GETs,
//!   how many, how many answered 200 and 504, failed (no answer within
//!   60 s, or the connection refused), and their p50, p99 and longest in
//!   ms;
//! - `child`: `running` until terminated, or how it ended during the
//!   run; `killed_at_rss_limit` when its VmRSS passed `--rss-limit-mib`
//!   (default 4096), a guard for the machine, not a measurement;
//! - `answer_bytes` (the answer's size), `body_bytes` (what came through
//!   the clients' windows, or with `--upload-kib`, through lanyard's).
//!
//! The child is then killed. Exit 1, with a message on stderr, when the
//! setup fails before the clients: the child not starting, no token, the
//! session not verified, the proxy not forwarding.

mod child;
mod proxy;
mod streams;
mod upstream;
mod verifier;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use proxy::Shape;

/// The first source address; 127.0.0.1, where the setup's requests come
/// from, stays out of the flood's count.
const FIRST_SOURCE: u8 = 10;
/// Start-up, the first token, each HTTP/1.1 exchange.
const SETUP_WAIT: Duration = Duration::from_secs(20);
/// How long every stream together has to get its head or end: past the
/// proxy's upstream timeout (30 s), which answers 504 to a request still
/// waiting for an upstream connection.
const HEADS_WAIT: Duration = Duration::from_secs(60);

const USAGE: &str = "usage: slow_readers --lanyard PATH [--shape verifier|h2|h1|neighbour] \
    [--connections N] [--addresses A] [--streams S] [--hold SECONDS] [--rss-limit-mib M] \
    [--env K=V]... [--claims-kib K] [--answer-kib K] [--chunked] [--window BYTES] \
    [--retry-refused] [--recv-buffer BYTES] [--read-every MS] [--neighbours N] [--upload-kib K]";

struct Args {
    lanyard: PathBuf,
    /// `None`: the verifier's shape.
    shape: Option<Shape>,
    connections: usize,
    addresses: usize,
    streams: usize,
    claims_kib: usize,
    answer_kib: usize,
    chunked: bool,
    window: u32,
    retry_refused: bool,
    recv_buffer: Option<u32>,
    read_every: Duration,
    neighbours: usize,
    /// `h2`: each stream a POST of this many KiB to `/sink` instead.
    upload_kib: Option<usize>,
    hold: Duration,
    rss_limit_kib: u64,
    env: Vec<(String, String)>,
}

fn parse_args() -> Result<Args, String> {
    let mut lanyard = None;
    let mut args = Args {
        lanyard: PathBuf::new(),
        shape: None,
        connections: 32,
        addresses: 1,
        streams: 100,
        claims_kib: 250,
        answer_kib: 256,
        chunked: false,
        window: 0,
        retry_refused: false,
        recv_buffer: None,
        read_every: Duration::from_millis(1000),
        neighbours: 4,
        upload_kib: None,
        hold: Duration::from_secs(10),
        rss_limit_kib: 4096 * 1024,
        env: Vec::new(),
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut value = || given.next().ok_or_else(|| format!("{arg} needs a value"));
        let whole = |value: String| {
            value
                .parse::<usize>()
                .map_err(|_| format!("{arg} {value}: not a whole number"))
        };
        let number = |value: String| {
            whole(value.clone())
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{arg} {value}: not a whole number above 0"))
        };
        let bytes = |value: String| {
            u32::try_from(whole(value.clone())?).map_err(|_| format!("{arg} {value}: too large"))
        };
        match arg.as_str() {
            "--lanyard" => lanyard = Some(PathBuf::from(value()?)),
            "--shape" => {
                args.shape = match value()?.as_str() {
                    "verifier" => None,
                    "h2" => Some(Shape::H2),
                    "h1" => Some(Shape::H1),
                    "neighbour" => Some(Shape::Neighbour),
                    other => return Err(format!("--shape {other}: not one of {USAGE}")),
                }
            }
            "--connections" => args.connections = number(value()?)?,
            "--addresses" => args.addresses = number(value()?)?,
            "--streams" => args.streams = number(value()?)?,
            "--claims-kib" => args.claims_kib = number(value()?)?,
            "--answer-kib" => args.answer_kib = number(value()?)?,
            "--chunked" => args.chunked = true,
            "--retry-refused" => args.retry_refused = true,
            "--window" => args.window = bytes(value()?)?,
            "--recv-buffer" => args.recv_buffer = Some(bytes(value()?)?),
            "--read-every" => args.read_every = Duration::from_millis(number(value()?)? as u64),
            "--neighbours" => args.neighbours = number(value()?)?,
            "--upload-kib" => args.upload_kib = Some(number(value()?)?),
            "--hold" => args.hold = Duration::from_secs(number(value()?)? as u64),
            "--rss-limit-mib" => args.rss_limit_kib = number(value()?)? as u64 * 1024,
            "--env" => {
                let pair = value()?;
                let (name, value) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("--env {pair}: not NAME=VALUE"))?;
                args.env.push((name.into(), value.into()));
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => return Err(format!("unexpected argument {arg}\n{USAGE}")),
        }
    }
    args.lanyard = lanyard.ok_or(USAGE)?;
    if usize::from(FIRST_SOURCE) + args.addresses > 255 {
        return Err(format!("--addresses {}: at most 245", args.addresses));
    }
    Ok(args)
}

/// One thread: the clients, the mock and the upstream wait on lanyard,
/// which has the machine's other cores.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("slow_readers: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("slow_readers: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<String, String> {
    // Each connection is a descriptor here and one in the child, which
    // raises its own limit; the proxy's shapes add an upstream connection
    // on each side per answer under way.
    let wanted = (2 * args.connections + 1024) as u64;
    let limit = rlimit::increase_nofile_limit(wanted).map_err(|e| format!("open files: {e}"))?;
    if limit < wanted {
        return Err(format!("the open-file limit is {limit}; {wanted} needed"));
    }
    match args.shape {
        None => verifier::run(&args).await,
        Some(shape) => proxy::run(&args, shape).await,
    }
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// One HTTP/1.1 exchange, from 127.0.0.1, within [`SETUP_WAIT`].
async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Answer, String> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(Answer {
            status: parts.status,
            headers: parts.headers,
            body: body.to_bytes(),
        })
    };
    tokio::time::timeout(SETUP_WAIT, exchange)
        .await
        .map_err(|_| format!("{url}: no answer within {SETUP_WAIT:?}"))?
        .map_err(|e| format!("{url}: {e}"))
}
