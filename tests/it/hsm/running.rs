//! A `lanyard run` child with a SoftHSM2 of its own, its JSON log read
//! line by line (as tests/it/process.rs reads it).

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::softhsm::PIN;
use crate::support::forward_lines;

pub struct Running {
    child: Child,
    pub proxy: String,
    pub admin: String,
    lines: mpsc::UnboundedReceiver<String>,
    pub log: Vec<String>,
}

impl Running {
    /// `lanyard run` with exactly `vars` (`SOFTHSM2_CONF` among them), on
    /// free loopback ports, once it says where it listens.
    pub async fn start(vars: HashMap<String, String>) -> Running {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanyard"))
            .arg("run")
            .env_clear()
            .envs(vars)
            .env("LANYARD_LISTEN", "127.0.0.1:0")
            .env("LANYARD_ADMIN_LISTEN", "127.0.0.1:0")
            .env("LANYARD_LOG_FORMAT", "json")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("lanyard starts");
        let lines = forward_lines(child.stderr.take().unwrap());
        let mut running = Running {
            child,
            proxy: String::new(),
            admin: String::new(),
            lines,
            log: Vec::new(),
        };
        let started = running
            .wait_for("lanyard started", Duration::from_secs(20))
            .await;
        running.proxy = format!("http://{}", started["fields"]["proxy"].as_str().unwrap());
        running.admin = format!("http://{}", started["fields"]["admin"].as_str().unwrap());
        running
    }

    /// Waits up to `limit` for a log line whose message is `message`,
    /// keeping every line.
    pub async fn wait_for(&mut self, message: &str, limit: Duration) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no `{message}`; log so far:\n{}", self.log.join("\n")))
                .unwrap_or_else(|| {
                    panic!(
                        "lanyard exited before `{message}`:\n{}",
                        self.log.join("\n")
                    )
                });
            self.log.push(line.clone());
            let json: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
            if json["fields"]["message"] == message {
                return json;
            }
        }
    }

    pub fn signal(&self, which: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// SIGTERM, then the exit code with the whole log, which must not hold
    /// the PIN.
    pub async fn stop(mut self) -> (Option<i32>, String) {
        self.signal("-TERM");
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("lanyard exits")
            .unwrap();
        while let Some(line) = self.lines.recv().await {
            self.log.push(line);
        }
        let log = self.log.join("\n");
        assert!(!log.contains(PIN), "the PIN is in the log");
        (status.code(), log)
    }
}
