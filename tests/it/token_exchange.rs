//! The token exchange over real sockets against the embedded mock: what is
//! sent, how the mock verifies it, and how each failure is classified.

use crate::support;

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
async fn replayed_jti_is_refused_by_the_mock() {
    let mock = mock().await;
    let signer = signer(
        &mock,
        Duration::from_secs(300),
        &fixture("rsa2048.pkcs8.pem"),
    );
    let assertion = signer.sign(SystemTime::now(), Uuid::new_v4()).unwrap();
    let (status, _) = post_form(&mock.token_url(), &fields(assertion.expose())).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = post_form(&mock.token_url(), &fields(assertion.expose())).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"], "invalid_grant");
    assert_eq!(body["error_description"], "claim `jti` was already used");
}

#[tokio::test]
async fn mock_refuses_assertions_that_break_the_seeds_rules() {
    let mock = mock().await;
    let key = fixture("rsa2048.pkcs8.pem");
    let now = SystemTime::now();
    let good = signer(&mock, Duration::from_secs(300), &key);

    let too_long = signer(&mock, Duration::from_secs(7200), &key)
        .sign(now, Uuid::new_v4())
        .unwrap();
    let expired = good
        .sign(now - Duration::from_secs(3600), Uuid::new_v4())
        .unwrap();
    let mut wrong_aud = signer(&mock, Duration::from_secs(300), &key);
    wrong_aud.audience = "https://elsewhere.example/iam".into();
    let wrong_aud = wrong_aud.sign(now, Uuid::new_v4()).unwrap();
    let other_key = lanyard::mock::generate_rsa_key().unwrap();
    let wrong_key = signer(
        &mock,
        Duration::from_secs(300),
        other_key.private_pem.expose(),
    )
    .sign(now, Uuid::new_v4())
    .unwrap();
    let v1_jti = good
        .sign(
            now,
            Uuid::parse_str("6fa459ea-ee8a-11ca-8f3d-0800200c9a66").unwrap(),
        )
        .unwrap();
    let fine = good.sign(now, Uuid::new_v4()).unwrap();

    let cases: Vec<(Vec<(&str, &str)>, &str)> = vec![
        (
            fields(too_long.expose()),
            "claim `exp` is more than an hour ahead",
        ),
        (fields(expired.expose()), "the assertion has expired"),
        (
            fields(wrong_aud.expose()),
            "claim `aud` is not this service's IAM audience",
        ),
        (
            fields(wrong_key.expose()),
            "the assertion's signature does not verify with the account's key",
        ),
        (fields(v1_jti.expose()), "claim `jti` must be a UUID v4"),
        (
            vec![
                ("client_id", "someone-else"),
                ("organization_id", ORGANIZATION_ID),
                ("client_assertion", fine.expose()),
            ],
            "client_id does not match the assertion's issuer",
        ),
        (
            vec![
                ("client_id", CLIENT_ID),
                ("organization_id", "org-other"),
                ("client_assertion", fine.expose()),
            ],
            "organization_id is not the account's organization",
        ),
        (
            vec![
                ("client_id", CLIENT_ID),
                ("client_assertion", fine.expose()),
            ],
            "parameter `organization_id` is missing",
        ),
        (
            vec![
                ("grant_type", "password"),
                ("client_id", CLIENT_ID),
                ("organization_id", ORGANIZATION_ID),
                ("client_assertion", fine.expose()),
            ],
            "only client_credentials is supported",
        ),
        (
            fields("not.a.jwt.at.all"),
            "client_assertion is not a compact JWS",
        ),
    ];
    for (form, why) in cases {
        let (status, body) = post_form(&mock.token_url(), &form).await;
        assert!(status.is_client_error(), "{why}: {status}");
        assert_eq!(body["error_description"], why);
    }
    assert_eq!(mock.counters().tokens_issued, 0);
}

/// A compact JWS of `header` and `claims`, signed by `sign`: for the
/// assertions lanyard itself never makes.
fn jws(header: &Value, claims: &Value, sign: impl Fn(&[u8]) -> Vec<u8>) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let input = format!(
        "{}.{}",
        b64.encode(header.to_string()),
        b64.encode(claims.to_string())
    );
    let signature = sign(input.as_bytes());
    format!("{input}.{}", b64.encode(signature))
}

/// An RS256 signature with the fixture key, the account's own.
fn rs256_with_fixture_key(message: &[u8]) -> Vec<u8> {
    use base64::Engine as _;
    let body: String = fixture("rsa2048.pkcs8.pem")
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .unwrap();
    let pair = aws_lc_rs::signature::RsaKeyPair::from_pkcs8(&der).unwrap();
    let mut signature = vec![0; pair.public_modulus_len()];
    pair.sign(
        &aws_lc_rs::signature::RSA_PKCS1_SHA256,
        &aws_lc_rs::rand::SystemRandom::new(),
        message,
        &mut signature,
    )
    .unwrap();
    signature
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims that break none of the mock's rules, before a case changes one.
fn good_claims(mock: &MockService) -> Value {
    let now = unix_now();
    serde_json::json!({
        "iss": CLIENT_ID,
        "sub": CLIENT_ID,
        "aud": mock.audience(),
        "iat": now,
        "exp": now + 300,
        "jti": Uuid::new_v4().to_string(),
    })
}

#[tokio::test]
async fn mock_refuses_forged_or_malformed_token_requests_and_issues_no_token() {
    let mock = mock().await;
    let key = fixture("rsa2048.pkcs8.pem");
    let now = SystemTime::now();
    let rs256 = serde_json::json!({"alg": "RS256", "typ": "JWT"});

    let mut claims = good_claims(&mock);
    claims["sub"] = "someone-else".into();
    let sub_not_iss = jws(&rs256, &claims, rs256_with_fixture_key);

    let mut unknown = signer(&mock, Duration::from_secs(300), &key);
    unknown.client_id = "sa-unknown-client".into();
    let unknown = unknown.sign(now, Uuid::new_v4()).unwrap();

    let hs256 = jws(
        &serde_json::json!({"alg": "HS256", "typ": "JWT"}),
        &good_claims(&mock),
        |message| {
            let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, b"shared-secret");
            aws_lc_rs::hmac::sign(&key, message).as_ref().to_vec()
        },
    );
    let wrong_typ = jws(
        &serde_json::json!({"alg": "RS256", "typ": "at+jwt"}),
        &good_claims(&mock),
        rs256_with_fixture_key,
    );
    let no_typ = jws(
        &serde_json::json!({"alg": "RS256"}),
        &good_claims(&mock),
        rs256_with_fixture_key,
    );
    // Well beyond any leeway for clocks a little apart.
    let future_iat = signer(&mock, Duration::from_secs(300), &key)
        .sign(now + Duration::from_secs(600), Uuid::new_v4())
        .unwrap();
    // Just over the hour: refused whether or not the mock allows leeway.
    let exp_past_an_hour = signer(&mock, Duration::from_secs(3700), &key)
        .sign(now, Uuid::new_v4())
        .unwrap();
    let fine = signer(&mock, Duration::from_secs(300), &key)
        .sign(now, Uuid::new_v4())
        .unwrap();

    let invalid_client = (StatusCode::UNAUTHORIZED, "invalid_client");
    let invalid_request = (StatusCode::BAD_REQUEST, "invalid_request");
    // (form, expected status and `error`, expected `error_description`)
    type Form<'a> = Vec<(&'a str, &'a str)>;
    let cases: Vec<(Form, (StatusCode, &str), &str)> = vec![
        (
            fields(&sub_not_iss),
            invalid_client,
            "claims `iss` and `sub` must both be the client id",
        ),
        (
            vec![
                ("client_id", "sa-unknown-client"),
                ("organization_id", ORGANIZATION_ID),
                ("client_assertion", unknown.expose()),
            ],
            invalid_client,
            "unknown client",
        ),
        (
            fields(&hs256),
            invalid_client,
            "the assertion's alg must be RS256",
        ),
        (
            fields(&wrong_typ),
            invalid_client,
            "the assertion's typ must be JWT",
        ),
        (
            fields(&no_typ),
            invalid_client,
            "the assertion's typ must be JWT",
        ),
        (
            fields(future_iat.expose()),
            invalid_client,
            "claim `iat` is in the future",
        ),
        (
            fields(exp_past_an_hour.expose()),
            invalid_client,
            "claim `exp` is more than an hour ahead",
        ),
        (
            vec![
                ("grant_type", "client_credentials"),
                (
                    "client_assertion_type",
                    "urn:ietf:params:oauth:client-assertion-type:saml2-bearer",
                ),
                ("client_id", CLIENT_ID),
                ("organization_id", ORGANIZATION_ID),
                ("client_assertion", fine.expose()),
            ],
            invalid_request,
            "client_assertion_type must be the RFC 7523 jwt-bearer type",
        ),
        (
            vec![
                ("client_id", CLIENT_ID),
                ("organization_id", ORGANIZATION_ID),
                ("client_id", CLIENT_ID),
                ("client_assertion", fine.expose()),
            ],
            invalid_request,
            "parameter `client_id` is repeated",
        ),
    ];
    for (form, (status, error), why) in cases {
        let (got, body) = post_form(&mock.token_url(), &form).await;
        assert_eq!(got, status, "{why}: {body}");
        assert_eq!(body["error"], error, "{why}");
        assert_eq!(body["error_description"], why);
        assert!(body.get("access_token").is_none(), "{why}: {body}");
    }
    assert_eq!(mock.counters().tokens_issued, 0);
    assert!(mock.last_accepted().is_none());

    // None of those burnt `fine`'s jti: the same assertion, sent properly,
    // is granted.
    let (status, body) = post_form(&mock.token_url(), &fields(fine.expose())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        mock.token_owner(body["access_token"].as_str().unwrap())
            .is_some()
    );
}

/// Each part of the assertion that is malformed, and each claim that is
/// missing or of the wrong type, is named in the refusal.
#[tokio::test]
async fn mock_names_what_is_malformed_in_an_assertion() {
    use base64::Engine as _;
    let b64 = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let mock = mock().await;
    let rs256 = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    let good = jws(&rs256, &good_claims(&mock), rs256_with_fixture_key);
    let [header, claims, _signature] = good.split('.').collect::<Vec<_>>()[..] else {
        panic!("a compact JWS has three parts");
    };
    let without = |claim: &str| {
        let mut claims = good_claims(&mock);
        claims.as_object_mut().unwrap().remove(claim);
        jws(&rs256, &claims, rs256_with_fixture_key)
    };
    let with = |claim: &str, value: Value| {
        let mut claims = good_claims(&mock);
        claims[claim] = value;
        jws(&rs256, &claims, rs256_with_fixture_key)
    };
    let signed_header = |header: Value| jws(&header, &good_claims(&mock), rs256_with_fixture_key);

    let cases: Vec<(String, &str)> = vec![
        (
            format!("!!.{claims}.AAAA"),
            "the assertion's header is not base64url",
        ),
        (
            format!("{}.{claims}.AAAA", b64("{not json")),
            "the assertion's header is not JSON",
        ),
        (
            format!("{header}.!!.AAAA"),
            "the assertion's claims is not base64url",
        ),
        (
            format!("{header}.{}.AAAA", b64("{not json")),
            "the assertion's claims is not JSON",
        ),
        (
            format!("{header}.{claims}.!!"),
            "the assertion's signature is not base64url",
        ),
        (
            signed_header(serde_json::json!({"alg": "none", "typ": "JWT"})),
            "the assertion's alg must be RS256",
        ),
        (
            signed_header(serde_json::json!({"typ": "JWT"})),
            "the assertion's alg must be RS256",
        ),
        (
            signed_header(serde_json::json!({"alg": "RS256", "typ": 5})),
            "the assertion's typ must be JWT",
        ),
        (
            signed_header(serde_json::json!({"alg": "RS256", "typ": "JWT", "kid": 5})),
            "the assertion's header has a member of the wrong type",
        ),
        (without("iss"), "claim `iss` is missing or not a string"),
        (without("sub"), "claim `sub` is missing or not a string"),
        (
            with("sub", 5.into()),
            "claim `sub` is missing or not a string",
        ),
        (
            without("aud"),
            "claim `aud` is not this service's IAM audience",
        ),
        (
            with("aud", serde_json::json!([])),
            "claim `aud` is not this service's IAM audience",
        ),
        (without("exp"), "claim `exp` is missing or not a number"),
        (
            with("exp", "soon".into()),
            "claim `exp` is missing or not a number",
        ),
        (
            with("exp", (unix_now() as f64 + 300.5).into()),
            "claim `exp` is missing or not a number",
        ),
        (without("iat"), "claim `iat` is missing or not a number"),
        (without("jti"), "claim `jti` is missing or not a string"),
        // RFC 7519 §4.1.4: the current time must be before `exp`.
        (with("exp", unix_now().into()), "the assertion has expired"),
    ];
    for (assertion, why) in cases {
        let (status, body) = post_form(&mock.token_url(), &fields(&assertion)).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{why}: {body}");
        assert_eq!(body["error"], "invalid_client", "{why}");
        assert_eq!(body["error_description"], why);
    }
    assert_eq!(mock.counters().tokens_issued, 0);

    // An `aud` array that holds this service's audience is accepted.
    let listed = with(
        "aud",
        serde_json::json!(["https://elsewhere.example", mock.audience()]),
    );
    let (status, body) = post_form(&mock.token_url(), &fields(&listed)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
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
