//! The process's limits on its host: the proxy's accept queue fits the
//! connection limit, a low open-file limit lowers it, a Unix socket
//! leaves only the admin listener on TCP, and the process is undumpable.

use super::*;

/// The accept queue's length of the listener on `addr`, as `ss` reports it
/// (its Send-Q column, for a listening socket).
fn backlog(addr: &str) -> u64 {
    let port = addr.rsplit(':').next().unwrap();
    let output = std::process::Command::new("ss")
        .args(["-ltnH", &format!("sport = :{port}")])
        .output()
        .expect("ss runs (Debian: apt-get install iproute2)");
    let line = text(&output.stdout);
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"LISTEN"), "{line}");
    fields[2].parse().unwrap()
}

#[tokio::test]
async fn the_proxy_accept_queue_fits_the_connection_limit() {
    // A client pool warming up opens its connections at once; a queue
    // shorter than the limit drops SYNs, and each dropped one costs its
    // client a second before the retransmit.
    let dir = tempfile::tempdir().unwrap();
    let mock = mock().await;
    let vars = settings(&mock, dir.path(), &[("LANYARD_MAX_CONNECTIONS", "2000")]);
    let process = Process::start(vars).await;
    let somaxconn: u64 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let proxy = process.proxy.trim_start_matches("http://");
    assert_eq!(backlog(proxy), 2000.min(somaxconn));
    let admin = process.admin.trim_start_matches("http://");
    assert_eq!(backlog(admin), 128.min(somaxconn));
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test]
async fn a_low_open_file_limit_lowers_the_connection_limit_so_probes_still_get_answers() {
    // 600 descriptors cannot hold the defaults (1024 client, 256 upstream
    // and 64 admin connections, 128 spare): lanyard serves 600 - 448 = 152
    // client connections, and the admin listener keeps its own.
    let dir = tempfile::tempdir().unwrap();
    let mock = mock().await;
    let vars = settings(&mock, dir.path(), &[]);
    let mut child = Command::new("bash")
        .args([
            "-c",
            r#"ulimit -n 600 && exec "$0" run"#,
            env!("CARGO_BIN_EXE_lanyard"),
        ])
        .env_clear()
        .envs(vars)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("LANYARD_LISTEN", "127.0.0.1:0")
        .env("LANYARD_ADMIN_LISTEN", "127.0.0.1:0")
        .env("LANYARD_LOG_FORMAT", "json")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let lines = forward_lines(child.stderr.take().unwrap());
    let mut process = Process {
        child,
        proxy: String::new(),
        admin: String::new(),
        lines,
        stdout: None,
        log: Vec::new(),
    };
    let warning = process
        .wait_for_log("the open-file limit cannot hold LANYARD_MAX_CONNECTIONS and LANYARD_MAX_UPSTREAM_CONNECTIONS together; serving at most max_connections client connections. Raise the hard limit (ulimit -Hn, LimitNOFILE=) or lower the settings")
        .await;
    assert_eq!(warning["fields"]["max_connections"], 152);
    let started = process.wait_for_log("lanyard started").await;
    let proxy = started["fields"]["proxy"].as_str().unwrap().to_string();
    let admin = format!("http://{}", started["fields"]["admin"].as_str().unwrap());

    // More clients than fit: the proxy refuses the surplus, and the
    // descriptors left over still answer the probes.
    let mut held = Vec::new();
    for _ in 0..300 {
        held.push(tokio::net::TcpStream::connect(&proxy).await.unwrap());
    }
    for _ in 0..3 {
        assert_eq!(
            get(&format!("{admin}/healthz")).await.status,
            StatusCode::OK
        );
    }
    drop(held);
    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!log.contains("accept failed"), "{log}");
}

/// TCP listeners the process `pid` holds, as `ss` lists them.
fn tcp_listeners_of(pid: u32) -> Vec<String> {
    let out = std::process::Command::new("ss")
        .args(["-Hltnp"])
        .output()
        .expect("ss (iproute2) runs");
    text(&out.stdout)
        .lines()
        .filter(|line| line.contains(&format!("pid={pid},")))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn on_a_unix_socket_only_the_admin_listener_is_on_tcp_and_sigterm_removes_the_file() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("lanyard.sock");
    let listen = format!("unix:{}", socket.display());
    let vars = settings(&mock, dir.path(), &[("LANYARD_LISTEN", &listen)]);
    let mut process = Process::launch(&["run"], vars, "json", false);
    let started = process.wait_for_log("lanyard started").await;
    assert_eq!(
        started["fields"]["proxy_socket"],
        socket.display().to_string()
    );
    assert!(started["fields"]["proxy"].is_null(), "{started}");
    let admin = started["fields"]["admin"].as_str().unwrap().to_owned();
    let pid = process.child.id().unwrap();
    let listeners = tcp_listeners_of(pid);
    assert_eq!(listeners.len(), 1, "only the admin listener: {listeners:?}");
    assert!(listeners[0].contains(&admin), "{listeners:?}");
    assert!(socket.exists());

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(!socket.exists(), "the socket file outlived the process");
}

/// lanyard makes itself undumpable before it reads a key: no other
/// process of its user can read its memory. Run as an unprivileged user,
/// since root reads any process's memory anyway; the kernel gives an
/// undumpable process's `/proc/PID/mem` to root, a dumpable one's to its
/// user.
#[tokio::test]
async fn the_process_is_undumpable_so_its_user_cannot_read_its_memory() {
    use std::os::unix::fs::MetadataExt as _;
    const NOBODY: u32 = 65534;
    let mut child = Command::new("setpriv")
        .args([
            &format!("--reuid={NOBODY}"),
            &format!("--regid={NOBODY}"),
            "--clear-groups",
            env!("CARGO_BIN_EXE_lanyard"),
            "run",
        ])
        .env_clear()
        .envs(env(&[
            ("DEMO_MOCK", "true"),
            ("LANYARD_LISTEN", "127.0.0.1:0"),
            ("LANYARD_ADMIN_LISTEN", "127.0.0.1:0"),
            ("LANYARD_VERIFIER_LISTEN", "127.0.0.1:0"),
            ("LANYARD_LOG_FORMAT", "json"),
        ]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("setpriv runs lanyard");
    let mut lines = forward_lines(child.stderr.take().unwrap());
    let started = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Some(line) = lines.recv().await {
            if line.contains("lanyard started") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(started, Ok(true), "lanyard started as user {NOBODY}");
    let pid = child.id().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("Uid:") && l.contains(&NOBODY.to_string())),
        "runs as {NOBODY}: {status}"
    );
    let mem = std::fs::metadata(format!("/proc/{pid}/mem")).unwrap();
    assert_eq!(
        mem.uid(),
        0,
        "undumpable: /proc/PID/mem is root's, not its user's"
    );
    child.kill().await.unwrap();
}
