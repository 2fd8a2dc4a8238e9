//! `lanyard verifier` as replicas behind a load balancer (CONTRACT §9: any
//! replica answers any session, and a session outlives the restart of any
//! of them). Two processes of the binary with the same settings against
//! one in-process mock, Debian's haproxy going round-robin in front:
//!
//! - a session started through the balancer is reached by every poll,
//!   whichever replica answers it; each replica answers, on its own port,
//!   a session the other started; no other browser gets it from either;
//!   the claims come through either once the wallet presents;
//! - a session outlives the restart (SIGTERM, exit 0, started again on the
//!   same port) of the replica that started it;
//! - a client polling through the balancer as fast as it likes while every
//!   replica is restarted, one after the other, has every poll answered
//!   with the session;
//! - the page, in headless Chromium (`tests/browser/replicas/`), ends with
//!   the claims though every replica restarted, one after the other, while
//!   the person was in their wallet, and none of its polls was answered
//!   404.
//!
//! Needs Debian's haproxy; the page test also Debian's chromium and
//! Node.js 20+ with npm. scripts/test installs them.

use crate::support;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use http::{Method, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::json;
use support::replicas::{self, Fleet, served_by, status, until_ended};
use support::sidecar::Answer;
use support::verifier::Browser;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, oneshot};

/// Debian's Chromium; playwright-core brings no browser of its own.
/// The page test, a file `tests/it/browser.rs` does not run (it runs the
/// `*.test.mjs` directly in `tests/browser` against the demo).
const PAGE_TEST: &str = "tests/browser/replicas/rolling-restart.test.mjs";
/// Between one answer and the next request of the client that polls
/// through a rolling restart: often enough to land in every gap.
const POLL_GAP: Duration = Duration::from_millis(10);
/// The page test takes about 10 s on two cores; a hang fails the test
/// rather than the CI run.
const PAGE_TEST_LIMIT: Duration = Duration::from_secs(180);

/// A refusal that says nothing: 404 `not_found`, as for a session that
/// never was.
fn assert_not_found(answer: &Answer, what: &str) {
    assert_eq!(
        answer.status,
        StatusCode::NOT_FOUND,
        "{what}: {:?}",
        answer.body
    );
    assert_eq!(answer.headers["lanyard-error"], "not_found", "{what}");
    assert_eq!(answer.json()["error"], "not_found", "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_started_on_one_replica_is_answered_by_every_replica() {
    let mock = support::mock().await;
    let fleet = Fleet::start(&mock, 2).await;
    let through = fleet.balancer.url.as_str();
    let [a, b] = [&fleet.replicas[0], &fleet.replicas[1]];

    let mut browser = Browser::default();
    let (session, _) = replicas::start(&mut browser, through).await;
    let mut answered_by = BTreeSet::new();
    for poll in 1..=8 {
        let answer = status(&browser, through, &session.handle).await;
        assert_eq!(answer.status, 200, "poll {poll}: {:?}", answer.body);
        assert_eq!(answer.json()["status"], "pending", "poll {poll}");
        answered_by.insert(served_by(&answer));
    }
    assert_eq!(answered_by, fleet.names(), "round-robin reached both");

    // Asked directly, so that it is the other replica that answers.
    for (starter, other) in [(a, b), (b, a)] {
        let mut browser = Browser::default();
        let (session, _) = replicas::start(&mut browser, &starter.url()).await;
        let answer = status(&browser, &other.url(), &session.handle).await;
        assert_eq!(
            answer.status,
            200,
            "{} on a session {} started: {:?}\n{}",
            other.name,
            starter.name,
            answer.body,
            other.log()
        );
        assert_eq!(answer.json()["status"], "pending");
    }

    // Knowing the handle is not enough: no cookie, or another browser's.
    let mut stranger = Browser::default();
    for replica in [a, b] {
        let answer = status(&stranger, &replica.url(), &session.handle).await;
        assert_not_found(
            &answer,
            &format!("{} to a browser without a cookie", replica.name),
        );
    }
    replicas::start(&mut stranger, through).await;
    for replica in [a, b] {
        let answer = status(&stranger, &replica.url(), &session.handle).await;
        assert_not_found(&answer, &format!("{} to another browser", replica.name));
    }

    replicas::present(
        &mock,
        &session,
        &json!({"given_name": "Ada", "age_over_18": true}),
    )
    .await;
    let verified =
        json!({"status": "verified", "claims": {"given_name": "Ada", "age_over_18": true}});
    for base in [a.url(), b.url(), fleet.balancer.url.clone()] {
        let ended = until_ended(&browser, &base, &session.handle).await;
        assert_eq!(ended.status, 200, "{base}: {:?}", ended.body);
        assert_eq!(ended.json(), verified, "{base}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_outlives_the_restart_of_the_replica_that_started_it() {
    let mock = support::mock().await;
    let mut fleet = Fleet::start(&mock, 2).await;
    let mut browser = Browser::default();
    let (session, started) = replicas::start(&mut browser, &fleet.balancer.url).await;
    let starter = served_by(&started);
    let index = fleet
        .replicas
        .iter()
        .position(|r| r.name == starter)
        .unwrap_or_else(|| panic!("{starter} is not a replica"));

    fleet.restart(index).await;
    let restarted = &fleet.replicas[index];
    let pending = status(&browser, &restarted.url(), &session.handle).await;
    assert_eq!(
        pending.status,
        200,
        "{starter} after its restart: {:?}\n{}",
        pending.body,
        restarted.log()
    );
    assert_eq!(pending.json()["status"], "pending");

    replicas::present(&mock, &session, &json!({"given_name": "Grace"})).await;
    let ended = until_ended(&browser, &restarted.url(), &session.handle).await;
    assert_eq!(
        ended.json(),
        json!({"status": "verified", "claims": {"given_name": "Grace"}})
    );
}

/// A client polling as fast as it likes through a rolling restart: the
/// balancer sends each poll to a replica that is up, which answers the
/// session, whether that replica started it or has just started itself.
/// Each step of each replica's restart waits for polls of its own, so
/// that every moment of it is polled however slow the machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_poll_through_the_balancer_reaches_the_session_during_a_rolling_restart() {
    let mock = support::mock().await;
    let mut fleet = Fleet::start(&mock, 2).await;
    let mut browser = Browser::default();
    let (session, _) = replicas::start(&mut browser, &fleet.balancer.url).await;

    let (stop, mut stopped) = tokio::sync::watch::channel(false);
    let (polled, mut polls) = tokio::sync::watch::channel(0_usize);
    let through = fleet.balancer.url.clone();
    let handle = session.handle.clone();
    let poller = tokio::spawn(async move {
        let mut answers = Vec::new();
        while !*stopped.borrow_and_update() {
            answers.push(status(&browser, &through, &handle).await);
            polled.send_replace(answers.len());
            tokio::time::sleep(POLL_GAP).await;
        }
        (browser, answers)
    });
    // Fleet::restart's steps, for each replica in turn.
    for index in 0..fleet.replicas.len() {
        fleet.replicas[index].stop().await;
        more_polls(&mut polls).await;
        fleet.balancer.wait_until_down(&fleet.replicas[index]).await;
        more_polls(&mut polls).await;
        fleet.replicas[index].start_again().await;
        more_polls(&mut polls).await;
        fleet.balancer.wait_until_up(&fleet.replicas).await;
        more_polls(&mut polls).await;
    }
    stop.send(true).unwrap();
    let (browser, answers) = poller.await.unwrap();

    let seen: Vec<String> = answers
        .iter()
        .map(|a| {
            let by = a.headers.get(replicas::SERVED_BY);
            let body = String::from_utf8_lossy(&a.body);
            format!("{} from {by:?}: {body}", a.status)
        })
        .collect();
    assert!(
        answers
            .iter()
            .all(|a| a.status == 200 && a.json()["status"] == "pending"),
        "{seen:#?}\n{}",
        fleet.logs()
    );
    replicas::present(&mock, &session, &json!({"given_name": "Ada"})).await;
    let ended = until_ended(&browser, &fleet.balancer.url, &session.handle).await;
    assert_eq!(
        ended.json(),
        json!({"status": "verified", "claims": {"given_name": "Ada"}})
    );
}

/// Waits for the poller of a rolling restart to answer two more polls.
async fn more_polls(polls: &mut tokio::sync::watch::Receiver<usize>) {
    let from = *polls.borrow_and_update();
    polls
        .wait_for(|&count| count >= from + 2)
        .await
        .expect("the poller runs until told to stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_ends_with_the_claims_through_a_rolling_restart_of_every_replica() {
    // Blocking, but nothing is served yet.
    let browser_dir = support::node::browser();
    let mock = support::mock().await;
    let mut fleet = Fleet::start(&mock, 2).await;
    let (control, mut restart_requests) = control().await;

    let started = Instant::now();
    let run = tokio::process::Command::new("node")
        .args(["--test", "--test-reporter=spec", PAGE_TEST])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env(
            "BROWSER_TEST_VERIFIER_URL",
            format!("{}/", fleet.balancer.url),
        )
        .env(
            "BROWSER_TEST_CSP",
            lanyard::verifier::CONTENT_SECURITY_POLICY,
        )
        .env("BROWSER_TEST_CHROMIUM", support::node::CHROMIUM)
        .env("BROWSER_TEST_SCREENSHOTS", screenshot_dir())
        .env("BROWSER_TEST_CONTROL_URL", &control)
        .env(
            "BROWSER_TEST_REPLICAS",
            Vec::from_iter(fleet.names()).join(","),
        )
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let mut restarts = 0;
    let driven = async {
        let mut run = std::pin::pin!(run);
        loop {
            tokio::select! {
                output = &mut run => break output,
                Some(done) = restart_requests.recv() => {
                    fleet.rolling_restart().await;
                    restarts += 1;
                    let _ = done.send(());
                }
            }
        }
    };
    let output = tokio::time::timeout(PAGE_TEST_LIMIT, driven)
        .await
        .unwrap_or_else(|_| panic!("the page test ran over {PAGE_TEST_LIMIT:?}"))
        .unwrap_or_else(|err| {
            panic!(
                "cannot run node: {err}\n{}",
                support::node::install_hint(&browser_dir)
            )
        });
    support::node::passed_report(&output, &format!("; the replicas' logs:\n{}", fleet.logs()));
    assert_eq!(restarts, 1, "the page test asked for one rolling restart");
    eprintln!(
        "the page test passed in {:.1?}; screenshots in {}",
        started.elapsed(),
        screenshot_dir().display()
    );
}

/// Where the screenshots go, for people to look at: `target/browser-screenshots`.
fn screenshot_dir() -> PathBuf {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().unwrap_or(tmp).join("browser-screenshots")
}

/// What the page test calls when the person is in their wallet: `POST
/// /restart` at the URL returned, answered once the test has restarted
/// every replica. The test receives each call as a sender to answer by.
async fn control() -> (String, mpsc::Receiver<oneshot::Sender<()>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (requests, received) = mpsc::channel(1);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let requests = requests.clone();
            let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                let requests = requests.clone();
                async move {
                    let asked =
                        request.method() == Method::POST && request.uri().path() == "/restart";
                    let status = if !asked {
                        StatusCode::NOT_FOUND
                    } else {
                        let (done, restarted) = oneshot::channel();
                        match requests.send(done).await {
                            Ok(()) if restarted.await.is_ok() => StatusCode::OK,
                            // The test failed while restarting: its panic says why.
                            _ => StatusCode::INTERNAL_SERVER_ERROR,
                        }
                    };
                    let mut response = Response::new(Full::new(Bytes::new()));
                    *response.status_mut() = status;
                    Ok::<_, Infallible>(response)
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (url, received)
}
