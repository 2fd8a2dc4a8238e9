use std::collections::VecDeque;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// A frame as a client or server would put it on the wire.
fn frame(frame_type: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut bytes = vec![length[1], length[2], length[3], frame_type, 0];
    bytes.extend_from_slice(&stream.to_be_bytes());
    bytes.extend_from_slice(payload);
    bytes
}

fn ping() -> Vec<u8> {
    frame(frame::PING, 0, &[0; 8])
}

fn settings() -> Vec<u8> {
    frame(frame::SETTINGS, 0, &[])
}

fn window_update(stream: u32) -> Vec<u8> {
    frame(frame::WINDOW_UPDATE, stream, &16_384u32.to_be_bytes())
}

/// One of each frame type a client might send, preface first, and the
/// headers a cursor should report for it.
fn conversation() -> (Vec<u8>, Vec<FrameHeader>) {
    let frames = [
        frame(frame::SETTINGS, 0, &[0, 3, 0, 0, 0, 100]),
        window_update(0),
        frame(frame::PRIORITY, 3, &[0, 0, 0, 0, 200]),
        frame(frame::HEADERS, 1, &[0x83, 0x86, 0x84]),
        frame(frame::CONTINUATION, 1, &[]),
        frame(frame::DATA, 1, &[7; 1000]),
        ping(),
        frame(frame::RST_STREAM, 1, &[0, 0, 0, 8]),
        frame(0x10, 1, b"u=1"),
        frame(frame::GOAWAY, 0, &[0; 8]),
    ];
    let mut bytes = PREFACE.to_vec();
    let mut headers = Vec::new();
    for frame in frames {
        headers.push(FrameHeader {
            length: u32::from_be_bytes([0, frame[0], frame[1], frame[2]]),
            frame_type: frame[3],
        });
        bytes.extend_from_slice(&frame);
    }
    (bytes, headers)
}

/// The headers `cursor` reports for `bytes` fed `chunk` bytes at a time.
fn headers_in(mut cursor: FrameCursor, bytes: &[u8], chunk: usize) -> Vec<FrameHeader> {
    let mut seen = Vec::new();
    for piece in bytes.chunks(chunk) {
        let Ok(()) = cursor.follow(piece, |header| {
            seen.push(header);
            Ok::<(), Infallible>(())
        });
    }
    seen
}

#[test]
fn cursor_finds_every_frame_in_reads_of_any_size() {
    let (bytes, expected) = conversation();
    for chunk in [1, 2, 3, 8, 9, 10, 24, 25, 999, bytes.len()] {
        let seen = headers_in(FrameCursor::client(), &bytes, chunk);
        assert_eq!(seen, expected, "{chunk}-byte reads");
    }
}

#[test]
fn cursor_skips_the_largest_payload_a_header_can_announce() {
    let largest = frame(0x20, 1, &[])[..HEADER_LEN].to_vec();
    let mut header = largest.clone();
    header[..3].copy_from_slice(&[0xff, 0xff, 0xff]);
    let mut cursor = FrameCursor::server();
    let mut seen = Vec::new();
    let mut record = |header| {
        seen.push(header);
        Ok::<(), Infallible>(())
    };
    let Ok(()) = cursor.follow(&header, &mut record);
    let payload = vec![0xff; 1 << 20];
    let mut left = (1 << 24) - 1;
    while left > 0 {
        let n = left.min(payload.len());
        let Ok(()) = cursor.follow(&payload[..n], &mut record);
        left -= n;
    }
    let Ok(()) = cursor.follow(&ping(), &mut record);
    let lengths: Vec<_> = seen.iter().map(|header| header.length).collect();
    assert_eq!(lengths, [(1 << 24) - 1, 8]);
}

#[test]
fn cursor_follows_nothing_that_does_not_start_with_the_preface() {
    let mut bytes = b"GET / HTTP/1.1\r\nhost: a\r\n\r\n".to_vec();
    bytes.extend(ping().repeat(1000));
    assert_eq!(headers_in(FrameCursor::client(), &bytes, 7), []);
}

/// Whether `kind`'s allowance holds for a client sending one every
/// `every` for `total`.
fn holds(kind: Kind, every: Duration, total: Duration) -> bool {
    let mut now = Instant::now();
    let end = now + total;
    let mut budget = Budget::new(now);
    while now < end {
        if !budget.admit(kind, now) {
            return false;
        }
        now += every;
    }
    true
}

#[test]
fn sustained_rates_hold_for_a_day_and_a_little_more_runs_out() {
    let day = Duration::from_secs(24 * 3600);
    for kind in Kind::ALL {
        let rule = kind.rule();
        if rule.per_second == 0 {
            continue;
        }
        let at_rate = Duration::from_nanos(1_000_000_000 / rule.per_second);
        assert!(holds(kind, at_rate, day), "{} at its rate", rule.frames);
        let faster = at_rate.mul_f64(0.9);
        assert!(!holds(kind, faster, day), "{} faster", rule.frames);
    }
}

#[test]
fn goaway_allowance_does_not_refill() {
    let mut now = Instant::now();
    let mut budget = Budget::new(now);
    for _ in 0..GOAWAY.burst {
        assert!(budget.admit(Kind::GoAway, now));
        now += Duration::from_secs(3600);
    }
    assert!(!budget.admit(Kind::GoAway, now));
}

#[test]
fn work_earns_allowance_beyond_the_burst() {
    let now = Instant::now();
    let mut budget = Budget::new(now);
    for _ in 0..1000 {
        budget.requested();
        assert!(budget.admit(Kind::Reset, now));
    }
    for _ in 0..RST_STREAM.burst {
        assert!(budget.admit(Kind::Reset, now));
    }
    assert!(!budget.admit(Kind::Reset, now));
}

/// The client's side of a connection, played by a test: what it sent
/// waits in `incoming`, read back at most `read_size` bytes at a time;
/// what the server writes is only counted.
#[derive(Debug)]
struct Script {
    incoming: VecDeque<u8>,
    read_size: usize,
    written: usize,
}

impl AsyncRead for Script {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let n = self.read_size.min(buf.remaining()).min(self.incoming.len());
        let bytes: Vec<u8> = self.incoming.drain(..n).collect();
        buf.put_slice(&bytes);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for Script {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.written += buf.len();
        Poll::Ready(Ok(buf.len()))
    }

    /// Takes at most 5 bytes, as a socket may take part of what it is
    /// offered, so that a write ends mid-header or spans two slices.
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let offered: usize = bufs.iter().map(|buf| buf.len()).sum();
        let n = offered.min(5);
        self.written += n;
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// A guarded connection whose client has sent the preface, read back
/// `read_size` bytes at a time.
fn connection(read_size: usize) -> (ControlFrames<Script>, Flooded) {
    ControlFrames::new(Script {
        incoming: PREFACE.iter().copied().collect(),
        read_size,
        written: 0,
    })
}

/// Reads everything the client has sent so far, as hyper would.
async fn read_sent(guard: &mut ControlFrames<Script>) -> io::Result<()> {
    let mut buf = [0; 16_384];
    while guard.read(&mut buf).await? > 0 {}
    Ok(())
}

fn send(guard: &mut ControlFrames<Script>, bytes: &[u8]) {
    guard.inner.incoming.extend(bytes);
}

#[tokio::test(start_paused = true)]
async fn reads_of_any_size_count_each_control_frame_once() {
    let cases: [(Kind, Vec<u8>); 6] = [
        (Kind::Settings, settings()),
        (Kind::Ping, ping()),
        (Kind::WindowUpdate, window_update(0)),
        (Kind::Reset, frame(frame::RST_STREAM, 1, &[0, 0, 0, 8])),
        (Kind::Hint, frame(frame::PRIORITY, 3, &[0, 0, 0, 0, 9])),
        (Kind::GoAway, frame(frame::GOAWAY, 0, &[0; 8])),
    ];
    for read_size in [1, 4, 9, 13, 4096] {
        for (kind, one) in &cases {
            let (mut guard, flooded) = connection(read_size);
            // Uncounted frames between them change nothing.
            let between = frame(frame::DATA, 1, &[0; 300]);
            for _ in 0..kind.rule().burst {
                send(&mut guard, one);
                send(&mut guard, &between);
            }
            read_sent(&mut guard).await.unwrap();
            assert!(!flooded.get());
            send(&mut guard, one);
            let error = read_sent(&mut guard).await.unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::InvalidData);
            let message = error.to_string();
            assert!(message.contains(kind.rule().frames), "{message}");
            assert!(flooded.get(), "{read_size}-byte reads, {message}");
        }
    }
}

#[test]
fn each_kind_has_an_allowance_of_its_own() {
    for (index, kind) in Kind::ALL.into_iter().enumerate() {
        assert_eq!(kind as usize, index, "{kind:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn answer_frames_count_across_partial_vectored_writes() {
    let (mut guard, flooded) = connection(4096);
    let data = frame(frame::DATA, 1, &[0; 3]);
    let (header, payload) = data.split_at(HEADER_LEN);
    // Header and payload in slices of their own, taken 5 bytes a write.
    for _ in 0..1000 {
        let mut done = 0;
        while done < data.len() {
            let (header, payload) = match done.checked_sub(HEADER_LEN) {
                None => (&header[done..], payload),
                Some(into_payload) => (&[][..], &payload[into_payload..]),
            };
            let slices = [IoSlice::new(header), IoSlice::new(payload)];
            done += guard.write_vectored(&slices).await.unwrap();
        }
    }
    assert_eq!(guard.inner.written, 1000 * data.len());
    // Each answer frame earned a PING, on top of the burst.
    send(&mut guard, &ping().repeat(1000 + 100));
    read_sent(&mut guard).await.unwrap();
    assert!(!flooded.get());
    send(&mut guard, &ping());
    assert!(read_sent(&mut guard).await.is_err());
}

#[tokio::test(start_paused = true)]
async fn a_ping_flood_trips_the_guard_and_reads_keep_failing() {
    let (mut guard, flooded) = connection(16_384);
    send(&mut guard, &settings());
    send(&mut guard, &ping().repeat(10_000));
    let error = read_sent(&mut guard).await.unwrap_err();
    assert!(error.to_string().contains("PING"), "{error}");
    assert!(flooded.get());
    // Nothing more reaches hyper, whatever the client sends next...
    send(&mut guard, &settings());
    let mut buf = [0; 64];
    assert!(guard.read(&mut buf).await.is_err());
    // ...and what the server still writes goes through.
    guard.write_all(&settings()).await.unwrap();
    assert_eq!(guard.inner.written, HEADER_LEN);
}

#[tokio::test(start_paused = true)]
async fn modest_pings_and_settings_never_trip() {
    let (mut guard, flooded) = connection(4096);
    // Twice a second for a (virtual) hour; SETTINGS every two seconds.
    for tick in 0..7200 {
        send(&mut guard, &ping());
        if tick % 4 == 0 {
            send(&mut guard, &settings());
        }
        read_sent(&mut guard).await.unwrap();
        tokio::time::advance(Duration::from_millis(500)).await;
    }
    assert!(!flooded.get());
}

#[tokio::test(start_paused = true)]
async fn window_updates_for_a_large_download_never_trip() {
    let (mut guard, flooded) = connection(16_384);
    send(&mut guard, &settings());
    send(&mut guard, &window_update(0));
    send(&mut guard, &frame(frame::HEADERS, 1, &[0x82, 0x86, 0x84]));
    read_sent(&mut guard).await.unwrap();
    // A GiB in 16 KiB frames with no time passing, the client giving
    // back the stream's and the connection's window for every frame.
    let data = frame(frame::DATA, 1, &[0; 16_384]);
    for _ in 0..(1 << 16) {
        guard.write_all(&data).await.unwrap();
        send(&mut guard, &window_update(1));
        send(&mut guard, &window_update(0));
        read_sent(&mut guard).await.unwrap();
    }
    // A client that raised its frame size to 1 MiB, giving back both
    // windows every 4 KiB it reads.
    let data = frame(frame::DATA, 1, &vec![0; 1 << 20]);
    for _ in 0..16 {
        guard.write_all(&data).await.unwrap();
        for _ in 0..256 {
            send(&mut guard, &window_update(1));
            send(&mut guard, &window_update(0));
        }
        read_sent(&mut guard).await.unwrap();
    }
    assert!(!flooded.get());
}

#[tokio::test(start_paused = true)]
async fn window_updates_with_nothing_written_trip() {
    let (mut guard, flooded) = connection(16_384);
    send(&mut guard, &window_update(0).repeat(1000));
    let error = read_sent(&mut guard).await.unwrap_err();
    assert!(error.to_string().contains("WINDOW_UPDATE"), "{error}");
    assert!(flooded.get());
}

#[tokio::test(start_paused = true)]
async fn pings_after_each_answer_frame_never_trip() {
    // grpc-go's bandwidth probe: one PING after each DATA frame read.
    let (mut guard, flooded) = connection(16_384);
    let data = frame(frame::DATA, 1, &[0; 64]);
    for _ in 0..100_000 {
        guard.write_all(&data).await.unwrap();
        send(&mut guard, &ping());
        read_sent(&mut guard).await.unwrap();
    }
    assert!(!flooded.get());
}

/// hyper's HTTP/2 server over real sockets, behind the guard or not.
mod end_to_end {
    use std::future::Future;
    use std::net::SocketAddr;

    use bytes::Bytes;
    use http::{Request, Response, StatusCode};
    use http_body_util::{BodyExt, Empty, Full};
    use hyper::body::Incoming;
    use hyper::server::conn::http2;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::mpsc;
    use tokio::task::LocalSet;

    use super::*;

    /// Runs hyper's tasks on the test's thread, as lanyard's servers do.
    #[derive(Debug, Clone, Copy)]
    struct Local;

    impl<F> hyper::rt::Executor<F> for Local
    where
        F: Future + 'static,
    {
        fn execute(&self, future: F) {
            tokio::task::spawn_local(future);
        }
    }

    /// Serves HTTP/2 on a new loopback listener until the test ends;
    /// with `guarded`, each connection behind [`ControlFrames`]. Each
    /// connection reports, as it ends, whether it was flooded.
    async fn serve(guarded: bool) -> (SocketAddr, mpsc::UnboundedReceiver<bool>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (report, reports) = mpsc::unbounded_channel();
        tokio::task::spawn_local(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let report = report.clone();
                tokio::task::spawn_local(async move {
                    // Answers once the whole request body is in, so a
                    // stream stays open while its client sends DATA.
                    let service = service_fn(|request: Request<Incoming>| async move {
                        let _ = request.into_body().collect().await;
                        let body = Full::new(Bytes::from_static(b"ok\n"));
                        Ok::<_, Infallible>(Response::new(body))
                    });
                    let server = http2::Builder::new(Local);
                    let flooded = if guarded {
                        let (io, flooded) = ControlFrames::new(stream);
                        let _ = server.serve_connection(TokioIo::new(io), service).await;
                        flooded.get()
                    } else {
                        let _ = server.serve_connection(TokioIo::new(stream), service).await;
                        false
                    };
                    let _ = report.send(flooded);
                });
            }
        });
        (address, reports)
    }

    /// A well-behaved request on a connection of its own.
    async fn get(address: SocketAddr) -> StatusCode {
        let stream = TcpStream::connect(address).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(Local, TokioIo::new(stream))
                .await
                .unwrap();
        tokio::task::spawn_local(connection);
        let request = Request::get("http://localhost/")
            .body(Empty::<Bytes>::new())
            .unwrap();
        sender.send_request(request).await.unwrap().status()
    }

    /// The frames the server sends on `reading` until it closes, each
    /// as its type and payload.
    async fn frames_from(mut reading: impl AsyncRead + Unpin) -> Vec<(u8, Vec<u8>)> {
        let mut frames = Vec::new();
        let mut head = [0; HEADER_LEN];
        while reading.read_exact(&mut head).await.is_ok() {
            let length = u32::from_be_bytes([0, head[0], head[1], head[2]]);
            let mut payload = vec![0; length as usize];
            if reading.read_exact(&mut payload).await.is_err() {
                break;
            }
            frames.push((head[3], payload));
        }
        frames
    }

    /// The most PINGs the flooding client writes before giving up: more
    /// than loopback's socket buffers hold (32 MiB at most here).
    const FLOOD_LIMIT: usize = 4_000_000;

    /// Opens a connection and writes PINGs to it as fast as it can,
    /// until the server ends it or `FLOOD_LIMIT`: how many it wrote,
    /// and how many the server answered.
    async fn flood_pings(address: SocketAddr, pings: usize) -> (usize, usize) {
        let stream = TcpStream::connect(address).await.unwrap();
        let (reading, mut writing) = stream.into_split();
        let answers = tokio::task::spawn_local(frames_from(reading));
        let mut start = PREFACE.to_vec();
        start.extend(settings());
        writing.write_all(&start).await.unwrap();
        let batch = ping().repeat(1000);
        let mut sent = 0;
        while sent < pings && writing.write_all(&batch).await.is_ok() {
            sent += 1000;
        }
        drop(writing);
        let answers = answers.await.unwrap();
        let pongs = answers.iter().filter(|(kind, _)| *kind == frame::PING);
        (sent, pongs.count())
    }

    #[tokio::test]
    async fn a_ping_flood_ends_its_connection_and_spares_the_others() {
        let local = LocalSet::new();
        local
            .run_until(async {
                let (address, mut reports) = serve(true).await;
                let flood = flood_pings(address, FLOOD_LIMIT);
                let ((sent, answered), status) = tokio::join!(flood, get(address));
                assert_eq!(status, StatusCode::OK);
                assert!(sent < FLOOD_LIMIT, "the flood went on: {sent} PINGs");
                assert!(answered <= PING.burst as usize, "{answered} PINGs answered");
                // Each connection reports as it ends; the flood's says so.
                let caught = async {
                    while let Some(flooded) = reports.recv().await {
                        if flooded {
                            return true;
                        }
                    }
                    false
                };
                let caught = tokio::time::timeout(Duration::from_secs(10), caught).await;
                assert_eq!(caught, Ok(true));
                eprintln!("flood: {sent} PINGs written, {answered} answered");
            })
            .await;
    }

    #[tokio::test]
    async fn without_the_guard_h2_answers_every_ping() {
        let local = LocalSet::new();
        local
            .run_until(async {
                let (address, _reports) = serve(false).await;
                let stream = TcpStream::connect(address).await.unwrap();
                let (reading, mut writing) = stream.into_split();
                let answers = tokio::task::spawn_local(frames_from(reading));
                let mut flood = PREFACE.to_vec();
                flood.extend(settings());
                flood.extend(ping().repeat(20_000));
                writing.write_all(&flood).await.unwrap();
                // Closing our side ends the connection once all are read.
                drop(writing);
                let answers = answers.await.unwrap();
                let pongs = answers.iter().filter(|(kind, _)| *kind == frame::PING);
                assert_eq!(pongs.count(), 20_000);
                assert!(answers.iter().all(|(kind, _)| *kind != frame::GOAWAY));
            })
            .await;
    }

    #[tokio::test]
    async fn h2_itself_sends_goaway_after_a_hundred_empty_data_frames() {
        let local = LocalSet::new();
        local
            .run_until(async {
                let (address, mut reports) = serve(true).await;
                let stream = TcpStream::connect(address).await.unwrap();
                let (reading, mut writing) = stream.into_split();
                let answers = tokio::task::spawn_local(frames_from(reading));
                let mut request = PREFACE.to_vec();
                request.extend(settings());
                // POST / over http, END_HEADERS and no END_STREAM: the
                // body stays open for the empty frames that follow.
                let mut headers = frame(frame::HEADERS, 1, &[0x83, 0x86, 0x84]);
                headers[4] = 0x4;
                request.extend(headers);
                request.extend(frame(frame::DATA, 1, &[]).repeat(200));
                writing.write_all(&request).await.unwrap();
                let answers = answers.await.unwrap();
                let goaway = answers.iter().find(|(kind, _)| *kind == frame::GOAWAY);
                let (_, payload) = goaway.expect("h2 sent GOAWAY");
                // ENHANCE_YOUR_CALM, and h2's reason.
                assert_eq!(payload[4..8], 11u32.to_be_bytes());
                assert_eq!(&payload[8..], b"too_many_data_frames");
                // Not the guard's doing.
                assert_eq!(reports.recv().await, Some(false));
            })
            .await;
    }
}
