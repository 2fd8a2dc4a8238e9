//! The proxy on a Unix socket (`LANYARD_LISTEN=unix:/path`): requests
//! reach the upstream with the token over HTTP/1.1 and h2c, the file's
//! permissions, a stale file replaced and anything else left alone, the
//! connection limit and the send timeout as on TCP, and no TCP proxy
//! listener at all.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use lanyard::process::{Components, Process, bind_proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use crate::support::DefaultTokens;
use crate::support::upstream::TestUpstream;
use crate::support::{self, mock, wait_for};

/// A `lanyard run` in this process on a Unix socket in a fresh directory.
struct OnSocket {
    process: Process,
    socket: PathBuf,
    _upstream: TestUpstream,
    _mock: lanyard::mock::MockService,
    _dir: tempfile::TempDir,
}

async fn start(extra: &[(&str, &str)]) -> OnSocket {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("lanyard.sock");
    start_at(dir, &socket, extra).await.expect("lanyard starts")
}

async fn start_at(
    dir: tempfile::TempDir,
    socket: &Path,
    extra: &[(&str, &str)],
) -> Result<OnSocket, lanyard::Failure> {
    let mock = mock().await;
    let upstream = TestUpstream::start(None).await;
    let listen = format!("unix:{}", socket.display());
    let mut vars = vec![("LANYARD_LISTEN", listen.as_str())];
    vars.extend_from_slice(extra);
    let mut map = support::settings(&mock, dir.path(), &vars);
    map.insert("SERVICE_API_URL".into(), upstream.url.clone());
    let config = support::config(&map);
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = bind_proxy(&config.proxy)?;
    let process = Process::start(Components::proxy(&config, admin, proxy))?;
    wait_for(
        &mut process.default_tokens().state(),
        Duration::from_secs(10),
        |s| s.generation >= 1,
    )
    .await;
    Ok(OnSocket {
        process,
        socket: socket.to_owned(),
        _upstream: upstream,
        _mock: mock,
        _dir: dir,
    })
}

/// The upstream's JSON echo of a GET sent over the socket with HTTP/1.1,
/// or with HTTP/2 prior knowledge (h2c).
async fn echo(socket: &Path, http2: bool) -> serde_json::Value {
    let io = TokioIo::new(UnixStream::connect(socket).await.unwrap());
    let request = Request::get("/v1/things?x=1")
        .header("host", "localhost")
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = if http2 {
        let (mut sender, connection) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(connection);
        sender.send_request(request).await.unwrap()
    } else {
        let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(connection);
        sender.send_request(request).await.unwrap()
    };
    assert_eq!(response.status(), StatusCode::OK);
    let body = response.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

#[tokio::test]
async fn requests_over_the_socket_reach_the_upstream_with_the_token_over_http1_and_h2c() {
    let running = start(&[]).await;
    assert_eq!(running.process.proxy_addr, None, "no TCP proxy address");
    assert_eq!(
        running.process.proxy_socket.as_deref(),
        Some(running.socket.as_path())
    );
    for http2 in [false, true] {
        let echo = echo(&running.socket, http2).await;
        assert_eq!(echo["path"], "/v1/things?x=1", "{echo}");
        let authorization = echo["headers"]["authorization"][0].as_str().unwrap();
        assert!(authorization.starts_with("Bearer "), "{echo}");
    }
}

#[tokio::test]
async fn the_socket_is_owner_and_group_only_by_default_and_listen_mode_narrows_it() {
    let running = start(&[]).await;
    let meta = std::fs::metadata(&running.socket).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o660);

    let narrow = start(&[("LANYARD_LISTEN_MODE", "0600")]).await;
    let meta = std::fs::metadata(&narrow.socket).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    // Nothing is left beside it: not the private directory it was bound
    // in (`.lanyard-bind.<random>`, docs/proxy.md "Listening on a Unix socket").
    let names: Vec<_> = std::fs::read_dir(narrow.socket.parent().unwrap())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"lanyard.sock".to_string()), "{names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with(".lanyard-bind")),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("lanyard.sock");
    // A crashed lanyard's socket: the file stays, nothing listens.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(socket.exists());
    let running = start_at(dir, &socket, &[]).await.expect("lanyard starts");
    let echo = echo(&running.socket, false).await;
    assert_eq!(echo["path"], "/v1/things?x=1");
}

#[tokio::test]
async fn a_file_that_is_not_a_socket_or_a_socket_in_use_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("data.sock");
    std::fs::write(&file, "keep me").unwrap();
    let in_use = dir.path().join("in-use.sock");
    let _listening = std::os::unix::net::UnixListener::bind(&in_use).unwrap();

    let dir2 = tempfile::tempdir().unwrap();
    let Err(failure) = start_at(dir2, &file, &[]).await else {
        panic!("a regular file was taken over");
    };
    let message = failure.to_string();
    assert!(message.contains("not a socket"), "{message}");
    assert!(message.contains("LANYARD_LISTEN"), "{message}");
    assert_eq!(failure.exit_code(), 2, "a settings problem");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");

    let dir3 = tempfile::tempdir().unwrap();
    let Err(failure) = start_at(dir3, &in_use, &[]).await else {
        panic!("a socket in use was taken over");
    };
    assert!(
        failure.to_string().contains("another process is listening"),
        "{failure}"
    );
    assert_eq!(failure.exit_code(), 1, "the machine's state, not a setting");
    assert!(UnixStream::connect(&in_use).await.is_ok(), "still answers");
}

/// A socket path whose directory is missing is a bad setting: exit 2,
/// naming the setting and what to create.
#[tokio::test]
async fn a_socket_in_a_missing_directory_is_a_settings_problem() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("absent").join("lanyard.sock");
    let dir2 = tempfile::tempdir().unwrap();
    let Err(failure) = start_at(dir2, &socket, &[]).await else {
        panic!("listened in a directory that does not exist");
    };
    let message = failure.to_string();
    assert!(message.starts_with("LANYARD_LISTEN: "), "{message}");
    assert!(
        message.contains("its directory does not exist"),
        "{message}"
    );
    assert_eq!(failure.exit_code(), 2);
}

#[tokio::test]
async fn the_socket_file_is_removed_at_shutdown() {
    let running = start(&[]).await;
    assert!(running.socket.exists());
    running.process.shutdown();
    let OnSocket {
        process, socket, ..
    } = running;
    process.wait().await.unwrap();
    assert!(!socket.exists(), "the socket file outlived the process");
}

#[tokio::test]
async fn the_connection_limit_holds_on_the_socket_as_on_tcp() {
    let running = start(&[("LANYARD_MAX_CONNECTIONS", "2")]).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = UnixStream::connect(&running.socket).await.unwrap();
        // A whole request, answered: the connection is then held idle.
        stream
            .write_all(b"GET /v1/a HTTP/1.1\r\nhost: localhost\r\n\r\n")
            .await
            .unwrap();
        let mut head = [0u8; 12];
        stream.read_exact(&mut head).await.unwrap();
        assert_eq!(&head, b"HTTP/1.1 200");
        held.push(stream);
    }
    let mut third = UnixStream::connect(&running.socket).await.unwrap();
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), third.read_to_string(&mut answer))
        .await
        .expect("the refusal comes at once")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("too_many_connections"), "{answer}");
}

#[tokio::test]
async fn the_header_timeout_cuts_off_a_silent_client_on_the_socket_as_on_tcp() {
    let running = start(&[("LANYARD_HEADER_TIMEOUT", "1s")]).await;
    let mut silent = UnixStream::connect(&running.socket).await.unwrap();
    silent.write_all(b"GET /v1/a HTTP/1.1\r\n").await.unwrap();
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), silent.read_to_end(&mut rest))
        .await
        .expect("the connection was closed at the header timeout")
        .unwrap();
}

#[tokio::test]
async fn a_client_that_stops_reading_is_closed_at_the_send_timeout_on_the_socket_as_on_tcp() {
    // Far more than the socket's buffers hold, so lanyard's writes wait.
    const BODY: usize = 64 * 1024 * 1024;
    let running = start(&[("LANYARD_SEND_TIMEOUT", "2s")]).await;
    let admin = format!("http://{}", running.process.admin_addr);
    let stalled = "lanyard_connections_stalled_total{listener=\"proxy\"}";
    let mut client = UnixStream::connect(&running.socket).await.unwrap();
    let request = format!("GET /download?bytes={BODY} HTTP/1.1\r\nhost: localhost\r\n\r\n");
    client.write_all(request.as_bytes()).await.unwrap();
    // The client reads nothing until the count says lanyard gave up.
    crate::support::flood::until_metric(&admin, stalled, |n| n >= 1.0).await;
    let mut received = 0;
    let mut buf = vec![0u8; 64 * 1024];
    tokio::time::timeout(Duration::from_secs(10), async {
        while let Ok(n @ 1..) = client.read(&mut buf).await {
            received += n;
        }
    })
    .await
    .expect("lanyard closed the connection");
    assert!(received < BODY, "{received} bytes: the whole answer came");
}
