//! Memory is bounded by configuration: `lanyard run` with its shipped
//! defaults, holding `LANYARD_MAX_CONNECTIONS` connections each with an
//! unfinished request head as large as `LANYARD_MAX_HEADER_BYTES` allows,
//! stays under the memory limit of the shipped Kubernetes manifest
//! (docs/proxy.md "Limits").

use crate::support;

use std::process::Stdio;
use std::time::Duration;

use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::Command;

const CONNECTIONS: usize = lanyard::config::DEFAULT_MAX_CONNECTIONS;
const HEADER_BYTES: usize = lanyard::config::DEFAULT_MAX_HEADER_BYTES;

/// The sidecar container's memory limit in the shipped manifest, in bytes.
fn manifest_memory_limit() -> u64 {
    let manifest = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes/deployment.yaml"),
    )
    .unwrap();
    // The first container is lanyard; its `limits:` block names memory.
    let limits = manifest.split("limits:").nth(1).expect("a limits block");
    let value = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory:"))
        .expect("a memory limit")
        .trim();
    let mib: u64 = value
        .strip_suffix("Mi")
        .expect("a limit in Mi")
        .parse()
        .unwrap();
    mib * 1024 * 1024
}

/// Bytes received by sockets on `port` that lanyard has not read yet, and
/// how many such sockets there are (`ss`: Recv-Q of established sockets).
fn unread_on(port: u16) -> (u64, usize) {
    let output = std::process::Command::new("ss")
        .args(["-tnH", "state", "established", &format!("sport = :{port}")])
        .output()
        .expect("ss runs (Debian: apt-get install iproute2)");
    let text = text(&output.stdout);
    let queues: Vec<u64> = text
        .lines()
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    (queues.iter().sum(), queues.len())
}

#[tokio::test]
async fn a_full_house_of_maximal_unfinished_headers_fits_the_manifest_memory_limit() {
    // Our end of every connection, and lanyard's.
    rlimit::increase_nofile_limit(4 * CONNECTIONS as u64).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mock = mock().await;
    let mut child = Command::new(env!("CARGO_BIN_EXE_lanyard"))
        .arg("run")
        .env_clear()
        .envs(settings(&mock, dir.path(), &[]))
        .env("LANYARD_LISTEN", "127.0.0.1:0")
        .env("LANYARD_ADMIN_LISTEN", "127.0.0.1:0")
        .env("LANYARD_LOG_FORMAT", "json")
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let proxy = loop {
        let line = lines.next_line().await.unwrap().expect("lanyard started");
        let event: serde_json::Value = serde_json::from_str(&line).unwrap();
        if event["fields"]["message"] == "lanyard started" {
            break event["fields"]["proxy"].as_str().unwrap().to_string();
        }
    };
    let port: u16 = proxy.rsplit(':').next().unwrap().parse().unwrap();
    let idle_rss = status_bytes(pid, "VmRSS:");

    // One header as long as the limit allows, and never the end of the
    // head: each connection makes lanyard hold a full read buffer.
    let mut head = b"GET / HTTP/1.1\r\nhost: lanyard\r\nx-fill: ".to_vec();
    head.resize(HEADER_BYTES - 64, b'a');
    let mut held = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        let mut stream = TcpStream::connect(&proxy).await.unwrap();
        stream.write_all(&head).await.unwrap();
        held.push(stream);
    }
    // Everything sent has been read into lanyard's buffers once its
    // sockets hold nothing unread.
    tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let (unread, sockets) = unread_on(port);
            if unread == 0 && sockets == CONNECTIONS {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("lanyard read every request head");

    let peak = status_bytes(pid, "VmHWM:");
    let limit = manifest_memory_limit();
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!(
        "idle RSS {:.1} MiB; peak {:.1} MiB with {CONNECTIONS} connections of {} KiB unfinished headers; manifest limit {:.0} MiB",
        mib(idle_rss),
        mib(peak),
        HEADER_BYTES / 1024,
        mib(limit)
    );
    assert!(
        peak < limit,
        "peak RSS {:.1} MiB is over the manifest's {:.0} MiB",
        mib(peak),
        mib(limit)
    );
    // The connections were held, not refused or cut off.
    assert_eq!(unread_on(port).1, CONNECTIONS);
    drop(held);
    child.kill().await.unwrap();
}
