//! A test upstream that shows what arrived and streams large bodies, over
//! plain HTTP or TLS (HTTP/1.1 and HTTP/2 by ALPN).
//!
//! - any path: 200 with a JSON echo of method, path and query, version and
//!   headers;
//! - `/upload`: reads the body chunk by chunk and answers its length;
//! - `/download?bytes=N`: streams N bytes in 64 KiB chunks;
//! - `/chunked?bytes=N`: the same with no declared length, so chunked on
//!   HTTP/1.1;
//! - `/slow?ms=N`: answers after N ms (announcing the request first);
//! - `/hold`: announces the request, then answers once the test calls
//!   [`TestUpstream::release_held`];
//! - `/status/N`: answers status N.
//!
//! It counts the requests and the TCP connections it receives.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Either, Full};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::service::service_fn;
use lanyard::mock::serve_connection;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

type Body = Either<Full<Bytes>, ChunkBody>;

pub struct TestUpstream {
    pub addr: SocketAddr,
    pub url: String,
    requests: Arc<AtomicU64>,
    /// TCP connections accepted so far.
    accepted: Arc<AtomicU64>,
    /// Counts requests that reached `/slow`, so a test can act while one is
    /// in flight.
    slow_started: watch::Receiver<u64>,
    release: Arc<watch::Sender<bool>>,
    _tasks: JoinSet<()>,
}

impl TestUpstream {
    pub async fn start(tls: Option<Arc<rustls::ServerConfig>>) -> TestUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = match tls {
            Some(_) => format!("https://localhost:{}", addr.port()),
            None => format!("http://127.0.0.1:{}", addr.port()),
        };
        let requests = Arc::new(AtomicU64::new(0));
        let (slow_tx, slow_started) = watch::channel(0u64);
        let slow_tx = Arc::new(slow_tx);
        let release = Arc::new(watch::Sender::new(false));
        let released = release.clone();
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        let mut tasks = JoinSet::new();
        let counter = requests.clone();
        let accepted = Arc::new(AtomicU64::new(0));
        let accepted_counter = accepted.clone();
        tasks.spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                accepted_counter.fetch_add(1, Ordering::SeqCst);
                let counter = counter.clone();
                let slow_tx = slow_tx.clone();
                let released = released.clone();
                let acceptor = acceptor.clone();
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        counter.fetch_add(1, Ordering::SeqCst);
                        let slow_tx = slow_tx.clone();
                        let released = released.subscribe();
                        async move { Ok::<_, Infallible>(answer(req, &slow_tx, released).await) }
                    });
                    // A failed connection is the client's error to see.
                    let _ = serve_connection(stream, acceptor, service).await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        TestUpstream {
            addr,
            url,
            requests,
            accepted,
            slow_started,
            release,
            _tasks: tasks,
        }
    }

    /// Requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::SeqCst)
    }

    /// TCP connections accepted so far, open or closed since.
    pub fn connections(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Lets every `/hold` request answer.
    pub fn release_held(&self) {
        self.release.send_replace(true);
    }

    /// Waits until `n` requests have reached `/slow` or `/hold`.
    pub async fn slow_requests_started(&self, n: u64) {
        let mut rx = self.slow_started.clone();
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|v| *v >= n))
            .await
            .expect("slow request arrived")
            .unwrap();
    }
}

async fn answer(
    req: Request<Incoming>,
    slow: &watch::Sender<u64>,
    mut released: watch::Receiver<bool>,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let param = |name: &str| {
        query
            .split('&')
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse::<u64>().ok())
    };
    if path == "/upload" {
        let mut body = req.into_body();
        let mut total = 0u64;
        while let Some(frame) = body.frame().await {
            if let Ok(data) = frame.map(|f| f.into_data()) {
                total += data.map(|d| d.len() as u64).unwrap_or(0);
            } else {
                break;
            }
        }
        return full(StatusCode::OK, total.to_string());
    }
    if path == "/download" {
        let bytes = param("bytes").unwrap_or(0);
        return Response::new(Either::Right(ChunkBody::new(bytes, true)));
    }
    if path == "/chunked" {
        let bytes = param("bytes").unwrap_or(0);
        return Response::new(Either::Right(ChunkBody::new(bytes, false)));
    }
    if path == "/hold" {
        slow.send_modify(|n| *n += 1);
        let _ = released.wait_for(|r| *r).await;
        return full(StatusCode::OK, "held done".into());
    }
    if path == "/slow" {
        slow.send_modify(|n| *n += 1);
        tokio::time::sleep(Duration::from_millis(param("ms").unwrap_or(1000))).await;
        return full(StatusCode::OK, "slow done".into());
    }
    if let Some(code) = path.strip_prefix("/status/") {
        let status = code.parse().ok().and_then(|c| StatusCode::from_u16(c).ok());
        return full(
            status.unwrap_or(StatusCode::BAD_REQUEST),
            format!("status {code}"),
        );
    }
    let mut headers: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in req.headers() {
        headers
            .entry(name.as_str().to_string())
            .or_default()
            .push(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    let echo = serde_json::json!({
        "method": req.method().as_str(),
        "path": req.uri().path_and_query().map(|pq| pq.as_str()).unwrap_or("/"),
        "version": format!("{:?}", req.version()),
        "authority": req.uri().authority().map(|a| a.as_str()),
        "headers": headers,
    });
    full(StatusCode::OK, echo.to_string())
}

fn full(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Either::Left(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response
}

/// A body of `total` bytes in 64 KiB chunks, generated as it is polled so
/// nothing the size of the whole body is ever held. `sized` chooses
/// between a known length (Content-Length) and chunked encoding.
pub struct ChunkBody {
    left: u64,
    sized: bool,
    chunk: Bytes,
}

impl ChunkBody {
    pub fn new(total: u64, sized: bool) -> Self {
        ChunkBody {
            left: total,
            sized,
            chunk: Bytes::from(vec![b'x'; 64 * 1024]),
        }
    }
}

impl hyper::body::Body for ChunkBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        let n = self.left.min(self.chunk.len() as u64) as usize;
        self.left -= n as u64;
        Poll::Ready(Some(Ok(Frame::data(self.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }

    fn size_hint(&self) -> SizeHint {
        if self.sized {
            SizeHint::with_exact(self.left)
        } else {
            SizeHint::default()
        }
    }
}

/// One chunk with no declared length, so it goes out chunked.
pub struct UnsizedBody(pub Option<Bytes>);

impl hyper::body::Body for UnsizedBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.take().map(|chunk| Ok(Frame::data(chunk))))
    }
}
