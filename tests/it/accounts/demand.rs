//! The directory's accounts kept on demand: no token request until a
//! request needs one, `/readyz` reporting them without ever turning 503
//! for them, and the token metrics labelled by `client_id` and
//! `organization`, an account's series going with its file.

use super::*;

use http::StatusCode;
use lanyard::mock::TokenEvent;
use tokio::sync::broadcast;

/// `/readyz`: its status and its `accounts` summary.
async fn readyz(sidecar: &Sidecar) -> (StatusCode, serde_json::Value) {
    let answer = sidecar::get(&format!("{}/readyz", sidecar.running.admin)).await;
    let body = answer.json();
    (answer.status, body)
}

/// The clients the token endpoint issued a token to, in order, from the
/// events received so far.
fn issued(events: &mut broadcast::Receiver<TokenEvent>) -> Vec<String> {
    let mut clients = Vec::new();
    while let Ok(event) = events.try_recv() {
        clients.extend(event.issued_to);
    }
    clients
}

#[tokio::test]
async fn a_directory_account_fetches_its_first_token_when_a_request_needs_it() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let mut events = fleet.mock.token_events();
    // The default account's first token is fetched at start-up and awaited
    // here: by then, any start-up fetch of the directory's would have gone
    // out alongside it.
    let sidecar = fleet.start(true).await;
    let (status, body) = readyz(&sidecar).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["accounts"],
        serde_json::json!({
            "total": 3, "ready": 0, "idle": 3, "starting": 0,
            "not_ready": 0, "not_ready_accounts": [],
        })
    );

    sidecar.assert_served(&sidecar.b).await;
    let (status, body) = readyz(&sidecar).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["accounts"]["ready"], 1, "{body}");
    assert_eq!(body["accounts"]["idle"], 2, "{body}");
    assert_eq!(body["accounts"]["total"], 3, "{body}");

    // B's token is held and reused; A and C, never used, asked nothing.
    sidecar.assert_served(&sidecar.b).await;
    assert_eq!(issued(&mut events), [CLIENT_ID, sidecar.b.client]);
    assert_eq!(sidecar.mock().counters().token_requests, 2);
}

#[tokio::test]
async fn with_the_directory_alone_nothing_is_fetched_and_the_pod_is_ready() {
    let sidecar = Fleet::all_written().await;

    let (status, body) = readyz(&sidecar).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ready", "{body}");
    assert_eq!(body["accounts"]["idle"], 3, "{body}");
    assert_eq!(sidecar.mock().counters().token_requests, 0);

    sidecar.assert_served(&sidecar.c).await;
    assert_eq!(sidecar.mock().counters().token_requests, 1);
    let (_, body) = readyz(&sidecar).await;
    assert_eq!(body["accounts"]["ready"], 1, "{body}");
}

/// C's file holds a key the mock no longer knows for it: its paths get
/// 503, `/readyz` lists it, and the pod stays ready, since the same
/// account fails on every replica.
#[tokio::test]
async fn an_account_that_gets_no_token_is_reported_and_never_makes_the_pod_unready() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    // The mock now knows another key for sa-c.
    member_with_new_key(&fleet.mock, "org-C", "sa-c");
    let sidecar = fleet.start(true).await;

    let answer = sidecar.get(&sidecar.c.rule_path()).await;
    assert_refusal(&answer, 503, "token_unavailable");
    sidecar.assert_served(&sidecar.a).await;

    let (status, body) = readyz(&sidecar).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let accounts = &body["accounts"];
    assert_eq!(accounts["not_ready"], 1, "{body}");
    assert_eq!(accounts["ready"], 1, "{body}");
    assert_eq!(accounts["idle"], 1, "{body}");
    let listed = &accounts["not_ready_accounts"][0];
    assert_eq!(listed["organization"], "org-C", "{body}");
    assert_eq!(listed["client_id"], "sa-c", "{body}");
    assert!(listed["reason"].is_string(), "{body}");
    assert!(
        listed["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("401") || e.contains("invalid")),
        "{body}"
    );
    let shown = body.to_string();
    assert!(!shown.contains("BEGIN"), "{shown}");
    assert!(!shown.contains("eyJ"), "an assertion in {shown}");
}

/// One `/metrics` answer.
async fn scrape(sidecar: &Sidecar) -> String {
    let answer = sidecar::get(&format!("{}/metrics", sidecar.running.admin)).await;
    assert_eq!(answer.status, StatusCode::OK);
    text(&answer.body)
}

/// `member`'s token series, as the exposition writes its labels.
fn series_of(member: &Member) -> String {
    format!(
        "client_id=\"{}\",organization=\"{}\"",
        member.client, member.org
    )
}

#[tokio::test]
async fn token_series_carry_each_account_and_go_with_the_file() {
    let sidecar = Fleet::all_written().await;
    sidecar.assert_served(&sidecar.a).await;
    sidecar.assert_served(&sidecar.b).await;

    let metrics = scrape(&sidecar).await;
    for member in [&sidecar.a, &sidecar.b] {
        let account = series_of(member);
        for series in [
            format!("lanyard_token_requests_total{{{account},outcome=\"success\"}} 1"),
            format!("lanyard_token_request_duration_seconds_count{{{account}}} 1"),
            format!("lanyard_token_expiry_timestamp_seconds{{{account}}} "),
        ] {
            assert!(metrics.contains(&series), "no `{series}` in:\n{metrics}");
        }
    }
    // C, never used, has no token: no expiry to alert on.
    assert!(
        !metrics.contains(&format!(
            "lanyard_token_expiry_timestamp_seconds{{{}}}",
            series_of(&sidecar.c)
        )),
        "{metrics}"
    );

    // A's refresher ends once its file is gone and no request holds it:
    // its state's sender closes with it.
    let mut a_state = sidecar.tokens_of(&sidecar.a).state();
    std::fs::remove_file(sidecar.dir.join("a.json")).unwrap();
    assert!(sidecar.running.process.reload_credentials());
    sidecar.reloaded(|r| r.removed == 1).await;
    tokio::time::timeout(NOTICED_WITHIN, async {
        while a_state.changed().await.is_ok() {}
    })
    .await
    .expect("A's refresher stops");

    let metrics = scrape(&sidecar).await;
    assert!(!metrics.contains("client_id=\"sa-a\""), "{metrics}");
    assert!(
        metrics.contains(&format!(
            "lanyard_token_requests_total{{{},outcome=\"success\"}} 1",
            series_of(&sidecar.b)
        )),
        "{metrics}"
    );
}

/// Two files naming one `client_id` for two organizations are two
/// accounts, each with its own series; removing one file removes its
/// series alone.
#[tokio::test]
async fn two_files_of_one_client_have_their_own_series_and_a_removed_one_takes_only_its_own() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    // A's client and key, for B's organization: the token endpoint
    // refuses it (the client is org-A's), which is counted as any token
    // request is; the series are what this test reads.
    let a_for_b = Member {
        org: "org-B",
        ..fleet.a.clone()
    };
    std::fs::remove_file(fleet.dir().join("b.json")).unwrap();
    write(&fleet.dir(), "a-for-b.json", &a_for_b.file(&fleet.mock));
    let sidecar = fleet.start(false).await;
    sidecar.assert_served(&sidecar.a).await;
    sidecar.get(&a_for_b.rule_path()).await;

    let metrics = scrape(&sidecar).await;
    let (a, b) = (series_of(&sidecar.a), series_of(&a_for_b));
    for series in [
        format!("lanyard_token_requests_total{{{a},outcome=\"success\"}} 1"),
        format!("lanyard_token_request_duration_seconds_count{{{a}}} 1"),
        format!("lanyard_token_expiry_timestamp_seconds{{{a}}} "),
        format!("lanyard_token_requests_total{{{b},outcome=\"rejected\"}} 1"),
        format!("lanyard_token_requests_total{{{b},outcome=\"success\"}} 0"),
        format!("lanyard_token_request_duration_seconds_count{{{b}}} 1"),
    ] {
        assert!(metrics.contains(&series), "no `{series}` in:\n{metrics}");
    }

    let mut state = sidecar.tokens_of(&a_for_b).state();
    std::fs::remove_file(sidecar.dir.join("a-for-b.json")).unwrap();
    assert!(sidecar.running.process.reload_credentials());
    sidecar.reloaded(|r| r.removed == 1).await;
    tokio::time::timeout(NOTICED_WITHIN, async {
        while state.changed().await.is_ok() {}
    })
    .await
    .expect("the removed account's refresher stops");

    let metrics = scrape(&sidecar).await;
    assert!(!metrics.contains("organization=\"org-B\""), "{metrics}");
    let account = series_of(&sidecar.a);
    for series in [
        format!("lanyard_token_requests_total{{{account},outcome=\"success\"}} 1"),
        format!("lanyard_token_expiry_timestamp_seconds{{{account}}} "),
    ] {
        assert!(metrics.contains(&series), "no `{series}` in:\n{metrics}");
    }
    sidecar.assert_served(&sidecar.a).await;
}
