//! The mock's own rules for token requests, each refusal named: a
//! replayed `jti`, assertions that break the seeds' rules, forged or
//! malformed requests, and each malformed part or claim of an assertion.

use super::*;

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

/// Assertions that each break one of the seeds' rules, with the refusal
/// each gets.
fn rule_breaking_assertions(mock: &MockService) -> Vec<(String, &'static str)> {
    let key = fixture("rsa2048.pkcs8.pem");
    let now = SystemTime::now();
    let good = signer(mock, Duration::from_secs(300), &key);
    let sign = |signer: &AssertionSigner, at: SystemTime, jti: Uuid| {
        signer.sign(at, jti).unwrap().expose().to_owned()
    };
    let mut wrong_aud = signer(mock, Duration::from_secs(300), &key);
    wrong_aud.audience = "https://elsewhere.example/iam".into();
    let other_key = lanyard::mock::generate_rsa_key().unwrap();
    let v1 = Uuid::parse_str("6fa459ea-ee8a-11ca-8f3d-0800200c9a66").unwrap();
    let too_long = signer(mock, Duration::from_secs(7200), &key);
    let wrong_key = signer(
        mock,
        Duration::from_secs(300),
        other_key.private_pem.expose(),
    );
    vec![
        (
            sign(&too_long, now, Uuid::new_v4()),
            "claim `exp` is more than an hour ahead",
        ),
        (
            sign(&good, now - Duration::from_secs(3600), Uuid::new_v4()),
            "the assertion has expired",
        ),
        (
            sign(&wrong_aud, now, Uuid::new_v4()),
            "claim `aud` is not this service's IAM audience",
        ),
        (
            sign(&wrong_key, now, Uuid::new_v4()),
            "the assertion's signature does not verify with the account's key",
        ),
        (sign(&good, now, v1), "claim `jti` must be a UUID v4"),
    ]
}

#[tokio::test]
async fn mock_refuses_assertions_that_break_the_seeds_rules() {
    let mock = mock().await;
    let key = fixture("rsa2048.pkcs8.pem");
    let broken = rule_breaking_assertions(&mock);
    let fine = signer(&mock, Duration::from_secs(300), &key)
        .sign(SystemTime::now(), Uuid::new_v4())
        .unwrap();

    let mut cases: Vec<(Vec<(&str, &str)>, &str)> =
        broken.iter().map(|(a, why)| (fields(a), *why)).collect();
    cases.extend([
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
    ]);
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

/// Assertions the mock refuses as `invalid_client`, forged or malformed
/// in ways lanyard never signs, each with the refusal's description.
fn forged_assertions(mock: &MockService) -> Vec<(String, &'static str)> {
    let key = fixture("rsa2048.pkcs8.pem");
    let now = SystemTime::now();
    let rs256 = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    let mut claims = good_claims(mock);
    claims["sub"] = "someone-else".into();
    let hs256 = |message: &[u8]| {
        let key = aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, b"shared-secret");
        aws_lc_rs::hmac::sign(&key, message).as_ref().to_vec()
    };
    let signed = |header: Value| jws(&header, &good_claims(mock), rs256_with_fixture_key);
    let sign = |lifetime: u64, at: SystemTime| {
        let signer = signer(mock, Duration::from_secs(lifetime), &key);
        signer.sign(at, Uuid::new_v4()).unwrap().expose().to_owned()
    };
    vec![
        (
            jws(&rs256, &claims, rs256_with_fixture_key),
            "claims `iss` and `sub` must both be the client id",
        ),
        (
            jws(
                &serde_json::json!({"alg": "HS256", "typ": "JWT"}),
                &good_claims(mock),
                hs256,
            ),
            "the assertion's alg must be RS256",
        ),
        (
            signed(serde_json::json!({"alg": "RS256", "typ": "at+jwt"})),
            "the assertion's typ must be JWT",
        ),
        (
            signed(serde_json::json!({"alg": "RS256"})),
            "the assertion's typ must be JWT",
        ),
        // Well beyond any leeway for clocks a little apart.
        (
            sign(300, now + Duration::from_secs(600)),
            "claim `iat` is in the future",
        ),
        // Just over the hour: refused whether or not the mock allows leeway.
        (sign(3700, now), "claim `exp` is more than an hour ahead"),
    ]
}

#[tokio::test]
async fn mock_refuses_forged_or_malformed_token_requests_and_issues_no_token() {
    let mock = mock().await;
    let key = fixture("rsa2048.pkcs8.pem");
    let now = SystemTime::now();
    let forged = forged_assertions(&mock);
    let mut unknown = signer(&mock, Duration::from_secs(300), &key);
    unknown.client_id = "sa-unknown-client".into();
    let unknown = unknown.sign(now, Uuid::new_v4()).unwrap();
    let fine = signer(&mock, Duration::from_secs(300), &key)
        .sign(now, Uuid::new_v4())
        .unwrap();

    let invalid_client = (StatusCode::UNAUTHORIZED, "invalid_client");
    let invalid_request = (StatusCode::BAD_REQUEST, "invalid_request");
    // (form, expected status and `error`, expected `error_description`)
    type Form<'a> = Vec<(&'a str, &'a str)>;
    let mut cases: Vec<(Form, (StatusCode, &str), &str)> = forged
        .iter()
        .map(|(assertion, why)| (fields(assertion), invalid_client, *why))
        .collect();
    cases.extend([
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
    ]);
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

/// Assertions whose parts are not base64url or not JSON, each with the
/// refusal that names the part.
fn malformed_parts(mock: &MockService) -> Vec<(String, &'static str)> {
    use base64::Engine as _;
    let b64 = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
    let rs256 = serde_json::json!({"alg": "RS256", "typ": "JWT"});
    let good = jws(&rs256, &good_claims(mock), rs256_with_fixture_key);
    let [header, claims, _signature] = good.split('.').collect::<Vec<_>>()[..] else {
        panic!("a compact JWS has three parts");
    };
    vec![
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
    ]
}

/// Each part of the assertion that is malformed, and each claim that is
/// missing or of the wrong type, is named in the refusal.
#[tokio::test]
async fn mock_names_what_is_malformed_in_an_assertion() {
    let mock = mock().await;
    let rs256 = serde_json::json!({"alg": "RS256", "typ": "JWT"});
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

    let mut cases = malformed_parts(&mock);
    cases.extend(vec![
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
    ]);
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
