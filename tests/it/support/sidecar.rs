//! A sidecar started in-process on `127.0.0.1:0`, and a plain HTTP client
//! to talk to it.

use std::time::Duration;

use super::DefaultTokens;
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lanyard::mock::MockService;
use lanyard::process::{Components, Process};
use tokio::net::TcpListener;

pub struct Running {
    pub process: Process,
    pub mock: MockService,
    pub proxy: String,
    pub admin: String,
    _dir: tempfile::TempDir,
}

/// Starts a sidecar forwarding to `upstream`, getting tokens from `mock`,
/// with `extra` settings on top.
pub async fn start(mock: MockService, upstream: &str, extra: &[(&str, &str)]) -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut map = super::settings(&mock, dir.path(), extra);
    if !extra.iter().any(|(k, _)| *k == "SERVICE_API_URL") {
        map.insert("SERVICE_API_URL".into(), upstream.into());
    }
    start_with(mock, &map, dir).await
}

/// A sidecar forwarding to `upstream` with `extra` settings on top, its
/// tokens from a mock of its own, once it holds its first token.
pub async fn ready_for(upstream: &str, extra: &[(&str, &str)]) -> Running {
    let running = start(super::mock().await, upstream, extra).await;
    running.ready().await;
    running
}

/// An echoing upstream, and a sidecar with `extra` settings in front of
/// it once it holds its first token.
pub async fn echoing(extra: &[(&str, &str)]) -> (super::upstream::TestUpstream, Running) {
    let upstream = super::upstream::TestUpstream::start(None).await;
    let running = ready_for(&upstream.url, extra).await;
    (upstream, running)
}

/// Starts a sidecar with exactly these settings (no credentials file
/// unless `map` names one: `SA_CREDENTIALS_DIR` alone, say), keeping `dir`
/// and what it holds for as long as it runs.
pub async fn start_with(
    mock: MockService,
    map: &std::collections::HashMap<String, String>,
    dir: tempfile::TempDir,
) -> Running {
    let config = super::config(map);
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let process = Process::start(Components::proxy(&config, admin, proxy)).unwrap();
    Running {
        proxy: format!("http://{}", process.proxy_addr.unwrap()),
        admin: format!("http://{}", process.admin_addr),
        process,
        mock,
        _dir: dir,
    }
}

impl Running {
    /// Waits for the first token.
    pub async fn ready(&self) {
        super::wait_for(
            &mut self.process.default_tokens().state(),
            Duration::from_secs(10),
            |s| s.generation >= 1,
        )
        .await;
    }
}

/// A response, fully read.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(&self.body)))
    }
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

pub async fn send(method: Method, url: &str, headers: &[(&str, &str)], body: Bytes) -> Answer {
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = client()
        .request(request.body(Full::new(body)).unwrap())
        .await
        .expect("the sidecar answers");
    let status = response.status();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body,
    }
}

pub async fn get(url: &str) -> Answer {
    send(Method::GET, url, &[], Bytes::new()).await
}

/// An HTTP/1.1 client for bodies other than `Full`.
pub fn client_for<B>() -> Client<HttpConnector, B>
where
    B: hyper::body::Body + Send + 'static + Unpin,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    Client::builder(TokioExecutor::new()).build_http()
}

/// An empty body, for `client_for`.
pub fn empty() -> Empty<Bytes> {
    Empty::new()
}
