//! `userinfo` as docs/oidc.md ("The access token") says: it answers what
//! the access token carries sealed, on any replica, and asks the service
//! nothing, so that a flood of it spends none of a replica's budget of
//! calls to the service; one token's flood is throttled per token; and an
//! access token another key sealed, or one tampered with, is refused
//! without a word of it echoed.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::Method;
use lanyard::mock::MockService;
use lanyard::verifier::{MAX_ACCESS_TOKEN, USERINFO_PER_MINUTE};
use serde_json::{Value, json};

use crate::support::flood::metric;
use crate::support::logs::Logs;
use crate::support::relying_party::{
    self, ISSUER, ISSUER_PATH, code_of, enc, jwks, sealed_request, shop_query, shop_redeems,
    userinfo, verified_with,
};
use crate::support::sidecar::{Answer, send};
use crate::support::verifier::{self, Browser, Running};
use crate::support::{self};

/// Replicas of one provider against one mock: the same clients file,
/// signing key and session key.
struct Shared {
    mock: Arc<MockService>,
    clients: String,
    key: String,
    _dir: tempfile::TempDir,
}

impl Shared {
    async fn new() -> Shared {
        let dir = tempfile::tempdir().unwrap();
        Shared {
            mock: Arc::new(support::mock().await),
            clients: relying_party::clients_file(dir.path()),
            key: relying_party::key_file(dir.path(), "oidc.pem"),
            _dir: dir,
        }
    }

    /// A replica with the shared session key and `extra` settings.
    async fn replica(&self, extra: &[(&str, &str)]) -> Running {
        self.replica_keyed(&STANDARD.encode([42u8; 32]), extra)
            .await
    }

    /// A replica with `session_key` (`LANYARD_VERIFIER_SESSION_KEY`).
    async fn replica_keyed(&self, session_key: &str, extra: &[(&str, &str)]) -> Running {
        let mut settings = vec![
            ("LANYARD_OIDC_ISSUER", ISSUER),
            ("LANYARD_OIDC_CLIENTS_FILE", self.clients.as_str()),
            ("LANYARD_OIDC_SIGNING_KEY_FILE", self.key.as_str()),
            ("LANYARD_VERIFIER_SESSION_KEY", session_key),
        ];
        settings.extend_from_slice(extra);
        verifier::start_shared(self.mock.clone(), None, &settings).await
    }

    /// A login of the shop's on `replica`, the wallet presenting `claims`
    /// (empty: the mock's own), redeemed there: the token answer's JSON.
    async fn tokens_from(&self, replica: &Running, claims: Value) -> Value {
        let base = base(replica);
        let page = send(
            Method::GET,
            &format!("{base}/authorize?{}", shop_query("")),
            &[],
            Bytes::new(),
        )
        .await;
        assert_eq!(page.status, 200, "{}", support::text(&page.body));
        let claims = match claims {
            Value::Null => Bytes::new(),
            claims => Bytes::from(claims.to_string()),
        };
        let mock = &self.mock;
        let redirect = relying_party::through_page_presenting(
            &base,
            &sealed_request(&page),
            |service_id| mock.wallet_present_url(service_id),
            claims,
        )
        .await;
        let answer = shop_redeems(&base, &code_of(&redirect)).await;
        assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
        answer.json()
    }

    /// Requests the mock's API has answered so far.
    fn service_calls(&self) -> u64 {
        self.mock.counters().api_requests
    }
}

/// The issuer's URL on `replica`.
fn base(replica: &Running) -> String {
    format!("{}{ISSUER_PATH}", replica.url)
}

fn access_token(tokens: &Value) -> String {
    tokens["access_token"].as_str().unwrap().to_string()
}

/// The ID token's claims, verified.
async fn id_token_claims(replica: &Running, tokens: &Value) -> Value {
    let id_token = tokens["id_token"].as_str().unwrap();
    verified_with(&jwks(&base(replica)).await, id_token, ISSUER, "shop").unwrap()
}

/// The whole of an answer as text: its headers and its body.
fn everything(answer: &Answer) -> String {
    let headers: Vec<String> = answer
        .headers
        .iter()
        .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value.as_bytes())))
        .collect();
    format!("{}\n{}", headers.join("\n"), support::text(&answer.body))
}

#[tokio::test]
async fn a_replica_that_never_saw_the_login_answers_userinfo_asking_the_service_nothing() {
    let shared = Shared::new().await;
    let (a, b) = (shared.replica(&[]).await, shared.replica(&[]).await);
    // The page, the polls and the token request on A, which saw the claims.
    let tokens = shared.tokens_from(&a, Value::Null).await;
    let sub = id_token_claims(&a, &tokens).await["sub"].clone();

    let before = shared.service_calls();
    let answer = userinfo(&base(&b), &access_token(&tokens)).await;
    assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
    let info = answer.json();
    assert_eq!(info["sub"], sub);
    assert_eq!(info["given_name"], "Erika");
    assert_eq!(info["birthdate"], "1984-01-26");
    assert_eq!(shared.service_calls(), before, "B asked the service");
}

#[tokio::test]
async fn one_tokens_userinfo_flood_is_throttled_and_leaves_the_service_budget_to_logins() {
    let shared = Shared::new().await;
    let a = shared.replica(&[]).await;
    // B may call the service twice an hour: what a flood that reached the
    // service would spend at once.
    let b = shared
        .replica(&[("LANYARD_VERIFIER_SERVICE_CALLS", "2/1h")])
        .await;
    let flooding = access_token(&shared.tokens_from(&a, Value::Null).await);
    let other = access_token(&shared.tokens_from(&a, Value::Null).await);

    let before = shared.service_calls();
    let mut answered: u32 = 0;
    let throttled = loop {
        let answer = userinfo(&base(&b), &flooding).await;
        match answer.status.as_u16() {
            200 => answered += 1,
            429 => break answer,
            status => panic!(
                "userinfo answered {status} after {answered}: {}",
                support::text(&answer.body)
            ),
        }
        assert!(
            answered <= 10 * USERINFO_PER_MINUTE,
            "{answered} answered, none throttled"
        );
    };
    assert!(
        answered >= USERINFO_PER_MINUTE,
        "throttled after {answered}"
    );
    let wait: u64 = throttled.headers["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=60).contains(&wait), "Retry-After: {wait}");
    assert_eq!(throttled.json()["error"], "temporarily_unavailable");
    assert!(!everything(&throttled).contains("Erika"));
    assert_eq!(
        shared.service_calls(),
        before,
        "the flood reached the service"
    );

    // Throttled per token: another login's token is answered, and so is
    // another person's start, which needs the service.
    let answer = userinfo(&base(&b), &other).await;
    assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
    let page = send(
        Method::GET,
        &format!("{}/authorize?{}", base(&b), shop_query("")),
        &[],
        Bytes::new(),
    )
    .await;
    let start = format!(
        "{}/api/start?authorization={}",
        base(&b),
        enc(&sealed_request(&page))
    );
    let started = Browser::default()
        .request(
            Method::POST,
            &start,
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(started.status, 200, "{}", support::text(&started.body));
    let refusals = r#"lanyard_oidc_refusals_total{client_id="shop",reason="userinfo_throttled"}"#;
    assert!(metric(&b.admin, refusals).await >= 1.0);
}

#[tokio::test]
async fn a_tampered_or_foreign_access_token_is_invalid_token_and_nothing_of_it_is_echoed() {
    let (logs, _guard) = Logs::capture();
    let shared = Shared::new().await;
    let a = shared.replica(&[]).await;
    let foreign = shared.replica_keyed(&STANDARD.encode([7u8; 32]), &[]).await;
    let token = access_token(&shared.tokens_from(&a, Value::Null).await);
    let sealed = URL_SAFE_NO_PAD.decode(&token).unwrap();
    assert!(
        !String::from_utf8_lossy(&sealed).contains("Erika"),
        "the claims are sealed, not only encoded"
    );

    // One bit flipped in the nonce, the text and the tag; cut short; made
    // longer; and the right token at a provider with another session key.
    let mut tampered = Vec::new();
    for at in [0, sealed.len() / 2, sealed.len() - 1] {
        let mut bytes = sealed.clone();
        bytes[at] ^= 1;
        tampered.push(URL_SAFE_NO_PAD.encode(bytes));
    }
    tampered.push(token[..token.len() - 4].to_string());
    tampered.push(format!("{token}AAAA"));
    let mut cases: Vec<(&Running, &str)> = tampered.iter().map(|t| (&a, t.as_str())).collect();
    cases.push((&foreign, &token));
    for (replica, presented) in cases {
        let answer = userinfo(&base(replica), presented).await;
        assert_eq!(answer.status, 401, "{}", support::text(&answer.body));
        let challenge = answer.headers["www-authenticate"].to_str().unwrap();
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert_eq!(answer.json()["error"], "invalid_token");
        let all = everything(&answer);
        for echoed in [presented, &presented[..16], "Erika"] {
            assert!(!all.contains(echoed), "{echoed} in\n{all}");
        }
    }
    let logged = String::from_utf8(logs.bytes()).unwrap();
    for secret in tampered
        .iter()
        .map(String::as_str)
        .chain([&token[..16], "Erika"])
    {
        assert!(!logged.contains(secret), "{secret} in the log");
    }
    // None of that spent the token, nor throttled it.
    assert_eq!(userinfo(&base(&a), &token).await.status, 200);
}

#[tokio::test]
async fn the_access_token_carries_the_claims_within_its_bound_and_a_portrait_past_it_is_left_out() {
    let (logs, _guard) = Logs::capture();
    let shared = Shared::new().await;
    let (a, b) = (shared.replica(&[]).await, shared.replica(&[]).await);
    // Too long for the ID token (over 1 KiB as JSON), short enough for
    // the access token; and a portrait too long for either.
    let mark = "M".repeat(1536);
    let presented = json!({
        "given_name": "Erika",
        "signature_usual_mark": mark,
        "portrait": "P".repeat(40 * 1024),
    });
    let tokens = shared.tokens_from(&a, presented).await;
    let token = access_token(&tokens);
    assert!(token.len() <= MAX_ACCESS_TOKEN, "{} bytes", token.len());
    let id_token = id_token_claims(&a, &tokens).await;
    assert!(id_token.get("signature_usual_mark").is_none());
    // The log says how many claims were left out, never which.
    assert_eq!(logs.count("left out of userinfo"), 1);
    let logged = String::from_utf8(logs.bytes()).unwrap();
    for claim in ["portrait", "PPPP", "MMMM", "Erika"] {
        assert!(!logged.contains(claim), "{claim} in the log");
    }

    let before = shared.service_calls();
    let answer = userinfo(&base(&b), &token).await;
    assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
    let info = answer.json();
    assert_eq!(info["sub"], id_token["sub"]);
    assert_eq!(info["given_name"], "Erika");
    assert_eq!(info["signature_usual_mark"], mark.as_str());
    assert!(info.get("portrait").is_none(), "past the token's bound");
    assert_eq!(shared.service_calls(), before, "B asked the service");
}
