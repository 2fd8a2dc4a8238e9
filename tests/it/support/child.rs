//! A `lanyard` binary run as a child process, its logs read line by line:
//! what tests of the process as operators run it (signals, logs, exit
//! codes) start from.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::forward_lines;

/// How long a wait for a log line lasts unless told otherwise.
const LOG_WAIT: Duration = Duration::from_secs(20);

/// A running `lanyard` whose stderr (its logs) and, when asked for, stdout
/// are collected line by line.
pub struct Process {
    pub child: Child,
    pub proxy: String,
    pub admin: String,
    pub lines: mpsc::UnboundedReceiver<String>,
    pub stdout: Option<mpsc::UnboundedReceiver<String>>,
    pub log: Vec<String>,
}

impl Process {
    /// `lanyard run` with JSON logs, once it says where it listens.
    pub async fn start(vars: HashMap<String, String>) -> Process {
        let mut process = Process::launch(&["run"], vars, "json", false);
        let started = process.wait_for_log("lanyard started").await;
        // None on a Unix socket.
        if let Some(proxy) = started["fields"]["proxy"].as_str() {
            process.proxy = format!("http://{proxy}");
        }
        process.admin = format!("http://{}", started["fields"]["admin"].as_str().unwrap());
        process
    }

    /// `lanyard <args>` with `vars` only, on free loopback ports where
    /// `vars` names no listener, logging in `format`; stdout is kept when
    /// `stdout` is set.
    pub fn launch(
        args: &[&str],
        mut vars: HashMap<String, String>,
        format: &str,
        stdout: bool,
    ) -> Process {
        for listener in [
            "LANYARD_LISTEN",
            "LANYARD_ADMIN_LISTEN",
            "LANYARD_VERIFIER_LISTEN",
        ] {
            vars.entry(listener.into())
                .or_insert_with(|| "127.0.0.1:0".into());
        }
        let mut child = Command::new(env!("CARGO_BIN_EXE_lanyard"))
            .args(args)
            .env_clear()
            .envs(vars)
            .env("LANYARD_LOG_FORMAT", format)
            .stdout(if stdout {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("lanyard starts");
        let lines = forward_lines(child.stderr.take().unwrap());
        let stdout = child.stdout.take().map(forward_lines);
        Process {
            child,
            proxy: String::new(),
            admin: String::new(),
            lines,
            stdout,
            log: Vec::new(),
        }
    }

    /// Waits for a JSON log line whose message is `message`, keeping every
    /// line.
    pub async fn wait_for_log(&mut self, message: &str) -> serde_json::Value {
        self.wait_for_log_within(message, LOG_WAIT).await
    }

    /// As [`Process::wait_for_log`], for up to `limit`.
    pub async fn wait_for_log_within(
        &mut self,
        message: &str,
        limit: Duration,
    ) -> serde_json::Value {
        let is_it = |line: &str| {
            serde_json::from_str::<serde_json::Value>(line)
                .is_ok_and(|json| json["fields"]["message"] == message)
        };
        let line = self.wait_for_line_within(message, is_it, limit).await;
        serde_json::from_str(&line).unwrap()
    }

    /// Waits for a log line `matches` accepts, keeping every line.
    pub async fn wait_for_line(&mut self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        self.wait_for_line_within(what, matches, LOG_WAIT).await
    }

    async fn wait_for_line_within(
        &mut self,
        what: &str,
        matches: impl Fn(&str) -> bool,
        limit: Duration,
    ) -> String {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!("no `{what}` log line; log so far:\n{}", self.log.join("\n"))
                })
                .unwrap_or_else(|| {
                    panic!("lanyard exited before `{what}`:\n{}", self.log.join("\n"))
                });
            self.log.push(line.clone());
            if matches(&line) {
                return line;
            }
        }
    }

    /// Stdout up to and including the first line that starts, indentation
    /// aside, with `last`.
    pub async fn stdout_through(&mut self, last: &str) -> String {
        let stdout = self.stdout.as_mut().expect("stdout was kept");
        let mut text = String::new();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), stdout.recv())
                .await
                .unwrap_or_else(|_| panic!("no `{last}` on stdout; so far:\n{text}"))
                .unwrap_or_else(|| panic!("stdout closed before `{last}`:\n{text}"));
            text.push_str(&line);
            text.push('\n');
            if line.trim_start().starts_with(last) {
                return text;
            }
        }
    }

    pub fn terminate(&self) {
        self.signal("-TERM");
    }

    pub fn signal(&self, which: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for exit and returns the status code with the whole log.
    pub async fn finish(mut self) -> (Option<i32>, String) {
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("lanyard exits")
            .unwrap();
        while let Some(line) = self.lines.recv().await {
            self.log.push(line);
        }
        (status.code(), self.log.join("\n"))
    }
}
