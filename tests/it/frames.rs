//! HTTP/2 frames a hostile client sends to lanyard's listeners: a PING
//! or SETTINGS flood closes its connection and is counted, while other
//! clients are served; a stream of empty DATA frames gets h2's own GOAWAY.

use crate::support;

use std::net::SocketAddr;

use support::flood::{ATTACKER, NEIGHBOUR, PROMPTLY, connect_from, metric, until_metric};
use support::verifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const END_HEADERS: u8 = 0x4;

/// A frame as a client puts it on the wire.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = (payload.len() as u32).to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], kind, flags];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

/// Floods `to` from [`ATTACKER`] with `kind` frames until lanyard closes
/// the connection; the number of frames written.
async fn flood(to: SocketAddr, kind: u8, payload: &[u8]) -> usize {
    let mut stream = connect_from(ATTACKER, to).await;
    let mut opening = PREFACE.to_vec();
    opening.extend(frame(SETTINGS, 0, 0, &[]));
    stream.write_all(&opening).await.unwrap();
    let batch: Vec<u8> = (0..64).flat_map(|_| frame(kind, 0, 0, payload)).collect();
    let (mut reader, mut writer) = stream.into_split();
    // What lanyard sends (its SETTINGS, acknowledgements) is read and
    // dropped, so that its writes never wait on this client.
    let drain = tokio::spawn(async move {
        let mut sink = vec![0u8; 64 * 1024];
        while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
    });
    let mut written = 0;
    let flooding = async {
        while writer.write_all(&batch).await.is_ok() {
            written += 64;
        }
    };
    tokio::time::timeout(PROMPTLY, async {
        tokio::select! {
            () = flooding => {}
            _ = drain => {}
        }
    })
    .await
    .expect("lanyard closed the flooding connection in time");
    written
}

#[tokio::test]
async fn a_ping_or_settings_flood_closes_its_connection_and_others_are_served() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let addr = running.process.verifier_addr.unwrap();
    let flooded = "lanyard_connections_flooding_total{listener=\"verifier\"}";
    assert_eq!(metric(&running.admin, flooded).await, 0.0);

    let neighbour = async {
        for _ in 0..5 {
            let mut stream = connect_from(NEIGHBOUR, addr).await;
            let page = support::flood::exchange(
                &mut stream,
                b"GET / HTTP/1.1\r\nhost: verifier\r\nconnection: close\r\n\r\n",
            )
            .await;
            assert_eq!(page.status, 200);
        }
    };
    let (pings, ()) = tokio::join!(flood(addr, PING, &[7; 8]), neighbour);
    let settings = flood(addr, SETTINGS, &[]).await;
    // h2 answers each before reading the next: without the guard, these
    // floods run until the client stops.
    assert!(pings < 1_000_000, "{pings} PINGs were written");
    assert!(settings < 1_000_000, "{settings} SETTINGS were written");
    until_metric(&running.admin, flooded, |closed| closed >= 2.0).await;
    // The proxy's and the admin listener's series are there too, at 0.
    let admin = running.process.admin_addr;
    flood(admin, PING, &[1; 8]).await;
    until_metric(
        &running.admin,
        "lanyard_connections_flooding_total{listener=\"admin\"}",
        |closed| closed >= 1.0,
    )
    .await;
}

#[tokio::test]
async fn empty_data_frames_get_h2s_goaway() {
    let running = verifier::start(support::mock().await, None, &[]).await;
    let mut stream = connect_from(ATTACKER, running.process.verifier_addr.unwrap()).await;
    // Everything is written before anything is read: a client that kept
    // writing after lanyard's GOAWAY would race the close (its next write
    // fails with a broken pipe, and an h2 client reports that instead of
    // the GOAWAY it has not read yet).
    let mut frames = PREFACE.to_vec();
    frames.extend(frame(SETTINGS, 0, 0, &[]));
    frames.extend(frame(HEADERS, END_HEADERS, 1, &post_api_start()));
    for _ in 0..150 {
        frames.extend(frame(DATA, 0, 1, &[]));
    }
    stream.write_all(&frames).await.unwrap();
    let mut answer = Vec::new();
    let read = tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut answer)).await;
    read.expect("lanyard ended the connection in time")
        .expect("the connection ended with a FIN, having been read whole");
    let goaway = sent_frames(&answer)
        .into_iter()
        .find(|(kind, _)| *kind == GOAWAY)
        .expect("a GOAWAY frame before the end");
    // Last stream id (4 bytes), then the error code: ENHANCE_YOUR_CALM.
    assert_eq!(goaway.1.get(4..8), Some(&[0, 0, 0, 0xb][..]));
}

/// A `POST /api/start` header block in HPACK (RFC 7541): `:method POST`,
/// `:scheme http` from the static table, `:path` and `:authority` as
/// literals without indexing.
fn post_api_start() -> Vec<u8> {
    let mut block = vec![0x83, 0x86];
    for (name_index, value) in [(4u8, "/api/start"), (1, "verifier")] {
        block.push(name_index);
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    block
}

/// The frames in what lanyard wrote, as (type, payload); a frame cut off
/// at the end is left out.
fn sent_frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut frames = Vec::new();
    while bytes.len() >= 9 {
        let length = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let Some(payload) = bytes.get(9..9 + length) else {
            break;
        };
        frames.push((bytes[3], payload.to_vec()));
        bytes = &bytes[9 + length..];
    }
    frames
}
