//! The floor under lanyard's proxy, for `bench/run.sh --floor`: lanyard's
//! own accept loop, proxy threads and upstream pool, with nothing done per
//! request but setting a fixed `Authorization`. No token, metrics,
//! timeouts, hop-by-hop stripping or replay copy. What lanyard costs
//! beyond this is its features; what this costs beyond nginx is hyper,
//! tokio and the structure they share with lanyard.
//!
//!   bare_proxy LISTEN UPSTREAM_URL AUTHORIZATION THREADS
//!
//! Prints `listening=ADDR` once every thread accepts, then serves until
//! killed. Loopback only, like the rest of the benchmark.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, Response, Version, header};
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use lanyard::client_body::ClientBody;
use lanyard::pool::{Pool, UpstreamLimit};
use lanyard::proxy::{StreamedBody, UpstreamBody, UpstreamResponse};
use lanyard::server::{self, Abort, Handler, Limits, Member};
use lanyard::target::TargetUrl;

/// As lanyard's default: the benchmark's 256 connections each get one.
const MAX_UPSTREAM_CONNECTIONS: usize = 256;

struct Bare {
    pool: Rc<Pool<UpstreamBody>>,
    authorization: HeaderValue,
}

impl Handler for Bare {
    type Body = Either<UpstreamResponse, Full<Bytes>>;

    fn handle(
        &self,
        req: Request<Incoming>,
        _client: lanyard::server::Peer,
    ) -> impl Future<Output = Result<Response<Self::Body>, Abort>> {
        let (mut parts, body) = req.into_parts();
        parts.version = Version::HTTP_11;
        parts.headers.remove(header::HOST);
        parts
            .headers
            .insert(header::AUTHORIZATION, self.authorization.clone());
        let body = ClientBody::new(body, Duration::from_secs(60));
        let request = Request::from_parts(parts, Either::Right(StreamedBody::streaming(body)));
        let sent = self.pool.send(request);
        async move {
            Ok(match sent.await {
                Ok(response) => response.map(Either::Left),
                Err(err) => {
                    let mut answer =
                        Response::new(Either::Right(Full::new(Bytes::from(err.to_string()))));
                    *answer.status_mut() = http::StatusCode::BAD_GATEWAY;
                    answer
                }
            })
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [listen, upstream, authorization, threads] = args.as_slice() else {
        eprintln!("usage: bare_proxy LISTEN UPSTREAM_URL AUTHORIZATION THREADS");
        return ExitCode::from(2);
    };
    match run(listen, upstream, authorization, threads) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("bare_proxy: {err}");
            ExitCode::FAILURE
        }
    }
}

fn run(listen: &str, upstream: &str, authorization: &str, threads: &str) -> Result<(), String> {
    let listen: SocketAddr = listen.parse().map_err(|err| format!("LISTEN: {err}"))?;
    let upstream =
        TargetUrl::parse(upstream, false).map_err(|why| format!("UPSTREAM_URL {why}"))?;
    let authorization =
        HeaderValue::from_str(authorization).map_err(|err| format!("AUTHORIZATION: {err}"))?;
    let threads: usize = threads.parse().map_err(|err| format!("THREADS: {err}"))?;
    // Plain http to the benchmark's upstream: no certificates to trust.
    let tls = rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    let connector = lanyard::outbound::connector(tls);
    let listener = std::net::TcpListener::bind(listen).map_err(|err| format!("{listen}: {err}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|err| err.to_string())?;
    let addr = listener.local_addr().map_err(|err| err.to_string())?;
    let limits = Limits {
        first_request_timeout: Duration::from_secs(60),
        idle_timeout: Duration::from_secs(60),
        send_timeout: Duration::from_secs(60),
        max_connections: 10_000,
        per_client: None,
        max_header_bytes: 64 * 1024,
        max_streams: 10_000,
        streams_per_connection: 100,
        stream_state_bytes: 4 * 1024,
        head_refusal: |refused| {
            let mut answer = http::Response::new(http_body_util::Full::new(Bytes::from_static(
                refused.reason().as_bytes(),
            )));
            *answer.status_mut() = refused.status();
            answer
        },
        refusal: Bytes::from_static(
            b"HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
        ),
        evict_idle: false,
        extra_headers: http::HeaderMap::new(),
    };

    let mut workers = Vec::new();
    let upstream_limits = UpstreamLimit::new(MAX_UPSTREAM_CONNECTIONS);
    for share in Member::group(&limits, threads) {
        let (upstream_limit, limits) = (upstream_limits.clone(), limits.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|err| err.to_string())?;
        let listener = {
            let _runtime = runtime.enter();
            let listener = listener.try_clone().map_err(|err| err.to_string())?;
            tokio::net::TcpListener::from_std(listener).map_err(|err| err.to_string())?
        };
        let (connector, upstream) = (connector.clone(), upstream.clone());
        let authorization = authorization.clone();
        workers.push(std::thread::spawn(move || {
            // Built on its thread: a pool belongs to one thread.
            let handler = Bare {
                pool: Rc::new(Pool::new(connector, &upstream, upstream_limit)),
                authorization,
            };
            runtime.block_on(server::serve(
                server::Listener::Tcp(listener),
                handler,
                std::future::pending::<()>(),
                Duration::ZERO,
                limits,
                None,
                share,
            ))
        }));
    }
    println!("listening={addr}");
    for worker in workers {
        let _ = worker.join();
    }
    Ok(())
}
