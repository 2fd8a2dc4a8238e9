//! The binary with `SA_CREDENTIALS_DIR`: start-up refuses what it cannot
//! serve (exit 2, each problem naming the setting and the files),
//! `lanyard check` reports every account, `lanyard token --organization`
//! prints that organization's token, and nothing lanyard prints, logs or
//! serves holds a key or a token.

use super::*;

use std::collections::HashMap;

use http::StatusCode;
use support::child;

/// A command run to its end, bounded: a start-up that should have been
/// refused would otherwise run until killed.
async fn run_to_end(args: &[&str], vars: &HashMap<String, String>) -> std::process::Output {
    tokio::time::timeout(Duration::from_secs(30), lanyard(args, vars))
        .await
        .unwrap_or_else(|_| panic!("`lanyard {}` still running", args.join(" ")))
}

/// Runs `lanyard <args>`, expects exit 2 with nothing on stdout, and
/// returns the problem lines, each without its `lanyard: `.
async fn refused(args: &[&str], vars: &HashMap<String, String>) -> Vec<String> {
    let out = run_to_end(args, vars).await;
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    assert!(!stderr.contains("BEGIN"), "key material in: {stderr}");
    assert_no_key(&stderr);
    stderr
        .lines()
        .map(|line| {
            line.strip_prefix("lanyard: ")
                .unwrap_or_else(|| panic!("not a problem line: {line}"))
                .to_string()
        })
        .collect()
}

/// No line of the fixture key's body in `out`.
fn assert_no_key(out: &str) {
    let key = fixture("rsa2048.pkcs8.pem");
    for line in key.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!out.contains(line), "key material in:\n{out}");
    }
}

/// `lanyard run`'s settings on free ports.
fn run_settings(fleet: &Fleet, default: bool) -> HashMap<String, String> {
    let mut vars = fleet.settings(default);
    vars.insert("LANYARD_LISTEN".into(), "127.0.0.1:0".into());
    vars.insert("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into());
    vars
}

fn path_of(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[tokio::test]
async fn start_up_refuses_two_files_for_one_organization_naming_both() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut twin = fleet.a.clone();
    twin.client = "sa-a-twin";
    write(&fleet.dir(), "z-twin.json", &twin.file(&fleet.mock));

    let lines = refused(&["run"], &run_settings(&fleet, false)).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("SA_CREDENTIALS_DIR ("), "{line}");
    assert!(
        line.contains("organization `org-A` has more than one credentials file")
            && line.contains(&path_of(&fleet.dir(), "a.json"))
            && line.contains(&path_of(&fleet.dir(), "z-twin.json")),
        "{line}"
    );
}

#[tokio::test]
async fn start_up_refuses_a_bad_file_naming_it() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    write(
        &fleet.dir(),
        "broken.json",
        "{\"private_key\": \"-----BEGIN",
    );
    let mut no_client: serde_json::Value =
        serde_json::from_str(&fleet.c.file(&fleet.mock)).unwrap();
    no_client.as_object_mut().unwrap().remove("client_id");
    write(&fleet.dir(), "c.json", &no_client.to_string());

    let lines = refused(&["run"], &run_settings(&fleet, false)).await;
    let broken = path_of(&fleet.dir(), "broken.json");
    let c = path_of(&fleet.dir(), "c.json");
    assert_eq!(lines.len(), 2, "{lines:?}");
    for (line, file) in lines.iter().zip([&broken, &c]) {
        assert!(line.starts_with("SA_CREDENTIALS_DIR ("), "{line}");
        assert!(line.contains(file.as_str()), "{line}");
    }
    assert!(lines[0].contains("not valid JSON"), "{}", lines[0]);
    assert!(lines[1].contains("client_id"), "{}", lines[1]);
}

#[tokio::test]
async fn start_up_refuses_a_file_for_the_default_accounts_organization() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut same = fleet.b.clone();
    same.org = ORGANIZATION_ID;
    write(&fleet.dir(), "default-too.json", &same.file(&fleet.mock));

    let vars = run_settings(&fleet, true);
    let lines = refused(&["run"], &vars).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    let line = &lines[0];
    assert!(line.starts_with("SA_CREDENTIALS_DIR ("), "{line}");
    assert!(
        line.contains(&format!("`{ORGANIZATION_ID}`"))
            && line.contains(&path_of(&fleet.dir(), "default-too.json"))
            && line.contains(&vars["SA_CREDENTIALS_FILE"]),
        "{line}"
    );
}

#[tokio::test]
async fn start_up_refuses_an_sa_override_with_the_directory_alone() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut vars = run_settings(&fleet, false);
    vars.insert("SA_CLIENT_ID".into(), "sa-a".into());
    vars.insert("SA_TOKEN_URI".into(), fleet.mock.token_url());

    let lines = refused(&["run"], &vars).await;
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("SA_CLIENT_ID ("), "{}", lines[0]);
    assert!(lines[1].starts_with("SA_TOKEN_URI ("), "{}", lines[1]);
    assert!(lines[0].contains("SA_CREDENTIALS_FILE"), "{}", lines[0]);
}

#[tokio::test]
async fn the_verifier_refuses_the_directory() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut vars = fleet.settings(true);
    vars.insert("LANYARD_VERIFIER_LISTEN".into(), "127.0.0.1:0".into());
    vars.insert("LANYARD_ADMIN_LISTEN".into(), "127.0.0.1:0".into());

    let lines = refused(&["verifier"], &vars).await;
    let line = lines
        .iter()
        .find(|line| line.starts_with("SA_CREDENTIALS_DIR ("))
        .unwrap_or_else(|| panic!("no SA_CREDENTIALS_DIR problem: {lines:?}"));
    assert!(
        line.contains("`lanyard verifier` serves one service account"),
        "{line}"
    );
}

#[tokio::test]
async fn check_reports_every_organization_and_account() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let vars = fleet.settings(false);
    let dir = fleet.dir();

    let out = run_to_end(&["check"], &vars).await;
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines.contains(
            &format!(
                "  ok    accounts     SA_CREDENTIALS_DIR {}: 3 account(s), serving organization(s) org-A, org-B, org-C",
                dir.display()
            )
            .as_str()
        ),
        "{stdout}"
    );
    for (name, member) in [("a", &fleet.a), ("b", &fleet.b), ("c", &fleet.c)] {
        let account = format!(
            "  ok    account      {}: organization {}, client id {}, RSA 2048-bit key",
            path_of(&dir, &format!("{name}.json")),
            member.org,
            member.client
        );
        assert!(
            lines.contains(&account.as_str()),
            "no `{account}`:\n{stdout}"
        );
    }
    let tokens = lines
        .iter()
        .filter(|l| l.starts_with("  ok    token"))
        .count();
    assert_eq!(tokens, 3, "{stdout}");
    assert_eq!(lines.last(), Some(&"all checks passed"));
    assert_eq!(fleet.mock.counters().tokens_issued, 3);
    assert_no_key(&stdout);
    assert!(!stdout.contains("mock-"), "a token in:\n{stdout}");
}

#[tokio::test]
async fn token_for_an_organization_prints_that_accounts_token() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let vars = fleet.settings(true);

    for (org, client) in [
        (fleet.b.org, fleet.b.client),
        (fleet.c.org, fleet.c.client),
        (ORGANIZATION_ID, CLIENT_ID),
    ] {
        let out = run_to_end(&["token", "--organization", org], &vars).await;
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{org}: {stderr}");
        let token = text(&out.stdout);
        let token = token.strip_suffix('\n').expect("one line");
        assert_eq!(
            fleet.mock.token_owner(token).as_deref(),
            Some(client),
            "{org}"
        );
        assert!(!stderr.contains(token), "{stderr}");
        assert_no_key(&stderr);
    }

    let lines = refused(&["token", "--organization", "org-Z"], &vars).await;
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("--organization org-Z: no account serves this organization"),
        "{}",
        lines[0]
    );
}

/// `lanyard run` at trace level, walked through every path that handles
/// a key or a token with many accounts: tokens fetched on demand, a 403
/// of lanyard's own, a file refused, a file removed, `/readyz` and
/// `/metrics`. Neither the log nor any answer holds a key line or a token.
#[tokio::test]
async fn no_log_or_answer_holds_a_key_or_a_token() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut vars = fleet.settings(true);
    vars.insert("RUST_LOG".into(), "trace".into());
    let dir = fleet.dir();
    let (a_path, b_path) = (fleet.a.rule_path(), fleet.b.rule_path());
    let c_pem = fleet.c.pem.clone();
    let mock = &fleet.mock;
    let mut process = child::Process::start(vars).await;
    process.wait_for_log("token obtained").await;

    let mut answers = Vec::new();
    let mut tokens = Vec::new();
    for path in [&a_path, &b_path] {
        let answer = sidecar::get(&format!("{}{path}", process.proxy)).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}");
        let seen = mock.last_api_request().unwrap();
        let bearer = seen.headers[http::header::AUTHORIZATION].to_str().unwrap();
        tokens.push(bearer.trim_start_matches("Bearer ").to_string());
    }
    let unknown = sidecar::get(&format!("{}/organizations/org-Z/x", process.proxy)).await;
    assert_eq!(unknown.status, StatusCode::FORBIDDEN);
    answers.push(text(&unknown.body));
    write(
        &dir,
        "broken.json",
        &format!("{{\"private_key\": \"{c_pem}"),
    );
    process
        .wait_for_line("credentials file refused", |l| {
            l.contains("credentials file refused")
        })
        .await;
    std::fs::remove_file(dir.join("a.json")).unwrap();
    process
        .wait_for_line("credentials file removed", |l| {
            l.contains("credentials file removed")
        })
        .await;
    for endpoint in ["readyz", "metrics"] {
        let answer = sidecar::get(&format!("{}/{endpoint}", process.admin)).await;
        assert_eq!(answer.status, StatusCode::OK, "{endpoint}");
        answers.push(text(&answer.body));
    }

    process.terminate();
    let (code, log) = process.finish().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("\"level\":\"TRACE\""), "trace logging is off");
    let everything = format!("{log}\n{}", answers.join("\n"));
    for line in c_pem.lines().filter(|l| !l.starts_with("-----")) {
        assert!(!everything.contains(line), "C's key in the output");
    }
    assert_no_key(&everything);
    assert!(!everything.contains("BEGIN"), "a PEM header in the output");
    assert!(!everything.contains("eyJ"), "an assertion in the output");
    for token in &tokens {
        assert!(
            !everything.contains(token.as_str()),
            "a token in the output"
        );
    }
    assert!(!everything.contains("mock-"), "a token in the output");
}
