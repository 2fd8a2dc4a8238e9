//! The mock's API at its edges: bodies, paths and methods, its test
//! hooks, and HTTP/2 and TLS.

use super::*;

// Bodies, paths and methods

#[tokio::test]
async fn bad_json_is_400() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    for body in ["{not json", "[1, 2]", ""] {
        let refused = api
            .call(Method::POST, &api.url("/credentials"), Some(body))
            .await;
        assert_eq!(refused.status, StatusCode::BAD_REQUEST, "{body:?}");
        assert!(is_json(&refused));
        assert_eq!(refused.body["error"], "bad_request");
    }
}

#[tokio::test]
async fn oversized_body_is_413() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(1024 * 1024));
    let refused = api
        .call(Method::POST, &api.url("/credentials"), Some(&big))
        .await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(is_json(&refused));
}

/// A body of `left` 64 KiB frames of spaces with no declared length, so
/// it is sent chunked and only the mock's reading limit can stop it.
struct Unsized {
    left: usize,
}

impl hyper::body::Body for Unsized {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if self.left == 0 {
            return std::task::Poll::Ready(None);
        }
        self.left -= 1;
        let frame = hyper::body::Frame::data(Bytes::from(vec![b' '; 64 * 1024]));
        std::task::Poll::Ready(Some(Ok(frame)))
    }
}

#[tokio::test]
async fn oversized_body_without_a_length_is_413() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let client = Client::builder(TokioExecutor::new()).build_http::<Unsized>();
    let request = Request::post(api.url("/credentials"))
        .header(header::AUTHORIZATION, format!("Bearer {}", api.token))
        .body(Unsized { left: 20 })
        .unwrap();
    let refused = answer(client.request(request).await.unwrap()).await;
    assert_eq!(refused.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn wrong_method_is_405_naming_the_allowed_ones() {
    let api = Api::start().await;
    let refused = api.call(Method::DELETE, &api.rule_url(), None).await;
    assert_eq!(refused.status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(is_json(&refused));
    assert_eq!(refused.headers[header::ALLOW], "GET, POST");
    assert_eq!(refused.body["error"], "method_not_allowed");
}

#[tokio::test]
async fn unknown_api_path_is_404() {
    let api = Api::start().await;
    let url = format!("{}/nothing/here", api.mock.api_url());
    let missing = api.call(Method::GET, &url, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(is_json(&missing));
    assert_eq!(missing.body["error"], "not_found");
}

// Test hooks and transports

#[tokio::test]
async fn last_api_request_records_what_arrived_even_when_refused() {
    let api = Api::start().await;
    let before = api.mock.counters().api_requests;
    let url = format!("{}?page=2&q=a%20b", api.rule_url());
    let mut request = Request::get(url)
        .header("x-request-id", "abc-123")
        .body(Full::new(Bytes::new()))
        .unwrap();
    request
        .headers_mut()
        .insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
    let refused = answer(api.client.request(request).await.unwrap()).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    assert_eq!(api.mock.counters().api_requests, before + 1);
    let seen = api.mock.last_api_request().unwrap();
    assert_eq!(seen.method, Method::GET);
    assert_eq!(
        seen.path_and_query,
        format!(
            "/api/organizations/{ORGANIZATION_ID}/projects/{PROJECT}/verifications/{RULE}?page=2&q=a%20b"
        )
    );
    assert_eq!(seen.headers["x-request-id"], "abc-123");
    assert_eq!(seen.headers[header::AUTHORIZATION], "Bearer wrong");
}

#[tokio::test]
async fn wallet_and_token_requests_are_not_api_requests() {
    let api = Api::start().await;
    assert_eq!(api.mock.counters().api_requests, 0);
    assert!(api.mock.last_api_request().is_none());
    let present = api.mock.wallet_present_url("nope");
    api.send(Method::POST, &present, None, None).await;
    assert_eq!(api.mock.counters().api_requests, 0);
}

#[tokio::test]
async fn api_answers_http2_with_prior_knowledge() {
    let api = Api::start().await;
    let h2 = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let request = Request::get(api.rule_url())
        .header(header::AUTHORIZATION, format!("Bearer {}", api.token))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = h2.request(request).await.unwrap();
    assert_eq!(response.version(), Version::HTTP_2);
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        api.mock.last_api_request().unwrap().version,
        Version::HTTP_2
    );
}

#[tokio::test]
async fn api_is_served_over_tls_with_h2_by_alpn() {
    let ca = TestCa::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mock = MockService::serve(listener, Some(ca.server.clone()));
    mock.add_account(account());
    let dir = tempfile::tempdir().unwrap();
    let ca_file = write(dir.path(), "ca.pem", &ca.ca_pem);
    let api = Api::over(mock, &[("LANYARD_CA_FILE", ca_file.to_str().unwrap())]).await;
    assert!(api.mock.api_url().starts_with("https://localhost:"));

    let rule = api.call(Method::GET, &api.rule_url(), None).await;
    assert_eq!(rule.status, StatusCode::OK);
    assert_eq!(
        api.mock.last_api_request().unwrap().version,
        Version::HTTP_2
    );
}
