//! The verifier's memory under clients that read none of what it sends:
//! `bench/slow_readers.sh` runs this against a release `lanyard` (and a
//! baseline) as a child process, at the scale the integration test
//! (`tests/it/slow_clients.rs`) does not reach in-process.
//!
//! ```text
//! cargo run --release --example slow_readers -- --lanyard PATH
//!     [--connections N] [--addresses A] [--streams S] [--claims-kib K]
//!     [--hold SECONDS] [--rss-limit-mib M] [--env K=V]...
//! ```
//!
//! One process: the embedded mock (the service and its wallet), and
//! `PATH verifier` started against it on loopback with `--env` settings
//! on top. A session is started as a browser starts it (`POST /api/start`,
//! the cookie kept), the mock's wallet presents claims of `--claims-kib`
//! KiB (default 250), and the session is polled until verified; the
//! child's VmRSS then is `rss_before_kib`. Then `--connections` (default
//! 32) HTTP/2 connections, spread in turn over `--addresses` (default 1)
//! loopback source addresses from 127.0.0.10 up, each send `--streams`
//! (default 100) polls of that verified status with the cookie, granting
//! a flow-control window of zero (`SETTINGS_INITIAL_WINDOW_SIZE` 0) and
//! never more: every answer's head arrives, none of its body. Each
//! connection is driven in a task, so PINGs are answered.
//!
//! Once every stream has its head or has ended (within 60 s), the child's
//! VmRSS is read every 100 ms for `--hold` seconds (default 10); it is
//! read from the first stream on, so the peak covers the opening too. One
//! line of `key=value` results follows on stdout:
//!
//! - `streams_answered`: streams whose answer's head arrived;
//! - `streams_refused`: reset by the verifier before any head (over its
//!   budget of streams in flight), with `refused_reasons` the reset codes;
//! - `streams_reset_later`: answered, then reset by the verifier within
//!   the hold (its send timeout);
//! - `streams_lost`: ended before a head without a reset of their own (a
//!   connection refused, evicted or closed); `streams_closed_later`:
//!   answered, then their connection ended within the hold;
//!   `streams_unresolved`: neither head nor end within 60 s;
//! - `rss_before_kib`, `rss_peak_kib` (the highest sample or VmHWM, which
//!   is also the start's), `rss_end_kib` (the last sample), `vm_hwm_kib`;
//! - `child`: `running` until terminated, or how it ended during the
//!   run; `killed_at_rss_limit` when its VmRSS passed `--rss-limit-mib`
//!   (default 4096), a guard for the machine, not a measurement;
//! - `answer_bytes` (the verified answer's size), `connections_closed`
//!   and `body_bytes` (what came through the zero window: 0 unless the
//!   window is broken).
//!
//! The child is then killed. Exit 1, with a message on stderr, when the
//! setup fails before the streams: the child not starting, no token, the
//! session not verified.

use std::collections::{BTreeMap, VecDeque};
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::{HeaderMap, Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use lanyard::mock::{MockAccount, MockService, VERIFICATIONS_ROLE, generate_rsa_key};
use tokio::io::AsyncBufReadExt as _;
use tokio::net::{TcpSocket, TcpStream};
use tokio::process::{Child, Command};
use tokio::sync::{Notify, oneshot, watch};
use tokio::time::Instant;

const ORGANIZATION_ID: &str = "org-slow-readers";
const CLIENT_ID: &str = "sa-slow-readers";
const PROJECT_ID: &str = "proj-slow-readers";
const RULE_ID: &str = "8c3e1f2a-6b4d-4e7f-9a1c-2d5e8f0b3a71";
/// The first source address; 127.0.0.1, where the session is started
/// from, stays out of the flood's count.
const FIRST_SOURCE: u8 = 10;
/// Start-up, the first token, each HTTP/1.1 exchange.
const SETUP_WAIT: Duration = Duration::from_secs(20);
/// How long every stream together has to get its head or end.
const HEADS_WAIT: Duration = Duration::from_secs(60);
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Lines of the child's log kept for a failure's message.
const LOG_TAIL: usize = 20;

const USAGE: &str = "usage: slow_readers --lanyard PATH [--connections N] [--addresses A] \
    [--streams S] [--claims-kib K] [--hold SECONDS] [--rss-limit-mib M] [--env K=V]...";

struct Args {
    lanyard: PathBuf,
    connections: usize,
    addresses: usize,
    streams: usize,
    claims_kib: usize,
    hold: Duration,
    rss_limit_kib: u64,
    env: Vec<(String, String)>,
}

fn parse_args() -> Result<Args, String> {
    let mut lanyard = None;
    let mut args = Args {
        lanyard: PathBuf::new(),
        connections: 32,
        addresses: 1,
        streams: 100,
        claims_kib: 250,
        hold: Duration::from_secs(10),
        rss_limit_kib: 4096 * 1024,
        env: Vec::new(),
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut value = || given.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |value: String| {
            value
                .parse::<usize>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("{arg} {value}: not a whole number above 0"))
        };
        match arg.as_str() {
            "--lanyard" => lanyard = Some(PathBuf::from(value()?)),
            "--connections" => args.connections = number(value()?)?,
            "--addresses" => args.addresses = number(value()?)?,
            "--streams" => args.streams = number(value()?)?,
            "--claims-kib" => args.claims_kib = number(value()?)?,
            "--hold" => args.hold = Duration::from_secs(number(value()?)? as u64),
            "--rss-limit-mib" => args.rss_limit_kib = number(value()?)? as u64 * 1024,
            "--env" => {
                let pair = value()?;
                let (name, value) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("--env {pair}: not NAME=VALUE"))?;
                args.env.push((name.into(), value.into()));
            }
            "-h" | "--help" => return Err(USAGE.into()),
            _ => return Err(format!("unexpected argument {arg}\n{USAGE}")),
        }
    }
    args.lanyard = lanyard.ok_or(USAGE)?;
    if usize::from(FIRST_SOURCE) + args.addresses > 255 {
        return Err(format!("--addresses {}: at most 245", args.addresses));
    }
    Ok(args)
}

/// One thread: the clients and the mock wait on the verifier, which has
/// the machine's other cores.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("slow_readers: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("slow_readers: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<String, String> {
    // Each connection is a descriptor here and one in the child, which
    // raises its own limit.
    let wanted = (args.connections + 512) as u64;
    let limit = rlimit::increase_nofile_limit(wanted).map_err(|e| format!("open files: {e}"))?;
    if limit < wanted {
        return Err(format!("the open-file limit is {limit}; {wanted} needed"));
    }
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let mock = start_mock(dir.path()).await?;
    let mut vars = vec![
        ("SERVICE_API_URL".to_string(), mock.api_url()),
        (
            "SA_CREDENTIALS_FILE".into(),
            dir.path().join("credentials.json").display().to_string(),
        ),
        ("PROJECT_ID".into(), PROJECT_ID.into()),
        ("RULE_ID".into(), RULE_ID.into()),
        ("WALLET_BASE_URL".into(), mock.wallet_url()),
        ("LANYARD_VERIFIER_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_LOG_FORMAT".into(), "json".into()),
    ];
    vars.extend(args.env.iter().cloned());
    let mut child = Verifier::spawn(&args.lanyard, vars).await?;
    let setup = async {
        until_ready(child.admin).await?;
        let session = verified_session(&mock, child.verifier, args.claims_kib).await?;
        let before = status_kib(child.pid, "VmRSS").ok_or("the child's VmRSS is unreadable")?;
        Ok::<_, String>((session, before))
    };
    let (session, rss_before) = match setup.await {
        Ok(done) => done,
        Err(message) => return Err(format!("{message}\n{}", child.log_tail())),
    };

    let (stop, sampled) = sample(child.take(), args.rss_limit_kib);
    let counts = Arc::new(Counts::default());
    let total = args.connections * args.streams;
    counts.unresolved.store(total as u64, Ordering::Relaxed);
    let holders = open_all(&args, child.verifier, &session, &counts).await;
    let heads = async {
        while counts.unresolved.load(Ordering::Relaxed) > 0 {
            counts.resolved.notified().await;
        }
    };
    tokio::select! {
        _ = tokio::time::timeout(HEADS_WAIT, heads) => {}
        () = child_gone(sampled.clone()) => {}
    }
    tokio::select! {
        () = tokio::time::sleep(args.hold) => {}
        () = child_gone(sampled.clone()) => {}
    }
    // The counts as the hold ends, before the child's end closes every
    // connection.
    let result = counts.line();
    let (tx, rx) = oneshot::channel();
    let _ = stop.send(tx);
    let last = rx.await.unwrap_or_else(|_| sampled.borrow().clone());
    drop(holders);
    Ok(format!(
        "streams={total} {result} rss_before_kib={rss_before} rss_peak_kib={} rss_end_kib={} \
         vm_hwm_kib={} answer_bytes={} child={}",
        last.peak_kib.max(last.vm_hwm_kib),
        last.last_kib,
        last.vm_hwm_kib,
        session.answer_bytes,
        last.child,
    ))
}

/// The mock with one account, its rule, and the account's credentials
/// file in `dir`, as `tests/it/support` sets them up.
async fn start_mock(dir: &Path) -> Result<MockService, String> {
    let mock = MockService::start()
        .await
        .map_err(|e| format!("starting the mock: {e}"))?;
    let key = generate_rsa_key().map_err(|e| format!("a key: {e}"))?;
    mock.add_account(MockAccount {
        client_id: CLIENT_ID.into(),
        organization_id: ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec![VERIFICATIONS_ROLE.into()],
        projects: vec![PROJECT_ID.into()],
    });
    mock.add_rule(PROJECT_ID, RULE_ID);
    let credentials = serde_json::json!({
        "type": "service_account",
        "organization_id": ORGANIZATION_ID,
        "client_id": CLIENT_ID,
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    });
    let path = dir.join("credentials.json");
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    file.write_all(credentials.to_string().as_bytes())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(mock)
}

/// `lanyard verifier` as a child, its JSON log read line by line: where
/// it listens comes from its "lanyard started" line.
struct Verifier {
    child: Option<Child>,
    pid: u32,
    verifier: SocketAddr,
    admin: SocketAddr,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Verifier {
    async fn spawn(lanyard: &Path, vars: Vec<(String, String)>) -> Result<Verifier, String> {
        let mut child = Command::new(lanyard)
            .arg("verifier")
            .env_clear()
            .envs(vars)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("{}: {e}", lanyard.display()))?;
        let pid = child.id().ok_or("the child has no pid")?;
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let (started_tx, started) = oneshot::channel();
        let stderr = child.stderr.take().ok_or("the child's stderr")?;
        // Read to the end, so a chatty child never blocks on a full pipe.
        tokio::spawn(read_log(stderr, log.clone(), started_tx));
        let fields = tokio::time::timeout(SETUP_WAIT, started).await;
        let tail = || lines(&log);
        let fields = match fields {
            Ok(Ok(fields)) => fields,
            Ok(Err(_)) => return Err(format!("the child ended before it started:\n{}", tail())),
            Err(_) => return Err(format!("no \"lanyard started\" line:\n{}", tail())),
        };
        let addr = |name: &str| {
            fields[name]
                .as_str()
                .and_then(|a| a.parse::<SocketAddr>().ok())
                .ok_or_else(|| format!("\"lanyard started\" has no {name} address: {fields}"))
        };
        Ok(Verifier {
            verifier: addr("verifier")?,
            admin: addr("admin")?,
            child: Some(child),
            pid,
            log,
        })
    }

    fn take(&mut self) -> Child {
        self.child.take().expect("the child is taken once")
    }

    fn log_tail(&self) -> String {
        lines(&self.log)
    }
}

fn lines(log: &Mutex<VecDeque<String>>) -> String {
    let log = log.lock().unwrap_or_else(|e| e.into_inner());
    log.iter().cloned().collect::<Vec<_>>().join("\n")
}

async fn read_log(
    stderr: tokio::process::ChildStderr,
    log: Arc<Mutex<VecDeque<String>>>,
    started: oneshot::Sender<serde_json::Value>,
) {
    let mut started = Some(started);
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if started.is_some() {
            let json = serde_json::from_str::<serde_json::Value>(&line).unwrap_or_default();
            if json["fields"]["message"] == "lanyard started" {
                let _ = started.take().map(|tx| tx.send(json["fields"].clone()));
            }
        }
        let mut log = log.lock().unwrap_or_else(|e| e.into_inner());
        if log.len() == LOG_TAIL {
            log.pop_front();
        }
        log.push_back(line);
    }
}

/// Waits for `/readyz` 200: the verifier holds its first token.
async fn until_ready(admin: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        let url = format!("http://{admin}/readyz");
        if let Ok(answer) = send(Method::GET, &url, &[], Bytes::new()).await
            && answer.status == StatusCode::OK
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("/readyz not 200 within {SETUP_WAIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

struct Session {
    /// `/api/status?transactionId=...`
    path: String,
    cookie: String,
    answer_bytes: usize,
}

/// A session started as the page starts it, presented claims of
/// `claims_kib` by the mock's wallet, and polled until verified.
async fn verified_session(
    mock: &MockService,
    verifier: SocketAddr,
    claims_kib: usize,
) -> Result<Session, String> {
    let started = send(
        Method::POST,
        &format!("http://{verifier}/api/start"),
        &[("content-type", "application/json")],
        Bytes::new(),
    )
    .await?;
    if started.status != StatusCode::OK {
        return Err(format!("/api/start: {} {:?}", started.status, started.body));
    }
    let cookie = started
        .headers
        .get(header::SET_COOKIE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .ok_or("/api/start set no cookie")?
        .to_string();
    let json: serde_json::Value =
        serde_json::from_slice(&started.body).map_err(|e| format!("/api/start: {e}"))?;
    let handle = json["transaction_id"]
        .as_str()
        .ok_or_else(|| format!("/api/start: no transaction_id in {json}"))?;
    let service_id = service_id(&json).ok_or_else(|| format!("/api/start: {json}"))?;

    let claims = serde_json::json!({ "portrait": "x".repeat(claims_kib * 1024) }).to_string();
    let presented = send(
        Method::POST,
        &mock.wallet_present_url(&service_id),
        &[("content-type", "application/json")],
        Bytes::from(claims),
    )
    .await?;
    if presented.status != StatusCode::OK {
        return Err(format!("the wallet's present: {}", presented.status));
    }

    let path = format!("/api/status?transactionId={handle}");
    let url = format!("http://{verifier}{path}");
    let deadline = Instant::now() + SETUP_WAIT;
    loop {
        let answer = send(Method::GET, &url, &[("cookie", &cookie)], Bytes::new()).await?;
        let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
        match json["status"].as_str() {
            Some("verified") if answer.status == StatusCode::OK => {
                return Ok(Session {
                    path,
                    cookie,
                    answer_bytes: answer.body.len(),
                });
            }
            Some("pending") if Instant::now() < deadline => {}
            _ => return Err(format!("/api/status: {} {json}", answer.status)),
        }
        // The verifier asks the service at most this often.
        tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await;
    }
}

/// The service's transaction id in a start answer's `request_uri`: the
/// mock names its wallet request `{mock}/mock/wallet/{id}`.
fn service_id(started: &serde_json::Value) -> Option<String> {
    let query = started["request_uri"].as_str()?.split_once('?')?.1;
    let (_, wallet) = form_urlencoded::parse(query.as_bytes()).find(|(n, _)| n == "request_uri")?;
    Some(wallet.rsplit('/').next()?.to_string())
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// One HTTP/1.1 exchange, from 127.0.0.1, within [`SETUP_WAIT`].
async fn send(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Bytes,
) -> Result<Answer, String> {
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build_http();
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
    let exchange = async {
        let response = client.request(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?;
        Ok::<_, String>(Answer {
            status: parts.status,
            headers: parts.headers,
            body: body.to_bytes(),
        })
    };
    tokio::time::timeout(SETUP_WAIT, exchange)
        .await
        .map_err(|_| format!("{url}: no answer within {SETUP_WAIT:?}"))?
        .map_err(|e| format!("{url}: {e}"))
}

/// Completes when the child has ended (or been killed) during the run.
async fn child_gone(mut sampled: watch::Receiver<Sampled>) {
    let _ = sampled.wait_for(|s| s.child != "running").await;
}

/// A field of `/proc/PID/status`, in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[derive(Clone)]
struct Sampled {
    peak_kib: u64,
    last_kib: u64,
    vm_hwm_kib: u64,
    child: String,
}

/// Reads the child's VmRSS every [`SAMPLE_EVERY`] until asked to stop,
/// then reads VmHWM and kills it; kills it early should VmRSS pass
/// `limit_kib`. What it has read is published as it goes.
fn sample(
    mut child: Child,
    limit_kib: u64,
) -> (
    oneshot::Sender<oneshot::Sender<Sampled>>,
    watch::Receiver<Sampled>,
) {
    let pid = child.id().unwrap_or_default();
    let (stop_tx, mut stop) = oneshot::channel::<oneshot::Sender<Sampled>>();
    let (tx, rx) = watch::channel(Sampled {
        peak_kib: 0,
        last_kib: 0,
        vm_hwm_kib: 0,
        child: "running".into(),
    });
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(SAMPLE_EVERY);
        let reply = loop {
            tokio::select! {
                reply = &mut stop => break reply.ok(),
                _ = ticks.tick() => {}
            }
            if tx.borrow().child != "running" {
                continue;
            }
            if let Ok(Some(status)) = child.try_wait() {
                let how = match (status.code(), status.signal()) {
                    (Some(code), _) => format!("exited_{code}"),
                    (None, Some(signal)) => format!("signal_{signal}"),
                    _ => "ended".into(),
                };
                tx.send_modify(|s| s.child = how);
                continue;
            }
            let Some(rss) = status_kib(pid, "VmRSS") else {
                continue;
            };
            let hwm = status_kib(pid, "VmHWM").unwrap_or_default();
            let over = rss > limit_kib;
            tx.send_modify(|s| {
                s.last_kib = rss;
                s.peak_kib = s.peak_kib.max(rss);
                s.vm_hwm_kib = hwm;
                if over {
                    s.child = "killed_at_rss_limit".into();
                }
            });
            if over {
                let _ = child.start_kill();
            }
        };
        if tx.borrow().child == "running" {
            let hwm = status_kib(pid, "VmHWM").unwrap_or_default();
            tx.send_modify(|s| s.vm_hwm_kib = hwm);
        }
        let _ = child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
        if let Some(reply) = reply {
            let _ = reply.send(tx.borrow().clone());
        }
    });
    (stop_tx, rx)
}

/// What became of the streams, counted as it happens.
#[derive(Default)]
struct Counts {
    answered: AtomicU64,
    not_200: AtomicU64,
    refused: AtomicU64,
    refused_reasons: Mutex<BTreeMap<String, u64>>,
    lost: AtomicU64,
    reset_later: AtomicU64,
    closed_later: AtomicU64,
    body_bytes: AtomicU64,
    connections_closed: AtomicU64,
    /// Streams with neither a head nor an end yet.
    unresolved: AtomicU64,
    resolved: Notify,
}

impl Counts {
    fn resolve(&self) {
        self.unresolved.fetch_sub(1, Ordering::Relaxed);
        self.resolved.notify_one();
    }

    fn line(&self) -> String {
        let n = |count: &AtomicU64| count.load(Ordering::Relaxed);
        let reasons = self
            .refused_reasons
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let reasons: Vec<String> = reasons.iter().map(|(r, n)| format!("{r}:{n}")).collect();
        format!(
            "streams_answered={} streams_answered_not_200={} streams_refused={} \
             refused_reasons={} streams_reset_later={} streams_lost={} \
             streams_closed_later={} streams_unresolved={} body_bytes={} connections_closed={}",
            n(&self.answered),
            n(&self.not_200),
            n(&self.refused),
            if reasons.is_empty() {
                "none".into()
            } else {
                reasons.join(",")
            },
            n(&self.reset_later),
            n(&self.lost),
            n(&self.closed_later),
            n(&self.unresolved),
            n(&self.body_bytes),
            n(&self.connections_closed),
        )
    }
}

/// Opens every connection, each from its turn of the source addresses,
/// and starts its streams; what is returned keeps the connections open
/// when all their streams have ended.
async fn open_all(
    args: &Args,
    to: SocketAddr,
    session: &Session,
    counts: &Arc<Counts>,
) -> Vec<SendRequest<Bytes>> {
    let mut holders = Vec::with_capacity(args.connections);
    for n in 0..args.connections {
        let source = Ipv4Addr::new(127, 0, 0, FIRST_SOURCE + (n % args.addresses) as u8);
        let Ok(requests) = open(source.into(), to, counts.clone()).await else {
            for _ in 0..args.streams {
                counts.lost.fetch_add(1, Ordering::Relaxed);
                counts.resolve();
            }
            continue;
        };
        for _ in 0..args.streams {
            let request = Request::get(format!("http://{to}{}", session.path))
                .header(header::COOKIE, &session.cookie)
                .body(())
                .expect("a valid request");
            tokio::spawn(hold(requests.clone(), request, counts.clone()));
        }
        holders.push(requests);
    }
    holders
}

/// A connection from `source` whose streams get no window: the handshake
/// does not wait for the server, so a refused connection shows as its
/// streams failing.
async fn open(
    source: IpAddr,
    to: SocketAddr,
    counts: Arc<Counts>,
) -> Result<SendRequest<Bytes>, ()> {
    let connect = async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(source, 0))?;
        socket.connect(to).await
    };
    let io: TcpStream = match tokio::time::timeout(SETUP_WAIT, connect).await {
        Ok(Ok(io)) => io,
        _ => return Err(()),
    };
    let handshake = h2::client::Builder::new()
        .initial_window_size(0)
        .handshake::<_, Bytes>(io);
    let Ok(Ok((requests, connection))) = tokio::time::timeout(SETUP_WAIT, handshake).await else {
        return Err(());
    };
    tokio::spawn(async move {
        let _ = connection.await;
        counts.connections_closed.fetch_add(1, Ordering::Relaxed);
    });
    Ok(requests)
}

/// One stream: sent, its head awaited and counted, then held until the
/// verifier ends it (or the process does).
async fn hold(requests: SendRequest<Bytes>, request: Request<()>, counts: Arc<Counts>) {
    let head = async {
        let mut ready = requests.ready().await?;
        let (response, _) = ready.send_request(request, true)?;
        response.await
    };
    let response = match tokio::time::timeout(HEADS_WAIT, head).await {
        // Counted as unresolved.
        Err(_) => return,
        Ok(Err(err)) => {
            match err.reason().filter(|_| err.is_reset() && err.is_remote()) {
                Some(reason) => {
                    counts.refused.fetch_add(1, Ordering::Relaxed);
                    let mut reasons = counts
                        .refused_reasons
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    *reasons.entry(format!("{reason:?}")).or_default() += 1;
                }
                None => {
                    counts.lost.fetch_add(1, Ordering::Relaxed);
                }
            }
            counts.resolve();
            return;
        }
        Ok(Ok(response)) => response,
    };
    counts.answered.fetch_add(1, Ordering::Relaxed);
    if response.status() != StatusCode::OK {
        counts.not_200.fetch_add(1, Ordering::Relaxed);
    }
    counts.resolve();
    let mut body = response.into_body();
    loop {
        match body.data().await {
            // Nothing should come through a zero window; counted if it does.
            Some(Ok(data)) => {
                counts
                    .body_bytes
                    .fetch_add(data.len() as u64, Ordering::Relaxed);
            }
            Some(Err(err)) if err.is_reset() && err.is_remote() => {
                counts.reset_later.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Some(Err(_)) | None => {
                counts.closed_later.fetch_add(1, Ordering::Relaxed);
                return;
            }
        }
    }
}
