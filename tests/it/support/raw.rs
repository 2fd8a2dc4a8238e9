//! HTTP/1.1 on raw sockets: a hand-written upstream, for tests that need a
//! fault, or a count of connections, exactly where they put it; and a
//! client's side, for requests sent byte for byte as written (an HTTP
//! client would normalise or refuse some of them).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// A request as the upstream saw it: the connection it came on (numbered
/// from 0 in the order accepted) and its request line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Served {
    pub connection: usize,
    pub method: String,
    pub target: String,
}

/// A hand-written HTTP/1.1 upstream: every accepted connection is counted
/// and given to `serve`.
pub struct RawUpstream {
    pub url: String,
    accepted: Arc<AtomicUsize>,
    log: Arc<Mutex<Vec<Served>>>,
    _tasks: JoinSet<()>,
}

impl RawUpstream {
    pub async fn start<F, Fut>(serve: F) -> RawUpstream
    where
        F: Fn(Conn) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (counter, shared_log) = (accepted.clone(), log.clone());
        let mut tasks = JoinSet::new();
        tasks.spawn(async move {
            let mut open = JoinSet::new();
            while let Ok((stream, _)) = listener.accept().await {
                let number = counter.fetch_add(1, Ordering::SeqCst);
                open.spawn(serve(Conn {
                    number,
                    io: BufReader::new(stream),
                    log: shared_log.clone(),
                }));
                while open.try_join_next().is_some() {}
            }
        });
        RawUpstream {
            url,
            accepted,
            log,
            _tasks: tasks,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Every request read so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.log.lock().unwrap().clone()
    }

    /// The connection each request read so far arrived on, in order.
    pub fn connections_used(&self) -> Vec<usize> {
        self.served().iter().map(|s| s.connection).collect()
    }
}

/// One upstream connection.
pub struct Conn {
    number: usize,
    io: BufReader<TcpStream>,
    log: Arc<Mutex<Vec<Served>>>,
}

impl Conn {
    /// Reads the next request, discarding its body, and records it; `None`
    /// once lanyard closed the connection.
    pub async fn next_request(&mut self) -> Option<Served> {
        let mut line = String::new();
        if self.io.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let mut words = line.split_whitespace();
        let seen = Served {
            connection: self.number,
            method: words.next()?.to_owned(),
            target: words.next()?.to_owned(),
        };
        let mut length = 0;
        loop {
            line.clear();
            if self.io.read_line(&mut line).await.ok()? == 0 {
                return None;
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().ok()?;
            }
        }
        let mut body = vec![0; length];
        self.io.read_exact(&mut body).await.ok()?;
        self.log.lock().unwrap().push(seen.clone());
        Some(seen)
    }

    pub async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.io.get_mut().write_all(bytes).await
    }

    /// A small complete response, leaving the connection open for more.
    pub async fn ok(&mut self) -> std::io::Result<()> {
        self.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            .await
    }

    /// Waits for lanyard's next move on a connection with no exchange it
    /// may start: true if it closed the connection, false if it sent more.
    pub async fn closed_by_lanyard(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.io.read(&mut byte).await, Ok(0) | Err(_))
    }

    /// Closes with a TCP reset instead of an orderly FIN.
    pub fn reset(self) {
        let _ = self.io.get_ref().set_zero_linger();
    }

    /// Waits until lanyard closes the connection.
    pub async fn until_closed(&mut self) {
        let mut sink = [0u8; 1024];
        while matches!(self.io.read(&mut sink).await, Ok(n) if n > 0) {}
    }
}

/// How long a raw client waits for an answer before the test fails
/// instead of hanging.
const ANSWER_WITHIN: Duration = Duration::from_secs(10);

/// Sends `request` as written on a fresh connection to `url`
/// (`http://host:port`), and returns the answer's head: its status line
/// and headers.
pub async fn head_of(url: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    read_head(&mut stream).await
}

/// Reads from `stream` until a response head has arrived, and returns it
/// without its closing blank line.
pub async fn read_head(stream: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
            return String::from_utf8_lossy(&received[..end]).into_owned();
        }
        let n = tokio::time::timeout(ANSWER_WITHIN, stream.read(&mut chunk))
            .await
            .expect("response head in time")
            .expect("the connection is readable");
        assert!(n > 0, "closed before a whole head: {received:?}");
        received.extend_from_slice(&chunk[..n]);
    }
}

/// Sends `request`, which should end with `Connection: close`, on a fresh
/// connection to `url`, reads the answer to its end, and returns its head
/// and body as they came (a chunked body is not decoded).
pub async fn to_end(url: &str, request: &str) -> (String, Vec<u8>) {
    let mut stream = TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut all = Vec::new();
    tokio::time::timeout(ANSWER_WITHIN, stream.read_to_end(&mut all))
        .await
        .expect("the answer ends and the connection closes in time")
        .unwrap();
    let split = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no whole head in {:?}", String::from_utf8_lossy(&all)));
    (
        String::from_utf8_lossy(&all[..split]).into_owned(),
        all[split + 4..].to_vec(),
    )
}
