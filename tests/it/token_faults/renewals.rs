//! Renewals that meet a rejecting upstream or a failing token endpoint:
//! forced renewals throttled, the held token kept until a retry replaces it.

use super::*;

#[tokio::test]
async fn upstream_rejecting_every_token_costs_one_forced_renewal_then_at_most_one_per_5_s() {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let api = mock.api_url();
    let running = sidecar::start(mock, &api, &[]).await;
    let arrivals = timestamps(running.mock.watch_counters(), |c| c.token_requests);
    running.ready().await;
    let url = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/{RULE}",
        running.proxy
    );
    assert_eq!(get(&url).await.status, StatusCode::OK);

    running.mock.set_revoke_on_issue(true);
    running.mock.revoke_all_tokens();
    // One forced renewal, one retry with the new token, refused too: the
    // client gets the service's own 401.
    let answer = get(&url).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    assert!(!answer.headers.contains_key("lanyard-error"));
    assert_eq!(answer.json()["error"], "unauthorized");
    assert_eq!(running.mock.counters().token_requests, 2);
    // More requests at once: each refused, none asks for a token.
    for _ in 0..10 {
        assert_eq!(get(&url).await.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(running.mock.counters().token_requests, 2);

    // Still ready: the token is within its lifetime and keeps being sent
    // (a client must not be able to take the pod out of service by calling
    // a path that answers 401); the rejection is reported.
    let ready = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["upstream_rejected_token"], true);
    let scrape = scrape(&running.admin).await;
    assert_eq!(scrape.outcome("success"), 2.0);
    assert_eq!(
        scrape.value("lanyard_upstream_unauthorized_retries_total"),
        Some(1.0)
    );

    // Clients keep calling, ten times a second: the next forced renewal
    // comes no sooner than 5 s after the last (and the one after that 10 s
    // later, as tests/it/refresher/forced.rs shows on the paused clock).
    let mut third = arrivals.clone();
    let traffic = async {
        let mut pace = tokio::time::interval(ms(100));
        loop {
            pace.tick().await;
            assert_eq!(get(&url).await.status, StatusCode::UNAUTHORIZED);
        }
    };
    tokio::select! {
        () = traffic => unreachable!(),
        _ = tokio::time::timeout(LIMIT, third.wait_for(|t| t.len() >= 3)) => {}
    }
    let times = arrivals.borrow().clone();
    assert_eq!(times.len(), 3, "{times:?}");
    let gap = times[2] - times[1];
    assert!(gap >= ms(4800), "forced again after {gap:?}");
}

#[tokio::test]
async fn scheduled_renewal_failure_keeps_the_held_token_until_a_retry_replaces_it() {
    let mock = mock().await;
    // Renewal after 4.2-5.1 s leaves at least 0.9 s of the token's life.
    mock.set_expires_in(Some(6));
    mock.push_fault(Fault::Pass);
    mock.push_fault(Fault::server_error(503));
    // No margin: its tenth of this short lifetime would leave the retry
    // too little time; the margin has tests of its own.
    let rig = Rig::start(mock, &[("LANYARD_EXPIRY_MARGIN", "0")]).await;
    rig.running.ready().await;
    let token = authorization(&rig.proxied().await);

    let state = rig.wait_state(|s| s.attempts >= 2).await;
    assert_eq!(state.generation, 1);
    assert_eq!(state.last_error.unwrap().kind(), "server_error");
    assert_eq!(authorization(&rig.proxied().await), token);
    // The renewal failed with under 10 s to go; /readyz says so and why.
    let ready = rig.readyz().await;
    assert_eq!(ready.status, StatusCode::SERVICE_UNAVAILABLE);
    let body = ready.json();
    assert_eq!(
        body["reason"],
        "the token has less than 10 s left before it is retired, and its renewal is failing"
    );
    assert_eq!(body["last_error"], "the token endpoint failed: HTTP 503");

    // The retry, half to all of the 0.9-1.8 s left later, succeeds.
    rig.wait_state(|s| s.generation >= 2).await;
    assert_ne!(authorization(&rig.proxied().await), token);
    assert_eq!(rig.running.mock.counters().token_requests, 3);
    let scrape = rig.scrape().await;
    assert_eq!(scrape.outcome("success"), 2.0);
    assert_eq!(scrape.outcome("server_error"), 1.0);
}

#[tokio::test]
async fn rejected_token_is_replaced_once_the_throttle_passes_without_client_traffic() {
    let mock = mock().await;
    mock.add_rule("proj-demo", RULE);
    let api = mock.api_url();
    let running = sidecar::start(mock, &api, &[]).await;
    running.ready().await;
    let url = format!(
        "{}/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/{RULE}",
        running.proxy
    );
    // A moment in which the service refuses every token: the first
    // request forces a renewal, the second finds the new token refused
    // too while another renewal would be too soon.
    running.mock.set_revoke_on_issue(true);
    running.mock.revoke_all_tokens();
    for _ in 0..2 {
        assert_eq!(get(&url).await.status, StatusCode::UNAUTHORIZED);
    }
    assert_eq!(running.mock.counters().token_requests, 2);
    let ready = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(ready.json()["upstream_rejected_token"], true);

    // The service recovers. Apps that saw 401s may have stopped calling,
    // so nothing but the sidecar itself may ask for a new token: once
    // forced renewals are allowed again (5 s), it should, rather than at
    // the scheduled renewal 84-102 s into the mock's 120 s token (42-51
    // minutes into an hour-long one).
    running.mock.set_revoke_on_issue(false);
    wait_for(
        &mut running.mock.watch_counters(),
        Duration::from_secs(12),
        |c| c.tokens_issued >= 3,
    )
    .await;
    wait_for(&mut running.process.default_tokens().state(), LIMIT, |s| {
        s.generation >= 3
    })
    .await;
    let ready = get(&format!("{}/readyz", running.admin)).await;
    assert_eq!(ready.status, StatusCode::OK);
    assert_eq!(ready.json()["upstream_rejected_token"], false);
    assert_eq!(get(&url).await.status, StatusCode::OK);
}
