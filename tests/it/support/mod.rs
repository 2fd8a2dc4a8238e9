//! Shared test helpers: the fixture key, a mock service with an account,
//! credentials files and settings maps.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use lanyard::access::ServiceAccess;
use lanyard::config::{DemoConfig, Flags, Loaded, Requirement, RunConfig};
use lanyard::mock::{MockAccount, MockService};
use lanyard::process::Process;
use lanyard::token::TokenHandle;

pub mod child;
pub mod flood;
pub mod h2raw;
pub mod logs;
pub mod node;
pub mod oidc_scripts;
pub mod raw;
pub mod relying_party;
pub mod replicas;
pub mod sidecar;
pub mod tls;
pub mod upstream;
pub mod verifier;

pub const CLIENT_ID: &str = "sa-test-client";
pub const ORGANIZATION_ID: &str = "org-test";

/// A loopback address nothing listens on: the port was free a moment ago.
pub fn closed_port() -> std::net::SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Path of a file under `tests/fixtures`.
pub fn fixture_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).expect("fixture exists")
}

/// The fixture account's public key, as the mock takes it.
pub fn fixture_public_der() -> Vec<u8> {
    std::fs::read(fixture_path("rsa2048.pub.pkcs1.der")).expect("fixture exists")
}

/// The account the fixture key belongs to.
pub fn account() -> MockAccount {
    MockAccount {
        client_id: CLIENT_ID.into(),
        organization_id: ORGANIZATION_ID.into(),
        public_key_der: fixture_public_der(),
        roles: vec!["verifications.api".into()],
        projects: vec!["proj-demo".into()],
    }
}

/// A mock service on a fresh loopback port that knows [`account`].
pub async fn mock() -> MockService {
    let mock = MockService::start().await.expect("mock starts");
    mock.add_account(account());
    mock
}

/// A credentials file for the fixture account, as the Portal delivers it.
pub fn credentials_json(mock: &MockService, key_pem: &str) -> String {
    serde_json::json!({
        "type": "service_account",
        "organization_id": ORGANIZATION_ID,
        "client_id": CLIENT_ID,
        "private_key": key_pem,
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    })
    .to_string()
}

/// Writes `contents` to `name` in `dir` and returns the path.
pub fn write(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, contents).expect("temp file written");
    path
}

/// As [`write`], readable by its owner alone, as docs/tokens.md asks of
/// a credentials file (lanyard warns at start-up otherwise).
pub fn write_private(dir: &Path, name: &str, contents: &str) -> PathBuf {
    let path = write(dir, name, contents);
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .expect("the file's mode set");
    path
}

pub fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Settings for the fixture account against `mock`, plus `extra`.
pub fn settings(mock: &MockService, dir: &Path, extra: &[(&str, &str)]) -> HashMap<String, String> {
    let creds = write_private(
        dir,
        "credentials.json",
        &credentials_json(mock, &fixture("rsa2048.pkcs8.pem")),
    );
    let mut map = env(&[
        ("SERVICE_API_URL", &mock.api_url()),
        ("SA_CREDENTIALS_FILE", creds.to_str().expect("utf-8 path")),
    ]);
    map.extend(env(extra));
    map
}

/// The default account's token, which every sidecar and verifier these
/// helpers start has unless only `SA_CREDENTIALS_DIR` is set.
pub trait DefaultTokens {
    fn default_tokens(&self) -> &TokenHandle;
}

impl DefaultTokens for Process {
    fn default_tokens(&self) -> &TokenHandle {
        self.tokens.as_ref().expect("a default account")
    }
}

/// `lanyard run`'s configuration from `map`.
pub fn config(map: &HashMap<String, String>) -> RunConfig {
    match Loaded::load(&Flags::default(), map, Requirement::Upstream).expect("valid settings") {
        Loaded::Run(run) => *run,
        other => panic!("settings for another command: {other:?}"),
    }
}

/// `lanyard demo`'s configuration from `map`.
pub fn demo_config(map: &HashMap<String, String>) -> DemoConfig {
    match Loaded::load(&Flags::default(), map, Requirement::Demo).expect("valid settings") {
        Loaded::Demo(demo) => *demo,
        other => panic!("settings for another command: {other:?}"),
    }
}

/// The default account's access to the service, as `lanyard run` builds
/// it from `map`.
pub fn access(map: &HashMap<String, String>) -> ServiceAccess {
    let run = config(map);
    ServiceAccess::of_default(&run.access, &run.signing).expect("a default account")
}

/// Waits for a watch channel's value to satisfy `done`, failing the test
/// after `limit` rather than hanging.
pub async fn wait_for<T: Clone>(
    rx: &mut tokio::sync::watch::Receiver<T>,
    limit: Duration,
    done: impl FnMut(&T) -> bool,
) -> T {
    tokio::time::timeout(limit, rx.wait_for(done))
        .await
        .expect("condition reached in time")
        .expect("sender alive")
        .clone()
}

/// Runs the lanyard binary with exactly these environment variables.
pub async fn lanyard<K, V>(
    args: &[&str],
    vars: impl IntoIterator<Item = (K, V)>,
) -> std::process::Output
where
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    tokio::process::Command::new(env!("CARGO_BIN_EXE_lanyard"))
        .args(args)
        .env_clear()
        .envs(vars)
        .kill_on_drop(true)
        .output()
        .await
        .expect("lanyard runs")
}

/// Output bytes as text, for assertions and messages.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A child's output, line by line, on a channel: what tests that read a
/// process's logs wait on.
pub fn forward_lines(
    output: impl tokio::io::AsyncRead + Unpin + Send + 'static,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    use tokio::io::AsyncBufReadExt as _;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(output).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A field of /proc/PID/status (`VmRSS:`, `VmHWM:`), in bytes: a child
/// process's memory, as the memory tests bound it.
pub fn status_bytes(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().strip_suffix("kB"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("{field} in {status}"));
    kib * 1024
}

/// `lanyard demo` in-process with `config`, its proxy on `proxy` (none
/// without one), its admin and verifier listeners on fresh loopback
/// ports, once it holds its first token.
pub async fn demo_holding_a_token(
    config: &DemoConfig,
    proxy: Option<lanyard::process::ProxyListener>,
) -> lanyard::commands::demo::Demo {
    let listeners = lanyard::commands::demo::DemoListeners {
        admin: tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap(),
        proxy,
        verifier: Some(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()),
    };
    let demo =
        lanyard::commands::demo::Demo::start(config, listeners, &lanyard::otel::Telemetry::off())
            .await
            .expect("the demo starts");
    tokio::time::timeout(
        Duration::from_secs(10),
        demo.process
            .default_tokens()
            .state()
            .wait_for(|s| s.generation >= 1),
    )
    .await
    .expect("the first token within 10 s")
    .expect("the refresher runs");
    demo
}
