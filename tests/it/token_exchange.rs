//! The token exchange over real sockets against the embedded mock: what is
//! sent, how the mock verifies it, and how each failure is classified. The
//! mock's own refusals, one by one, are in `token_exchange/mock_rules.rs`.

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod mock_rules;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use lanyard::config::credentials::parse_private_key;
use lanyard::mock::{Fault, MockService};
use lanyard::token::{AssertionSigner, ExchangeError};
use serde_json::Value;
use support::*;
use uuid::Uuid;

fn exchanger(
    mock: &MockService,
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> Arc<lanyard::token::Exchanger> {
    access(&settings(mock, dir, extra)).exchanger
}

/// Posts a token request by hand, for the cases lanyard itself never sends.
async fn post_form(url: &str, fields: &[(&str, &str)]) -> (StatusCode, Value) {
    let body = form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let request = Request::post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let response = client.request(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn signer(mock: &MockService, lifetime: Duration, key: &str) -> AssertionSigner {
    AssertionSigner {
        client_id: CLIENT_ID.into(),
        audience: mock.audience(),
        lifetime,
        backdate: Duration::ZERO,
        key: Arc::new(parse_private_key(key).unwrap()),
    }
}

fn fields(assertion: &str) -> Vec<(&str, &str)> {
    vec![
        ("client_id", CLIENT_ID),
        ("organization_id", ORGANIZATION_ID),
        ("client_assertion", assertion),
    ]
}

#[tokio::test]
async fn token_is_obtained_and_accepted_by_the_mock() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let issued = exchanger(&mock, dir.path(), &[]).fetch().await.unwrap();
    assert_eq!(
        mock.token_owner(issued.access_token.expose()).as_deref(),
        Some(CLIENT_ID)
    );
    assert_eq!(issued.lifetime, Duration::from_secs(120));
}

#[tokio::test]
async fn assertion_claims_and_form_fields_are_as_specified() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let before = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    exchanger(&mock, dir.path(), &[("LANYARD_ASSERTION_TTL", "10m")])
        .fetch()
        .await
        .unwrap();
    let after = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let seen = mock.last_accepted().unwrap();

    assert_eq!(
        seen.header,
        serde_json::json!({"alg": "RS256", "typ": "JWT"})
    );
    let claims = &seen.claims;
    assert_eq!(claims["iss"], CLIENT_ID);
    assert_eq!(claims["sub"], CLIENT_ID);
    assert_eq!(claims["aud"], mock.audience());
    let iat = claims["iat"].as_u64().unwrap();
    assert!((before..=after).contains(&iat));
    assert_eq!(claims["exp"].as_u64().unwrap(), iat + 600);
    let jti = Uuid::parse_str(claims["jti"].as_str().unwrap()).unwrap();
    assert_eq!(jti.get_version_num(), 4);
    assert_eq!(
        claims.as_object().unwrap().len(),
        6,
        "no extra claims: {claims}"
    );

    let names: Vec<&str> = seen.form.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "client_assertion",
            "client_assertion_type",
            "client_id",
            "grant_type",
            "organization_id"
        ]
    );
    assert_eq!(seen.form["grant_type"], "client_credentials");
    assert_eq!(
        seen.form["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert_eq!(seen.form["client_id"], CLIENT_ID);
    assert_eq!(seen.form["organization_id"], ORGANIZATION_ID);
}

/// RFC 7523 §2.2 and RFC 6749 §4.4.2 spell these; they are written out
/// here, and read off the wire by a token endpoint of this test's own, so
/// neither the client's constant nor the mock's vouches for the other.
#[tokio::test]
async fn client_sends_the_rfc7523_form_fields_as_the_rfcs_spell_them() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let token_uri = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
    let (sent, mut received) = tokio::sync::mpsc::unbounded_channel::<Bytes>();
    let endpoint = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let answer = hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
            let sent = sent.clone();
            async move {
                let body = request.into_body().collect().await?.to_bytes();
                let _ = sent.send(body);
                let token = r#"{"access_token":"t","token_type":"Bearer","expires_in":60}"#;
                Ok::<_, hyper::Error>(http::Response::new(Full::new(Bytes::from(token))))
            }
        });
        hyper::server::conn::http1::Builder::new()
            .serve_connection(hyper_util::rt::TokioIo::new(stream), answer)
            .await
    });
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    exchanger(&mock, dir.path(), &[("SA_TOKEN_URI", &token_uri)])
        .fetch()
        .await
        .unwrap();

    let body = received.recv().await.unwrap();
    let form: std::collections::HashMap<String, String> =
        form_urlencoded::parse(&body).into_owned().collect();
    assert_eq!(form["grant_type"], "client_credentials");
    assert_eq!(
        form["client_assertion_type"],
        "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
    );
    assert!(!form["client_assertion"].is_empty());
    endpoint.abort();
}

#[tokio::test]
async fn clock_skew_backdates_iat_and_exp_together() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let now = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let before = now();
    exchanger(
        &mock,
        dir.path(),
        &[
            ("LANYARD_ASSERTION_TTL", "10m"),
            ("LANYARD_CLOCK_SKEW", "45s"),
        ],
    )
    .fetch()
    .await
    .expect("a backdated assertion is still accepted");
    let after = now();

    let claims = mock.last_accepted().unwrap().claims;
    let iat = claims["iat"].as_u64().unwrap();
    assert!(
        (before - 45..=after - 45).contains(&iat),
        "iat {iat} is not 45 s before [{before}, {after}]"
    );
    assert_eq!(
        claims["exp"].as_u64().unwrap(),
        iat + 600,
        "exp keeps the lifetime after the backdated iat"
    );
}

#[tokio::test]
async fn rfc7523_fields_off_sends_the_seeds_three_fields() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    exchanger(&mock, dir.path(), &[("LANYARD_RFC7523_FIELDS", "false")])
        .fetch()
        .await
        .unwrap();
    let names: Vec<String> = mock.last_accepted().unwrap().form.into_keys().collect();
    assert_eq!(names, ["client_assertion", "client_id", "organization_id"]);
}

#[tokio::test]
async fn every_token_request_uses_a_fresh_jti() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let exchanger = exchanger(&mock, dir.path(), &[]);
    exchanger.fetch().await.unwrap();
    let first = mock.last_accepted().unwrap().claims["jti"].clone();
    exchanger.fetch().await.unwrap();
    let second = mock.last_accepted().unwrap().claims["jti"].clone();
    assert_ne!(first, second);
}

#[tokio::test]
async fn pkcs1_key_and_literal_newlines_are_accepted() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let escaped = fixture("rsa2048.pkcs1.pem").replace('\n', "\\n");
    let map = env(&[
        ("SERVICE_API_URL", &mock.api_url()),
        ("SA_CLIENT_ID", CLIENT_ID),
        ("SA_PRIVATE_KEY", &escaped),
        ("SA_IAM_AUDIENCE", &mock.audience()),
        ("SA_TOKEN_URI", &mock.token_url()),
        ("ORG_ID", ORGANIZATION_ID),
    ]);
    let access = access(&map);
    let issued = access.exchanger.fetch().await.unwrap();
    assert!(mock.token_owner(issued.access_token.expose()).is_some());
    drop(dir);
}

#[tokio::test]
async fn failures_are_classified_for_retry_decisions() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let exchanger = exchanger(&mock, dir.path(), &[("LANYARD_TOKEN_TIMEOUT", "300ms")]);

    mock.push_fault(Fault::Delay(Duration::from_secs(5)));
    assert!(matches!(
        exchanger.fetch().await,
        Err(ExchangeError::Timeout(_))
    ));

    mock.push_fault(Fault::Disconnect);
    let err = exchanger.fetch().await.unwrap_err();
    assert_eq!(err.kind(), "network", "{err}");

    mock.push_fault(Fault::rate_limited(Some("7")));
    let err = exchanger.fetch().await.unwrap_err();
    assert_eq!(
        err,
        ExchangeError::RateLimited {
            retry_after: Some(Duration::from_secs(7))
        }
    );

    mock.push_fault(Fault::server_error(503));
    assert_eq!(exchanger.fetch().await.unwrap_err().kind(), "server_error");

    mock.push_fault(Fault::invalid_client());
    let err = exchanger.fetch().await.unwrap_err();
    assert!(err.is_rejection());
    assert!(
        err.to_string().contains("HTTP 401 (invalid_client"),
        "{err}"
    );

    mock.push_fault(Fault::body("{\"access_token\":"));
    assert_eq!(
        exchanger.fetch().await.unwrap_err(),
        ExchangeError::Malformed("the body is not JSON".into())
    );

    // The mock still works once the faults are used up.
    exchanger.fetch().await.unwrap();
}

#[tokio::test]
async fn mock_token_outage_answers_503_until_switched_off() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    let exchanger = exchanger(&mock, dir.path(), &[]);
    let held = exchanger.fetch().await.unwrap();
    let mut events = mock.token_events();

    mock.push_fault(Fault::invalid_client());
    mock.set_token_outage(true);
    for _ in 0..3 {
        assert_eq!(exchanger.fetch().await.unwrap_err().kind(), "server_error");
    }
    // The API keeps honouring what was issued before the outage.
    assert!(mock.token_owner(held.access_token.expose()).is_some());

    mock.set_token_outage(false);
    // The queued fault waited for the outage to end, then the mock issues again.
    assert!(exchanger.fetch().await.unwrap_err().is_rejection());
    exchanger.fetch().await.unwrap();

    let mut seen = Vec::new();
    while let Ok(event) = events.try_recv() {
        seen.push((event.status, event.issued_to));
    }
    let refused = (Some(503), None);
    assert_eq!(
        seen,
        [
            refused.clone(),
            refused.clone(),
            refused,
            (Some(401), None),
            (Some(200), Some(CLIENT_ID.to_string())),
        ]
    );
    assert_eq!(mock.counters().token_requests, 6);
}

#[tokio::test]
async fn refused_connection_is_a_connect_failure() {
    let mock = mock().await;
    let dir = tempfile::tempdir().unwrap();
    // A port that was just free: nothing listens there now.
    let closed = closed_port();
    let exchanger = exchanger(
        &mock,
        dir.path(),
        &[("SA_TOKEN_URI", &format!("http://{closed}/oauth2/token"))],
    );
    let err = exchanger.fetch().await.unwrap_err();
    assert_eq!(err.kind(), "connect", "{err}");
}
