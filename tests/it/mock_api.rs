//! The embedded mock's API over real sockets: bearer-token authentication,
//! the authorization model of docs/service.md §5.4, verification sessions with the
//! simulated wallet, and the issuance lifecycle of docs/service.md §5.5.

use crate::support;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode, Version, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use lanyard::mock::{CREDENTIALS_ROLE, MockAccount, MockService, VERIFICATIONS_ROLE};
use lanyard::outbound::{self, Connector};
use serde_json::{Value, json};
use support::tls::TestCa;
use support::*;

const PROJECT: &str = "proj-demo";
const RULE: &str = "3f0c2a57-9d1e-4b8a-a6f2-5c7e1d9b0a43";

/// A mock with the fixture account, a token for it, and a client.
struct Api {
    mock: MockService,
    client: Client<Connector, Full<Bytes>>,
    token: String,
    _dir: tempfile::TempDir,
}

struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Api {
    async fn start() -> Api {
        Api::over(mock().await, &[]).await
    }

    /// Fetches a token from `mock`'s token endpoint, as the sidecar does.
    async fn over(mock: MockService, extra: &[(&str, &str)]) -> Api {
        mock.add_rule(PROJECT, RULE);
        let dir = tempfile::tempdir().unwrap();
        let access = access(&settings(&mock, dir.path(), extra));
        let issued = access.exchanger.fetch().await.unwrap();
        Api {
            client: outbound::client(access.connector),
            token: issued.access_token.expose().to_string(),
            mock,
            _dir: dir,
        }
    }

    /// Replaces the fixture account's roles and project groups; the mock
    /// looks them up on every request, so the token stays valid.
    fn grant(&self, roles: &[&str], projects: &[&str]) {
        self.mock.add_account(MockAccount {
            roles: roles.iter().map(|r| r.to_string()).collect(),
            projects: projects.iter().map(|p| p.to_string()).collect(),
            ..account()
        });
    }

    /// `{api}/organizations/{ORG}/projects/{PROJECT}{rest}`.
    fn url(&self, rest: &str) -> String {
        format!(
            "{}/organizations/{ORGANIZATION_ID}/projects/{PROJECT}{rest}",
            self.mock.api_url()
        )
    }

    fn rule_url(&self) -> String {
        self.url(&format!("/verifications/{RULE}"))
    }

    /// An API call with the token.
    async fn call(&self, method: Method, url: &str, body: Option<&str>) -> Answer {
        let auth = format!("Bearer {}", self.token);
        self.send(method, url, Some(&auth), body).await
    }

    async fn send(
        &self,
        method: Method,
        url: &str,
        authorization: Option<&str>,
        body: Option<&str>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(url);
        if let Some(value) = authorization {
            request = request.header(header::AUTHORIZATION, value);
        }
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default().to_string())))
            .unwrap();
        answer(self.client.request(request).await.unwrap()).await
    }
}

async fn answer(response: http::Response<hyper::body::Incoming>) -> Answer {
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).expect("the mock answers JSON")
    };
    Answer {
        status,
        headers,
        body,
    }
}

fn is_json(answer: &Answer) -> bool {
    answer.headers.get(header::CONTENT_TYPE).unwrap() == "application/json"
}

fn message(answer: &Answer) -> &str {
    answer.body["message"].as_str().unwrap_or_default()
}

// Authentication

#[tokio::test]
async fn missing_token_is_refused_with_401() {
    let api = Api::start().await;
    let refused = api.send(Method::GET, &api.rule_url(), None, None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(
        refused.headers[header::WWW_AUTHENTICATE]
            .to_str()
            .unwrap()
            .starts_with("Bearer")
    );
    assert!(is_json(&refused));
    assert_eq!(refused.body["error"], "unauthorized");
    assert!(message(&refused).contains("missing"), "{}", refused.body);
}

#[tokio::test]
async fn non_bearer_authorization_is_refused_with_401() {
    let api = Api::start().await;
    let refused = api
        .send(
            Method::GET,
            &api.rule_url(),
            Some("Basic dXNlcjpwYXNz"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(message(&refused).contains("not a bearer token"));
}

#[tokio::test]
async fn unknown_token_is_refused_with_401() {
    let api = Api::start().await;
    let refused = api
        .send(
            Method::GET,
            &api.rule_url(),
            Some("Bearer mock-forged"),
            None,
        )
        .await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(refused.headers.contains_key(header::WWW_AUTHENTICATE));
    assert!(message(&refused).contains("unknown or revoked"));
}

#[tokio::test]
async fn revoked_token_is_refused_with_401() {
    let api = Api::start().await;
    assert_eq!(
        api.call(Method::GET, &api.rule_url(), None).await.status,
        StatusCode::OK
    );
    api.mock.revoke_all_tokens();
    let refused = api.call(Method::GET, &api.rule_url(), None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(message(&refused).contains("unknown or revoked"));
}

#[tokio::test]
async fn expired_token_is_refused_with_401_saying_so() {
    let api = Api::start().await;
    api.mock.expire_all_tokens();
    let refused = api.call(Method::GET, &api.rule_url(), None).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    assert!(message(&refused).contains("expired"), "{}", refused.body);
}

#[tokio::test]
async fn api_root_names_the_tokens_account() {
    let api = Api::start().await;
    let root = api
        .call(Method::GET, &format!("{}/", api.mock.api_url()), None)
        .await;
    assert_eq!(root.status, StatusCode::OK);
    assert_eq!(root.body["client_id"], CLIENT_ID);
    assert_eq!(root.body["organization_id"], ORGANIZATION_ID);
    assert_eq!(root.body["roles"], json!([VERIFICATIONS_ROLE]));
}

// Authorization (docs/service.md §5.4)

#[tokio::test]
async fn account_without_the_credentials_role_gets_403_naming_it() {
    let api = Api::start().await;
    let refused = api
        .call(Method::POST, &api.url("/credentials"), Some("{}"))
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert!(is_json(&refused));
    assert_eq!(refused.body["error"], "forbidden");
    assert_eq!(refused.body["missing"], "role");
    assert_eq!(refused.body["required_role"], CREDENTIALS_ROLE);
}

#[tokio::test]
async fn account_without_the_verifications_role_gets_403_naming_it() {
    let api = Api::start().await;
    api.grant(&[CREDENTIALS_ROLE], &[PROJECT]);
    let refused = api.call(Method::POST, &api.rule_url(), None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["missing"], "role");
    assert_eq!(refused.body["required_role"], VERIFICATIONS_ROLE);
}

#[tokio::test]
async fn account_without_project_group_gets_403_naming_it() {
    let api = Api::start().await;
    api.grant(&[VERIFICATIONS_ROLE, CREDENTIALS_ROLE], &["proj-other"]);
    for url in [api.rule_url(), api.url("/credentials")] {
        let refused = api.call(Method::GET, &url, None).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{url}");
        assert_eq!(refused.body["missing"], "project_group");
        assert_eq!(refused.body["project_id"], PROJECT);
        assert!(message(&refused).contains("add it to the project's group"));
    }
}

#[tokio::test]
async fn role_is_checked_before_group() {
    let api = Api::start().await;
    api.grant(&[], &[]);
    let refused = api.call(Method::GET, &api.rule_url(), None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["missing"], "role");
}

#[tokio::test]
async fn other_organization_gets_403() {
    let api = Api::start().await;
    let url = format!(
        "{}/organizations/org-other/projects/{PROJECT}/verifications/{RULE}",
        api.mock.api_url()
    );
    let refused = api.call(Method::GET, &url, None).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    assert_eq!(refused.body["missing"], "organization");
    assert_eq!(refused.body["organization_id"], "org-other");
}

// Verification (docs/service.md §4.3)

#[tokio::test]
async fn rule_path_answers_the_published_rule() {
    let api = Api::start().await;
    let rule = api.call(Method::GET, &api.rule_url(), None).await;
    assert_eq!(rule.status, StatusCode::OK);
    assert!(is_json(&rule));
    assert_eq!(
        rule.body,
        json!({
            "rule_id": RULE,
            "project_id": PROJECT,
            "organization_id": ORGANIZATION_ID,
            "status": "published",
        })
    );
    let upper = api.url(&format!("/verifications/{}", RULE.to_uppercase()));
    assert_eq!(
        api.call(Method::GET, &upper, None).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn unknown_rule_is_404() {
    let api = Api::start().await;
    let unknown = api.url("/verifications/00000000-0000-4000-8000-000000000000");
    let missing = api.call(Method::POST, &unknown, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(is_json(&missing));
    assert_eq!(missing.body["error"], "not_found");

    let prefixed = api
        .call(Method::GET, &api.url("/verifications/ver_123"), None)
        .await;
    assert_eq!(prefixed.status, StatusCode::NOT_FOUND);
    assert!(message(&prefixed).contains("not the ver_ identifier"));
}

#[tokio::test]
async fn draft_rule_is_404_until_published() {
    let api = Api::start().await;
    let draft = "5b1d7c0e-2f4a-4e9b-8c3d-7a6f5e4d3c2b";
    api.mock.add_draft_rule(PROJECT, draft);
    let url = api.url(&format!("/verifications/{draft}"));
    let refused = api.call(Method::POST, &url, None).await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    assert!(message(&refused).contains("draft"));
    api.mock.add_rule(PROJECT, draft);
    assert_eq!(
        api.call(Method::POST, &url, None).await.status,
        StatusCode::CREATED
    );
}

#[tokio::test]
async fn verification_session_is_verified_after_wallet_presentation() {
    let api = Api::start().await;
    let started = api.call(Method::POST, &api.rule_url(), None).await;
    assert_eq!(started.status, StatusCode::CREATED);
    assert_eq!(started.body["status"], "pending");
    assert!(
        started.body["request_uri"]
            .as_str()
            .unwrap()
            .starts_with("openid4vp://")
    );
    let transaction = started.body["transaction_id"].as_str().unwrap().to_string();
    uuid::Uuid::parse_str(&transaction).unwrap();
    let poll_url = format!("{}/sessions/{transaction}", api.rule_url());

    let pending = api.call(Method::GET, &poll_url, None).await;
    assert_eq!(pending.status, StatusCode::OK);
    assert_eq!(pending.body["transaction_id"], transaction.as_str());
    assert_eq!(pending.body["status"], "pending");
    assert!(pending.body.get("claims").is_none());

    // The wallet presents straight to the service, without a token.
    let present = api.mock.wallet_present_url(&transaction);
    assert_eq!(started.body["mock_wallet_present_url"], present.as_str());
    let presented = api.send(Method::POST, &present, None, None).await;
    assert_eq!(presented.status, StatusCode::OK);

    let verified = api.call(Method::GET, &poll_url, None).await;
    assert_eq!(verified.body["status"], "verified");
    assert_eq!(verified.body["claims"]["given_name"], "Erika");
    assert_eq!(verified.body["claims"]["age_over_18"], true);
}

#[tokio::test]
async fn wallet_presents_the_claims_it_is_given_once() {
    let api = Api::start().await;
    let started = api.call(Method::POST, &api.rule_url(), Some("{}")).await;
    let transaction = started.body["transaction_id"].as_str().unwrap();
    let present = api.mock.wallet_present_url(transaction);
    let claims = r#"{"given_name":"Ada","age_over_21":true}"#;
    api.send(Method::POST, &present, None, Some(claims)).await;

    let poll_url = format!("{}/sessions/{transaction}", api.rule_url());
    let verified = api.call(Method::GET, &poll_url, None).await;
    assert_eq!(
        verified.body["claims"],
        json!({"given_name": "Ada", "age_over_21": true})
    );
    let again = api.send(Method::POST, &present, None, None).await;
    assert_eq!(again.status, StatusCode::CONFLICT);
}

#[tokio::test]
async fn declined_presentation_shows_in_the_poll() {
    let api = Api::start().await;
    let started = api.call(Method::POST, &api.rule_url(), None).await;
    let transaction = started.body["transaction_id"].as_str().unwrap();
    let decline = format!("{}/mock/wallet/{transaction}/decline", api.mock.base_url());
    let declined = api.send(Method::POST, &decline, None, None).await;
    assert_eq!(declined.status, StatusCode::OK);
    let poll_url = format!("{}/sessions/{transaction}", api.rule_url());
    assert_eq!(
        api.call(Method::GET, &poll_url, None).await.body["status"],
        "declined"
    );
}

#[tokio::test]
async fn wallet_for_unknown_transaction_is_404() {
    let api = Api::start().await;
    let present = api
        .mock
        .wallet_present_url("00000000-0000-4000-8000-000000000000");
    let missing = api.send(Method::POST, &present, None, None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert!(is_json(&missing));
}

#[tokio::test]
async fn session_is_polled_only_on_its_own_rule_path() {
    let api = Api::start().await;
    let other = "9a8b7c6d-5e4f-4a3b-9c2d-1e0f9a8b7c6d";
    api.mock.add_rule(PROJECT, other);
    let started = api.call(Method::POST, &api.rule_url(), None).await;
    let transaction = started.body["transaction_id"].as_str().unwrap();
    let wrong = api.url(&format!("/verifications/{other}/sessions/{transaction}"));
    assert_eq!(
        api.call(Method::GET, &wrong, None).await.status,
        StatusCode::NOT_FOUND
    );
}

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
