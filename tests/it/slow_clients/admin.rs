//! The admin listener under a flood: it caps each address at its share,
//! keeps answering probes, and gives a probe from an address whose
//! connections sit idle one of their places.

use super::*;

/// Waits until lanyard ends `stream`; the status of what it said first,
/// if anything.
async fn refusal(mut stream: TcpStream) -> Option<u16> {
    let mut said = Vec::new();
    tokio::time::timeout(PROMPTLY, stream.read_to_end(&mut said))
        .await
        .expect("refused in time")
        .ok()?;
    (!said.is_empty()).then(|| {
        let said = text(&said);
        said.get(9..12)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("not an HTTP answer: {said:?}"))
    })
}

#[tokio::test]
async fn a_flood_from_one_address_holds_eight_admin_connections_and_probes_pass() {
    const FLOOD: usize = ADMIN_MAX_CONNECTIONS;
    const HALF_OPEN: usize = 16;
    allow_sockets(2 * FLOOD);
    let flooder = loopback(3);
    // Long: the held connections must outlast the test, which shows the
    // cap rather than the send timeout.
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_SEND_TIMEOUT", "60s")]).await;
    let admin = running.process.admin_addr;

    // Zero-window connections, each holding a scrape: each past the
    // address's eighth takes the place of one of its own (stalled, so
    // idle), never anyone else's.
    let mut held = Vec::new();
    for n in 0..FLOOD {
        let mut connection = ZeroWindow::open(flooder, admin).await;
        let scrape = tokio::time::timeout(PROMPTLY, connection.hold("/metrics", &[]))
            .await
            .unwrap_or_else(|_| panic!("connection {n} neither held nor refused in time"));
        if let Ok(scrape) = scrape {
            assert_eq!(scrape.status, 200);
            held.push((connection, scrape));
        }
    }
    let open = || held.iter().filter(|(c, _)| !c.is_closed()).count();
    tokio::time::timeout(PROMPTLY, async {
        while open() > ADMIN_PER_CLIENT {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{} of the flood's connections still open", open()));

    // Half-open connections from the same address take the places of its
    // own too, or are told 503.
    let half_open = half_open(flooder, admin, HALF_OPEN).await;
    for (n, stream) in half_open
        .into_iter()
        .enumerate()
        .take(HALF_OPEN - ADMIN_PER_CLIENT)
    {
        let said = refusal(stream).await;
        assert!(matches!(said, None | Some(503)), "half-open {n}: {said:?}");
    }

    // Probes from elsewhere pass, every time.
    for round in 0..5 {
        probes_pass(NEIGHBOUR, admin, round).await;
    }
    // A scraper's kept-alive connection is answered too.
    let mut scraper = connect_from(NEIGHBOUR, admin).await;
    for _ in 0..3 {
        let scrape = exchange(
            &mut scraper,
            b"GET /metrics HTTP/1.1\r\nhost: admin\r\n\r\n",
        )
        .await;
        assert_eq!(scrape.status, 200);
    }
    // The cap, not the send timeout, kept the flood to its eight.
    assert_eq!(metric(&running.admin, STALLED_ADMIN).await, 0.0);
}

#[tokio::test]
async fn a_flood_filling_the_admin_listener_from_eight_addresses_gives_way_to_probes() {
    allow_sockets(2 * ADMIN_MAX_CONNECTIONS);
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[("LANYARD_SEND_TIMEOUT", "60s")]).await;
    let admin = running.process.admin_addr;

    // Eight addresses at their cap: all 64 of the listener's connections,
    // each holding a scrape behind a zero window.
    let mut flood = Vec::new();
    let mut held = Vec::new();
    for address in 0..ADMIN_MAX_CONNECTIONS / ADMIN_PER_CLIENT {
        for _ in 0..ADMIN_PER_CLIENT {
            let mut connection = ZeroWindow::open(loopback(20 + address as u8), admin).await;
            let scrape = tokio::time::timeout(PROMPTLY, connection.hold("/metrics", &[]))
                .await
                .expect("a scrape's head in time")
                .expect("admitted");
            assert_eq!(scrape.status, 200);
            held.push(scrape);
            flood.push(connection);
        }
    }

    // A ninth address's probes take stalled connections' places.
    let prober = loopback(40);
    for round in 0..5 {
        probes_pass(prober, admin, round).await;
    }
    tokio::time::timeout(PROMPTLY, any_closed(&flood))
        .await
        .expect("a stalled connection was evicted");
    // Over HTTP/2 as well: an evicted connection's streams leave the
    // listener's budget for streams.
    assert_eq!(h2_get(prober, admin, "/healthz").await, 200);
    assert_eq!(h2_get(prober, admin, "/readyz").await, 200);
    let closed = flood.iter().filter(|c| c.is_closed()).count();
    assert!(closed >= 1, "{closed} of the flood's connections closed");
}

#[tokio::test]
async fn a_probe_from_an_address_whose_connections_sit_idle_takes_one_of_their_places() {
    // A neighbour sharing the kubelet's address (a host-network pod,
    // NodePort traffic) holds the address's eight connections, each kept
    // alive after a request of its own.
    let upstream = TestUpstream::start(None).await;
    let running = sidecar::ready_for(&upstream.url, &[]).await;
    let admin = running.process.admin_addr;
    let shared = loopback(7);
    let mut neighbour = Vec::new();
    for _ in 0..ADMIN_PER_CLIENT {
        let mut stream = connect_from(shared, admin).await;
        let answer = exchange(&mut stream, b"GET /healthz HTTP/1.1\r\nhost: admin\r\n\r\n").await;
        assert_eq!(answer.status, 200);
        neighbour.push(stream);
    }
    // The probe from the same address takes an idle one's place.
    for round in 0..3 {
        probes_pass(shared, admin, round).await;
    }
}
