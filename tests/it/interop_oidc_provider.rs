//! Interoperability: `lanyard token` against a real OAuth 2.0 authorization
//! server that this project did not write, node's `oidc-provider`, set up
//! for the `client_credentials` grant with `private_key_jwt` client
//! authentication (RFC 7523). See `tests/interop/server.mjs`.
//!
//! Needs Node.js 20+ and npm; `npm ci` runs in `tests/interop` on first use
//! (tests/it/support/node.rs).

use crate::support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

const CLIENT_ID: &str = "interop-client";
/// How long the provider may take to say where it listens.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// How long the provider may take to report a token after lanyard exits
/// (it reports before answering, so this is only reader-thread slack).
const ISSUED_TIMEOUT: Duration = Duration::from_secs(10);

fn manifest_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn interop_dir() -> PathBuf {
    support::node::dir("interop")
}

/// The provider, running; killed when dropped.
struct Provider {
    child: Child,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    issuer: String,
    token_endpoint: String,
}

impl Provider {
    /// Starts `tests/interop/server.mjs` with the client's public key
    /// registered, and waits for it to say where it listens.
    fn start(public_key_pem: &Path) -> Provider {
        support::node::ensure_packages(&interop_dir());
        let mut child = Command::new("node")
            .arg(interop_dir().join("server.mjs"))
            .current_dir(manifest_dir())
            .env("CLIENT_ID", CLIENT_ID)
            .env("PUBLIC_KEY_PEM_FILE", public_key_pem)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot start node: {err}\n{}",
                    support::node::install_hint(&interop_dir())
                )
            });

        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut child_stderr = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = child_stderr.read(&mut buf) {
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });

        let mut provider = Provider {
            child,
            lines,
            stderr,
            issuer: String::new(),
            token_endpoint: String::new(),
        };
        let first = match provider.lines.recv_timeout(STARTUP_TIMEOUT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!(
                "oidc-provider did not report its address within {} s; its stderr:\n{}",
                STARTUP_TIMEOUT.as_secs(),
                provider.stderr()
            ),
            Err(RecvTimeoutError::Disconnected) => panic!(
                "oidc-provider exited before reporting its address ({:?}); its stderr:\n{}",
                provider.child.wait().ok(),
                provider.stderr()
            ),
        };
        let json: serde_json::Value = serde_json::from_str(&first)
            .unwrap_or_else(|err| panic!("the server's first line {first:?} is not JSON: {err}"));
        let field = |name: &str| {
            json[name]
                .as_str()
                .unwrap_or_else(|| panic!("the server's first line {first:?} lacks `{name}`"))
                .to_string()
        };
        provider.issuer = field("issuer");
        provider.token_endpoint = field("token_endpoint");
        assert!(
            provider.issuer.starts_with("http://127.0.0.1:")
                && provider.token_endpoint.starts_with(&provider.issuer),
            "unexpected addresses: {first}"
        );
        provider
    }

    /// What the server has written to stderr so far.
    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// The next access token the provider reports having issued.
    fn next_issued(&self) -> String {
        let line = self
            .lines
            .recv_timeout(ISSUED_TIMEOUT)
            .unwrap_or_else(|err| {
                panic!(
                    "oidc-provider reported no issued token ({err:?}); its stderr:\n{}",
                    self.stderr()
                )
            });
        let json: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("server line {line:?} is not JSON: {err}"));
        json["issued"]
            .as_str()
            .unwrap_or_else(|| panic!("server line {line:?} is not an `issued` report"))
            .to_string()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        // Closing stdin alone makes the server exit; killing makes sure.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `lanyard token` with nothing but PATH and the given credentials.
fn lanyard_token(provider: &Provider, private_key_pem: &str) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lanyard"));
    command
        .arg("token")
        .env_clear()
        .env("SA_CLIENT_ID", CLIENT_ID)
        .env("SA_PRIVATE_KEY", private_key_pem)
        // oidc-provider accepts the issuer or the token endpoint URL as the
        // assertion's audience; server.mjs narrows that to the issuer.
        .env("SA_IAM_AUDIENCE", &provider.issuer)
        .env("SA_TOKEN_URI", &provider.token_endpoint)
        // Sent as an extra form field; oidc-provider ignores it.
        .env("SA_ORGANIZATION_ID", "org-interop")
        .stdin(Stdio::null());
    if let Some(path) = std::env::var_os("PATH") {
        command.env("PATH", path);
    }
    command.output().expect("run lanyard")
}

#[test]
fn token_command_gets_a_token_from_oidc_provider() {
    let started = Instant::now();
    let provider = Provider::start(&support::fixture_path("rsa2048.pub.pem"));
    let key = std::fs::read_to_string(support::fixture_path("rsa2048.pkcs8.pem"))
        .expect("read the fixture key");

    let out = lanyard_token(&provider, &key);
    let stdout = String::from_utf8(out.stdout).expect("stdout is UTF-8");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "lanyard token failed\nlanyard stderr:\n{stderr}\nserver stderr:\n{}",
        provider.stderr()
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "stdout must be exactly one line: {stdout:?}"
    );
    assert!(
        stdout.ends_with('\n'),
        "stdout must be one terminated line: {stdout:?}"
    );
    let token = lines[0];
    assert!(!token.trim().is_empty(), "the printed token is empty");
    assert_eq!(
        token,
        provider.next_issued(),
        "lanyard printed a token that oidc-provider did not issue"
    );
    assert!(!stderr.contains(token), "stderr holds the token: {stderr}");
    assert!(
        !stderr.contains("PRIVATE KEY"),
        "stderr holds key material: {stderr}"
    );
    eprintln!("interop round trip took {:?}", started.elapsed());
}

#[test]
fn oidc_provider_refusal_is_reported_with_exit_1() {
    // The provider knows the fixture key; lanyard signs with another one.
    let provider = Provider::start(&support::fixture_path("rsa2048.pub.pem"));
    let other = lanyard::mock::generate_rsa_key().expect("generate an RSA key");

    let out = lanyard_token(&provider, other.private_pem.expose());
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1\nlanyard stdout: {stdout:?}\nlanyard stderr:\n{stderr}\nserver stderr:\n{}",
        provider.stderr()
    );
    assert!(stdout.is_empty(), "stdout must be empty: {stdout:?}");
    assert!(
        stderr.contains("the token endpoint refused the request: HTTP 401")
            && stderr.contains("invalid_client"),
        "stderr does not report the refusal: {stderr}"
    );
    assert!(
        !stderr.contains("PRIVATE KEY"),
        "stderr holds key material: {stderr}"
    );
    assert!(
        provider.lines.try_recv().is_err(),
        "oidc-provider issued a token to a client signing with an unregistered key"
    );
}
