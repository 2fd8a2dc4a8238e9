//! The verifier's listener as the internet meets it (issue 22), over real
//! sockets: a flood of half-open connections from one address neither
//! takes the slots everyone else needs nor holds them past the
//! first-request timeout; behind a trusted proxy one address is not capped
//! as one client, and at the limit connections with no request in flight
//! give way to new ones; the connections are counted; and the answers the
//! server makes itself (its refusals, 431) carry the page's security
//! headers.

use crate::support;

use std::time::Duration;

use http::Method;
use lanyard::process::{VERIFIER_CONNECTIONS_PER_CLIENT, VERIFIER_FIRST_REQUEST_TIMEOUT};
use lanyard::server::HEAD_BACKSTOP;
use lanyard::verifier::{CONTENT_SECURITY_POLICY, PERMISSIONS_POLICY};
use support::flood::{
    ATTACKER, NEIGHBOUR, PROMPTLY, RawAnswer, allow_sockets, connect_from, exchange, half_open,
    metric, read_answer, until_closed, until_metric,
};
use support::verifier::{self, Running};
use tokio::net::TcpStream;
use tokio::time::Instant;

const OPEN: &str = "lanyard_verifier_connections";
const REFUSED: &str = "lanyard_verifier_connections_refused_total";
const EVICTED: &str = "lanyard_verifier_connections_evicted_total";
const GET_PAGE: &[u8] = b"GET / HTTP/1.1\r\nhost: verifier\r\n\r\n";
/// lanyard's default `LANYARD_MAX_HEADER_BYTES`.
const MAX_HEADER_BYTES: usize = 64 * 1024;

fn assert_secured(answer: &RawAnswer, what: &str) {
    assert_eq!(
        answer.header("content-security-policy"),
        CONTENT_SECURITY_POLICY,
        "{what}"
    );
    assert_eq!(answer.header("x-frame-options"), "DENY", "{what}");
    assert_eq!(
        answer.header("permissions-policy"),
        PERMISSIONS_POLICY,
        "{what}"
    );
    assert_eq!(answer.header("x-content-type-options"), "nosniff", "{what}");
}

async fn verifier_with(extra: &[(&str, &str)]) -> Running {
    verifier::start(support::mock().await, None, extra).await
}

/// A connection from [`NEIGHBOUR`] that has had the page.
async fn served_neighbour(running: &Running) -> TcpStream {
    let addr = running.process.verifier_addr.unwrap();
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let page = exchange(&mut stream, GET_PAGE).await;
    assert_eq!(
        page.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&page.body)
    );
    assert_secured(&page, "the page");
    stream
}

/// Connections the listener has admitted, refused or evicted for: every
/// one it has accepted, while none can have reached its first-request
/// timeout (or been closed by its client).
async fn accepted(running: &Running) -> usize {
    let mut sum = 0.0;
    for name in [OPEN, REFUSED, EVICTED] {
        sum += metric(&running.admin, name).await;
    }
    sum as usize
}

/// [`ATTACKER`]'s half-open connections, `count` in all, in batches half
/// the listener's accept queue (1024) holds. A flood that outruns the
/// server's thread overflows the queue, and Linux then completes the
/// client's connect but accepts the connection only as it retransmits, a
/// second or more later and behind connections made after it. So after
/// each batch this waits until the listener has accepted all so far, or
/// the first-request timeout may have closed some (the count no longer
/// adds up; the tests' bounds then widen).
async fn flood(running: &Running, count: usize, began: Instant) -> Vec<TcpStream> {
    const BATCH: usize = 512;
    let addr = running.process.verifier_addr.unwrap();
    let mut held = Vec::with_capacity(count);
    while held.len() < count {
        let batch = BATCH.min(count - held.len());
        held.extend(half_open(ATTACKER, addr, batch).await);
        while accepted(running).await < held.len() {
            if began.elapsed() >= VERIFIER_FIRST_REQUEST_TIMEOUT {
                return held;
            }
            // Accepts have no signal a test can await; the scrape can.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    held
}

/// First-request timeouts that may have passed since `began`: each lets a
/// flood's closed connections be replaced by as many more.
fn windows(began: Instant) -> usize {
    1 + (began.elapsed().as_secs() / VERIFIER_FIRST_REQUEST_TIMEOUT.as_secs()) as usize
}

#[tokio::test]
async fn half_open_connections_from_one_address_leave_the_listener_to_everyone_else() {
    const FLOOD: usize = 1_100;
    allow_sockets(FLOOD + 64);
    let running = verifier_with(&[]).await;
    let began = Instant::now();
    let mut flood = flood(&running, FLOOD, began).await;

    // Another address is served at once.
    let mut neighbour = served_neighbour(&running).await;

    // The flood holds its cap and no more; the rest was refused, counted.
    let cap = VERIFIER_CONNECTIONS_PER_CLIENT;
    let windows = windows(began);
    let open = metric(&running.admin, OPEN).await as usize;
    let refused = metric(&running.admin, REFUSED).await as usize;
    assert!(open <= cap + 1, "{open} open");
    assert!(refused <= FLOOD - cap, "{refused} refused");
    if windows == 1 {
        assert_eq!(open, cap + 1, "the flood's cap, and the neighbour");
        assert_eq!(refused, FLOOD - cap);
    } else {
        assert!(refused >= FLOOD - cap * windows, "{refused} refused");
    }
    assert_eq!(metric(&running.admin, EVICTED).await, 0.0);

    // The first connection over the cap was told why, as the page's
    // answers are, naming the cap.
    let refusal = tokio::time::timeout(PROMPTLY, read_answer(&mut flood[cap]))
        .await
        .expect("the refusal in time");
    assert_eq!(refusal.status, 503);
    assert_eq!(refusal.header("lanyard-error"), "too_many_connections");
    assert_secured(&refusal, "the per-client refusal");
    let body = String::from_utf8_lossy(&refusal.body);
    assert!(body.contains(&format!("holds {cap} connections")), "{body}");

    // A connection that sent nothing is closed at the first-request
    // timeout; the neighbour's, which sent a whole request, is kept alive.
    until_closed(&mut flood[0], PROMPTLY).await;
    assert!(began.elapsed() >= VERIFIER_FIRST_REQUEST_TIMEOUT);
    let again = exchange(&mut neighbour, GET_PAGE).await;
    assert_eq!(again.status, 200, "the kept-alive connection");

    drop((flood, neighbour));
    until_metric(&running.admin, OPEN, |open| open == 0.0).await;
}

#[tokio::test]
async fn behind_a_trusted_proxy_one_address_is_not_capped_and_half_open_ones_give_way() {
    // lanyard's default LANYARD_MAX_CONNECTIONS: a burst that fills it
    // queues a task per connection ahead of the first eviction.
    const LIMIT: usize = 1024;
    const FLOOD: usize = 1_100;
    allow_sockets(FLOOD + 64);
    let running = verifier_with(&[("LANYARD_VERIFIER_FORWARDED_HOPS", "1")]).await;
    let began = Instant::now();
    let _flood = flood(&running, FLOOD, began).await;

    // Every connection comes from the proxy's address: far more than one
    // client's cap are held, up to the limit, where each new connection
    // takes the place of the oldest that has sent no whole request, the
    // neighbour's included; none is refused.
    let _neighbour = served_neighbour(&running).await;
    assert_eq!(metric(&running.admin, REFUSED).await, 0.0);
    let open = metric(&running.admin, OPEN).await as usize;
    let evicted = metric(&running.admin, EVICTED).await as usize;
    if windows(began) == 1 {
        assert_eq!(open, LIMIT);
        assert_eq!(evicted, FLOOD + 1 - LIMIT);
    } else {
        assert!(open > VERIFIER_CONNECTIONS_PER_CLIENT, "{open} open");
    }
}

#[tokio::test]
async fn at_the_limit_the_connection_idle_longest_gives_way() {
    const LIMIT: usize = 4;
    let running = verifier_with(&[
        ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
        ("LANYARD_MAX_CONNECTIONS", &LIMIT.to_string()),
    ])
    .await;
    // Kept-alive connections, each idle after its page, the first longest.
    let mut idle = Vec::new();
    for _ in 0..LIMIT {
        idle.push(served_neighbour(&running).await);
    }
    let _newcomer = served_neighbour(&running).await;
    until_closed(&mut idle[0], PROMPTLY).await;
    for stream in &mut idle[1..] {
        assert_eq!(exchange(stream, GET_PAGE).await.status, 200);
    }
    assert_eq!(metric(&running.admin, EVICTED).await, 1.0);
    assert_eq!(metric(&running.admin, REFUSED).await, 0.0);
}

#[tokio::test]
async fn at_the_limit_with_every_connection_busy_a_new_one_is_refused_with_the_headers() {
    const LIMIT: usize = 4;
    let running = verifier_with(&[
        ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
        ("LANYARD_MAX_CONNECTIONS", &LIMIT.to_string()),
    ])
    .await;
    let addr = running.process.verifier_addr.unwrap();
    // Starts whose bodies never come: each connection has a request in
    // flight (until LANYARD_BODY_TIMEOUT), so none may be evicted.
    let mut busy = Vec::new();
    for _ in 0..LIMIT {
        let mut stream = connect_from(NEIGHBOUR, addr).await;
        tokio::io::AsyncWriteExt::write_all(
            &mut stream,
            b"POST /api/start HTTP/1.1\r\nhost: verifier\r\ncontent-type: application/json\r\ncontent-length: 10\r\n\r\n",
        )
        .await
        .unwrap();
        busy.push(stream);
    }
    until_metric(&running.admin, OPEN, |open| open == LIMIT as f64).await;
    let mut late = connect_from(NEIGHBOUR, addr).await;
    let refusal = exchange(&mut late, GET_PAGE).await;
    assert_eq!(refusal.status, 503);
    assert_eq!(refusal.header("lanyard-error"), "too_many_connections");
    assert_secured(&refusal, "the refusal at the limit");
    assert_eq!(metric(&running.admin, REFUSED).await, 1.0);
    assert_eq!(metric(&running.admin, EVICTED).await, 0.0);
    drop(busy);
    until_metric(&running.admin, OPEN, |open| open == 0.0).await;
    served_neighbour(&running).await;
}

#[tokio::test]
async fn a_request_head_over_the_limit_or_malformed_gets_the_servers_answer_with_the_security_headers()
 {
    let running = verifier_with(&[]).await;
    let addr = running.process.verifier_addr.unwrap();
    let head = |value_bytes: usize| {
        format!(
            "GET / HTTP/1.1\r\nhost: verifier\r\nx-big: {}\r\n\r\n",
            "x".repeat(value_bytes)
        )
    };

    // Just under the limit is served.
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let answer = exchange(&mut stream, head(MAX_HEADER_BYTES - 1024).as_bytes()).await;
    assert_eq!(answer.status, 200);

    // Over it: the server's own 431, with the page's headers, and closed.
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let answer = exchange(&mut stream, head(MAX_HEADER_BYTES + 1024).as_bytes()).await;
    assert_eq!(answer.status, 431);
    assert_secured(&answer, "431");
    assert_eq!(answer.header("connection"), "close");
    until_closed(&mut stream, PROMPTLY).await;

    // Far beyond it, and with more fields than hyper takes: the same, as
    // heads are judged before hyper reads them.
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let beyond = head(HEAD_BACKSTOP * MAX_HEADER_BYTES + 1024);
    let answer = exchange(&mut stream, beyond.as_bytes()).await;
    assert_eq!(answer.status, 431);
    assert_secured(&answer, "431 far beyond the limit");
    let many: String = (0..101).map(|n| format!("x-{n}: 1\r\n")).collect();
    let mut stream = connect_from(NEIGHBOUR, addr).await;
    let request = format!("GET / HTTP/1.1\r\nhost: verifier\r\n{many}\r\n");
    let answer = exchange(&mut stream, request.as_bytes()).await;
    assert_eq!(answer.status, 431);
    assert_secured(&answer, "431 for too many fields");

    // Malformed, or framed ambiguously: 400, secured too.
    for bad in [
        &b"GET / HTTP/1.1\r\nhost: verifier\r\nbad header\r\n\r\n"[..],
        b"POST /api/start HTTP/1.1\r\nhost: verifier\r\ntransfer-encoding: chunked\r\ncontent-length: 2\r\n\r\n0\r\n\r\n",
    ] {
        let mut stream = connect_from(NEIGHBOUR, addr).await;
        let answer = exchange(&mut stream, bad).await;
        assert_eq!(answer.status, 400);
        assert_secured(&answer, "400");
        assert_eq!(answer.header("lanyard-error"), "bad_request");
    }

    // HTTP/2 (a balancer's h2c) is answered the same way.
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let request = http::Request::builder()
        .method(Method::GET)
        .uri(format!("{}/", running.url))
        .header("x-big", "x".repeat(MAX_HEADER_BYTES + 1024))
        .body(http_body_util::Empty::new())
        .unwrap();
    let answer = tokio::time::timeout(PROMPTLY, h2.request(request))
        .await
        .expect("an HTTP/2 answer in time")
        .unwrap();
    assert_eq!(answer.version(), http::Version::HTTP_2);
    assert_eq!(answer.status(), 431);
    let headers = answer.headers();
    assert_eq!(
        headers["content-security-policy"], CONTENT_SECURITY_POLICY,
        "HTTP/2 431"
    );
    assert_eq!(headers["permissions-policy"], PERMISSIONS_POLICY);
    assert_eq!(headers["x-frame-options"], "DENY");
}
