//! The embedded mock's API over real sockets: bearer-token authentication,
//! the authorization model of docs/service.md §5.4, verification sessions with the
//! simulated wallet, and (in `mock_api/issuance.rs`) the issuance lifecycle
//! of docs/service.md §5.5; bodies, methods, hooks and transports in
//! `mock_api/transport.rs`.

use crate::support;

// Cargo builds only the files directly under `tests/` as test crates;
// these are modules of this one.
mod issuance;
mod transport;

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
