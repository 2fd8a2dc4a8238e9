//! What an OpenID Connect login costs one verifier replica:
//! `bench/oidc.sh` runs this against a release `lanyard` as a child
//! process, once per concurrency.
//!
//! ```text
//! cargo run --release --example oidc_bench -- --lanyard PATH
//!     --clients-file PATH --signing-key-file PATH [--concurrency C]
//!     [--logins N] [--rounds R] [--duration SECONDS] [--warmup SECONDS]
//!     [--env K=V]...
//! ```
//!
//! The child is `PATH verifier` with `DEMO_MOCK=true` (the embedded mock is
//! the service and the wallet), listening on a free loopback port that is
//! also its `LANYARD_OIDC_ISSUER`, with the clients file and the signing
//! key given and `--env` settings on top. The first client with a secret
//! in the clients file is the relying party, its first redirect URI the
//! one every login names (never fetched).
//!
//! `--concurrency` workers (default 1), each its own HTTP/1.1 client with
//! keep-alive from its own loopback source address (127.0.0.10 up, so no
//! worker shares the verifier's per-client limits with another), drive
//! logins as a browser and a relying party's backend do (docs/oidc.md):
//!
//! 1. `authorize`: `GET /authorize`, the page with the sealed request;
//! 2. `start`: `POST /api/start?authorization=…`, a new browser each time
//!    (no cookie: it gets one);
//! 3. `present`: the mock's wallet presents (`POST
//!    {mock}/mock/wallet/{id}/present`): the wallet's part, not lanyard's;
//! 4. `status_ending`: the one `GET /api/status` that asks the service,
//!    finds the session verified and seals a code;
//! 5. `token`: `POST /token` with `client_secret_basic`: an ID token,
//!    signed with RS256;
//! 6. `status_ended`: `GET /api/status` of the same ended session again:
//!    answered from the replica's memory (with a fresh code);
//! 7. `start_plain`, `status_ended_plain`: steps 2 and 6 for sessions the
//!    plain page starts (no login); the latter is the page's steady
//!    state, the cheapest call of the API. (The plain sessions' present
//!    and ending poll run too, unreported.)
//!
//! After `--warmup` seconds of whole logins (default 2, discarded), each
//! step runs alone over a batch of `--logins` logins (default 2000, at
//! most 2000: the verifier remembers 4096 sessions, and a round polls two
//! batches), the workers taking the batch's logins in turn, so a step's
//! rate is what the replica does of that step alone; `--rounds` batches
//! (default 3), each step's figures over all of them. Then the workers
//! run whole logins, steps 1 to 5, for `--duration` seconds (default
//! 10): `login`, its latency the sum of lanyard's four requests (the
//! wallet's excluded), its rate logins completed per second of the run
//! (the wallet's time included: it is in each worker's sequence).
//!
//! One line of `key=value` per step on stdout: `step`, `concurrency`,
//! `requests`, `failed`, `seconds`, `per_second`, `p50_ms`, `p99_ms`
//! (nearest rank), and CPU per request from `/proc/…/schedstat` (time on
//! a CPU, in ns): `verifier_cpu_us` of the verifier's thread, which
//! serves every request; `process_cpu_us` of every thread of the child,
//! the mock's included; `driver_cpu_us` of this process. The first
//! failure of each step is on stderr. Exit 1, with a message, when the
//! child does not start.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{ExitCode, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::oneshot;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Start-up, the first token, each exchange.
const WAIT: Duration = Duration::from_secs(20);
/// The verifier remembers 4096 sessions, and a round polls two batches:
/// more would have it forget some and ask the service again.
const MAX_BATCH: usize = 2000;
/// The first worker's source address; worker k has 127.0.0.(10 + k).
const FIRST_SOURCE: u8 = 10;

const USAGE: &str = "usage: oidc_bench --lanyard PATH --clients-file PATH --signing-key-file PATH \
    [--concurrency C] [--logins N] [--rounds R] [--duration SECONDS] [--warmup SECONDS] [--env K=V]...";

struct Args {
    lanyard: PathBuf,
    clients_file: PathBuf,
    signing_key_file: PathBuf,
    concurrency: usize,
    logins: usize,
    rounds: usize,
    duration: Duration,
    warmup: Duration,
    env: Vec<(String, String)>,
}

fn parse_args() -> Result<Args, String> {
    let (mut lanyard, mut clients_file, mut signing_key_file) = (None, None, None);
    let mut args = Args {
        lanyard: PathBuf::new(),
        clients_file: PathBuf::new(),
        signing_key_file: PathBuf::new(),
        concurrency: 1,
        logins: 2000,
        rounds: 3,
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(2),
        env: Vec::new(),
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        let mut value = || given.next().ok_or_else(|| format!("{arg} needs a value"));
        let number = |value: String| {
            value
                .parse::<usize>()
                .map_err(|_| format!("{arg} {value}: not a whole number"))
        };
        match arg.as_str() {
            "--lanyard" => lanyard = Some(PathBuf::from(value()?)),
            "--clients-file" => clients_file = Some(PathBuf::from(value()?)),
            "--signing-key-file" => signing_key_file = Some(PathBuf::from(value()?)),
            "--concurrency" => args.concurrency = number(value()?)?,
            "--logins" => args.logins = number(value()?)?,
            "--rounds" => args.rounds = number(value()?)?,
            "--duration" => args.duration = Duration::from_secs(number(value()?)? as u64),
            "--warmup" => args.warmup = Duration::from_secs(number(value()?)? as u64),
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
    args.clients_file = clients_file.ok_or(USAGE)?;
    args.signing_key_file = signing_key_file.ok_or(USAGE)?;
    if !(1..=200).contains(&args.concurrency) {
        return Err("--concurrency: 1 to 200 (a source address each)".into());
    }
    if !(1..=MAX_BATCH).contains(&args.logins) || args.rounds == 0 || args.duration.is_zero() {
        return Err(format!(
            "--logins: 1 to {MAX_BATCH}; --rounds and --duration: above 0"
        ));
    }
    Ok(args)
}

/// One thread: the workers wait on the verifier, whose own thread (and
/// the mock's) have the machine's other cores.
#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("oidc_bench: {message}");
            return ExitCode::from(2);
        }
    };
    match run(args).await {
        Ok(lines) => {
            for line in lines {
                println!("{line}");
            }
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("oidc_bench: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<Vec<String>, String> {
    let client = RelyingParty::read(&args.clients_file)?;
    // A free port, known before the child starts: the issuer names it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map_err(|e| format!("a free port: {e}"))?
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let path = |p: &Path| p.display().to_string();
    let mut vars = vec![
        ("DEMO_MOCK".to_string(), "true".to_string()),
        (
            "LANYARD_VERIFIER_LISTEN".into(),
            format!("127.0.0.1:{port}"),
        ),
        ("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into()),
        ("LANYARD_LOG_FORMAT".into(), "json".into()),
        ("LANYARD_OIDC_ISSUER".into(), base.clone()),
        ("LANYARD_OIDC_CLIENTS_FILE".into(), path(&args.clients_file)),
        (
            "LANYARD_OIDC_SIGNING_KEY_FILE".into(),
            path(&args.signing_key_file),
        ),
    ];
    vars.extend(args.env.iter().cloned());
    let child = Verifier::spawn(&args.lanyard, vars).await?;
    let cpu = Cpu::of(child.pid)?;
    let bench = Bench {
        base,
        client,
        workers: (0..args.concurrency).map(worker).collect(),
        serial: Arc::new(AtomicU64::new(0)),
    };
    let steps = measure(&bench, &args, &cpu).await;
    drop(child);
    let concurrency = args.concurrency;
    Ok(steps
        .into_iter()
        .map(|(step, stats)| stats.line(step, concurrency))
        .collect())
}

/// Every step, in the order of the module's comment, then whole logins.
async fn measure(bench: &Bench, args: &Args, cpu: &Cpu) -> Vec<(&'static str, Stats)> {
    let _ = whole_logins(bench, args.warmup, cpu).await;
    let mut steps: Vec<(&'static str, Stats)> = Vec::new();
    let mut add =
        |name: &'static str, stats: Stats| match steps.iter_mut().find(|(n, _)| *n == name) {
            Some((_, total)) => total.add(stats),
            None => steps.push((name, stats)),
        };
    let fresh = |plain| (0..args.logins).map(|_| Login::new(plain)).collect();
    for _ in 0..args.rounds {
        let mut logins: Vec<Login> = fresh(false);
        for step in [
            Step::Authorize,
            Step::Start,
            Step::Present,
            Step::StatusEnding,
            Step::Token,
            Step::StatusEnded,
        ] {
            let stats;
            (logins, stats) = bench.phase(step, logins, cpu).await;
            add(step.name(false), stats);
        }
        let mut plain: Vec<Login> = fresh(true);
        for step in [
            Step::Start,
            Step::Present,
            Step::StatusEnding,
            Step::StatusEnded,
        ] {
            let stats;
            (plain, stats) = bench.phase(step, plain, cpu).await;
            if matches!(step, Step::Start | Step::StatusEnded) {
                add(step.name(true), stats);
            }
        }
    }
    add("login", whole_logins(bench, args.duration, cpu).await);
    steps
}

/// The relying party: its client id, secret and redirect URI.
struct RelyingParty {
    id: String,
    secret: String,
    redirect_uri: String,
}

impl RelyingParty {
    fn read(file: &Path) -> Result<RelyingParty, String> {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let json: Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        let clients = json["clients"].as_array().cloned().unwrap_or_default();
        let client = clients
            .iter()
            .find(|c| c["client_secret"].is_string())
            .ok_or_else(|| format!("{}: no client with a client_secret", file.display()))?;
        let text = |name: &str, value: &Value| {
            value
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| format!("{}: no {name}", file.display()))
        };
        Ok(RelyingParty {
            id: text("client_id", &client["client_id"])?,
            secret: text("client_secret", &client["client_secret"])?,
            redirect_uri: text("redirect_uris", &client["redirect_uris"][0])?,
        })
    }

    /// `client_secret_basic`: id and secret form-encoded, then base64.
    fn basic(&self) -> String {
        let pair = format!("{}:{}", enc(&self.id), enc(&self.secret));
        format!("Basic {}", STANDARD.encode(pair))
    }
}

type Http = Client<HttpConnector, Full<Bytes>>;

/// Worker `n`'s client, from its own source address.
fn worker(n: usize) -> Http {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    let source = Ipv4Addr::new(127, 0, 0, FIRST_SOURCE + n as u8);
    connector.set_local_address(Some(IpAddr::V4(source)));
    Client::builder(TokioExecutor::new()).build(connector)
}

struct Bench {
    base: String,
    client: RelyingParty,
    workers: Vec<Http>,
    /// Numbers the logins, for their `state` and `nonce`.
    serial: Arc<AtomicU64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Authorize,
    Start,
    Present,
    StatusEnding,
    Token,
    StatusEnded,
}

impl Step {
    fn name(self, plain: bool) -> &'static str {
        match (self, plain) {
            (Step::Authorize, _) => "authorize",
            (Step::Start, false) => "start",
            (Step::Start, true) => "start_plain",
            (Step::Present, _) => "present",
            (Step::StatusEnding, _) => "status_ending",
            (Step::Token, _) => "token",
            (Step::StatusEnded, false) => "status_ended",
            (Step::StatusEnded, true) => "status_ended_plain",
        }
    }
}

/// One login as it goes: what each step left for the next.
#[derive(Default)]
struct Login {
    /// A session of the plain page: no authorization request.
    plain: bool,
    state: String,
    sealed: String,
    handle: String,
    cookie: String,
    present_url: String,
    code: String,
}

impl Login {
    fn new(plain: bool) -> Login {
        Login {
            plain,
            ..Login::default()
        }
    }
}

/// What one step (or whole logins) measured.
#[derive(Default)]
struct Stats {
    latencies: Vec<Duration>,
    failed: u64,
    wall: Duration,
    verifier_us: u64,
    process_us: u64,
    driver_us: u64,
}

impl Stats {
    /// Another batch of the same step.
    fn add(&mut self, other: Stats) {
        self.latencies.extend(other.latencies);
        self.failed += other.failed;
        self.wall += other.wall;
        self.verifier_us += other.verifier_us;
        self.process_us += other.process_us;
        self.driver_us += other.driver_us;
    }

    fn line(&self, step: &str, concurrency: usize) -> String {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let rank = |p: f64| -> f64 {
            if sorted.is_empty() {
                return f64::NAN;
            }
            let at = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
            sorted[at - 1].as_secs_f64() * 1000.0
        };
        let n = sorted.len().max(1) as f64;
        let seconds = self.wall.as_secs_f64();
        format!(
            "step={step} concurrency={concurrency} requests={} failed={} seconds={seconds:.3} \
             per_second={:.1} p50_ms={:.3} p99_ms={:.3} verifier_cpu_us={:.1} \
             process_cpu_us={:.1} driver_cpu_us={:.1}",
            sorted.len(),
            self.failed,
            sorted.len() as f64 / seconds,
            rank(0.50),
            rank(0.99),
            self.verifier_us as f64 / n,
            self.process_us as f64 / n,
            self.driver_us as f64 / n,
        )
    }
}

impl Bench {
    /// `step` of every login in `logins`, the workers taking them in
    /// turn: the logins it succeeded for, and what it measured.
    async fn phase(&self, step: Step, logins: Vec<Login>, cpu: &Cpu) -> (Vec<Login>, Stats) {
        let queue = Arc::new(Mutex::new(VecDeque::from(logins)));
        let before = cpu.read();
        let started = Instant::now();
        let mut tasks = JoinSet::new();
        for http in &self.workers {
            let (queue, http, ctx) = (queue.clone(), http.clone(), self.context());
            tasks.spawn(async move {
                let (mut done, mut latencies, mut failed) = (Vec::new(), Vec::new(), 0u64);
                loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).pop_front();
                    let Some(mut login) = next else { break };
                    let at = Instant::now();
                    match ctx.step(&http, step, &mut login).await {
                        Ok(()) => {
                            latencies.push(at.elapsed());
                            done.push(login);
                        }
                        Err(why) => {
                            if failed == 0 {
                                eprintln!("oidc_bench: {}: {why}", step.name(login.plain));
                            }
                            failed += 1;
                        }
                    }
                }
                (done, latencies, failed)
            });
        }
        let mut stats = Stats::default();
        let mut logins = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            let (done, latencies, failed) = joined.unwrap_or_default();
            logins.extend(done);
            stats.latencies.extend(latencies);
            stats.failed += failed;
        }
        stats.wall = started.elapsed();
        cpu.spent(&before, &mut stats);
        (logins, stats)
    }

    fn context(&self) -> Context {
        Context {
            base: self.base.clone(),
            client_id: self.client.id.clone(),
            basic: self.client.basic(),
            redirect_uri: self.client.redirect_uri.clone(),
            serial: self.serial.clone(),
        }
    }
}

/// Whole logins (steps 1 to 5) by every worker for `length`: a latency
/// per login, lanyard's four requests; the wallet's time is in the wall
/// time, not in the latency.
async fn whole_logins(bench: &Bench, length: Duration, cpu: &Cpu) -> Stats {
    let before = cpu.read();
    let started = Instant::now();
    let until = started + length;
    let mut tasks = JoinSet::new();
    for http in &bench.workers {
        let (http, ctx) = (http.clone(), bench.context());
        tasks.spawn(async move {
            let (mut latencies, mut failed) = (Vec::new(), 0u64);
            while Instant::now() < until {
                let mut login = Login::new(false);
                let mut lanyard = Duration::ZERO;
                let mut outcome = Ok(());
                for step in [
                    Step::Authorize,
                    Step::Start,
                    Step::Present,
                    Step::StatusEnding,
                    Step::Token,
                ] {
                    let at = Instant::now();
                    outcome = ctx.step(&http, step, &mut login).await;
                    if step != Step::Present {
                        lanyard += at.elapsed();
                    }
                    if let Err(why) = &outcome {
                        if failed == 0 {
                            eprintln!("oidc_bench: login, {}: {why}", step.name(false));
                        }
                        break;
                    }
                }
                match outcome {
                    Ok(()) => latencies.push(lanyard),
                    Err(_) => failed += 1,
                }
            }
            (latencies, failed)
        });
    }
    let mut stats = Stats::default();
    while let Some(joined) = tasks.join_next().await {
        let (latencies, failed) = joined.unwrap_or_default();
        stats.latencies.extend(latencies);
        stats.failed += failed;
    }
    stats.wall = started.elapsed();
    cpu.spent(&before, &mut stats);
    stats
}

/// What a worker's task needs of the bench, owned.
struct Context {
    base: String,
    client_id: String,
    basic: String,
    redirect_uri: String,
    serial: Arc<AtomicU64>,
}

impl Context {
    async fn step(&self, http: &Http, step: Step, login: &mut Login) -> Result<(), String> {
        match step {
            Step::Authorize => {
                let n = self.serial.fetch_add(1, Ordering::Relaxed);
                login.state = format!("st-{n}");
                let url = format!(
                    "{}/authorize?response_type=code&client_id={}&redirect_uri={}&scope=openid&state={}&nonce=n-{n}",
                    self.base,
                    enc(&self.client_id),
                    enc(&self.redirect_uri),
                    login.state,
                );
                let page = send(http, Method::GET, &url, &[], "").await?;
                expect(&page, StatusCode::OK, "/authorize")?;
                let html = std::str::from_utf8(&page.body).unwrap_or_default();
                let at = html
                    .find("data-authorization=\"")
                    .ok_or("/authorize: no data-authorization in the page")?;
                let rest = &html[at + "data-authorization=\"".len()..];
                login.sealed = rest.split('"').next().unwrap_or_default().to_string();
            }
            Step::Start => {
                let url = match login.plain {
                    true => format!("{}/api/start", self.base),
                    false => format!(
                        "{}/api/start?authorization={}",
                        self.base,
                        enc(&login.sealed)
                    ),
                };
                let headers = [("content-type", "application/json")];
                let started = send(http, Method::POST, &url, &headers, "{}").await?;
                expect(&started, StatusCode::OK, "/api/start")?;
                login.cookie = started
                    .set_cookie
                    .clone()
                    .ok_or("/api/start set no cookie")?;
                let json = started.json("/api/start")?;
                login.handle = json["transaction_id"]
                    .as_str()
                    .ok_or("/api/start: no transaction_id")?
                    .to_string();
                login.present_url = wallet_request(&json)
                    .map(|wallet| format!("{wallet}/present"))
                    .ok_or("/api/start: no wallet request_uri")?;
            }
            Step::Present => {
                let presented = send(http, Method::POST, &login.present_url, &[], "").await?;
                expect(&presented, StatusCode::OK, "the wallet's present")?;
            }
            Step::StatusEnding | Step::StatusEnded => {
                let url = format!("{}/api/status?transactionId={}", self.base, login.handle);
                let headers = [("cookie", login.cookie.as_str())];
                let answer = send(http, Method::GET, &url, &headers, "").await?;
                expect(&answer, StatusCode::OK, "/api/status")?;
                let json = answer.json("/api/status")?;
                if json["status"] != "verified" {
                    return Err(format!("/api/status: {} (not verified)", json["status"]));
                }
                if !login.plain {
                    let redirect = json["redirect"]
                        .as_str()
                        .ok_or("/api/status: no redirect")?;
                    login.code = self.code_in(redirect, &login.state)?;
                }
            }
            Step::Token => {
                let form = format!(
                    "grant_type=authorization_code&code={}&redirect_uri={}",
                    enc(&login.code),
                    enc(&self.redirect_uri)
                );
                let headers = [
                    ("content-type", "application/x-www-form-urlencoded"),
                    ("authorization", self.basic.as_str()),
                ];
                let answer = send(
                    http,
                    Method::POST,
                    &format!("{}/token", self.base),
                    &headers,
                    form,
                )
                .await?;
                expect(&answer, StatusCode::OK, "/token")?;
                let json = answer.json("/token")?;
                let id_token = json["id_token"].as_str().ok_or("/token: no id_token")?;
                if id_token.split('.').count() != 3 {
                    return Err("/token: the id_token is not a JWS".into());
                }
            }
        }
        Ok(())
    }

    /// The code in the redirect to the client, whose `state` must be this
    /// login's.
    fn code_in(&self, redirect: &str, state: &str) -> Result<String, String> {
        let query = redirect
            .strip_prefix(&self.redirect_uri)
            .and_then(|rest| rest.strip_prefix('?'))
            .ok_or("/api/status: the redirect is not to the client")?;
        let params: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
            .map(|(n, v)| (n.into_owned(), v.into_owned()))
            .collect();
        let param = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v);
        if param("state").map(String::as_str) != Some(state) {
            return Err("/api/status: the redirect's state is not the login's".into());
        }
        param("code")
            .cloned()
            .ok_or_else(|| format!("/api/status: no code, error {:?}", param("error")))
    }
}

/// The wallet's request in a start answer's `request_uri`: the mock's is
/// `{mock}/mock/wallet/{id}`.
fn wallet_request(started: &Value) -> Option<String> {
    let query = started["request_uri"].as_str()?.split_once('?')?.1;
    form_urlencoded::parse(query.as_bytes())
        .find(|(n, _)| n == "request_uri")
        .map(|(_, wallet)| wallet.into_owned())
}

fn enc(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

struct Answer {
    status: StatusCode,
    set_cookie: Option<String>,
    body: Bytes,
}

impl Answer {
    fn json(&self, what: &str) -> Result<Value, String> {
        serde_json::from_slice(&self.body).map_err(|e| format!("{what}: {e}"))
    }
}

fn expect(answer: &Answer, status: StatusCode, what: &str) -> Result<(), String> {
    if answer.status == status {
        return Ok(());
    }
    let body = String::from_utf8_lossy(&answer.body);
    Err(format!(
        "{what}: {} {}",
        answer.status,
        &body[..body.len().min(200)]
    ))
}

/// One exchange on the worker's keep-alive connection, within [`WAIT`].
async fn send(
    http: &Http,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Result<Answer, String> {
    let mut request = Request::builder().method(method).uri(url);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request
        .body(Full::new(body.into()))
        .map_err(|e| e.to_string())?;
    let exchange = async {
        let response = http.request(request).await.map_err(|e| e.to_string())?;
        let (parts, body) = response.into_parts();
        let body = body.collect().await.map_err(|e| e.to_string())?;
        let set_cookie = parts
            .headers
            .get(header::SET_COOKIE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_string);
        Ok::<_, String>(Answer {
            status: parts.status,
            set_cookie,
            body: body.to_bytes(),
        })
    };
    tokio::time::timeout(WAIT, exchange)
        .await
        .map_err(|_| format!("{url}: no answer within {WAIT:?}"))?
        .map_err(|e| format!("{url}: {e}"))
}

/// Where the CPU went: the verifier's thread, the child, this process.
struct Cpu {
    pid: u32,
    verifier_tid: u32,
}

/// Time on a CPU so far, in ns, by thread id.
type Threads = HashMap<u32, u64>;

struct CpuRead {
    child: Threads,
    driver: Threads,
}

impl Cpu {
    /// The child's thread named `lanyard-verifier` (15 bytes of it).
    fn of(pid: u32) -> Result<Cpu, String> {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|e| format!("the child's threads: {e}"))?;
        for task in tasks.flatten() {
            let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            if comm.starts_with("lanyard-verifie")
                && let Some(tid) = task.file_name().to_str().and_then(|t| t.parse().ok())
            {
                return Ok(Cpu {
                    pid,
                    verifier_tid: tid,
                });
            }
        }
        Err("the child has no lanyard-verifier thread".into())
    }

    fn read(&self) -> CpuRead {
        CpuRead {
            child: threads(&self.pid.to_string()),
            driver: threads("self"),
        }
    }

    fn spent(&self, before: &CpuRead, stats: &mut Stats) {
        let after = self.read();
        let ns = |of: &Threads| of.get(&self.verifier_tid).copied().unwrap_or(0);
        stats.verifier_us = ns(&after.child).saturating_sub(ns(&before.child)) / 1000;
        stats.process_us = since(&before.child, &after.child) / 1000;
        stats.driver_us = since(&before.driver, &after.driver) / 1000;
    }
}

/// The CPU time of every thread of process `pid` (a number or `self`),
/// from `/proc/…/task/…/schedstat`: nanoseconds, where `stat` counts
/// ticks of 10 ms.
fn threads(pid: &str) -> Threads {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Threads::new();
    };
    tasks
        .flatten()
        .filter_map(|task| {
            let tid = task.file_name().to_str()?.parse().ok()?;
            let schedstat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
            Some((tid, schedstat.split_whitespace().next()?.parse().ok()?))
        })
        .collect()
}

/// What the threads spent between two reads. A thread that ended in
/// between is left out (none of the child's ends per request); one that
/// began counts from 0.
fn since(before: &Threads, after: &Threads) -> u64 {
    after
        .iter()
        .map(|(tid, ns)| ns.saturating_sub(before.get(tid).copied().unwrap_or(0)))
        .sum()
}

/// `lanyard verifier` as a child, its JSON log drained: ready once its
/// "lanyard started" line is out and `/readyz` answers 200.
struct Verifier {
    pid: u32,
    _child: Child,
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
        let stderr = child.stderr.take().ok_or("the child's stderr")?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let (started_tx, started) = oneshot::channel();
        tokio::spawn(drain_log(stderr, tail.clone(), started_tx));
        let log = || {
            let tail = tail.lock().unwrap_or_else(|e| e.into_inner());
            tail.iter().cloned().collect::<Vec<String>>().join("\n")
        };
        let fields = match tokio::time::timeout(WAIT, started).await {
            Ok(Ok(fields)) => fields,
            _ => return Err(format!("no \"lanyard started\" line:\n{}", log())),
        };
        let admin = fields["admin"]
            .as_str()
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .ok_or_else(|| format!("\"lanyard started\" has no admin address: {fields}"))?;
        until_ready(admin)
            .await
            .map_err(|why| format!("{why}\n{}", log()))?;
        Ok(Verifier { pid, _child: child })
    }
}

/// Reads the child's log to the end, so it never blocks on a full pipe;
/// keeps the last lines for a failure's message.
async fn drain_log(
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<VecDeque<String>>>,
    started: oneshot::Sender<Value>,
) {
    let mut started = Some(started);
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if started.is_some() {
            let json = serde_json::from_str::<Value>(&line).unwrap_or_default();
            if json["fields"]["message"] == "lanyard started" {
                let _ = started.take().map(|tx| tx.send(json["fields"].clone()));
            }
            let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
            if tail.len() == 20 {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}

/// Waits for `/readyz` 200: the verifier holds its first token.
async fn until_ready(admin: SocketAddr) -> Result<(), String> {
    let http = worker(0);
    let deadline = Instant::now() + WAIT;
    loop {
        let url = format!("http://{admin}/readyz");
        if let Ok(answer) = send(&http, Method::GET, &url, &[], "").await
            && answer.status == StatusCode::OK
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("/readyz not 200 within {WAIT:?}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
