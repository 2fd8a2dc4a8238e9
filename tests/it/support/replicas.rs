//! `lanyard verifier` replicas as operators run them: separate processes
//! of the binary with the same settings, each on a fixed loopback port (the
//! balancer names it, and a restarted replica comes back on it), behind a
//! real load balancer, Debian's haproxy, going round-robin over them. And a
//! browser's calls to any one of them, or to the balancer, by URL.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use lanyard::mock::MockService;
use lanyard::verifier::{COOKIE, SERVICE_POLL_SPACING};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::time::{Instant, timeout, timeout_at};

use super::sidecar::{Answer, send};
use super::verifier::{Browser, PROJECT, RULE, Session};

/// Debian's haproxy; scripts/test installs it when missing.
pub const HAPROXY: &str = "/usr/sbin/haproxy";
/// The response header the balancer adds: the name of the replica
/// (`replica0`, `replica1`, ...) that answered.
pub const SERVED_BY: &str = "x-lanyard-replica";
/// A replica's start-up, first token included, on two busy cores.
const START_LIMIT: Duration = Duration::from_secs(20);
/// SIGTERM to exit: the drain is quick with nothing in flight, but the
/// default grace is 20 s.
const STOP_LIMIT: Duration = Duration::from_secs(30);
/// The balancer's start-up, and its checks' view of a replica going down
/// or coming up (they run every 200 ms).
const BALANCER_LIMIT: Duration = Duration::from_secs(10);
/// How often the balancer's state is read while waiting for it.
const BALANCER_POLL: Duration = Duration::from_millis(50);
/// A session's end once the wallet presented: the verifier asks the
/// service at most once a second.
const END_LIMIT: Duration = Duration::from_secs(15);

/// `N` distinct free loopback ports for processes to listen on: bound
/// together (so no two are the same) and let go, since a replica's
/// address must be known before it starts, and kept through restarts.
fn free_addrs<const N: usize>() -> [SocketAddr; N] {
    let held: [std::net::TcpListener; N] =
        std::array::from_fn(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap());
    held.map(|listener| listener.local_addr().unwrap())
}

/// Replicas with the same settings against one mock, and a balancer in
/// front of them.
pub struct Fleet {
    pub replicas: Vec<Replica>,
    pub balancer: Balancer,
    _dir: tempfile::TempDir,
}

impl Fleet {
    /// `count` replicas of `lanyard verifier` for [`RULE`] against `mock`,
    /// each with its first token, and the balancer once it sees them all
    /// up.
    pub async fn start(mock: &MockService, count: usize) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let vars = replica_settings(mock, dir.path());
        let mut replicas = Vec::with_capacity(count);
        for index in 0..count {
            replicas.push(Replica::start(format!("replica{index}"), vars.clone()).await);
        }
        let balancer = Balancer::start(&replicas, dir.path()).await;
        Fleet {
            replicas,
            balancer,
            _dir: dir,
        }
    }

    /// Restarts replica `index` as a rolling deploy does: SIGTERM, a
    /// clean exit, the balancer sending it nothing more, then the replica
    /// started again on its ports, and the balancer sending to it again
    /// once it is ready, before the next replica is touched.
    ///
    /// The wait for the balancer to take it out matters: a replica serves
    /// before it holds its first token, and a restart quicker than the
    /// balancer's checks (200 ms) is otherwise not seen at all, so the
    /// balancer sends to the new process in that moment, which answers
    /// 503 `token_unavailable`.
    pub async fn restart(&mut self, index: usize) {
        let replica = &mut self.replicas[index];
        replica.stop().await;
        self.balancer.wait_until_down(replica).await;
        replica.start_again().await;
        self.balancer.wait_until_up(&self.replicas).await;
    }

    /// The balancer's names for the replicas.
    pub fn names(&self) -> BTreeSet<String> {
        self.replicas.iter().map(|r| r.name.clone()).collect()
    }

    /// Every replica's log, every run of it, for failure messages.
    pub fn logs(&self) -> String {
        let logs: Vec<String> = self
            .replicas
            .iter()
            .map(|r| format!("{}:\n{}", r.name, r.log()))
            .collect();
        logs.join("\n")
    }

    /// Every replica, one after the other.
    pub async fn rolling_restart(&mut self) {
        for index in 0..self.replicas.len() {
            self.restart(index).await;
        }
    }
}

/// The settings every replica of a fleet shares: the fixture account's
/// credentials (from whose key the session key is derived), the mock's
/// API and wallet, [`RULE`] in [`PROJECT`], one trusted proxy in front,
/// and JSON logs.
pub fn replica_settings(mock: &MockService, dir: &Path) -> HashMap<String, String> {
    mock.add_rule(PROJECT, RULE);
    let wallet = mock.wallet_url();
    super::settings(
        mock,
        dir,
        &[
            ("PROJECT_ID", PROJECT),
            ("RULE_ID", RULE),
            ("WALLET_BASE_URL", &wallet),
            ("LANYARD_VERIFIER_FORWARDED_HOPS", "1"),
            ("LANYARD_LOG_FORMAT", "json"),
        ],
    )
}

/// One `lanyard verifier` process on fixed ports, which it keeps through
/// restarts.
pub struct Replica {
    /// The balancer's name for it.
    pub name: String,
    /// The verifier: the page and its API.
    pub addr: SocketAddr,
    /// Health and readiness: what the balancer checks.
    pub admin: SocketAddr,
    vars: HashMap<String, String>,
    running: Option<Child>,
    lines: Option<mpsc::UnboundedReceiver<String>>,
    /// Every log line of every run, for failure messages.
    log: Vec<String>,
}

impl Replica {
    /// Starts `lanyard verifier` with `vars` on a free port, and waits for
    /// it to listen and hold a token.
    pub async fn start(name: String, vars: HashMap<String, String>) -> Replica {
        let [addr, admin] = free_addrs();
        let mut replica = Replica {
            name,
            addr,
            admin,
            vars,
            running: None,
            lines: None,
            log: Vec::new(),
        };
        replica.run().await;
        replica
    }

    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Starts the stopped replica again with the same settings on the
    /// same ports, and waits for it to listen and hold a token.
    pub async fn start_again(&mut self) {
        self.log
            .push(format!("--- {} started again ---", self.name));
        self.run().await;
    }

    async fn run(&mut self) {
        assert!(self.running.is_none(), "{} is already running", self.name);
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanyard"))
            .arg("verifier")
            .env_clear()
            .envs(&self.vars)
            .env("LANYARD_VERIFIER_LISTEN", self.addr.to_string())
            .env("LANYARD_ADMIN_LISTEN", self.admin.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("lanyard starts");
        self.lines = Some(super::forward_lines(child.stderr.take().unwrap()));
        self.running = Some(child);
        // The first token may be logged before or after the start line.
        let seen = self
            .wait_for_logs(&["lanyard started", "token obtained"])
            .await;
        let fields = &seen[0]["fields"];
        assert_eq!(
            (&fields["verifier"], &fields["admin"]),
            (
                &self.addr.to_string().into(),
                &self.admin.to_string().into()
            ),
            "{} listens where the balancer sends and checks",
            self.name
        );
    }

    /// SIGTERM, then the exit, which must be a clean 0.
    pub async fn stop(&mut self) {
        let mut child = self.running.take().expect("running");
        let pid = child.id().expect("not yet reaped").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(sent.success(), "SIGTERM to {}", self.name);
        let status = timeout(STOP_LIMIT, child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} still running {STOP_LIMIT:?} after SIGTERM:\n{}",
                    self.name,
                    self.log.join("\n")
                )
            })
            .unwrap();
        // Its stderr closed with it: the rest of its log is buffered.
        let mut lines = self.lines.take().expect("its log");
        while let Some(line) = lines.recv().await {
            self.log.push(line);
        }
        assert_eq!(
            status.code(),
            Some(0),
            "{} after SIGTERM:\n{}",
            self.name,
            self.log.join("\n")
        );
    }

    /// Its log so far, every run of it.
    pub fn log(&self) -> String {
        self.log.join("\n")
    }

    /// Reads the log until a JSON line with each of `messages` has been
    /// seen, in any order; returns those lines, in the order asked.
    async fn wait_for_logs(&mut self, messages: &[&str]) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + START_LIMIT;
        let mut seen: Vec<Option<serde_json::Value>> = vec![None; messages.len()];
        let lines = self.lines.as_mut().expect("running");
        while seen.iter().any(Option::is_none) {
            let line = match timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => panic!(
                    "{} exited before logging {messages:?}:\n{}",
                    self.name,
                    self.log.join("\n")
                ),
                Err(_) => panic!(
                    "{} did not log {messages:?} within {START_LIMIT:?}:\n{}",
                    self.name,
                    self.log.join("\n")
                ),
            };
            if let Ok(event) = serde_json::from_str::<serde_json::Value>(&line) {
                let message = event["fields"]["message"].as_str().unwrap_or_default();
                if let Some(index) = messages.iter().position(|m| *m == message) {
                    seen[index] = Some(event);
                }
            }
            self.log.push(line);
        }
        seen.into_iter().map(Option::unwrap).collect()
    }
}

/// haproxy in the foreground, round-robin over the replicas, checking
/// each one's readiness every 200 ms; killed on drop.
pub struct Balancer {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub url: String,
    /// haproxy's statistics page, whose CSV says which replica is up.
    stats: String,
    child: Child,
    stderr: mpsc::UnboundedReceiver<String>,
}

impl Balancer {
    /// Writes the configuration to `dir`, starts haproxy, and waits until
    /// it sends to every replica.
    pub async fn start(replicas: &[Replica], dir: &Path) -> Balancer {
        assert!(
            Path::new(HAPROXY).is_file(),
            "{HAPROXY} is missing: install Debian's haproxy (apt-get install haproxy), \
             or run scripts/test, which does"
        );
        let [front, stats] = free_addrs();
        let config = super::write(dir, "haproxy.cfg", &haproxy_config(front, stats, replicas));
        let mut child = Command::new(HAPROXY)
            .arg("-f")
            .arg(&config)
            .arg("-db")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("haproxy starts");
        let stderr = super::forward_lines(child.stderr.take().unwrap());
        let mut balancer = Balancer {
            url: format!("http://{front}"),
            stats: format!("http://{stats}/;csv"),
            child,
            stderr,
        };
        balancer.wait_until_up(replicas).await;
        balancer
    }

    /// Waits until haproxy's checks have every replica up.
    pub async fn wait_until_up(&mut self, replicas: &[Replica]) {
        let up = |states: &HashMap<String, String>| {
            replicas
                .iter()
                .all(|r| states.get(&r.name).is_some_and(|s| s == "UP"))
        };
        self.wait_until("every replica up", up).await;
    }

    /// Waits until haproxy's checks have taken `replica` out.
    pub async fn wait_until_down(&mut self, replica: &Replica) {
        let down = |states: &HashMap<String, String>| {
            states
                .get(&replica.name)
                .is_some_and(|s| s.starts_with("DOWN"))
        };
        self.wait_until(&format!("{} down", replica.name), down)
            .await;
    }

    /// Reads haproxy's view of the replicas until `done` holds, failing the
    /// test with haproxy's output if it exits or takes too long.
    async fn wait_until(&mut self, what: &str, done: impl Fn(&HashMap<String, String>) -> bool) {
        let deadline = Instant::now() + BALANCER_LIMIT;
        let mut last = String::from("no answer yet");
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("haproxy exited ({status}):\n{}", self.output());
            }
            if let Some(states) = self.server_states().await {
                if done(&states) {
                    return;
                }
                last = format!("{states:?}");
            }
            assert!(
                Instant::now() < deadline,
                "the balancer did not see {what} within {BALANCER_LIMIT:?}: {last}\n{}",
                self.output()
            );
            tokio::time::sleep(BALANCER_POLL).await;
        }
    }

    /// Each replica's state (`UP`, `DOWN`, ...) as the statistics CSV
    /// says; `None` while haproxy does not answer.
    async fn server_states(&self) -> Option<HashMap<String, String>> {
        let client = super::sidecar::client();
        let answer = timeout(BALANCER_LIMIT, client.get(self.stats.parse().unwrap()))
            .await
            .ok()?
            .ok()?;
        let body = http_body_util::BodyExt::collect(answer.into_body())
            .await
            .ok()?
            .to_bytes();
        let text = String::from_utf8_lossy(&body);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next()?.trim_start_matches("# ").split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name);
        let (proxy, server, status) = (column("pxname")?, column("svname")?, column("status")?);
        Some(
            lines
                .map(|line| line.split(',').collect::<Vec<_>>())
                .filter(|row| row.get(proxy) == Some(&"replicas"))
                .filter_map(|row| {
                    Some((row.get(server)?.to_string(), row.get(status)?.to_string()))
                })
                .collect(),
        )
    }

    /// What haproxy wrote so far (alerts and warnings), for messages.
    fn output(&mut self) -> String {
        let mut lines = Vec::new();
        while let Ok(line) = self.stderr.try_recv() {
            lines.push(line);
        }
        lines.join("\n")
    }
}

/// The configuration: HTTP, round-robin over the replicas that are ready,
/// as deploy/kubernetes/verifier's readinessProbe has it: `GET /readyz` on
/// the admin port every 200 ms, one failure takes a replica out, one
/// success puts it back. (`GET /` on the verifier port would not do: a
/// replica serves the page before it holds a token, and in that moment
/// answers polls with 503 `token_unavailable`.) A request that finds its
/// replica gone (refused, or closed without an answer while it drains) is
/// retried on another, as an operator's balancer would be told to.
/// `X-Forwarded-For` is added, for the replicas' one trusted hop.
fn haproxy_config(front: SocketAddr, stats: SocketAddr, replicas: &[Replica]) -> String {
    let servers: String = replicas
        .iter()
        .map(|r| {
            format!(
                "    server {} {} check port {} inter 200ms fall 1 rise 1\n",
                r.name,
                r.addr,
                r.admin.port()
            )
        })
        .collect();
    format!(
        "global
    maxconn 256

defaults
    mode http
    timeout connect 1s
    timeout client 30s
    timeout server 30s
    retries 3
    option redispatch 1
    retry-on conn-failure empty-response response-timeout
    option forwardfor

frontend verifier
    bind {front}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET /readyz
    http-response set-header {SERVED_BY} %[srv_name]
{servers}
frontend stats
    bind {stats}
    stats enable
    stats uri /
"
    )
}

/// Which replica the balancer sent a request to.
pub fn served_by(answer: &Answer) -> String {
    answer
        .headers
        .get(SERVED_BY)
        .unwrap_or_else(|| panic!("no {SERVED_BY}: not through the balancer?"))
        .to_str()
        .unwrap()
        .to_string()
}

/// `POST /api/start` at `base` (a replica or the balancer), keeping the
/// cookie it sets, as the page does.
pub async fn start(browser: &mut Browser, base: &str) -> (Session, Answer) {
    let answer = browser
        .request(
            Method::POST,
            &format!("{base}/api/start"),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(answer.status, 200, "{:?}", answer.body);
    let set = answer.headers["set-cookie"].to_str().unwrap();
    let pair = set.split(';').next().unwrap();
    assert!(pair.starts_with(&format!("{COOKIE}=")), "{set}");
    browser.cookie = Some(pair.to_string());
    (Session::of(&answer.json()), answer)
}

/// `GET /api/status` at `base` for `handle`, with `browser`'s cookie.
pub async fn status(browser: &Browser, base: &str, handle: &str) -> Answer {
    let url = format!("{base}/api/status?transactionId={handle}");
    browser.request(Method::GET, &url, &[]).await
}

/// Polls `base` until the session is no longer pending, as the page does.
pub async fn until_ended(browser: &Browser, base: &str, handle: &str) -> Answer {
    let deadline = Instant::now() + END_LIMIT;
    loop {
        let answer = status(browser, base, handle).await;
        if answer.status != 200 || answer.json()["status"] != "pending" {
            return answer;
        }
        assert!(
            Instant::now() < deadline,
            "still pending after {END_LIMIT:?}"
        );
        tokio::time::sleep(SERVICE_POLL_SPACING).await;
    }
}

/// The mock's wallet presents `claims` for `session`.
pub async fn present(mock: &MockService, session: &Session, claims: &serde_json::Value) {
    let presented = send(
        Method::POST,
        &mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from(claims.to_string()),
    )
    .await;
    assert_eq!(presented.status, 200, "{:?}", presented.body);
}
