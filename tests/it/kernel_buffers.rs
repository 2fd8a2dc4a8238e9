//! A client that stops reading leaves lanyard's kernel no more than a
//! small send buffer of its answer (docs/proxy.md "Limits"): the kernel
//! would grow it to megabytes, which a cgroup v2 memory limit counts as
//! lanyard's; the rest of the answer waits upstream, timed.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use support::sidecar;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::time::Instant;

/// What lanyard's side of a connection may hold: `SO_SNDBUF` as lanyard
/// sets it (32 KiB), doubled by Linux, plus one segment's bookkeeping.
const MOST_QUEUED: u64 = 64 * 1024 + 16 * 1024;

/// The memory of the bytes queued in the kernel for sending (`skmem`'s
/// `w`, the write queue) on each established socket whose local port is
/// `port`.
fn queued_on(port: u16) -> Vec<u64> {
    let output = std::process::Command::new("ss")
        .args(["-tnmH", "state", "established", &format!("sport = :{port}")])
        .output()
        .expect("ss runs (Debian: apt-get install iproute2)");
    String::from_utf8_lossy(&output.stdout)
        .split("skmem:(")
        .skip(1)
        .filter_map(|fields| {
            let fields = fields.split(')').next()?;
            let queued = fields.split(',').find(|f| f.starts_with('w'))?;
            queued[1..].parse().ok()
        })
        .collect()
}

#[tokio::test]
async fn an_answer_its_client_does_not_read_queues_little_in_lanyards_socket() {
    let (_upstream, running) = sidecar::echoing(&[]).await;
    let proxy: SocketAddr = running.process.proxy_addr.unwrap();

    // A client that means to hold the answer: a small receive buffer, and
    // nothing read past the head.
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut client = socket.connect(proxy).await.unwrap();
    client
        .write_all(b"GET /download?bytes=16777216 HTTP/1.1\r\nhost: lanyard\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 1024];
    let read = client.read(&mut head).await.unwrap();
    assert!(head[..read].starts_with(b"HTTP/1.1 200"));

    // Until what lanyard has queued stops growing: the answer has filled
    // whatever room the kernel gives it. No event says so; ss is asked
    // again until two readings 100 ms apart agree.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = Vec::new();
    loop {
        let now = queued_on(proxy.port());
        if now.len() == 1 && now == last && now[0] > 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "lanyard's socket never settled: {now:?}"
        );
        last = now;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        last[0] <= MOST_QUEUED,
        "lanyard's kernel holds {} bytes of an unread answer",
        last[0]
    );
    drop(client);
}
