//! The verifier as an OpenID Connect provider (docs/oidc.md), driven as a
//! relying party's browser and backend would over real sockets, against
//! the mock's service and wallet: discovery, the page, the code, the ID
//! token, `userinfo`, and every refusal on the way. The relying parties
//! nobody on the team wrote are in `oidc_interop`.

use crate::support;
use crate::support::relying_party::{
    self, CHALLENGE, ISSUER, SECRET, SHOP_CB, SPA_CB, VERIFIER, basic, enc, param, params_of,
    sealed_request, shop_form, shop_query,
};
use crate::support::sidecar::{Answer, send};
use crate::support::verifier::{self, Browser, Running};

use bytes::Bytes;
use http::Method;
use serde_json::Value;

pub(crate) struct Provider {
    pub(crate) running: Running,
    _dir: tempfile::TempDir,
}

impl Provider {
    pub(crate) async fn start(extra: &[(&str, &str)]) -> Provider {
        let dir = tempfile::tempdir().unwrap();
        let clients = relying_party::clients_file(dir.path());
        let key = relying_party::key_file(dir.path(), "oidc.pem");
        let mut settings = vec![
            ("LANYARD_OIDC_ISSUER", ISSUER),
            ("LANYARD_OIDC_CLIENTS_FILE", clients.as_str()),
            ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
        ];
        settings.extend_from_slice(extra);
        let mock = support::mock().await;
        let running = verifier::start(mock, None, &settings).await;
        Provider { running, _dir: dir }
    }

    /// The issuer's URL on this verifier.
    pub(crate) fn base(&self) -> String {
        format!("{}{}", self.running.url, relying_party::ISSUER_PATH)
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    pub(crate) async fn get(&self, path: &str) -> Answer {
        send(Method::GET, &self.url(path), &[], Bytes::new()).await
    }

    /// The admin listener's `/metrics` page.
    pub(crate) async fn metrics(&self) -> String {
        let url = format!("{}/metrics", self.running.admin);
        support::text(&send(Method::GET, &url, &[], Bytes::new()).await.body)
    }

    /// The authorization endpoint's answer to `query`.
    pub(crate) async fn authorize(&self, query: &str) -> Answer {
        self.get(&format!("/authorize?{query}")).await
    }

    /// A token request with `form` and `headers`.
    pub(crate) async fn token(&self, form: &str, headers: &[(&str, &str)]) -> Answer {
        relying_party::token(&self.base(), form, headers).await
    }
}

/// A login as a browser makes it: the page, the button, the wallet's
/// answer (`wallet`: `/present` or `/decline`), the poll that ends it.
/// Returns the URL the page is sent to.
pub(crate) async fn login(provider: &Provider, query: &str, wallet: &str) -> String {
    let mock = &provider.running.mock;
    relying_party::login(&provider.base(), query, |service_id| {
        mock.wallet_present_url(service_id)
            .replace("/present", wallet)
    })
    .await
}

#[tokio::test]
async fn discovery_and_the_jwk_set_name_every_endpoint_for_any_origin() {
    let provider = Provider::start(&[]).await;
    let discovery = provider.get("/.well-known/openid-configuration").await;
    assert_eq!(discovery.status, 200);
    assert_eq!(discovery.headers["access-control-allow-origin"], "*");
    let document = discovery.json();
    assert_eq!(document["issuer"], ISSUER);
    for (name, path) in [
        ("authorization_endpoint", "/authorize"),
        ("token_endpoint", "/token"),
        ("userinfo_endpoint", "/userinfo"),
        ("jwks_uri", "/jwks"),
    ] {
        assert_eq!(document[name], format!("{ISSUER}{path}"), "{name}");
    }
    assert_eq!(
        document["authorization_response_iss_parameter_supported"],
        true
    );
    assert_eq!(
        document["code_challenge_methods_supported"],
        serde_json::json!(["S256"])
    );
    let jwks = provider.get("/jwks").await;
    assert_eq!(jwks.headers["access-control-allow-origin"], "*");
    let keys = jwks.json()["keys"].as_array().unwrap().clone();
    assert_eq!(keys.len(), 1);
    assert!(keys[0]["kid"].as_str().is_some_and(|kid| kid.len() == 43));
    // Nothing else carries CORS, and the endpoints are under the path only.
    let page = provider.authorize(&shop_query("")).await;
    assert!(!page.headers.contains_key("access-control-allow-origin"));
    let root = send(
        Method::GET,
        &format!("{}/authorize", provider.running.url),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(root.status, 404);
}

#[tokio::test]
async fn a_login_gives_the_shop_an_id_token_over_the_presented_claims_once() {
    let provider = Provider::start(&[]).await;
    let page = provider.authorize(&shop_query("")).await;
    let html = support::text(&page.body);
    assert!(
        html.contains("The &lt;Shop&gt;</strong> asks you"),
        "{html}"
    );
    assert!(html.contains("href=\"/wallet/assets/verifier.css\""));
    assert_eq!(page.headers["cache-control"], "no-store");

    let redirect = login(&provider, &shop_query(""), "/present").await;
    assert!(redirect.starts_with(&format!("{SHOP_CB}?")), "{redirect}");
    let params = params_of(&redirect);
    assert_eq!(param(&params, "state").as_deref(), Some("st-1"));
    assert_eq!(param(&params, "iss").as_deref(), Some(ISSUER));
    let code = param(&params, "code").expect("a code");

    let form = shop_form(&code);
    let auth = basic("shop", SECRET);
    let answer = provider.token(&form, &[("authorization", &auth)]).await;
    assert_eq!(answer.status, 200, "{}", support::text(&answer.body));
    assert_eq!(answer.headers["cache-control"], "no-store");
    let tokens = answer.json();
    assert_eq!(tokens["token_type"], "Bearer");
    assert_eq!(tokens["expires_in"], 300);
    let claims = verified_claims(&provider, tokens["id_token"].as_str().unwrap()).await;
    assert_eq!(claims["iss"], ISSUER);
    assert_eq!(claims["aud"], "shop");
    assert_eq!(claims["nonce"], "n-1");
    assert_eq!(claims["given_name"], "Erika");
    assert_eq!(claims["birthdate"], "1984-01-26");
    assert!(claims.get("birth_date").is_none());
    let sub = claims["sub"].as_str().unwrap().to_string();

    let bearer = format!("Bearer {}", tokens["access_token"].as_str().unwrap());
    let userinfo = send(
        Method::GET,
        &provider.url("/userinfo"),
        &[("authorization", &bearer)],
        Bytes::new(),
    )
    .await;
    assert_eq!(userinfo.status, 200);
    assert_eq!(userinfo.json()["sub"], sub.as_str());
    assert_eq!(userinfo.json()["family_name"], claims["family_name"]);

    let again = provider.token(&form, &[("authorization", &auth)]).await;
    assert_eq!(
        (again.status.as_u16(), again.json()["error"].clone()),
        (400, "invalid_grant".into())
    );
    let metrics = provider.metrics().await;
    for line in [
        "lanyard_oidc_authorizations_total{client_id=\"shop\",outcome=\"verified\"} 1",
        "lanyard_oidc_tokens_total{client_id=\"shop\"} 1",
        "lanyard_oidc_refusals_total{client_id=\"shop\",reason=\"invalid_grant\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
}

/// The ID token's claims, its signature checked with the published key
/// its `kid` names.
async fn verified_claims(provider: &Provider, id_token: &str) -> Value {
    let jwks = relying_party::jwks(&provider.base()).await;
    relying_party::verified_with(&jwks, id_token, ISSUER, "shop").unwrap()
}

#[tokio::test]
async fn a_public_client_needs_pkce_and_its_verifier() {
    let provider = Provider::start(&[]).await;
    let query = |extra: &str| {
        format!(
            "response_type=code&client_id=spa&redirect_uri={}&scope=openid{extra}",
            enc(SPA_CB)
        )
    };
    let refused = provider.authorize(&query("&state=s")).await;
    assert_eq!(refused.status, 303);
    let location = refused.headers["location"].to_str().unwrap();
    assert!(
        location.starts_with(&format!("{SPA_CB}&")),
        "keeps the query: {location}"
    );
    let params = params_of(location);
    assert_eq!(param(&params, "error").as_deref(), Some("invalid_request"));
    assert_eq!(param(&params, "state").as_deref(), Some("s"));

    let pkce = format!("&code_challenge={CHALLENGE}&code_challenge_method=S256");
    let redirect = login(&provider, &query(&pkce), "/present").await;
    let code = param(&params_of(&redirect), "code").unwrap();
    let form = |verifier: &str| {
        format!(
            "grant_type=authorization_code&client_id=spa&code={}&redirect_uri={}&code_verifier={verifier}",
            enc(&code),
            enc(SPA_CB)
        )
    };
    let wrong = provider.token(&form(&"A".repeat(43)), &[]).await;
    assert_eq!(wrong.json()["error"], "invalid_grant");
    let right = provider.token(&form(VERIFIER), &[]).await;
    assert_eq!(right.status, 200, "{}", support::text(&right.body));
}

#[tokio::test]
async fn a_decline_goes_back_as_access_denied_with_state_and_iss() {
    let provider = Provider::start(&[]).await;
    let redirect = login(&provider, &shop_query(""), "/decline").await;
    let params = params_of(&redirect);
    assert_eq!(param(&params, "error").as_deref(), Some("access_denied"));
    assert_eq!(param(&params, "state").as_deref(), Some("st-1"));
    assert_eq!(param(&params, "iss").as_deref(), Some(ISSUER));
    assert!(param(&params, "code").is_none());
}

#[tokio::test]
async fn an_unknown_client_or_redirect_uri_gets_lanyards_page_never_a_redirect() {
    let provider = Provider::start(&[]).await;
    for query in [
        "response_type=code&client_id=nobody&redirect_uri=https%3A%2F%2Fevil.example%2F&scope=openid".to_string(),
        "response_type=code&client_id=shop&redirect_uri=https%3A%2F%2Fevil.example%2F&scope=openid".to_string(),
        format!("response_type=code&client_id=shop&redirect_uri={}%2Fmore&scope=openid", enc(SHOP_CB)),
        "response_type=code&redirect_uri=https%3A%2F%2Fevil.example%2F&scope=openid".to_string(),
        format!("{}&client_id=shop", shop_query("")),
    ] {
        let answer = provider.authorize(&query).await;
        assert_eq!(answer.status, 400, "{query}");
        assert!(!answer.headers.contains_key("location"), "{query}");
        let html = support::text(&answer.body);
        assert!(html.contains("This login cannot go on"), "{html}");
        assert!(!html.contains("evil.example"), "reflected: {html}");
        // Its files under the issuer's path, where a proxy routing that
        // path alone to lanyard serves them.
        assert!(
            html.contains(r#"href="/wallet/assets/verifier.css""#),
            "{html}"
        );
    }
    let css = provider.get("/assets/verifier.css").await;
    assert_eq!(css.status, 200);
}

#[tokio::test]
async fn other_request_errors_go_back_to_the_client_by_rfc_6749() {
    let provider = Provider::start(&[]).await;
    for (extra, error) in [
        ("&prompt=none", "login_required"),
        ("&response_mode=form_post", "invalid_request"),
        ("&request=eyJ", "request_not_supported"),
        ("&code_challenge_method=plain", "invalid_request"),
        ("&state=again", "invalid_request"),
    ] {
        // The method given once, as the case says.
        let query = match extra.contains("code_challenge_method") {
            true => shop_query(extra).replace("&code_challenge_method=S256", ""),
            false => shop_query(extra),
        };
        let answer = provider.authorize(&query).await;
        assert_eq!(answer.status, 303, "{extra}");
        let params = params_of(answer.headers["location"].to_str().unwrap());
        assert_eq!(param(&params, "error").as_deref(), Some(error), "{extra}");
        assert_eq!(param(&params, "iss").as_deref(), Some(ISSUER));
    }
    let wrong_type = provider
        .authorize(&shop_query("").replace("response_type=code", "response_type=token"))
        .await;
    let params = params_of(wrong_type.headers["location"].to_str().unwrap());
    assert_eq!(
        param(&params, "error").as_deref(),
        Some("unsupported_response_type")
    );
    let no_openid = provider
        .authorize(&shop_query("").replace("openid%20profile", "profile"))
        .await;
    let params = params_of(no_openid.headers["location"].to_str().unwrap());
    assert_eq!(param(&params, "error").as_deref(), Some("invalid_scope"));
}

#[tokio::test]
async fn the_token_endpoint_refuses_wrong_clients_and_foreign_codes() {
    let provider = Provider::start(&[]).await;
    let redirect = login(&provider, &shop_query(""), "/present").await;
    let code = param(&params_of(&redirect), "code").unwrap();
    let form = shop_form(&code);
    let wrong_secret = provider
        .token(
            &form,
            &[("authorization", &basic("shop", "not-the-secret-at-all"))],
        )
        .await;
    assert_eq!(wrong_secret.status, 401);
    assert_eq!(wrong_secret.json()["error"], "invalid_client");
    assert!(wrong_secret.headers.contains_key("www-authenticate"));
    // The public client redeeming the shop's code: not its code.
    let foreign = provider
        .token(
            &format!(
                "grant_type=authorization_code&code={}&redirect_uri={}&client_id=spa&code_verifier={VERIFIER}",
                enc(&code),
                enc(SHOP_CB)
            ),
            &[],
        )
        .await;
    assert_eq!(foreign.json()["error"], "invalid_grant");
    let other_redirect = form.replace(&enc(SHOP_CB), &enc("https://shop.example/other"));
    let moved = provider
        .token(
            &other_redirect,
            &[("authorization", &basic("shop", SECRET))],
        )
        .await;
    assert_eq!(moved.json()["error"], "invalid_grant");
    let two_methods = provider
        .token(
            &format!("{form}&client_secret={SECRET}"),
            &[("authorization", &basic("shop", SECRET))],
        )
        .await;
    assert_eq!(two_methods.json()["error"], "invalid_request");
    let grant = provider
        .token(
            &form.replace("authorization_code", "password"),
            &[("authorization", &basic("shop", SECRET))],
        )
        .await;
    assert_eq!(grant.json()["error"], "unsupported_grant_type");
    let forged = provider
        .token(
            &form.replace(&enc(&code), "AAAA"),
            &[("authorization", &basic("shop", SECRET))],
        )
        .await;
    assert_eq!(forged.json()["error"], "invalid_grant");
    // After all that, the code itself is still good once, by post.
    let post = provider
        .token(
            &format!("{form}&client_id=shop&client_secret={SECRET}"),
            &[],
        )
        .await;
    assert_eq!(post.status, 200, "{}", support::text(&post.body));
    let unauthorized = send(
        Method::GET,
        &provider.url("/userinfo"),
        &[("authorization", "Bearer AAAA")],
        Bytes::new(),
    )
    .await;
    assert_eq!(unauthorized.status, 401);
    assert!(
        unauthorized.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
}

#[tokio::test]
async fn hostile_requests_get_a_clear_refusal_and_nothing_else() {
    let provider = Provider::start(&[]).await;
    // A login request lanyard did not seal, or sealed for another purpose.
    let browser = Browser::default();
    for forged in ["AAAA", "not-base64!", &"A".repeat(7000)] {
        let started = browser
            .request(
                Method::POST,
                &provider.url(&format!("/api/start?authorization={}", enc(forged))),
                &[("content-type", "application/json")],
            )
            .await;
        assert_eq!(started.status, 400, "{forged}");
        assert_eq!(verifier::error_code(&started), "bad_request");
    }
    // The token endpoint: a body too large, not a form, no grant at all.
    let auth = basic("shop", SECRET);
    let large = provider
        .token(&"a=b&".repeat(5000), &[("authorization", &auth)])
        .await;
    assert_eq!(
        (large.status.as_u16(), large.json()["error"].clone()),
        (400, "invalid_request".into())
    );
    let json = send(
        Method::POST,
        &provider.url("/token"),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
        Bytes::from_static(b"{\"grant_type\":\"authorization_code\"}"),
    )
    .await;
    assert_eq!(json.json()["error"], "invalid_request");
    let empty = provider.token("", &[("authorization", &auth)]).await;
    assert_eq!(empty.json()["error"], "unsupported_grant_type");
    let no_client = provider
        .token("grant_type=authorization_code&code=x", &[])
        .await;
    assert_eq!(no_client.json()["error"], "invalid_request");
    let get = provider.get("/token").await;
    assert_eq!(get.status, 405);
    // userinfo with no token, or another kind of sealed value as one.
    let page = provider.authorize(&shop_query("")).await;
    let sealed = sealed_request(&page);
    for bearer in [
        None,
        Some(format!("Bearer {sealed}")),
        Some("Basic abc".to_string()),
    ] {
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str()))
            .collect();
        let answer = send(
            Method::GET,
            &provider.url("/userinfo"),
            &headers,
            Bytes::new(),
        )
        .await;
        assert_eq!(answer.status, 401, "{bearer:?}");
    }
}

#[tokio::test]
async fn an_authorization_request_may_be_posted_and_discovery_is_preflighted() {
    let provider = Provider::start(&[]).await;
    let posted = send(
        Method::POST,
        &provider.url("/authorize"),
        &[("content-type", "application/x-www-form-urlencoded")],
        Bytes::from(shop_query("")),
    )
    .await;
    assert_eq!(posted.status, 200);
    assert!(!sealed_request(&posted).is_empty());
    let preflight = send(
        Method::OPTIONS,
        &provider.url("/jwks"),
        &[
            ("origin", "https://app.example"),
            ("access-control-request-method", "GET"),
        ],
        Bytes::new(),
    )
    .await;
    assert_eq!(preflight.status, 204);
    assert_eq!(preflight.headers["access-control-allow-origin"], "*");
    let head = send(
        Method::HEAD,
        &provider.url("/.well-known/openid-configuration"),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
}

/// The page's login up to the wallet's presentation; the browser and the
/// session's status URL.
pub(crate) async fn presented(provider: &Provider, query: &str) -> (Browser, String) {
    let page = provider.authorize(query).await;
    let sealed = sealed_request(&page);
    let mut browser = Browser::default();
    let url = provider.url(&format!("/api/start?authorization={}", enc(&sealed)));
    let started = browser
        .request(Method::POST, &url, &[("content-type", "application/json")])
        .await;
    let set = started.headers["set-cookie"].to_str().unwrap();
    browser.cookie = Some(set.split(';').next().unwrap().to_string());
    let session = crate::support::verifier::Session::of(&started.json());
    let present = provider
        .running
        .mock
        .wallet_present_url(&session.service_id);
    assert_eq!(
        send(Method::POST, &present, &[], Bytes::new()).await.status,
        200
    );
    let status = provider.url(&format!("/api/status?transactionId={}", session.handle));
    (browser, status)
}

/// The page may ask for a login's ending again and again (a reload, a
/// second tab), and gets a code each time: they are one authorization,
/// redeemed once, not one each.
#[tokio::test]
async fn every_code_of_one_login_is_one_authorization() {
    let provider = Provider::start(&[]).await;
    let (browser, status) = presented(&provider, &shop_query("")).await;
    let mut codes = Vec::new();
    while codes.len() < 3 {
        let answer = browser.request(Method::GET, &status, &[]).await.json();
        match answer["redirect"].as_str() {
            Some(redirect) => codes.push(relying_party::code_of(redirect)),
            None => tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await,
        }
    }
    let form = shop_form;
    // As many libraries send Basic: the secret as it is, the scheme in
    // lower case.
    let auth = basic("shop", SECRET).replace("Basic", "basic");
    let first = provider
        .token(&form(&codes[2]), &[("authorization", &auth)])
        .await;
    assert_eq!(first.status, 200, "{}", support::text(&first.body));
    for code in &codes[..2] {
        let again = provider
            .token(&form(code), &[("authorization", &auth)])
            .await;
        assert_eq!(
            again.json()["error"],
            "invalid_grant",
            "another code of the same login"
        );
    }
    // userinfo with no token at all: a bare challenge (RFC 6750 §3.1).
    let bare = send(Method::GET, &provider.url("/userinfo"), &[], Bytes::new()).await;
    assert_eq!(bare.status, 401);
    assert_eq!(bare.headers["www-authenticate"], "Bearer");
}
