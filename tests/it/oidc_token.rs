//! What a relying party's security review asks of the provider's token
//! endpoint (docs/oidc.md): PKCE from every client unless its entry opts
//! out (and then a nonce), a replayed code revoking the access token it
//! gave, failed client authentications throttled per address without
//! locking the client out, `auth_time` as when the wallet presented, and
//! CORS for browser apps that never spends a code for another origin.

use std::net::IpAddr;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use crate::oidc::{Provider, login, presented};
use crate::support;
use crate::support::relying_party::{
    self, CHALLENGE, ISSUER, LEGACY_CB, SECRET, SPA_CB, VERIFIER, basic, code_of, enc, param,
    params_of, shop_form, shop_query,
};
use crate::support::sidecar::{Answer, send};
use crate::support::verifier::Browser;

/// The origin of the public client's redirect URI ([`SPA_CB`]).
const SPA_ORIGIN: &str = "http://127.0.0.1:3000";

/// The authorization request of `client` at `redirect_uri`, `extra`
/// appended, without PKCE.
fn query(client: &str, redirect_uri: &str, extra: &str) -> String {
    format!(
        "response_type=code&client_id={client}&redirect_uri={}&scope=openid&state=s{extra}",
        enc(redirect_uri)
    )
}

/// The error an authorization request was sent back with.
fn sent_back_with(answer: &Answer) -> Option<String> {
    assert_eq!(answer.status, 303, "{}", support::text(&answer.body));
    param(
        &params_of(answer.headers["location"].to_str().unwrap()),
        "error",
    )
}

#[tokio::test]
async fn a_confidential_client_needs_pkce_unless_its_entry_opts_out_and_then_a_nonce() {
    let provider = Provider::start(&[]).await;
    let shop = provider
        .authorize(&shop_query("").replace(&format!("&code_challenge={CHALLENGE}"), ""))
        .await;
    assert_eq!(sent_back_with(&shop).as_deref(), Some("invalid_request"));
    let shop = provider
        .authorize(&query("shop", relying_party::SHOP_CB, "&nonce=n"))
        .await;
    assert_eq!(sent_back_with(&shop).as_deref(), Some("invalid_request"));

    let no_nonce = provider.authorize(&query("legacy", LEGACY_CB, "")).await;
    assert_eq!(
        sent_back_with(&no_nonce).as_deref(),
        Some("invalid_request")
    );
    let redirect = login(
        &provider,
        &query("legacy", LEGACY_CB, "&nonce=n-2"),
        "/present",
    )
    .await;
    let form = format!(
        "grant_type=authorization_code&code={}&redirect_uri={}",
        enc(&code_of(&redirect)),
        enc(LEGACY_CB)
    );
    let tokens = provider
        .token(&form, &[("authorization", &basic("legacy", SECRET))])
        .await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
}

#[tokio::test]
async fn a_replayed_code_revokes_the_access_token_it_gave() {
    let provider = Provider::start(&[]).await;
    let redirect = login(&provider, &shop_query(""), "/present").await;
    let form = shop_form(&code_of(&redirect));
    let auth = basic("shop", SECRET);
    let tokens = provider.token(&form, &[("authorization", &auth)]).await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
    let access = tokens.json()["access_token"].as_str().unwrap().to_string();
    let info = relying_party::userinfo(&provider.base(), &access).await;
    assert_eq!(info.status, 200);

    let replayed = provider.token(&form, &[("authorization", &auth)]).await;
    assert_eq!(replayed.json()["error"], "invalid_grant");
    let revoked = relying_party::userinfo(&provider.base(), &access).await;
    assert_eq!(revoked.status, 401, "{}", support::text(&revoked.body));
    assert!(
        revoked.headers["www-authenticate"]
            .to_str()
            .unwrap()
            .contains("invalid_token")
    );
}

/// A request from `local`, a loopback address of the test's choosing.
async fn send_from(local: IpAddr, url: &str, form: &str, headers: &[(&str, &str)]) -> Answer {
    let mut connector = HttpConnector::new();
    connector.set_local_address(Some(local));
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build(connector);
    let mut request = Request::builder()
        .method(Method::POST)
        .uri(url)
        .header("content-type", "application/x-www-form-urlencoded");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = Full::new(Bytes::from(form.to_string()));
    let response = client.request(request.body(body).unwrap()).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.into_body().collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers,
        body,
    }
}

#[tokio::test]
async fn wrong_secrets_from_one_address_are_throttled_and_the_right_one_from_another_redeems() {
    let provider = Provider::start(&[]).await;
    let redirect = login(&provider, &shop_query(""), "/present").await;
    let form = shop_form(&code_of(&redirect));
    let url = provider.url("/token");
    let guessing: IpAddr = "127.0.0.1".parse().unwrap();
    let wrong = basic("shop", "not-the-secret-at-all");
    let mut throttled = 0;
    for _ in 0..25 {
        let answer = send_from(guessing, &url, &form, &[("authorization", &wrong)]).await;
        match answer.status.as_u16() {
            401 => assert_eq!(answer.json()["error"], "invalid_client"),
            429 => {
                throttled += 1;
                let wait: u64 = answer.headers["retry-after"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                assert!((1..=60).contains(&wait), "{wait}");
                assert_eq!(answer.json()["error"], "temporarily_unavailable");
            }
            other => panic!("{other}: {}", support::text(&answer.body)),
        }
    }
    assert!(
        throttled >= 5,
        "only {throttled} of 25 wrong secrets throttled"
    );
    let right = basic("shop", SECRET);
    let here = send_from(guessing, &url, &form, &[("authorization", &right)]).await;
    assert_eq!(
        here.status, 429,
        "the guessing address waits, secret or not"
    );
    let elsewhere: IpAddr = "127.0.0.2".parse().unwrap();
    let tokens = send_from(elsewhere, &url, &form, &[("authorization", &right)]).await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
    let metrics = provider.metrics().await;
    let line = "lanyard_oidc_refusals_total{client_id=\"shop\",reason=\"client_auth_throttled\"} ";
    let count: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix(line))
        .unwrap_or_else(|| panic!("{line} not in\n{metrics}"))
        .parse()
        .unwrap();
    assert_eq!(count, throttled + 1);
}

/// The page's poll until it is sent on; the redirect.
async fn ending(browser: &Browser, status: &str) -> String {
    loop {
        let answer = browser.request(Method::GET, status, &[]).await.json();
        if let Some(redirect) = answer["redirect"].as_str() {
            return redirect.to_string();
        }
        tokio::time::sleep(lanyard::verifier::SERVICE_POLL_SPACING).await;
    }
}

/// How much later, on lanyard's clock, the page asks for its ending again.
const RELOADED_LATER: Duration = Duration::from_secs(30);

#[tokio::test]
async fn auth_time_is_when_the_wallet_presented_not_when_the_code_was_made() {
    let provider = Provider::start(&[]).await;
    let (browser, status) = presented(&provider, &shop_query("")).await;
    ending(&browser, &status).await;
    // The page asks for its ending again (a reload) half a minute later.
    // lanyard measures how long ago it first saw the presentation on its
    // API's clock, which this test puts ahead instead of waiting; the
    // code made then, and the ID token made from it, read the wall clock.
    provider.running.clock.advance(RELOADED_LATER);
    let later = ending(&browser, &status).await;
    let tokens = provider
        .token(
            &shop_form(&code_of(&later)),
            &[("authorization", &basic("shop", SECRET))],
        )
        .await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
    let jwks = relying_party::jwks(&provider.base()).await;
    let id_token = tokens.json()["id_token"].as_str().unwrap().to_string();
    let claims = relying_party::verified_with(&jwks, &id_token, ISSUER, "shop").unwrap();
    let auth_time = claims["auth_time"].as_u64().unwrap();
    let iat = claims["iat"].as_u64().unwrap();
    // Within a second either way of the half minute: the wall clock's
    // seconds tick on their own.
    let before = iat.saturating_sub(auth_time);
    let later = RELOADED_LATER.as_secs();
    assert!(
        (later - 1..=later + 1).contains(&before),
        "auth_time {auth_time} is {before} s before iat {iat}, not when the presentation was first seen, {later} s before"
    );
}

#[tokio::test]
async fn the_token_endpoint_and_userinfo_are_preflighted_for_registered_origins_only() {
    let provider = Provider::start(&[]).await;
    for (path, method) in [("/token", "POST"), ("/userinfo", "GET")] {
        let url = provider.url(path);
        let preflight = |origin: &'static str| {
            let url = url.clone();
            async move {
                let headers = [
                    ("origin", origin),
                    ("access-control-request-method", method),
                    (
                        "access-control-request-headers",
                        "authorization, content-type",
                    ),
                ];
                send(Method::OPTIONS, &url, &headers, Bytes::new()).await
            }
        };
        let granted = preflight(SPA_ORIGIN).await;
        assert_eq!(granted.status, 204, "{path}");
        let headers = &granted.headers;
        assert_eq!(headers["access-control-allow-origin"], SPA_ORIGIN, "{path}");
        assert_eq!(headers["vary"], "Origin");
        let methods = headers["access-control-allow-methods"].to_str().unwrap();
        assert!(methods.contains(method), "{path}: {methods}");
        let allowed = headers["access-control-allow-headers"].to_str().unwrap();
        assert!(allowed.contains("Authorization") && allowed.contains("Content-Type"));
        let refused = preflight("https://evil.example").await;
        assert!(
            !refused.headers.contains_key("access-control-allow-origin"),
            "{path}"
        );
    }
    let discovery = provider.get("/.well-known/openid-configuration").await;
    assert_eq!(discovery.headers["access-control-allow-origin"], "*");
}

#[tokio::test]
async fn a_token_request_from_another_origin_is_refused_and_leaves_the_code_redeemable() {
    let provider = Provider::start(&[]).await;
    let pkce = format!("&nonce=n&code_challenge={CHALLENGE}&code_challenge_method=S256");
    let redirect = login(&provider, &query("spa", SPA_CB, &pkce), "/present").await;
    let form = format!(
        "grant_type=authorization_code&client_id=spa&code={}&redirect_uri={}&code_verifier={VERIFIER}",
        enc(&code_of(&redirect)),
        enc(SPA_CB)
    );
    // The shop's origin is registered, but not for this client.
    for origin in ["https://evil.example", "https://shop.example", "null"] {
        let foreign = provider.token(&form, &[("origin", origin)]).await;
        assert_eq!(
            (foreign.status.as_u16(), foreign.json()["error"].clone()),
            (400, "invalid_request".into()),
            "{origin}"
        );
        assert!(!foreign.headers.contains_key("access-control-allow-origin"));
    }
    let tokens = provider.token(&form, &[("origin", SPA_ORIGIN)]).await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
    assert_eq!(tokens.headers["access-control-allow-origin"], SPA_ORIGIN);
    assert_eq!(tokens.headers["vary"], "Origin");
    let bearer = format!("Bearer {}", tokens.json()["access_token"].as_str().unwrap());
    let info = send(
        Method::GET,
        &provider.url("/userinfo"),
        &[("authorization", &bearer), ("origin", SPA_ORIGIN)],
        Bytes::new(),
    )
    .await;
    assert_eq!(info.status, 200);
    assert_eq!(info.headers["access-control-allow-origin"], SPA_ORIGIN);
}
