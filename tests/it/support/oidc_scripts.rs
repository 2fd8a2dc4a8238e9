//! The relying parties' scripts of `tests/oidc` and the provider they
//! sign in at: `lanyard verifier` as an OpenID Connect provider with the
//! embedded mock as its service and wallet, and a node script whose
//! stdout is read as JSON reports (tests/it/oidc_interop.rs,
//! tests/it/oidc_browser_app.rs).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;

use super::child::Process;

/// A whole sign-in: Chromium's start, the page's polls (every 1 to 5 s),
/// the wallet, the code exchange. About 5 s on two cores when idle.
pub const FLOW_TIMEOUT: Duration = Duration::from_secs(120);

/// `lanyard verifier` as an OpenID Connect provider, the embedded mock as
/// its service and wallet; killed when dropped.
pub struct Provider {
    pub process: Process,
    /// `http://127.0.0.1:PORT` and the issuer's path: the verifier's
    /// listener serves it.
    pub issuer: String,
    _dir: tempfile::TempDir,
}

impl Provider {
    /// Starts it with `clients` as its clients file and the issuer's path
    /// `path` ("" or "/wallet", say), once it holds a token from the mock.
    pub async fn start(path: &str, clients: Value) -> Provider {
        let dir = tempfile::tempdir().unwrap();
        let clients = super::write(dir.path(), "clients.json", &clients.to_string());
        // The issuer names the port, so the port is chosen before lanyard
        // starts rather than by the kernel at its bind.
        let listen = super::closed_port();
        let issuer = format!("http://{listen}{path}");
        let vars = super::env(&[
            ("DEMO_MOCK", "true"),
            ("LANYARD_VERIFIER_LISTEN", &listen.to_string()),
            ("LANYARD_ADMIN_LISTEN", "127.0.0.1:0"),
            ("LANYARD_OIDC_ISSUER", &issuer),
            ("LANYARD_OIDC_CLIENTS_FILE", path_str(&clients)),
            (
                "LANYARD_OIDC_SIGNING_KEY_FILE",
                path_str(&super::fixture_path("rsa2048.pkcs8.pem")),
            ),
        ]);
        let mut process = Process::launch(&["verifier"], vars, "json", false);
        let started = process.wait_for_log("lanyard started").await;
        assert_eq!(
            started["fields"]["verifier"].as_str(),
            Some(listen.to_string().as_str()),
            "{started}"
        );
        process.wait_for_log("token obtained").await;
        Provider {
            process,
            issuer,
            _dir: dir,
        }
    }

    /// Its log so far, for a failure's message.
    pub fn logs(&mut self) -> String {
        while let Ok(line) = self.process.lines.try_recv() {
            self.process.log.push(line);
        }
        format!("lanyard's log:\n{}", self.process.log.join("\n"))
    }
}

/// A node script of `tests/oidc`, its stdout read as JSON lines and its
/// stderr kept for failures; killed when dropped.
pub struct Script {
    name: &'static str,
    child: Child,
    stdout: UnboundedReceiver<String>,
    stderr: UnboundedReceiver<String>,
    stderr_seen: Vec<String>,
}

impl Script {
    pub fn start(name: &'static str, vars: &[(&str, &str)]) -> Script {
        let dir = super::node::dir("oidc");
        super::node::ensure_packages(&dir);
        assert!(
            Path::new(super::node::CHROMIUM).is_file(),
            "{} is missing: install Debian's chromium, or run scripts/test, which does",
            super::node::CHROMIUM
        );
        let mut child = Command::new("node")
            .arg(dir.join(name))
            .current_dir(&dir)
            .envs(vars.iter().copied())
            .env("OIDC_TEST_CHROMIUM", super::node::CHROMIUM)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|err| {
                panic!(
                    "cannot run node: {err}\n{}",
                    super::node::install_hint(&dir)
                )
            });
        let stdout = super::forward_lines(child.stdout.take().unwrap());
        let stderr = super::forward_lines(child.stderr.take().unwrap());
        Script {
            name,
            child,
            stdout,
            stderr,
            stderr_seen: Vec::new(),
        }
    }

    /// The next report, which must be `event`; a failure report, an exit
    /// or silence fails the test with the script's stderr and the servers'
    /// logs, which `logs` gathers.
    pub async fn next(&mut self, event: &str, logs: impl FnOnce() -> String) -> Value {
        let line = tokio::time::timeout(FLOW_TIMEOUT, self.stdout.recv()).await;
        let report = match line {
            Ok(Some(line)) => serde_json::from_str::<Value>(&line)
                .unwrap_or_else(|err| panic!("{} printed {line:?}, not JSON: {err}", self.name)),
            Ok(None) => Value::Null,
            Err(_) => json!({"event": "timeout"}),
        };
        if report["event"] != event {
            let said = match report["event"].as_str() {
                Some(said) => format!("`{said}`"),
                None => "nothing (it exited)".into(),
            };
            let stderr = self.stderr();
            panic!(
                "{} reported {said} instead of `{event}`:\n{report:#}\n\nits stderr:\n{stderr}\n\n{}",
                self.name,
                logs(),
            );
        }
        report
    }

    /// Writes `line` on the script's stdin.
    pub async fn tell(&mut self, line: &str) {
        let stdin = self.child.stdin.as_mut().expect("piped stdin");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Waits for the script to exit 0.
    pub async fn finish(mut self) {
        let status = tokio::time::timeout(FLOW_TIMEOUT, self.child.wait())
            .await
            .expect("the script exits")
            .unwrap();
        let stderr = self.stderr();
        assert!(status.success(), "{} exited {status}:\n{stderr}", self.name);
    }

    /// Its stderr so far.
    pub fn stderr(&mut self) -> String {
        while let Ok(line) = self.stderr.try_recv() {
            self.stderr_seen.push(line);
        }
        self.stderr_seen.join("\n")
    }
}

/// A path as the settings and Apache's config take it.
pub fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 path")
}
