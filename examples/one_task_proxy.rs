//! A second floor for `bench/run.sh --floor`: what a proxy costs when one
//! task reads, rewrites and writes each request with no HTTP library
//! between it and the sockets, as nginx does, on the same runtime and
//! threads as lanyard. Not a proxy to use: it knows `Content-Length`
//! framing only, checks nothing, bounds nothing and closes on anything
//! else. It measures how much of lanyard's cost beyond nginx is the
//! structure of hyper's codecs (two per request, each with its own
//! dispatch) rather than tokio or the kernel (docs/performance.md).
//!
//!   one_task_proxy LISTEN UPSTREAM_ADDR AUTHORIZATION THREADS
//!
//! UPSTREAM_ADDR is `host:port` of a plain-HTTP/1.1 upstream. Prints
//! `listening=ADDR` once every thread accepts, then serves until killed.
//! Loopback only, like the rest of the benchmark.

use std::cell::RefCell;
use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Most header fields of a request or response head.
const MAX_FIELDS: usize = 64;
/// A connection's read buffer, which must hold a whole head.
const BUFFER: usize = 16 * 1024;

/// A thread's idle upstream connections.
type Idle = Rc<RefCell<Vec<TcpStream>>>;

/// What each thread's connections share.
struct Setup {
    upstream: SocketAddr,
    /// `Authorization: ...\r\n`, written into each request.
    authorization: Vec<u8>,
    idle: Idle,
}

/// A head rewritten for the next hop, and its body's length.
struct Head {
    bytes: Vec<u8>,
    parsed_len: usize,
    body_len: usize,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, upstream, authorization, threads] = args.as_slice() else {
        eprintln!("usage: one_task_proxy LISTEN UPSTREAM_ADDR AUTHORIZATION THREADS");
        return ExitCode::from(2);
    };
    match run(listen, upstream, authorization, threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("one_task_proxy: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(listen: &str, upstream: &str, authorization: &str, threads: &str) -> Result<(), String> {
    let listen: SocketAddr = listen.parse().map_err(|err| format!("LISTEN: {err}"))?;
    let upstream: SocketAddr = upstream
        .parse()
        .map_err(|err| format!("UPSTREAM_ADDR: {err}"))?;
    let threads: usize = threads.parse().map_err(|err| format!("THREADS: {err}"))?;
    let authorization = format!("authorization: {authorization}\r\n").into_bytes();
    let listener = std::net::TcpListener::bind(listen).map_err(|err| format!("{listen}: {err}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|err| err.to_string())?;
    let addr = listener.local_addr().map_err(|err| err.to_string())?;
    let mut workers = Vec::new();
    for _ in 0..threads {
        let listener = listener.try_clone().map_err(|err| err.to_string())?;
        let authorization = authorization.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| err.to_string())?;
        workers.push(std::thread::spawn(move || {
            let local = tokio::task::LocalSet::new();
            local.block_on(&runtime, accept(listener, upstream, authorization))
        }));
    }
    println!("listening={addr}");
    for worker in workers {
        match worker.join() {
            Ok(Ok(())) => {}
            Ok(Err(err)) => return Err(err.to_string()),
            Err(_) => return Err("a thread panicked".into()),
        }
    }
    Ok(())
}

async fn accept(
    listener: std::net::TcpListener,
    upstream: SocketAddr,
    authorization: Vec<u8>,
) -> io::Result<()> {
    let listener = TcpListener::from_std(listener)?;
    let setup = Rc::new(Setup {
        upstream,
        authorization,
        idle: Rc::default(),
    });
    loop {
        let (client, _) = listener.accept().await?;
        client.set_nodelay(true)?;
        let setup = setup.clone();
        tokio::task::spawn_local(async move {
            // A failed exchange closes the connection; nothing to report.
            let _ = serve(client, &setup).await;
        });
    }
}

/// Serves one client connection's requests, one at a time.
async fn serve(mut client: TcpStream, setup: &Setup) -> io::Result<()> {
    let mut from_client = Buffer::new();
    let mut from_upstream = Buffer::new();
    loop {
        let Some(head) = from_client
            .head(&mut client, |bytes| {
                rewrite_request(bytes, &setup.authorization)
            })
            .await?
        else {
            return Ok(());
        };
        let pooled = setup.idle.borrow_mut().pop();
        let mut upstream = match pooled {
            Some(upstream) => upstream,
            None => {
                let upstream = TcpStream::connect(setup.upstream).await?;
                upstream.set_nodelay(true)?;
                upstream
            }
        };
        from_client.pass(head, &mut client, &mut upstream).await?;
        let Some(answer) = from_upstream.head(&mut upstream, rewrite_response).await? else {
            return Ok(());
        };
        from_upstream
            .pass(answer, &mut upstream, &mut client)
            .await?;
        setup.idle.borrow_mut().push(upstream);
    }
}

/// Bytes read from one side and not yet passed on.
struct Buffer {
    bytes: Vec<u8>,
    filled: usize,
}

impl Buffer {
    fn new() -> Self {
        Buffer {
            bytes: vec![0; BUFFER],
            filled: 0,
        }
    }

    /// Reads until `parse` finds a whole head; `None` at a clean end.
    async fn head(
        &mut self,
        from: &mut TcpStream,
        parse: impl Fn(&[u8]) -> io::Result<Option<Head>>,
    ) -> io::Result<Option<Head>> {
        loop {
            if let Some(head) = parse(&self.bytes[..self.filled])? {
                return Ok(Some(head));
            }
            if self.filled == self.bytes.len() {
                return Err(io::Error::other("head too large"));
            }
            let n = from.read(&mut self.bytes[self.filled..]).await?;
            if n == 0 {
                return match self.filled {
                    0 => Ok(None),
                    _ => Err(io::ErrorKind::UnexpectedEof.into()),
                };
            }
            self.filled += n;
        }
    }

    /// Writes `head` rewritten and its body to `to`, the body read from
    /// `from` as far as it is not buffered already, in one write when it
    /// is; keeps whatever follows.
    async fn pass(
        &mut self,
        mut head: Head,
        from: &mut TcpStream,
        to: &mut TcpStream,
    ) -> io::Result<()> {
        let start = head.parsed_len;
        let buffered = (self.filled - start).min(head.body_len);
        head.bytes
            .extend_from_slice(&self.bytes[start..start + buffered]);
        to.write_all(&head.bytes).await?;
        self.bytes.copy_within(start + buffered..self.filled, 0);
        self.filled -= start + buffered;
        let mut left = head.body_len - buffered;
        while left > 0 {
            let want = left.min(self.bytes.len());
            let n = from.read(&mut self.bytes[..want]).await?;
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            to.write_all(&self.bytes[..n]).await?;
            left -= n;
        }
        Ok(())
    }
}

fn rewrite_request(bytes: &[u8], authorization: &[u8]) -> io::Result<Option<Head>> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut request = httparse::Request::new(&mut fields);
    let httparse::Status::Complete(parsed_len) = request.parse(bytes).map_err(io::Error::other)?
    else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(parsed_len + authorization.len());
    out.extend_from_slice(request.method.unwrap_or("GET").as_bytes());
    out.push(b' ');
    out.extend_from_slice(request.path.unwrap_or("/").as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let body_len = copy_fields(request.headers, &mut out, &["authorization"])?;
    out.extend_from_slice(authorization);
    out.extend_from_slice(b"\r\n");
    Ok(Some(Head {
        bytes: out,
        parsed_len,
        body_len,
    }))
}

fn rewrite_response(bytes: &[u8]) -> io::Result<Option<Head>> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_FIELDS];
    let mut response = httparse::Response::new(&mut fields);
    let httparse::Status::Complete(parsed_len) = response.parse(bytes).map_err(io::Error::other)?
    else {
        return Ok(None);
    };
    let mut out = Vec::with_capacity(parsed_len);
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(response.code.unwrap_or(502).to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(response.reason.unwrap_or("").as_bytes());
    out.extend_from_slice(b"\r\n");
    let body_len = copy_fields(response.headers, &mut out, &[])?;
    out.extend_from_slice(b"\r\n");
    Ok(Some(Head {
        bytes: out,
        parsed_len,
        body_len,
    }))
}

/// Copies a head's fields but `Connection` and those in `dropped`, and
/// returns its `Content-Length`; a chunked body is more than this floor
/// reads.
fn copy_fields(
    fields: &[httparse::Header<'_>],
    out: &mut Vec<u8>,
    dropped: &[&str],
) -> io::Result<usize> {
    let mut body_len = 0;
    for field in fields {
        let name = field.name;
        if name.eq_ignore_ascii_case("transfer-encoding") {
            return Err(io::Error::other("chunked bodies are not read here"));
        }
        if name.eq_ignore_ascii_case("connection")
            || dropped.iter().any(|d| name.eq_ignore_ascii_case(d))
        {
            continue;
        }
        if name.eq_ignore_ascii_case("content-length") {
            body_len = std::str::from_utf8(field.value)
                .ok()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| io::Error::other("bad content-length"))?;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(field.value);
        out.extend_from_slice(b"\r\n");
    }
    Ok(body_len)
}
