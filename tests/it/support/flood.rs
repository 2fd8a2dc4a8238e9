//! Connections from a chosen loopback address (Linux routes all of
//! 127.0.0.0/8 to the loopback), raw HTTP/1.1 on them, and the metrics
//! read from a scrape: for listener tests where a flood comes from one
//! address and another client must still be served.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use super::sidecar::get;

/// The flood's address.
pub const ATTACKER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
/// Everyone else's.
pub const NEIGHBOUR: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));

/// Long enough for a loaded CI machine; short enough that a hang fails
/// the test rather than the suite.
pub const PROMPTLY: Duration = Duration::from_secs(20);

/// Raises the open-file soft limit so this process can hold `sockets`
/// connections to itself: each is two descriptors, the client's and the
/// server's, plus what the test harness and lanyard hold anyway.
pub fn allow_sockets(sockets: usize) {
    let wanted = (2 * sockets + 512) as u64;
    let limit = rlimit::increase_nofile_limit(wanted).expect("the open-file limit can be read");
    assert!(
        limit >= wanted,
        "the open-file hard limit ({limit}) is below the {wanted} this test needs"
    );
}

/// A connection to `to` from `source`.
pub async fn connect_from(source: IpAddr, to: SocketAddr) -> TcpStream {
    let socket = match source {
        IpAddr::V4(_) => TcpSocket::new_v4(),
        IpAddr::V6(_) => TcpSocket::new_v6(),
    }
    .unwrap();
    socket.bind(SocketAddr::new(source, 0)).unwrap();
    socket.connect(to).await.unwrap()
}

/// `count` connections from `source`, held open; every other one sends
/// half a request head, the rest nothing at all.
pub async fn half_open(source: IpAddr, to: SocketAddr, count: usize) -> Vec<TcpStream> {
    let mut held = Vec::with_capacity(count);
    for n in 0..count {
        let mut stream = connect_from(source, to).await;
        if n % 2 == 1 {
            // Written into the socket's buffer whether or not lanyard
            // still holds the connection.
            let _ = stream.write_all(b"GET / HTTP/1.1\r\nhost: ").await;
        }
        held.push(stream);
    }
    held
}

/// An answer as it came over the wire.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl RawAnswer {
    /// The value of `name`, which must be there.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.as_str())
            .unwrap_or_else(|| panic!("no {name} in {:?}", self.headers))
    }
}

/// Sends `request` on `stream` and reads one answer (its body by
/// `content-length`), leaving the connection open.
pub async fn exchange(stream: &mut TcpStream, request: &[u8]) -> RawAnswer {
    // The server may answer and close before all of an oversized request
    // is written; the answer is what matters.
    let _ = stream.write_all(request).await;
    tokio::time::timeout(PROMPTLY, read_answer(stream))
        .await
        .expect("an answer in time")
}

/// One answer: its head, then as many body bytes as it declares (to the
/// close when it declares none).
pub async fn read_answer(stream: &mut TcpStream) -> RawAnswer {
    let mut bytes = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(end) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        let n = stream.read(&mut buf).await.unwrap_or(0);
        assert!(n > 0, "closed before an answer: {:?}", text(&bytes));
        bytes.extend_from_slice(&buf[..n]);
    };
    let head = text(&bytes[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap()[9..12].parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map(|(_, value)| value.parse::<usize>().unwrap());
    let mut body = bytes[head_end + 4..].to_vec();
    while length.is_none_or(|length| body.len() < length) {
        let n = stream.read(&mut buf).await.unwrap_or(0);
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    RawAnswer {
        status,
        headers,
        body,
    }
}

/// Waits until lanyard closes `stream`, discarding what it sends; how
/// many bytes that was.
pub async fn until_closed(stream: &mut TcpStream, limit: Duration) -> usize {
    let mut received = 0;
    let mut sink = vec![0u8; 64 * 1024];
    tokio::time::timeout(limit, async {
        while let Ok(n @ 1..) = stream.read(&mut sink).await {
            received += n;
        }
    })
    .await
    .expect("lanyard closed the connection in time");
    received
}

/// A metric without labels, from the admin listener's scrape.
pub async fn metric(admin: &str, name: &str) -> f64 {
    let scrape = get(&format!("{admin}/metrics")).await;
    text(&scrape.body)
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("{name} in the scrape"))
}

/// Waits until `name` satisfies `done`, scraping as it changes; fails the
/// test after [`PROMPTLY`].
pub async fn until_metric(admin: &str, name: &str, done: impl Fn(f64) -> bool) -> f64 {
    let deadline = tokio::time::Instant::now() + PROMPTLY;
    loop {
        let value = metric(admin, name).await;
        if done(value) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{name} still {value} after {PROMPTLY:?}"
        );
        // A scrape a few times a second: the change it waits for (a
        // connection's end) has no signal a test can await.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits until `admin` counts a stalled connection in `series`; how long
/// after `began` that was, which must be no sooner than `timeout`.
pub async fn stalled_after(
    admin: &str,
    series: &str,
    began: tokio::time::Instant,
    timeout: Duration,
) -> Duration {
    until_metric(admin, series, |n| n >= 1.0).await;
    let stalled_after = began.elapsed();
    assert!(
        stalled_after >= timeout,
        "cut after {stalled_after:?}, before the send timeout"
    );
    stalled_after
}

/// A client with a small receive buffer, so that its side fills at once,
/// which sends `request` to `to` and then reads nothing until the test
/// says; the moment it sent it.
pub async fn non_reader(to: SocketAddr, request: &str) -> (TcpStream, tokio::time::Instant) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket.connect(to).await.unwrap();
    let began = tokio::time::Instant::now();
    client.write_all(request.as_bytes()).await.unwrap();
    (client, began)
}
