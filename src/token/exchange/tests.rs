//! The token endpoint's answers as lanyard reads them (RFC 6749 §5.1 and
//! §5.2, docs/tokens.md "Token exchange"): lifetimes, malformed and refused
//! answers, `Retry-After`, and error text that may echo a secret.

use super::*;

fn ok(body: &str) -> Result<Issued, ExchangeError> {
    interpret(
        StatusCode::OK,
        &http::HeaderMap::new(),
        body.as_bytes(),
        SystemTime::now(),
    )
}

fn malformed(body: &str) -> String {
    match ok(body) {
        Err(ExchangeError::Malformed(why)) => why,
        other => panic!("expected malformed for {body}, got {other:?}"),
    }
}

#[test]
fn valid_response_is_accepted_with_numeric_or_string_lifetime() {
    let issued = ok(r#"{"access_token":"abc","token_type":"bearer","expires_in":120}"#).unwrap();
    assert_eq!(issued.access_token.expose(), "abc");
    assert_eq!(issued.lifetime, Duration::from_secs(120));
    let issued = ok(r#"{"access_token":"abc","token_type":"Bearer","expires_in":"90"}"#).unwrap();
    assert_eq!(issued.lifetime, Duration::from_secs(90));
    assert!(!issued.lifetime_assumed);
}

#[test]
fn missing_expires_in_is_taken_as_300_seconds() {
    let issued = ok(r#"{"access_token":"abc","token_type":"Bearer"}"#).unwrap();
    assert_eq!(issued.lifetime, Duration::from_secs(300));
    assert!(issued.lifetime_assumed);
}

#[test]
fn huge_expires_in_is_clamped_to_a_day() {
    let issued =
        ok(r#"{"access_token":"abc","token_type":"Bearer","expires_in":99999999999999999999}"#)
            .unwrap();
    assert_eq!(issued.lifetime, MAX_TOKEN_LIFETIME);
}

#[test]
fn malformed_responses_say_what_is_wrong() {
    assert_eq!(malformed(""), "the body is empty");
    assert_eq!(malformed("<html>"), "the body is not JSON");
    assert_eq!(malformed("[1]"), "the body is not a JSON object");
    assert_eq!(
        malformed(r#"{"token_type":"Bearer"}"#),
        "`access_token` is missing"
    );
    assert_eq!(
        malformed(r#"{"access_token":"","token_type":"Bearer"}"#),
        "`access_token` is empty"
    );
    assert_eq!(
        malformed(r#"{"access_token":5,"token_type":"Bearer"}"#),
        "`access_token` is not a string"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a b","token_type":"Bearer"}"#),
        "`access_token` has characters not allowed in an HTTP header"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a"}"#),
        "`token_type` is missing"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a","token_type":"mac"}"#),
        "`token_type` is `mac`, expected Bearer"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a","token_type":"Bearer","expires_in":0}"#),
        "`expires_in` is 0; a token must live longer than 0 s"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a","token_type":"Bearer","expires_in":-5}"#),
        "`expires_in` is -5; a token must live longer than 0 s"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a","token_type":"Bearer","expires_in":"soon"}"#),
        "`expires_in` is not a whole number of seconds"
    );
    assert_eq!(
        malformed(r#"{"access_token":"a","token_type":"Bearer","expires_in":1.5}"#),
        "`expires_in` is not a whole number of seconds"
    );
}

#[test]
fn malformed_message_never_contains_the_token() {
    let why = malformed(
        r#"{"access_token":"s3cr3t-token","token_type":"s3cr3t-token-type-that-is-long"}"#,
    );
    assert!(!why.contains("s3cr3t-token\""), "{why}");
}

#[test]
fn statuses_are_classified() {
    let headers = http::HeaderMap::new();
    let now = SystemTime::now();
    let err = interpret(
        StatusCode::UNAUTHORIZED,
        &headers,
        br#"{"error":"invalid_client","error_description":"signature does not verify"}"#,
        now,
    )
    .unwrap_err();
    assert_eq!(err.kind(), "rejected");
    assert!(err.is_rejection());
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 401 (invalid_client: signature does not verify)"
    );
    let err = interpret(StatusCode::BAD_GATEWAY, &headers, b"", now).unwrap_err();
    assert_eq!(err.kind(), "server_error");
    let err = interpret(StatusCode::FOUND, &headers, b"", now).unwrap_err();
    assert_eq!(err.kind(), "unexpected_status");
}

#[test]
fn a_description_is_quoted_without_the_characters_that_hide_or_reorder_text() {
    let body = "{\"error\":\"invalid_client\",\"error_description\":\"key \u{202E}deifitnedi\u{202C} un\u{200B}known\u{FEFF}\u{E0041}\"}";
    let err = interpret(
        StatusCode::UNAUTHORIZED,
        &http::HeaderMap::new(),
        body.as_bytes(),
        SystemTime::now(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 401 (invalid_client: key deifitnedi unknown)"
    );
}

#[test]
fn echoed_assertion_is_not_quoted() {
    let err = interpret(
        StatusCode::BAD_REQUEST,
        &http::HeaderMap::new(),
        br#"{"error":"invalid_grant","error_description":"bad assertion eyJhbGciOi.x.y"}"#,
        SystemTime::now(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 400 (invalid_grant)"
    );
}

#[test]
fn description_echoing_long_encoded_text_is_not_quoted() {
    let signature = "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk0dBjftJeZ4CVP";
    let body =
        format!(r#"{{"error":"invalid_client","error_description":"bad signature {signature}"}}"#);
    let err = interpret(
        StatusCode::UNAUTHORIZED,
        &http::HeaderMap::new(),
        body.as_bytes(),
        SystemTime::now(),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "the token endpoint refused the request: HTTP 401 (invalid_client)"
    );
}

#[test]
fn retry_after_accepts_seconds_and_http_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let mut headers = http::HeaderMap::new();
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("7"));
    let err = interpret(StatusCode::TOO_MANY_REQUESTS, &headers, b"", now).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(7)));
    let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
    headers.insert(header::RETRY_AFTER, HeaderValue::from_str(&later).unwrap());
    let err = interpret(StatusCode::TOO_MANY_REQUESTS, &headers, b"", now).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(30)));
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("whenever"));
    let err = interpret(StatusCode::TOO_MANY_REQUESTS, &headers, b"", now).unwrap_err();
    assert_eq!(err.retry_after(), None);
}

#[test]
fn a_retry_after_past_the_cap_is_reported_as_the_wait_kept() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let far = httpdate::fmt_http_date(now + Duration::from_secs(86_400 * 30));
    for asked in ["999999999", "99999999999999999999999", far.as_str()] {
        let mut headers = http::HeaderMap::new();
        headers.insert(header::RETRY_AFTER, HeaderValue::from_str(asked).unwrap());
        let err = interpret(StatusCode::SERVICE_UNAVAILABLE, &headers, b"", now).unwrap_err();
        assert_eq!(err.retry_after(), Some(MAX_RETRY_AFTER), "{asked}");
        let said = err.to_string();
        assert!(said.ends_with("retry after 3600 s"), "{said}");
        assert!(!said.contains("999999999"), "{said}");
    }
}
