//! The lanyard under measure: the embedded mock as its token service,
//! the release binary started as a child with its JSON log read, its
//! readiness awaited, and its VmRSS read from `/proc` as it runs.

use std::collections::VecDeque;
use std::fs::OpenOptions;
use std::io::Write as _;
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode};
use lanyard::mock::{MockAccount, MockService, VERIFICATIONS_ROLE, generate_rsa_key};
use tokio::io::AsyncBufReadExt as _;
use tokio::process::{Child, Command};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::{SETUP_WAIT, send};

pub const ORGANIZATION_ID: &str = "org-slow-readers";
pub const CLIENT_ID: &str = "sa-slow-readers";
pub const PROJECT_ID: &str = "proj-slow-readers";
pub const RULE_ID: &str = "8c3e1f2a-6b4d-4e7f-9a1c-2d5e8f0b3a71";
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Lines of the child's log kept for a failure's message.
const LOG_TAIL: usize = 20;

/// The mock with one account, its rule, and the account's credentials
/// file in `dir` (`credentials.json`), as `tests/it/support` sets them up.
pub async fn start_mock(dir: &Path) -> Result<MockService, String> {
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

/// `lanyard COMMAND` as a child, its JSON log read line by line: where
/// it listens comes from its "lanyard started" line.
pub struct Lanyard {
    child: Option<Child>,
    pub pid: u32,
    /// The listener named `listener` in "lanyard started".
    pub listen: SocketAddr,
    pub admin: SocketAddr,
    log: Arc<Mutex<VecDeque<String>>>,
}

impl Lanyard {
    /// `listener` names the field of "lanyard started" that is the
    /// listener under measure (`verifier`, `proxy`).
    pub async fn spawn(
        lanyard: &Path,
        command: &str,
        listener: &str,
        vars: Vec<(String, String)>,
    ) -> Result<Lanyard, String> {
        let mut child = Command::new(lanyard)
            .arg(command)
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
        Ok(Lanyard {
            listen: addr(listener)?,
            admin: addr("admin")?,
            child: Some(child),
            pid,
            log,
        })
    }

    pub fn take(&mut self) -> Child {
        self.child.take().expect("the child is taken once")
    }

    pub fn log_tail(&self) -> String {
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

/// Waits for `/readyz` 200: the child holds its first token.
pub async fn until_ready(admin: SocketAddr) -> Result<(), String> {
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

/// Completes when the child has ended (or been killed) during the run.
pub async fn child_gone(mut sampled: watch::Receiver<Sampled>) {
    let _ = sampled.wait_for(|s| s.child != "running").await;
}

/// A field of `/proc/PID/status`, in KiB.
pub fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The kernel's TCP buffers in all, in KiB: `/proc/net/sockstat`'s
/// `TCP: ... mem PAGES`.
fn tcp_mem_kib() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let tcp = stat.lines().find(|line| line.starts_with("TCP:"))?;
    let pages: u64 = tcp
        .split_whitespace()
        .skip_while(|f| *f != "mem")
        .nth(1)?
        .parse()
        .ok()?;
    Some(pages * 4)
}

#[derive(Clone)]
pub struct Sampled {
    pub peak_kib: u64,
    pub last_kib: u64,
    pub vm_hwm_kib: u64,
    /// The machine's TCP buffers at their highest (`/proc/net/sockstat`):
    /// lanyard's sockets, and its clients' and upstream's, on loopback.
    /// Not in any RSS, but what a cgroup v2 memory limit charges each
    /// socket's owner for.
    pub tcp_mem_peak_kib: u64,
    pub child: String,
}

impl Sampled {
    /// The highest sample, or VmHWM if higher (it also covers the start).
    pub fn peak(&self) -> u64 {
        self.peak_kib.max(self.vm_hwm_kib)
    }
}

/// Reads the child's VmRSS every [`SAMPLE_EVERY`] until asked to stop,
/// then reads VmHWM and kills it; kills it early should VmRSS pass
/// `limit_kib`. What it has read is published as it goes.
pub fn sample(
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
        tcp_mem_peak_kib: 0,
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
            let tcp = tcp_mem_kib().unwrap_or_default();
            tx.send_modify(|s| {
                s.tcp_mem_peak_kib = s.tcp_mem_peak_kib.max(tcp);
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

/// Stops the sampling (which kills the child) and returns its last state.
pub async fn stop(
    stop: oneshot::Sender<oneshot::Sender<Sampled>>,
    sampled: &watch::Receiver<Sampled>,
) -> Sampled {
    let (tx, rx) = oneshot::channel();
    let _ = stop.send(tx);
    rx.await.unwrap_or_else(|_| sampled.borrow().clone())
}
