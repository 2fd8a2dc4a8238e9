//! The proxy's hostile shapes: `lanyard run` in front of a loopback
//! upstream of large answers (`super::upstream`), its clients HTTP/2
//! streams behind a shut window, HTTP/1.1 connections that never read,
//! or a few slow HTTP/2 readers beside a neighbour's plain GETs.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

use crate::child::{self, Lanyard};
use crate::streams::{self, Counts, Reader};
use crate::{Args, FIRST_SOURCE, HEADS_WAIT, SETUP_WAIT, send, upstream};

#[derive(Clone, Copy, PartialEq)]
pub enum Shape {
    /// HTTP/2 streams of large answers, the window shut after
    /// `--window` bytes.
    H2,
    /// HTTP/1.1 connections that read an answer's head and nothing more.
    H1,
    /// `--connections` slow HTTP/2 readers, and a neighbour's GETs.
    Neighbour,
}

/// The neighbour's address: below the flood's, so no flood's cap is its.
const NEIGHBOUR: Ipv4Addr = Ipv4Addr::new(127, 0, 0, FIRST_SOURCE - 1);
/// How long the neighbour's GETs are timed before the slow readers come.
const NEIGHBOUR_ALONE: Duration = Duration::from_secs(2);
/// A neighbour's GET is given up after this (the proxy's own upstream
/// timeout, 30 s by default, should answer 504 first).
const NEIGHBOUR_WAIT: Duration = Duration::from_secs(60);
/// Of a HTTP/1.1 answer, what a client reads looking for its head's end.
const HEAD_READ: usize = 4 * 1024;

pub async fn run(args: &Args, shape: Shape) -> Result<String, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    // The token service, kept to the run's end.
    let _mock = child::start_mock(dir.path()).await?;
    let answer = Bytes::from(vec![b'x'; args.answer_kib * 1024]);
    let upstream = upstream::start(answer).await?;
    let mut vars = vec![
        ("SERVICE_API_URL".to_string(), format!("http://{upstream}")),
        (
            "SA_CREDENTIALS_FILE".into(),
            dir.path().join("credentials.json").display().to_string(),
        ),
        ("LANYARD_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_LOG_FORMAT".into(), "json".into()),
    ];
    vars.extend(args.env.iter().cloned());
    let mut child = Lanyard::spawn(&args.lanyard, "run", "proxy", vars).await?;
    let to = child.listen;
    let setup = async {
        child::until_ready(child.admin).await?;
        // One request through, so the token, a pooled connection and the
        // proxy's threads are in "before", as in a sidecar at work.
        let through = send(
            Method::GET,
            &format!("http://{to}/small"),
            &[],
            Bytes::new(),
        )
        .await?;
        if through.status != StatusCode::OK {
            return Err(format!("GET /small through the proxy: {}", through.status));
        }
        child::status_kib(child.pid, "VmRSS")
            .ok_or_else(|| "the child's VmRSS is unreadable".into())
    };
    let rss_before = match setup.await {
        Ok(rss) => rss,
        Err(message) => return Err(format!("{message}\n{}", child.log_tail())),
    };
    let (stop, sampled) = child::sample(child.take(), args.rss_limit_kib);
    let path = match (args.upload_kib, args.chunked) {
        (Some(_), _) => "/sink",
        (None, true) => "/chunked",
        (None, false) => "/large",
    };
    // HTTP/1.1 has one answer per connection.
    let total = match shape {
        Shape::H1 => args.connections,
        _ => args.connections * args.streams,
    };

    let (counts, holders, neighbour) = match shape {
        Shape::H2 | Shape::H1 => {
            let counts = Counts::new(total);
            let holders = match shape {
                Shape::H1 => Holders::H1(h1_all(args, to, path, &counts).await),
                _ => Holders::H2(h2_all(args, to, path, None, &counts).await),
            };
            tokio::select! {
                _ = tokio::time::timeout(HEADS_WAIT, counts.all_resolved()) => {}
                () = child::child_gone(sampled.clone()) => {}
            }
            tokio::select! {
                () = tokio::time::sleep(args.hold) => {}
                () = child::child_gone(sampled.clone()) => {}
            }
            (counts, holders, String::new())
        }
        Shape::Neighbour => {
            let alone = neighbour(to, args.neighbours, NEIGHBOUR_ALONE).await;
            let counts = Counts::new(total);
            let slow = Some(args.read_every);
            let holders = Holders::H2(h2_all(args, to, path, slow, &counts).await);
            // The slow readers' answers under way before the neighbour
            // comes back.
            let _ = tokio::time::timeout(NEIGHBOUR_ALONE, counts.all_resolved()).await;
            let beside = tokio::select! {
                timed = neighbour(to, args.neighbours, args.hold) => timed,
                () = child::child_gone(sampled.clone()) => Timed::default(),
            };
            (
                counts,
                holders,
                format!("{} {}", alone.line("alone"), beside.line("beside")),
            )
        }
    };
    // The counts as the hold ends, before the child's end closes every
    // connection.
    let result = counts.line();
    let last = child::stop(stop, &sampled).await;
    drop(holders);
    let delta = last.peak().saturating_sub(rss_before);
    let per_unit = match shape {
        Shape::H1 => {
            let opened = counts.connections_opened.load(Ordering::Relaxed);
            format!(
                "kib_per_connection={:.1}",
                delta as f64 / opened.max(1) as f64
            )
        }
        // A stream refused and sent again is taken at one time and not
        // at another: no count of streams held to divide by.
        _ if args.retry_refused => "kib_per_stream=-".into(),
        _ => {
            let accepted = counts.accepted(total);
            format!(
                "kib_per_stream={:.1}",
                delta as f64 / accepted.max(1) as f64
            )
        }
    };
    Ok(format!(
        "streams={total} {result} rss_before_kib={rss_before} rss_peak_kib={} rss_end_kib={} \
         vm_hwm_kib={} tcp_mem_peak_kib={} {per_unit} answer_bytes={} {neighbour} child={}",
        last.peak(),
        last.last_kib,
        last.vm_hwm_kib,
        last.tcp_mem_peak_kib,
        args.answer_kib * 1024,
        last.child,
    ))
}

/// What keeps the clients' connections open until it is dropped.
enum Holders {
    H2(Vec<h2::client::SendRequest<Bytes>>),
    H1(Vec<tokio::task::JoinHandle<()>>),
}

impl Drop for Holders {
    fn drop(&mut self) {
        match self {
            Holders::H2(requests) => requests.clear(),
            Holders::H1(tasks) => tasks.iter().for_each(|task| task.abort()),
        }
    }
}

async fn h2_all(
    args: &Args,
    to: SocketAddr,
    path: &str,
    give_back_after: Option<Duration>,
    counts: &Arc<Counts>,
) -> Vec<h2::client::SendRequest<Bytes>> {
    let upload = args.upload_kib.map(|kib| kib * 1024);
    let request = || {
        let method = match upload {
            Some(_) => Method::POST,
            None => Method::GET,
        };
        let mut request = Request::builder()
            .method(method)
            .uri(format!("http://{to}{path}"));
        if let Some(bytes) = upload {
            request = request.header(http::header::CONTENT_LENGTH, bytes);
        }
        request.body(()).expect("a valid request")
    };
    let reader = Reader {
        initial: args.window,
        give_back_after,
        retry_refused: args.retry_refused,
        upload,
    };
    streams::open_all(
        args.connections,
        args.addresses,
        args.streams,
        to,
        request,
        reader,
        counts,
    )
    .await
}

/// Opens `--connections` HTTP/1.1 connections, each from its turn of the
/// source addresses with a receive buffer of `--recv-buffer` bytes, and
/// sends one GET of `path` on each; each reads its answer's head and
/// nothing more. The tasks are returned: dropped, they close.
async fn h1_all(
    args: &Args,
    to: SocketAddr,
    path: &str,
    counts: &Arc<Counts>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut tasks = Vec::with_capacity(args.connections);
    for n in 0..args.connections {
        let connect = async {
            let socket = TcpSocket::new_v4()?;
            if let Some(bytes) = args.recv_buffer {
                socket.set_recv_buffer_size(bytes)?;
            }
            socket.bind(SocketAddr::new(streams::source(n, args.addresses), 0))?;
            socket.connect(to).await
        };
        let Ok(Ok(io)) = tokio::time::timeout(SETUP_WAIT, connect).await else {
            counts.lost.fetch_add(1, Ordering::Relaxed);
            counts.resolve();
            continue;
        };
        counts.connections_opened.fetch_add(1, Ordering::Relaxed);
        let request = format!("GET {path} HTTP/1.1\r\nhost: {to}\r\n\r\n");
        tasks.push(tokio::spawn(h1_hold(io, request, counts.clone())));
    }
    tasks
}

/// One HTTP/1.1 client: its request sent, its answer's head read (with
/// at most [`HEAD_READ`] bytes of it), then nothing, to the end.
async fn h1_hold(mut io: TcpStream, request: String, counts: Arc<Counts>) {
    let head = async {
        io.write_all(request.as_bytes()).await?;
        let mut read = Vec::with_capacity(HEAD_READ);
        let mut buf = [0u8; 512];
        while !read.windows(4).any(|w| w == b"\r\n\r\n") && read.len() < HEAD_READ {
            let n = io.read(&mut buf).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            read.extend_from_slice(&buf[..n]);
        }
        // "HTTP/1.1 200 OK"
        std::str::from_utf8(read.get(9..12).unwrap_or_default())
            .ok()
            .and_then(|s| s.parse::<u16>().ok())
            .ok_or_else(|| std::io::Error::other("no status line"))
    };
    match tokio::time::timeout(HEADS_WAIT, head).await {
        // Counted as unresolved.
        Err(_) => {}
        Ok(Ok(status)) => {
            counts.status(status);
            counts.resolve();
        }
        Ok(Err(_)) => {
            counts.lost.fetch_add(1, Ordering::Relaxed);
            counts.resolve();
        }
    }
    // Held, unread, until the run drops this task.
    std::future::pending::<()>().await;
    drop(io);
}

/// A neighbour's GETs of `/small`: what each was answered and how long
/// it took.
#[derive(Default)]
struct Timed {
    answers: Vec<(Option<u16>, Duration)>,
}

impl Timed {
    fn line(&self, name: &str) -> String {
        let mut times: Vec<Duration> = self.answers.iter().map(|(_, t)| *t).collect();
        times.sort();
        let at = |q: f64| {
            let i = ((times.len() as f64 * q).ceil() as usize).clamp(1, times.len().max(1)) - 1;
            times
                .get(i)
                .map_or("-".into(), |t| format!("{:.1}", t.as_secs_f64() * 1000.0))
        };
        let status = |s: u16| self.answers.iter().filter(|(a, _)| *a == Some(s)).count();
        let failed = self.answers.iter().filter(|(a, _)| a.is_none()).count();
        format!(
            "neighbour_{name}_requests={} neighbour_{name}_200={} neighbour_{name}_504={} \
             neighbour_{name}_failed={failed} neighbour_{name}_p50_ms={} neighbour_{name}_p99_ms={} \
             neighbour_{name}_max_ms={}",
            self.answers.len(),
            status(200),
            status(504),
            at(0.5),
            at(0.99),
            at(1.0),
        )
    }
}

/// `loops` keep-alive clients from [`NEIGHBOUR`], each sending GETs one
/// after the other for `run_for`; those under way then are waited for.
async fn neighbour(to: SocketAddr, loops: usize, run_for: Duration) -> Timed {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(IpAddr::V4(NEIGHBOUR)));
    let client: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(connector);
    let timed = Arc::new(Mutex::new(Timed::default()));
    let until = Instant::now() + run_for;
    let url = format!("http://{to}/small");
    let mut tasks = Vec::new();
    for _ in 0..loops {
        let (client, timed, url) = (client.clone(), timed.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            while Instant::now() < until {
                let started = Instant::now();
                let request = Request::get(&url)
                    .body(Empty::new())
                    .expect("a valid request");
                let exchange = async {
                    let response = client.request(request).await.ok()?;
                    let status = response.status().as_u16();
                    response.into_body().collect().await.ok()?;
                    Some(status)
                };
                let status = tokio::time::timeout(NEIGHBOUR_WAIT, exchange)
                    .await
                    .ok()
                    .flatten();
                let took = started.elapsed();
                timed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .answers
                    .push((status, took));
                if status.is_none() {
                    // A refused connection fails at once; not a busy loop.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }
    for task in tasks {
        let _ = task.await;
    }
    let mut timed = timed.lock().unwrap_or_else(|e| e.into_inner());
    std::mem::take(&mut *timed)
}
