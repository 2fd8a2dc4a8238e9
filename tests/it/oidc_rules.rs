//! Rules per client (docs/oidc.md, "Rules per client"): a login's scope
//! picks its client's verification rule, its session is started on that
//! rule's path (as the mock records), and its ID token and `userinfo`
//! carry what that rule presented, no other; two rule scopes, or one the
//! client lacks, are `invalid_scope`; the metrics name the client, bounded
//! by the clients file; `lanyard check` probes every rule, and start-up
//! refuses a rule path that is not made of path segments. A login shown
//! on one replica and ended on another is in `oidc_replicas`.

use serde_json::Value;

use crate::oidc::{Provider, login};
use crate::support::relying_party::{
    self, AGE_RULE, BANK_CB, CHALLENGE, ISSUER, KYC_RULE, SECRET, SHOP_CB, basic, code_of, enc,
    param, params_of, shop_query,
};
use crate::support::verifier::{PROJECT, RULE};
use crate::support::{self, lanyard, text};

/// The shop's authorization request with `scope` in place of its own.
fn shop_asking(scope: &str) -> String {
    shop_query("").replace("scope=openid%20profile", &format!("scope={}", enc(scope)))
}

/// The bank's authorization request, with `scope`.
fn bank_asking(scope: &str) -> String {
    format!(
        "response_type=code&client_id=bank&redirect_uri={}&scope={}&state=b-1&nonce=n-1&code_challenge={CHALLENGE}&code_challenge_method=S256",
        enc(BANK_CB),
        enc(scope)
    )
}

/// A login of `client` for `query` presented by the mock's wallet, its
/// code redeemed: the rule path its session was started on, the ID
/// token's claims (checked with the published keys) and `userinfo`'s.
async fn logged_in(provider: &Provider, client: &str, query: &str) -> (String, Value, Value) {
    let redirect = login(provider, query, "/present").await;
    let started_on = provider.running.mock.sessions_started_on();
    let started_on = started_on.last().expect("a session started").clone();
    let callback = if client == "bank" { BANK_CB } else { SHOP_CB };
    let form = format!(
        "grant_type=authorization_code&code={}&redirect_uri={}&code_verifier={}",
        enc(&code_of(&redirect)),
        enc(callback),
        relying_party::VERIFIER
    );
    let auth = basic(client, SECRET);
    let tokens = provider.token(&form, &[("authorization", &auth)]).await;
    assert_eq!(tokens.status, 200, "{}", text(&tokens.body));
    let tokens = tokens.json();
    let jwks = relying_party::jwks(&provider.base()).await;
    let id_token = tokens["id_token"].as_str().unwrap();
    let claims = relying_party::verified_with(&jwks, id_token, ISSUER, client).unwrap();
    let access = tokens["access_token"].as_str().unwrap();
    let userinfo = relying_party::userinfo(&provider.base(), access).await;
    assert_eq!(userinfo.status, 200);
    (started_on, claims, userinfo.json())
}

fn names(object: &Value) -> Vec<&str> {
    let mut names: Vec<&str> = object
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    names.sort_unstable();
    names
}

#[tokio::test]
async fn a_login_per_scope_starts_its_rule_and_carries_only_its_claims() {
    let provider = Provider::start(&[]).await;
    relying_party::add_rules(&provider.running.mock);
    let on = |rule: &str| format!("/projects/{PROJECT}/verifications/{rule}");

    let (started_on, id_token, userinfo) =
        logged_in(&provider, "shop", &shop_asking("openid age profile")).await;
    assert!(started_on.ends_with(&on(AGE_RULE)), "{started_on}");
    assert_eq!(id_token["age_over_18"], true);
    for claim in ["given_name", "family_name", "birthdate", "nationality"] {
        assert!(id_token.get(claim).is_none(), "{claim} in {id_token}");
    }
    assert_eq!(names(&userinfo), ["age_over_18", "sub"]);

    // No rule scope and no default: the deployment's RULE_ID.
    let (started_on, id_token, _) = logged_in(&provider, "shop", &shop_asking("openid")).await;
    assert!(started_on.ends_with(&on(RULE)), "{started_on}");
    assert_eq!(id_token["given_name"], "Erika");
    assert!(id_token.get("nationality").is_none());

    // The bank's default rule, after the claims map.
    let (started_on, id_token, userinfo) =
        logged_in(&provider, "bank", &bank_asking("openid")).await;
    assert!(started_on.ends_with(&on(KYC_RULE)), "{started_on}");
    assert_eq!(
        (&id_token["given_name"], &id_token["birthdate"]),
        (&"Ada".into(), &"1815-12-10".into())
    );
    assert!(id_token.get("age_over_18").is_none() && id_token.get("birth_date").is_none());
    assert_eq!(
        names(&userinfo),
        [
            "birthdate",
            "family_name",
            "given_name",
            "nationality",
            "sub"
        ]
    );

    let metrics = provider.metrics().await;
    for line in [
        "lanyard_oidc_authorizations_total{client_id=\"shop\",outcome=\"verified\"} 2",
        "lanyard_oidc_authorizations_total{client_id=\"bank\",outcome=\"verified\"} 1",
        "lanyard_oidc_tokens_total{client_id=\"shop\"} 2",
        "lanyard_oidc_tokens_total{client_id=\"bank\"} 1",
        "lanyard_oidc_tokens_total{client_id=\"spa\"} 0",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

#[tokio::test]
async fn two_rule_scopes_or_one_the_client_lacks_is_invalid_scope() {
    let provider = Provider::start(&[]).await;
    relying_party::add_rules(&provider.running.mock);
    let discovery = relying_party::discovery(&provider.base()).await;
    assert_eq!(
        discovery["scopes_supported"],
        serde_json::json!(["openid", "age", "kyc"])
    );
    for (query, back_to, state, why) in [
        (
            shop_asking("openid age kyc"),
            SHOP_CB,
            "st-1",
            "more than one",
        ),
        (bank_asking("openid age"), BANK_CB, "b-1", "does not have"),
    ] {
        let answer = provider.authorize(&query).await;
        assert_eq!(answer.status, 303, "{query}");
        let location = answer.headers["location"].to_str().unwrap();
        assert!(location.starts_with(&format!("{back_to}?")), "{location}");
        let params = params_of(location);
        assert_eq!(param(&params, "error").as_deref(), Some("invalid_scope"));
        let description = param(&params, "error_description").unwrap();
        assert!(description.contains(why), "{description}");
        assert_eq!(param(&params, "state").as_deref(), Some(state));
        assert_eq!(param(&params, "iss").as_deref(), Some(ISSUER));
    }
    // A scope that is no client's rule is not one: left alone.
    let page = provider.authorize(&shop_asking("openid email wine")).await;
    assert_eq!(page.status, 200);
    assert!(provider.running.mock.sessions_started_on().is_empty());

    // An unknown client makes no series of its own.
    let intruder = shop_query("").replace("client_id=shop", "client_id=intruder-7f3a");
    assert_eq!(provider.authorize(&intruder).await.status, 400);
    let metrics = provider.metrics().await;
    for line in [
        "lanyard_oidc_refusals_total{client_id=\"shop\",reason=\"invalid_scope\"} 1",
        "lanyard_oidc_refusals_total{client_id=\"bank\",reason=\"invalid_scope\"} 1",
        "lanyard_oidc_refusals_total{client_id=\"unknown\",reason=\"untrusted_redirect\"} 1",
        "lanyard_oidc_authorizations_total{client_id=\"shop\",outcome=\"started\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    assert!(!metrics.contains("intruder"), "{metrics}");
}

/// The settings of a provider whose clients file is `clients`, as
/// `lanyard` reads them from its environment.
fn provider_settings(
    mock: &lanyard::mock::MockService,
    dir: &std::path::Path,
    clients: &Value,
) -> std::collections::HashMap<String, String> {
    let file = support::write(dir, "rules.json", &clients.to_string());
    let key = relying_party::key_file(dir, "oidc.pem");
    let wallet = mock.wallet_url();
    let extra = [
        ("PROJECT_ID", PROJECT),
        ("RULE_ID", RULE),
        ("WALLET_BASE_URL", wallet.as_str()),
        ("LANYARD_OIDC_ISSUER", ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", file.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
    ];
    support::settings(mock, dir, &extra)
}

#[tokio::test]
async fn check_probes_every_clients_rule_and_start_up_refuses_a_rule_path_that_is_no_segment() {
    let mock = support::mock().await;
    mock.add_rule(PROJECT, RULE);
    relying_party::add_rules(&mock);
    let dir = tempfile::tempdir().unwrap();
    let rule = |project: &str, id: &str| serde_json::json!({"project_id": project, "rule_id": id});
    let clients = serde_json::json!({"clients": [{"client_id": "shop", "redirect_uris": [SHOP_CB],
        "rules": {"age": rule(PROJECT, AGE_RULE), "kyc": rule("proj-other", KYC_RULE)}}]});
    let out = lanyard(&["check"], &provider_settings(&mock, dir.path(), &clients)).await;
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    for line in [
        "  ok    rule         the rule path answered HTTP 200",
        "  ok    rule         client shop, scope age: the rule path answered HTTP 200",
        "  FAIL  rule         client shop, scope kyc: HTTP 403: the service account likely lacks",
    ] {
        assert!(stdout.contains(line), "{line} not in\n{stdout}");
    }

    let hidden = "..%2Fsecret-project";
    let clients = serde_json::json!({"clients": [{"client_id": "shop", "redirect_uris": [SHOP_CB],
        "rules": {"age": rule(hidden, AGE_RULE), "kyc": rule(PROJECT, "ver_kyc")}}]});
    let settings = provider_settings(&mock, dir.path(), &clients);
    for command in ["verifier", "check"] {
        let out = lanyard(&[command], &settings).await;
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        for problem in [
            "clients[0].rules.age.project_id: has characters that cannot appear in a URL path segment",
            "clients[0].rules.kyc.rule_id: is the rule's `ver_` identifier",
        ] {
            assert!(stderr.contains(problem), "{problem} not in\n{stderr}");
        }
        assert!(!stderr.contains("secret-project"), "{stderr}");
    }
}
