//! The `lanyard run` process as operators run it: its logs hold no secret,
//! and SIGTERM drains a request in flight before exiting 0.

mod support;

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use http::StatusCode;
use http_body_util::BodyExt;
use support::sidecar::get;
use support::upstream::TestUpstream;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr, Command};
use tokio::sync::mpsc;

/// A running `lanyard run` whose stderr (JSON logs) is collected.
struct Process {
    child: Child,
    proxy: String,
    admin: String,
    lines: mpsc::UnboundedReceiver<String>,
    log: Vec<String>,
}

impl Process {
    async fn start(vars: HashMap<String, String>) -> Process {
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
        let mut process = Process {
            child,
            proxy: String::new(),
            admin: String::new(),
            lines,
            log: Vec::new(),
        };
        let started = process.wait_for_log("lanyard started").await;
        process.proxy = format!("http://{}", started["fields"]["proxy"].as_str().unwrap());
        process.admin = format!("http://{}", started["fields"]["admin"].as_str().unwrap());
        process
    }

    /// Waits for a log line whose message is `message`, keeping every line.
    async fn wait_for_log(&mut self, message: &str) -> serde_json::Value {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let line = tokio::time::timeout_at(deadline, self.lines.recv())
                .await
                .unwrap_or_else(|_| {
                    panic!(
                        "no `{message}` log line; log so far:\n{}",
                        self.log.join("\n")
                    )
                })
                .unwrap_or_else(|| {
                    panic!(
                        "lanyard exited before `{message}`:\n{}",
                        self.log.join("\n")
                    )
                });
            self.log.push(line.clone());
            let Ok(json) = serde_json::from_str::<serde_json::Value>(&line) else {
                continue;
            };
            if json["fields"]["message"] == message {
                return json;
            }
        }
    }

    fn terminate(&self) {
        self.signal("-TERM");
    }

    fn signal(&self, which: &str) {
        let pid = self.child.id().expect("still running").to_string();
        let status = std::process::Command::new("kill")
            .args([which, &pid])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for exit and returns the status code with the whole log.
    async fn finish(mut self) -> (Option<i32>, String) {
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

fn forward_lines(stderr: ChildStderr) -> mpsc::UnboundedReceiver<String> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// A `lanyard run` in front of a test upstream, with one request held at
/// the upstream and SIGTERM sent: the state both drain tests start from.
struct Draining {
    process: Process,
    upstream: TestUpstream,
    held: tokio::task::JoinHandle<support::sidecar::Answer>,
    _mock: lanyard::mock::MockService,
    _dir: tempfile::TempDir,
}

async fn draining_with_a_held_request(grace: &str) -> Draining {
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[("LANYARD_SHUTDOWN_GRACE", grace)]);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    let held_url = format!("{}/hold", process.proxy);
    let held = tokio::spawn(async move { get(&held_url).await });
    upstream.slow_requests_started(1).await;
    process.terminate();
    process
        .wait_for_log("shutting down: draining in-flight requests")
        .await;
    Draining {
        process,
        upstream,
        held,
        _mock: mock,
        _dir: dir,
    }
}

#[tokio::test]
async fn sigterm_lets_a_slow_request_finish_then_exits_0() {
    let Draining {
        process,
        upstream,
        held,
        ..
    } = draining_with_a_held_request("10s").await;

    // Draining: not ready, and no new connections.
    let ready = get(&format!("{}/readyz", process.admin)).await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(ready.json()["reason"], "shutting down");
    let refused = tokio::net::TcpStream::connect(process.proxy.trim_start_matches("http://")).await;
    assert!(
        refused.is_err(),
        "the proxy still accepts connections while draining"
    );

    upstream.release_held();
    let answer = held.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.body, "held done");
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
}

#[tokio::test]
async fn sigterm_under_load_loses_no_request_that_had_started() {
    const CLIENTS: usize = 16;
    let upstream = TestUpstream::start(None).await;
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[("LANYARD_SHUTDOWN_GRACE", "20s")]);
    vars.insert("SERVICE_API_URL".into(), upstream.url.clone());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    // Clients on keep-alive connections, each sending request after request
    // to an upstream that takes 100 ms, so at any moment most are in flight.
    let signalled = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicU64::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let url: http::Uri = format!("{}/slow?ms=100", process.proxy).parse().unwrap();
        let (signalled, completed) = (signalled.clone(), completed.clone());
        clients.spawn(async move {
            let client = support::sidecar::client();
            let mut failures = Vec::new();
            loop {
                match client.get(url.clone()).await {
                    Ok(response) => {
                        let status = response.status();
                        match response.into_body().collect().await.map(|b| b.to_bytes()) {
                            Ok(body) if status == StatusCode::OK && body == "slow done" => {
                                completed.fetch_add(1, Ordering::SeqCst);
                            }
                            Ok(_) => failures.push(format!("HTTP {status}")),
                            Err(err) => failures.push(format!("body cut off: {err}")),
                        }
                    }
                    // The listener is closed: this request never started.
                    // Whether an earlier one was lost, the upstream's count
                    // tells below.
                    Err(_) if signalled.load(Ordering::SeqCst) => break,
                    Err(err) => failures.push(format!("before the signal: {err}")),
                }
            }
            failures
        });
    }
    upstream.slow_requests_started(4 * CLIENTS as u64).await;
    signalled.store(true, Ordering::SeqCst);
    process.terminate();
    let in_flight = upstream.requests() - completed.load(Ordering::SeqCst);

    let (code, log) = process.finish().await;
    let mut failures = Vec::new();
    while let Some(client) = clients.join_next().await {
        failures.extend(client.unwrap());
    }
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
    assert!(failures.is_empty(), "{failures:?}");
    assert!(in_flight > 0, "requests were in flight when SIGTERM came");
    assert_eq!(
        completed.load(Ordering::SeqCst),
        upstream.requests(),
        "every request that reached the upstream was answered in full"
    );
}

#[tokio::test]
async fn second_signal_ends_the_drain_at_once() {
    // Every field bound: `..` would drop the upstream here, failing the held
    // request and ending the drain before the second signal arrives.
    let Draining {
        process,
        upstream: _upstream,
        held,
        _mock,
        _dir,
    } = draining_with_a_held_request("1h").await;
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("second signal: exiting now"), "{log}");
    held.abort();
}

#[tokio::test]
async fn logs_hold_no_key_assertion_or_token_even_at_trace_level() {
    let mock = mock().await;
    mock.add_rule("proj-demo", "2b0c1a7e-5d4f-4e3a-8b2c-1d0e9f8a7b6c");
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.insert("RUST_LOG".into(), "trace".into());
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    let rule = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/2b0c1a7e-5d4f-4e3a-8b2c-1d0e9f8a7b6c",
        process.proxy
    );
    assert_eq!(get(&rule).await.status, StatusCode::OK);
    // A 401 and a forced renewal, so those paths log too.
    mock.revoke_all_tokens();
    assert_eq!(get(&rule).await.status, StatusCode::OK);
    let other = rule.replace("proj-demo", "proj-other");
    assert_eq!(get(&other).await.status, StatusCode::FORBIDDEN);
    assert_eq!(mock.counters().tokens_issued, 2);

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0));
    assert!(
        log.contains("\"level\":\"TRACE\""),
        "trace logging is off:\n{log}"
    );
    assert!(
        log.contains("\"message\":\"proxied\""),
        "no per-request log line:\n{log}"
    );

    let key = fixture("rsa2048.pkcs8.pem");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!log.contains(line), "a key line is in the log");
    }
    assert!(!log.contains("eyJ"), "an assertion (JWT) is in the log");
    assert!(!log.contains("mock-"), "an access token is in the log");
    assert!(
        log.contains("the service answered 403"),
        "the 403 hint is missing"
    );
}

#[tokio::test]
async fn sighup_reloads_the_credentials_file_at_once() {
    let mock = mock().await;
    let key = lanyard::mock::generate_rsa_key().unwrap();
    mock.add_account(lanyard::mock::MockAccount {
        client_id: "sa-rotated".into(),
        organization_id: ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec!["verifications.api".into()],
        projects: vec!["proj-demo".into()],
    });
    let dir = tempfile::tempdir().unwrap();
    let vars = settings(&mock, dir.path(), &[]);
    let file = vars["SA_CREDENTIALS_FILE"].clone();
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    process.signal("-HUP");
    process
        .wait_for_log("SIGHUP: the credentials file is unchanged")
        .await;

    let rotated = serde_json::json!({
        "type": "service_account",
        "organization_id": ORGANIZATION_ID,
        "client_id": "sa-rotated",
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    });
    std::fs::write(&file, rotated.to_string()).unwrap();
    process.signal("-HUP");
    let reloaded = process
        .wait_for_log("credentials file changed: new credentials in use")
        .await;
    assert_eq!(reloaded["fields"]["client_id"], "sa-rotated");
    assert_eq!(reloaded["fields"]["previous_client_id"], CLIENT_ID);
    let renewed = process.wait_for_log("token obtained").await;
    assert_eq!(renewed["fields"]["generation"], 2);
    assert_eq!(
        mock.last_accepted().map(|a| a.claims["iss"].clone()),
        Some("sa-rotated".into())
    );

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains(key.private_pem.expose().lines().nth(1).unwrap()));
}

#[tokio::test]
async fn sighup_with_no_credentials_file_stops_gracefully() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut vars = settings(&mock, dir.path(), &[]);
    vars.remove("SA_CREDENTIALS_FILE");
    vars.extend(env(&[
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_ORGANIZATION_ID", ORGANIZATION_ID),
        ("SA_PRIVATE_KEY", &fixture("rsa2048.pkcs8.pem")),
        ("SA_IAM_AUDIENCE", &mock.audience()),
        ("SA_TOKEN_URI", &mock.token_url()),
    ]));
    let mut process = Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    process.signal("-HUP");
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("no credentials file to reload"), "{log}");
    assert!(log.contains("every in-flight request finished"), "{log}");
}
