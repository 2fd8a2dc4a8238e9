//! Which account serves which path: each organization its own, the
//! default account the paths with no organization (and its own
//! organization's), and lanyard's 403s where no account serves, with
//! nothing forwarded.

use super::*;

use http::StatusCode;

#[tokio::test]
async fn each_organization_path_carries_its_own_accounts_token() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    let sidecar = fleet.start(true).await;

    // Twice round, so that a held token is not mixed up either.
    for _ in 0..2 {
        for member in [&sidecar.a, &sidecar.b, &sidecar.c] {
            sidecar.assert_served(member).await;
        }
    }
    // Each account's token opens its own organization's rule only: B's
    // path with A's token would be the mock's 403, never lanyard's choice.
    let crossed = format!(
        "/organizations/{}/projects/{}/verifications/{RULE}",
        sidecar.b.org,
        sidecar.a.project()
    );
    let answer = sidecar.get(&crossed).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN);
    assert!(answer.headers.get("lanyard-error").is_none());
    assert_eq!(sidecar.last_caller().as_deref(), Some(sidecar.b.client));

    // The default account: a path with no organization, and its own
    // organization's paths.
    let root = sidecar.get("/").await;
    assert_eq!(root.status, StatusCode::OK);
    assert_eq!(root.json()["client_id"], CLIENT_ID);
    let own = format!("/organizations/{ORGANIZATION_ID}/projects/proj-demo/verifications/{RULE}");
    assert_eq!(sidecar.get(&own).await.status, StatusCode::OK);
    assert_eq!(sidecar.last_caller().as_deref(), Some(CLIENT_ID));
}

#[tokio::test]
async fn without_a_default_account_a_path_with_no_organization_gets_403() {
    let sidecar = Fleet::all_written().await;

    for path in [
        "/",
        "/health",
        "/v1/organizations/org-A/x",
        "/organization/org-A/x",
    ] {
        let before = sidecar.api_requests();
        let answer = sidecar.get(path).await;
        let message = assert_refusal(&answer, 403, "no_account_for_path");
        assert!(message.contains("SA_CREDENTIALS_FILE"), "{message}");
        assert_eq!(sidecar.api_requests(), before, "{path} was forwarded");
    }
    // The organizations' paths are served all the same.
    sidecar.assert_served(&sidecar.b).await;
    assert_eq!(
        sidecar.mock().counters().token_requests,
        1,
        "a refused path fetched a token"
    );
}

#[tokio::test]
async fn an_organization_with_no_account_gets_403_naming_it_and_nothing_is_sent() {
    let fleet = Fleet::new().await;
    fleet.write_all();
    // With the default account: an unknown organization must not fall to
    // it.
    let sidecar = fleet.start(true).await;
    let counters = sidecar.mock().counters();

    for org in ["org-Z", "org-a", "ORG-A", "org-A-"] {
        let answer = sidecar
            .get(&format!(
                "/organizations/{org}/projects/p/verifications/{RULE}"
            ))
            .await;
        let message = assert_refusal(&answer, 403, "no_account_for_organization");
        assert!(message.contains(&format!("`{org}`")), "{message}");
        assert_eq!(
            answer.headers.get("content-type").unwrap(),
            "application/json"
        );
        assert_eq!(answer.json().as_object().unwrap().len(), 2);
    }
    let after = sidecar.mock().counters();
    assert_eq!(after.api_requests, counters.api_requests);
    assert_eq!(after.token_requests, counters.token_requests);
}
