//! `lanyard demo`: the banner's curl lines work as printed, against the
//! embedded mock through the sidecar, on TCP and on a Unix socket.

use std::collections::HashMap;
use std::time::Duration;

use lanyard::config::{Config, Flags, Requirement};
use lanyard::demo::{Demo, DemoListeners};
use lanyard::process::{ProxyListener, bind_proxy};
use tokio::net::TcpListener;

#[tokio::test]
async fn banner_curl_lines_start_poll_and_show_a_403() {
    let config = demo_config(HashMap::new());
    let proxy = TcpListener::bind("127.0.0.1:0").await.unwrap().into();
    banner_curl_lines_work(&config, proxy).await;
}

/// With the proxy on a Unix socket the lines give curl the socket, its
/// path quoted for the shell (this one has a space).
#[tokio::test]
async fn banner_curl_lines_work_on_a_unix_socket() {
    let dir = tempfile::Builder::new()
        .prefix("demo dir")
        .tempdir()
        .unwrap();
    let socket = dir.path().join("lanyard.sock");
    let listen = format!("unix:{}", socket.display());
    let config = demo_config(HashMap::from([("LANYARD_LISTEN".into(), listen)]));
    let banner = banner_curl_lines_work(&config, bind_proxy(&config).unwrap()).await;
    assert!(
        banner.contains(&format!("curl --unix-socket '{}' ", socket.display())),
        "{banner}"
    );
}

fn demo_config(env: HashMap<String, String>) -> Config {
    Config::load(&Flags::default(), &env, Requirement::Demo).unwrap()
}

/// Runs the demo on `proxy` and the banner's lines in bash; the banner.
async fn banner_curl_lines_work(config: &Config, proxy: ProxyListener) -> String {
    let listeners = DemoListeners {
        admin: TcpListener::bind("127.0.0.1:0").await.unwrap(),
        proxy: Some(proxy),
        verifier: Some(TcpListener::bind("127.0.0.1:0").await.unwrap()),
    };
    let demo = Demo::start(config, listeners, &lanyard::otel::Telemetry::off())
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
    banner
}
