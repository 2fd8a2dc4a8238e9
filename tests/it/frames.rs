//! HTTP/2 frames a hostile client sends to lanyard's listeners: a PING
//! or SETTINGS flood closes its connection and is counted, while other
//! clients are served; a stream of empty DATA frames gets h2's own GOAWAY.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use support::flood::{ATTACKER, NEIGHBOUR, PROMPTLY, connect_from, metric, until_metric};
use support::verifier;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const PING: u8 = 0x6;
const SETTINGS: u8 = 0x4;

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
    let stream = connect_from(ATTACKER, running.process.verifier_addr.unwrap()).await;
    let (mut requests, connection) = h2::client::handshake(stream).await.unwrap();
    let connection = tokio::spawn(connection);
    let request = http::Request::post("http://verifier/api/start")
        .header("content-type", "application/json")
        .body(())
        .unwrap();
    let (_answer, mut body) = requests.send_request(request, false).unwrap();
    for _ in 0..1000 {
        if body.send_data(Bytes::new(), false).is_err() {
            break;
        }
        // Lets the connection write what was queued, and see a GOAWAY.
        tokio::task::yield_now().await;
    }
    let ended = tokio::time::timeout(Duration::from_secs(10), connection)
        .await
        .expect("the connection ended")
        .unwrap();
    let error = ended.expect_err("ended by lanyard");
    assert_eq!(
        error.reason(),
        Some(h2::Reason::ENHANCE_YOUR_CALM),
        "{error}"
    );
    assert!(error.is_go_away(), "{error}");
}
