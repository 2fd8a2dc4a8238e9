//! The verifier's session keys: a given key rotated, a key derived from
//! the service account's surviving a credentials rotation across
//! replicas, and each replica's counts of the sessions it answers.

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Method;
use lanyard::mock::{MockAccount, generate_rsa_key};
use support::sidecar::send;
use support::verifier::{self, Browser, PROJECT, Running, error_code};

use super::metric;

fn session_key(byte: u8) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode([byte; 32])
}

/// `LANYARD_VERIFIER_SESSION_KEY=new,old` answers sessions sealed under
/// the old key and seals new ones under the new; a replica that holds
/// only a key nobody sealed with answers the clean 404 the page offers a
/// new start for.
#[tokio::test]
async fn a_given_session_key_rotates_and_a_key_nobody_holds_ends_cleanly() {
    let mock = Arc::new(support::mock().await);
    let (old, new) = (session_key(1), session_key(2));
    let both = format!("{new},{old}");
    let replica = |key: &str| {
        let key = key.to_string();
        let mock = mock.clone();
        async move {
            verifier::start_shared(mock, None, &[("LANYARD_VERIFIER_SESSION_KEY", &key)]).await
        }
    };
    let before = replica(&old).await;
    let mut browser = Browser::default();
    let first = browser.start_session(&before).await;
    let first_cookie = browser.cookie.clone().unwrap();

    let rotating = replica(&both).await;
    assert_eq!(
        browser.status(&rotating, &first.handle).await.json()["status"],
        "pending"
    );
    // A start under the new key replaces the old key's cookie, naming the
    // same browser: the session its other tab started under the old
    // cookie is still its own.
    let second = browser.start_session(&rotating).await;
    assert_ne!(browser.cookie.as_ref(), Some(&first_cookie));
    assert_eq!(browser.status(&rotating, &second.handle).await.status, 200);
    assert_eq!(
        browser.status(&rotating, &first.handle).await.json()["status"],
        "pending",
        "the other tab's session"
    );

    let after = replica(&new).await;
    assert_eq!(browser.status(&after, &second.handle).await.status, 200);
    let old_browser = Browser {
        cookie: Some(first_cookie),
    };
    let gone = old_browser.status(&after, &first.handle).await;
    assert_eq!(gone.status, 404, "{:?}", gone.body);
    assert_eq!(error_code(&gone), "not_found");
    let unknown = verifier::start_shared(
        mock.clone(),
        None,
        &[("LANYARD_VERIFIER_SESSION_KEY", &session_key(3))],
    )
    .await;
    assert_eq!(browser.status(&unknown, &second.handle).await.status, 404);
    // A replica with another key says why, and counts it: nothing else
    // would tell its operator why every session it is sent fails.
    assert_eq!(unknown.process.metrics.verifier_handles_unopened.get(), 1);
}

/// A key derived from the service account's key survives a credentials
/// rotation that reaches replicas at different moments: each answers the
/// sessions the other started before, during and after.
#[tokio::test]
async fn a_derived_session_key_survives_a_credentials_rotation_across_replicas() {
    let mock = Arc::new(support::mock().await);
    let key = generate_rsa_key().expect("a key");
    mock.add_account(MockAccount {
        client_id: "sa-rotated".into(),
        organization_id: support::ORGANIZATION_ID.into(),
        public_key_der: key.public_der,
        roles: vec!["verifications.api".into()],
        projects: vec![PROJECT.into()],
    });
    let rotated = serde_json::json!({
        "type": "service_account",
        "organization_id": support::ORGANIZATION_ID,
        "client_id": "sa-rotated",
        "private_key": key.private_pem.expose(),
        "token_uri": mock.token_url(),
        "iam_audience": mock.audience(),
    })
    .to_string();
    let a = verifier::start_shared(mock.clone(), None, &[]).await;
    let b = verifier::start_shared(mock.clone(), None, &[]).await;
    let mut browser = Browser::default();
    let before = browser.start_session(&b).await;
    assert_eq!(
        browser.status(&a, &before.handle).await.status,
        200,
        "same key"
    );

    rotate(&a, &rotated).await;
    assert_eq!(
        browser.status(&a, &before.handle).await.status,
        200,
        "the previous key"
    );
    let during = browser.start_session(&a).await;
    let answer = browser.status(&b, &during.handle).await;
    assert_eq!(
        answer.status, 200,
        "b has not seen the new Secret yet: {:?}",
        answer.body
    );

    rotate(&b, &rotated).await;
    let after = browser.start_session(&b).await;
    for session in [&before, &during, &after] {
        for replica in [&a, &b] {
            assert_eq!(browser.status(replica, &session.handle).await.status, 200);
        }
    }
}

/// docs/verifier.md "Running many", Counting: `started` by the replica that started
/// a session, an ending by each replica the first time it answers it, and
/// never again however often it is polled.
#[tokio::test]
async fn each_replica_counts_the_start_it_made_and_each_ending_once() {
    let mock = Arc::new(support::mock().await);
    let a = verifier::start_shared(mock.clone(), None, &[]).await;
    let b = verifier::start_shared(mock.clone(), None, &[]).await;
    let mut browser = Browser::default();
    let session = browser.start_session(&a).await;
    let pending = browser.status(&b, &session.handle).await;
    assert_eq!(pending.json()["status"], "pending");
    let presented = send(
        Method::POST,
        &mock.wallet_present_url(&session.service_id),
        &[],
        Bytes::from_static(br#"{"given_name":"Ada"}"#),
    )
    .await;
    assert_eq!(presented.status, 200);
    let verified = browser.until_ended(&b, &session.handle).await;
    assert_eq!(verified.json()["status"], "verified");
    browser.status(&b, &session.handle).await;
    assert_eq!(
        (metric(&a, "started").await, metric(&b, "started").await),
        (1, 0)
    );
    assert_eq!(
        (metric(&a, "verified").await, metric(&b, "verified").await),
        (0, 1)
    );

    for _ in 0..2 {
        let answer = browser.status(&a, &session.handle).await;
        assert_eq!(answer.json()["status"], "verified");
    }
    assert_eq!(
        (metric(&a, "verified").await, metric(&b, "verified").await),
        (1, 1)
    );
}

/// Replaces a replica's credentials file, as a Secret's update does, and
/// waits for the reload.
async fn rotate(replica: &Running, contents: &str) {
    let staged = replica.credentials.with_extension("new");
    std::fs::write(&staged, contents).unwrap();
    std::fs::rename(&staged, &replica.credentials).unwrap();
    let mut reloads = replica.process.reloads.clone().expect("a file is watched");
    support::wait_for(&mut reloads, Duration::from_secs(10), |r| r.succeeded >= 1).await;
}
