//! `lanyard demo`: the banner's curl lines work as printed, against the
//! embedded mock through the sidecar.

use std::collections::HashMap;
use std::time::Duration;

use lanyard::config::{Config, Flags, Requirement};
use lanyard::demo::{Demo, DemoListeners};
use tokio::net::TcpListener;

#[tokio::test]
async fn banner_curl_lines_start_poll_and_show_a_403() {
    let config = Config::load(
        &Flags::default(),
        &HashMap::<String, String>::new(),
        Requirement::Demo,
    )
    .unwrap();
    let listeners = DemoListeners {
        admin: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        proxy: Some(TcpListener::bind("127.0.0.1:0").await.unwrap().into()),
        verifier: Some(TcpListener::bind("127.0.0.1:0").await.unwrap()),
    };
    let demo = Demo::start(&config, listeners, &lanyard::otel::Telemetry::off())
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(10),
        demo.process.tokens.state().wait_for(|s| s.generation >= 1),
    )
    .await
    .unwrap()
    .unwrap();

    let banner = demo.banner();
    let script: Vec<&str> = banner
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("TX=") || l.starts_with("curl "))
        .collect();
    assert_eq!(script.len(), 3, "{banner}");
    let output = tokio::process::Command::new("bash")
        .args(["-c", &format!("set -eu\n{}", script.join("\n"))])
        .output()
        .await
        .expect("bash and curl are installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let mut lines = stdout.lines();
    let tx = lines.next().unwrap();
    assert!(
        uuid::Uuid::parse_str(tx).is_ok(),
        "transaction id: {stdout}"
    );
    let poll: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(poll["transaction_id"], tx);
    assert_eq!(poll["status"], "pending");
    let rest: Vec<&str> = lines.collect();
    assert!(rest[0].starts_with("HTTP/1.1 403"), "{stdout}");
    let body = rest.last().unwrap();
    assert!(body.contains("project_group"), "{stdout}");
    assert_eq!(demo.mock.counters().tokens_issued, 1);
}
