//! Documentation that runs: every shell block of README.md, docs/ and
//! deploy/README.md is run as its info string says, or says why not
//! (docs/tests.md, "Documentation that runs"), so that a documented
//! command cannot break unnoticed.

mod blocks;
mod docker;
mod session;

use std::path::Path;

use blocks::Plan;
use session::{Failure, Session};

/// The pages a user reads commands from.
fn pages() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut pages = vec!["README.md".to_string()];
    let mut docs: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages.push("deploy/README.md".to_string());
    pages
}

/// Runs the blocks of `markdown` (the page `file`) in order, in a session
/// of their own; every block that failed.
async fn run_page(file: &str, markdown: &str) -> Vec<Failure> {
    let blocks = match blocks::blocks(file, markdown) {
        Ok(blocks) => blocks,
        Err(problem) => {
            return vec![Failure {
                place: file.to_string(),
                problem,
                output: String::new(),
            }];
        }
    };
    let mut session = Session::new().await;
    let mut failures = Vec::new();
    for block in &blocks {
        if let Err(failure) = session.run(block).await {
            failures.push(failure);
        }
    }
    failures
}

fn report(failures: &[Failure]) -> String {
    failures.iter().map(|f| f.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_shell_block_of_the_guide_runs_or_says_why_not() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut failures = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let markdown = std::fs::read_to_string(root.join(&page)).unwrap();
        ran += blocks::blocks(&page, &markdown)
            .unwrap_or_default()
            .iter()
            .filter(|block| !matches!(block.plan(), Ok(Plan::NotShell | Plan::NoRun(_)) | Err(_)))
            .count();
        failures.extend(run_page(&page, &markdown).await);
    }
    assert!(failures.is_empty(), "{}", report(&failures));
    assert!(ran > 10, "only {ran} blocks ran");
}

/// The runner itself: a planted broken command fails, named by its page and
/// line, with what it printed.
#[tokio::test]
async fn a_broken_command_fails_naming_its_page_and_line() {
    let page =
        "# Planted\n\n```sh\nlanyard --version\n```\n\n```sh\nlanyard no-such-command\n```\n";
    let failures = run_page("planted.md", page).await;
    assert_eq!(failures.len(), 1, "{}", report(&failures));
    let shown = failures[0].to_string();
    assert!(shown.starts_with("planted.md:7: exited with"), "{shown}");
    assert!(
        shown.contains("no-such-command"),
        "its output shown: {shown}"
    );
}

#[tokio::test]
async fn an_unmarked_block_or_a_reasonless_no_run_fails() {
    let page =
        "```\nlanyard run\n```\n\n```sh no-run\nlanyard run\n```\n\n```text\nlanyard run\n```\n";
    let failures = run_page("planted.md", page).await;
    let shown = report(&failures);
    assert_eq!(failures.len(), 2, "{shown}");
    assert!(
        shown.contains("planted.md:1: a block with no info string"),
        "{shown}"
    );
    assert!(
        shown.contains("planted.md:5: `no-run` without a reason"),
        "{shown}"
    );
}

/// A server's block that stops before its probe answers fails with its
/// output; one that answers lives on for the page's next blocks, on a port
/// of the runner's choosing, its printed port read into a placeholder.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_run_until_their_probe_answers_and_serve_the_page() {
    let page = "```sh server probe=http://127.0.0.1:9090/healthz\ncargo run -- demo --no-such-flag\n```\n\n\
                ```sh server probe=http://127.0.0.1:9090/readyz MOCK=mock\ncargo run -- demo\n```\n\n\
                ```sh\ncurl -sf http://127.0.0.1:8080/organizations/org-demo/projects/proj-demo/verifications/0b7c6d2e-4a1f-4c3b-9a57-2f1e8d9c6b10\n\
                curl -s http://127.0.0.1:MOCK/mock/wallet/nothing -o /dev/null -w '%{http_code}' | grep -q 404\n```\n";
    let failures = run_page("planted.md", page).await;
    let shown = report(&failures);
    assert_eq!(failures.len(), 1, "{shown}");
    assert!(shown.starts_with("planted.md:1: exited with"), "{shown}");
    assert!(shown.contains("--no-such-flag"), "{shown}");
}

/// A `docker run` of lanyard's image runs as the image runs the binary:
/// without the settings the image does not have, it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn docker_lines_run_as_the_image_runs_the_binary() {
    let page = "```sh docker probe=http://127.0.0.1:8080/\n\
                docker run --rm -p 8080:8080 -e DEMO_MOCK=true lanyard:0.1.0 verifier\n\
                docker run -d --name app my-app:1.0\n```\n\n\
                ```sh docker probe=http://127.0.0.1:8080/\n\
                docker run --rm -p 8080:8080 lanyard:0.1.0 verifier   # no settings\n```\n";
    let failures = run_page("planted.md", page).await;
    let shown = report(&failures);
    assert_eq!(failures.len(), 1, "{shown}");
    assert!(
        shown.starts_with("planted.md:6: `lanyard verifier` exited with"),
        "{shown}"
    );
}
