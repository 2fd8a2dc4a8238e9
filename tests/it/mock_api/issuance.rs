//! The mock's issuance lifecycle (docs/service.md §5.5) over its API.

use super::*;

// Issuance (docs/service.md §5.5)

#[tokio::test]
async fn issuance_lifecycle_moves_through_approve_hold_revoke() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let created = api
        .call(
            Method::POST,
            &api.url("/credentials"),
            Some(r#"{"email":"holder@example.com","degree":"MSc"}"#),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED);
    assert!(is_json(&created));
    assert_eq!(created.body["status"], "pending");
    assert_eq!(
        created.body["attributes"],
        json!({"email": "holder@example.com", "degree": "MSc"})
    );
    let id = created.body["credential_id"].as_str().unwrap().to_string();
    let item = api.url(&format!("/credentials/{id}"));

    let read = api.call(Method::GET, &item, None).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body["credential_id"], id.as_str());

    let updated = api
        .call(
            Method::PATCH,
            &item,
            Some(r#"{"degree":"PhD","email":null}"#),
        )
        .await;
    assert_eq!(updated.status, StatusCode::OK);
    assert_eq!(updated.body["attributes"], json!({"degree": "PhD"}));

    let step = |action: &'static str| {
        let url = format!("{item}/{action}");
        let api = &api;
        async move { api.call(Method::POST, &url, None).await }
    };
    let approved = step("approve").await;
    assert_eq!(approved.status, StatusCode::OK);
    assert_eq!(approved.body["status"], "issued");
    assert_eq!(approved.body["notifications_sent"], 1);
    assert_eq!(step("resend").await.body["notifications_sent"], 2);
    assert_eq!(step("hold").await.body["status"], "on_hold");
    assert_eq!(step("revoke").await.body["status"], "revoked");

    let listed = api.call(Method::GET, &api.url("/credentials"), None).await;
    assert_eq!(listed.body["credentials"][0]["status"], "revoked");

    let deleted = api.call(Method::DELETE, &item, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    assert_eq!(
        api.call(Method::GET, &item, None).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn bad_credential_moves_are_409() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let created = api
        .call(Method::POST, &api.url("/credentials"), Some("{}"))
        .await;
    let id = created.body["credential_id"].as_str().unwrap();
    let item = api.url(&format!("/credentials/{id}"));

    for action in ["hold", "revoke", "resend"] {
        let refused = api
            .call(Method::POST, &format!("{item}/{action}"), None)
            .await;
        assert_eq!(refused.status, StatusCode::CONFLICT, "{action}");
        assert_eq!(refused.body["error"], "conflict");
        assert_eq!(refused.body["status"], "pending");
    }

    api.call(Method::POST, &format!("{item}/approve"), None)
        .await;
    api.call(Method::POST, &format!("{item}/revoke"), None)
        .await;
    let refused = api
        .call(Method::POST, &format!("{item}/approve"), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT);
    assert!(message(&refused).contains("final"));
    let patched = api.call(Method::PATCH, &item, Some(r#"{"a":1}"#)).await;
    assert_eq!(patched.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn unknown_credential_is_404() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let item = api.url("/credentials/00000000-0000-4000-8000-000000000000");
    for (method, url) in [
        (Method::GET, item.clone()),
        (Method::DELETE, item.clone()),
        (Method::POST, format!("{item}/approve")),
    ] {
        let missing = api.call(method.clone(), &url, None).await;
        assert_eq!(missing.status, StatusCode::NOT_FOUND, "{method} {url}");
        assert!(is_json(&missing));
    }
}
