//! The verifier page in a real browser: headless Chromium, driven by
//! playwright-core from `tests/browser/*.test.mjs`, against the demo's
//! verifier and mock wallet started in this process. What the browser
//! tests check is said at the top of each file.
//!
//! Needs Node.js 20+ and npm (`npm ci` runs in `tests/browser` on first
//! use, tests/it/support/node.rs) and Debian's chromium; scripts/test
//! installs both.

use crate::support;
use crate::support::relying_party;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use lanyard::commands::demo::Demo;

/// Debian's Chromium; playwright-core brings no browser of its own.
/// The whole browser suite takes one to five minutes on two cores, as
/// much else runs on them; a hang fails the test rather than the CI run.
const SUITE_TIMEOUT: Duration = Duration::from_secs(480);

/// The test files, named as the runner takes them: node 20 finds them in
/// a folder, but node 21 and later take only files or globs.
fn test_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.to_str().is_some_and(|p| p.ends_with(".test.mjs")))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.test.mjs in {}", dir.display());
    files
}

/// Where the screenshots go, for people to look at: `target/browser-screenshots`.
fn screenshot_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("browser-screenshots")
}

/// `lanyard demo` in-process with `extra` settings, holding its first
/// token. The files start about 16 sessions from one address over a
/// minute (tests/browser/support.mjs), beyond the default per-client rate:
/// raised here, not in the page.
async fn start_demo(extra: &[(&str, &str)]) -> Demo {
    let mut settings: HashMap<String, String> =
        HashMap::from([("LANYARD_VERIFIER_CLIENT_STARTS".into(), "30/1m".into())]);
    settings.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    support::demo_holding_a_token(&support::demo_config(&settings), None).await
}

/// The shop's own brand as the page must show it, for
/// `tests/browser/brand.test.mjs`: its name, its accent as CSS computes
/// it, its purpose and its label by language.
fn client_brand() -> String {
    let rgb = |at: usize| u8::from_str_radix(&relying_party::WINE_ACCENT[at..at + 2], 16).unwrap();
    serde_json::json!({
        "name": relying_party::WINE,
        "accent": format!("rgb({}, {}, {})", rgb(1), rgb(3), rgb(5)),
        "purpose": {"en": relying_party::WINE_PURPOSE[0], "de": relying_party::WINE_PURPOSE[1]},
        "label": {"en": relying_party::WINE_LABEL[0], "de": relying_party::WINE_LABEL[1]},
    })
    .to_string()
}

/// Where the browser tests find what they test, as they read it from
/// their environment (tests/browser/support.mjs): the demo, the demo in
/// the example brand, and a login of a client with a brand of its own
/// (`authorize` of its `client_id` parameter) and of one without.
fn suite_env(
    demo: &Demo,
    branded: &Demo,
    authorize: impl Fn(&str) -> String,
) -> Vec<(&'static str, String)> {
    let verifier = demo.process.verifier_addr.expect("the verifier listens");
    let branded_verifier = branded.process.verifier_addr.expect("the verifier listens");
    vec![
        ("BROWSER_TEST_VERIFIER_URL", format!("http://{verifier}/")),
        (
            "BROWSER_TEST_CSP",
            lanyard::verifier::CONTENT_SECURITY_POLICY.into(),
        ),
        ("BROWSER_TEST_CHROMIUM", support::node::CHROMIUM.into()),
        ("BROWSER_TEST_SHOP_URL", demo.mock.shop_url()),
        (
            "BROWSER_TEST_BRANDED_URL",
            format!("http://{branded_verifier}/"),
        ),
        ("BROWSER_TEST_BRANDED_SHOP_URL", branded.mock.shop_url()),
        (
            "BROWSER_TEST_CLIENT_BRANDED_URL",
            authorize("client_id=shop"),
        ),
        (
            "BROWSER_TEST_CLIENT_PLAIN_URL",
            authorize("client_id=plain"),
        ),
        ("BROWSER_TEST_CLIENT_BRAND", client_brand()),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verifier_page_works_in_headless_chromium() {
    // Blocking, but nothing is served yet.
    let browser_dir = support::node::browser();

    let demo = start_demo(&[]).await;
    // The same demo in the example brand shipped in config/
    // (tests/browser/brand.test.mjs).
    let brand_file = format!("{}/config/brand.example.toml", env!("CARGO_MANIFEST_DIR"));
    let branded = start_demo(&[("LANYARD_VERIFIER_BRAND_FILE", &brand_file)]).await;
    // A provider whose client `shop` has a brand of its own.
    let clients_dir = tempfile::tempdir().unwrap();
    let clients = relying_party::branded_clients_file(clients_dir.path());
    let provider = crate::oidc::Provider::start(&[
        ("LANYARD_OIDC_CLIENTS_FILE", clients.as_str()),
        ("LANYARD_VERIFIER_BRAND_FILE", brand_file.as_str()),
    ])
    .await;
    let authorize = |client: &str| {
        let query = relying_party::shop_query("").replace("client_id=shop", client);
        provider.url(&format!("/authorize?{query}"))
    };

    let started = Instant::now();
    let run = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec"])
        .args(test_files(&browser_dir))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .envs(suite_env(&demo, &branded, authorize))
        .env("BROWSER_TEST_SCREENSHOTS", screenshot_dir())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SUITE_TIMEOUT, run)
        .await
        .unwrap_or_else(|_| panic!("the browser tests ran over {SUITE_TIMEOUT:?}"))
        .unwrap_or_else(|err| {
            panic!(
                "cannot run node: {err}\n{}",
                support::node::install_hint(&browser_dir)
            )
        });
    let tests = support::node::passed_report(&output, "");

    // The server saw what the browser did: sessions presented and declined
    // through the mock wallet's page.
    let outcome = |label: &str| {
        demo.process
            .metrics
            .verifier_sessions
            .with_label_values(&[label])
            .get()
    };
    assert!(outcome("verified") >= 1, "no session ended verified");
    assert!(outcome("declined") >= 1, "no session ended declined");
    eprintln!(
        "{} browser tests passed in {:.1?}; screenshots in {}",
        tests,
        started.elapsed(),
        screenshot_dir().display()
    );
}
