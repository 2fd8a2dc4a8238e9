//! The log format when `LANYARD_LOG_FORMAT` is unset (docs/admin.md "Logs"):
//! `lanyard demo` under a pseudo-terminal (util-linux's `script`) logs
//! text a person reads; with stderr a pipe, as in a container, JSON.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

/// The demo on free loopback ports, its logging left to decide.
fn demo(command: &mut Command) -> &mut Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("LANYARD_LISTEN", "127.0.0.1:0")
        .env("LANYARD_ADMIN_LISTEN", "127.0.0.1:0")
        .env("LANYARD_VERIFIER_LISTEN", "127.0.0.1:0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
}

/// Reads `stream` until a line holding `token obtained`, and returns it.
async fn token_line(stream: impl tokio::io::AsyncRead + Unpin) -> String {
    let mut lines = BufReader::new(stream).lines();
    let find = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("token obtained") {
                return line;
            }
        }
        panic!("the demo ended before it logged `token obtained`");
    };
    tokio::time::timeout(Duration::from_secs(30), find)
        .await
        .expect("a token within 30 s")
}

#[tokio::test]
async fn on_a_terminal_the_demo_logs_text() {
    let lanyard = env!("CARGO_BIN_EXE_lanyard");
    // `script` runs the command on a new pseudo-terminal, its stderr
    // included, and copies what it writes to our stdout.
    let mut child = demo(&mut Command::new("script"))
        .args(["-qefc", &format!("{lanyard} demo"), "/dev/null"])
        .spawn()
        .expect("util-linux's script");
    let line = token_line(child.stdout.take().unwrap()).await;
    assert!(
        !line.trim_start().starts_with('{'),
        "JSON on a terminal: {line}"
    );
    assert!(line.contains("INFO"), "{line}");
}

#[tokio::test]
async fn into_a_pipe_the_demo_logs_json() {
    let mut child = demo(&mut Command::new(env!("CARGO_BIN_EXE_lanyard")))
        .arg("demo")
        .spawn()
        .unwrap();
    let line = token_line(child.stderr.take().unwrap()).await;
    let json: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(json["fields"]["message"], "token obtained");
}

#[tokio::test]
async fn an_explicit_format_wins_over_the_terminal() {
    let lanyard = env!("CARGO_BIN_EXE_lanyard");
    let mut child = demo(&mut Command::new("script"))
        .env("LANYARD_LOG_FORMAT", "json")
        .args(["-qefc", &format!("{lanyard} demo"), "/dev/null"])
        .spawn()
        .unwrap();
    let line = token_line(child.stdout.take().unwrap()).await;
    assert!(line.trim_start().starts_with('{'), "{line}");
}
