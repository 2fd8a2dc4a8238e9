//! An OpenID Connect login against `lanyard verifier` as a relying party's
//! browser and backend make it, over real sockets: the clients file and
//! key the provider is started with, the authorization page, the page's
//! API through to the redirect, the token request, and the ID token
//! checked with the published JWK set. Shared by `oidc`, `oidc_replicas`
//! and `demo`, which drive the same login against one provider, several,
//! and the demo's shop.

use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::Method;
use lanyard::verifier::SERVICE_POLL_SPACING;
use serde_json::Value;
use tokio::time::Instant;

use super::sidecar::{Answer, send};
use super::verifier::{Browser, Session};

/// The issuer: a path under which the provider's endpoints are, on a
/// loopback host (plain http is allowed there only).
pub const ISSUER: &str = "http://127.0.0.1/wallet";
/// The issuer's path, under which a test reaches the endpoints.
pub const ISSUER_PATH: &str = "/wallet";
pub const SECRET: &str = "a-secret-of-the-shop-0123456789";
pub const SHOP_CB: &str = "https://shop.example/cb";
pub const SPA_CB: &str = "http://127.0.0.1:3000/cb?x=1";
/// A confidential client registered with `"require_pkce": false`.
pub const LEGACY_CB: &str = "https://legacy.example/cb";
/// A PKCE verifier and its S256 challenge (RFC 7636 Appendix B).
pub const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
pub const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
/// A login's end once the wallet presented: the verifier asks the service
/// at most once a second.
const END_LIMIT: Duration = Duration::from_secs(15);

/// A rule of the shop's (scope `age`) in the fixture account's project,
/// whose wallet presents age over 18 alone ([`add_rules`]).
pub const AGE_RULE: &str = "9e8d7c6b-5a4f-4e3d-8c2b-1a0f9e8d7c6b";
/// A rule of the shop's and the bank's (scope `kyc`, the bank's default),
/// whose wallet presents a full identity.
pub const KYC_RULE: &str = "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f";
pub const BANK_CB: &str = "https://bank.example/cb";

/// The clients file: `shop`, confidential, with the rules `age` and
/// `kyc` and no default; `bank`, confidential, whose default is `kyc`;
/// `spa`, public, and `legacy`, confidential without PKCE; its path.
pub fn clients_file(dir: &Path) -> String {
    let rule =
        |id: &str| serde_json::json!({"project_id": super::verifier::PROJECT, "rule_id": id});
    let clients = serde_json::json!({"clients": [
        {"client_id": "shop", "client_secret": SECRET, "redirect_uris": [SHOP_CB], "client_name": "The <Shop>",
         "rules": {"age": rule(AGE_RULE), "kyc": rule(KYC_RULE)}},
        {"client_id": "bank", "client_secret": SECRET, "redirect_uris": [BANK_CB],
         "rules": {"kyc": rule(KYC_RULE)}, "default_rule": "kyc"},
        {"client_id": "spa", "redirect_uris": [SPA_CB]},
        {"client_id": "legacy", "client_secret": SECRET, "redirect_uris": [LEGACY_CB], "require_pkce": false},
    ]});
    let path = super::write(dir, "clients.json", &clients.to_string());
    path.to_str().unwrap().to_string()
}

/// Publishes [`AGE_RULE`] and [`KYC_RULE`] at `mock`, each presenting
/// its own claims.
pub fn add_rules(mock: &lanyard::mock::MockService) {
    let object = |value: Value| match value {
        Value::Object(map) => map,
        _ => unreachable!("an object"),
    };
    let over_18 = object(serde_json::json!({"age_over_18": true}));
    mock.add_rule_presenting(super::verifier::PROJECT, AGE_RULE, over_18);
    let identity = object(serde_json::json!({
        "given_name": "Ada", "family_name": "Lovelace", "birth_date": "1815-12-10", "nationality": "GB",
    }));
    mock.add_rule_presenting(super::verifier::PROJECT, KYC_RULE, identity);
}

/// The shop's own brand's name (docs/oidc.md, "A brand per client"),
/// and its claim label in English and German.
pub const WINE: &str = "Wine & Co";
pub const WINE_LABEL: [&str; 2] = ["Old enough for wine", "Alt genug für Wein"];
pub const WINE_PURPOSE: [&str; 2] = [
    "Wine & Co sells wine to adults only.",
    "Wine & Co verkauft Wein nur an Erwachsene.",
];
/// Its accent, and its logo (an SVG the brand's checks allow).
pub const WINE_ACCENT: &str = "#7a1f2b";
pub const WINE_LOGO: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 120 40" width="120" height="40"><rect width="120" height="40" fill="#7a1f2b"/><circle cx="20" cy="20" r="12" fill="#ffffff"/></svg>"##;

/// A clients file of two confidential clients redirecting to
/// [`SHOP_CB`]: `shop` in its own brand (its logo beside the file), and
/// `plain` with none; its path.
pub fn branded_clients_file(dir: &Path) -> String {
    super::write(dir, "wine.svg", WINE_LOGO);
    let clients = serde_json::json!({"clients": [
        {"client_id": "shop", "client_secret": SECRET, "redirect_uris": [SHOP_CB],
         "brand": {"name": WINE, "logo": "wine.svg", "accent": WINE_ACCENT,
                   "purpose": {"en": WINE_PURPOSE[0], "de": WINE_PURPOSE[1]},
                   "claims": {"age_over_18": {"en": WINE_LABEL[0], "de": WINE_LABEL[1]}}}},
        {"client_id": "plain", "client_secret": SECRET, "redirect_uris": [SHOP_CB]},
    ]});
    let path = super::write(dir, "clients.json", &clients.to_string());
    path.to_str().unwrap().to_string()
}

/// A fresh RSA key for ID tokens, as a PEM file in `dir`; its path.
pub fn key_file(dir: &Path, name: &str) -> String {
    let key = lanyard::mock::generate_rsa_key().unwrap();
    let path = super::write(dir, name, key.private_pem.expose());
    path.to_str().unwrap().to_string()
}

/// The shop's authorization request, with PKCE ([`CHALLENGE`]), `extra`
/// appended.
pub fn shop_query(extra: &str) -> String {
    format!(
        "response_type=code&client_id=shop&redirect_uri={}&scope=openid%20profile&state=st-1&nonce=n-1&code_challenge={CHALLENGE}&code_challenge_method=S256{extra}",
        enc(SHOP_CB)
    )
}

/// The shop's token request form for `code`, with the PKCE verifier.
pub fn shop_form(code: &str) -> String {
    format!(
        "grant_type=authorization_code&code={}&redirect_uri={}&code_verifier={VERIFIER}",
        enc(code),
        enc(SHOP_CB)
    )
}

pub fn enc(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

pub fn basic(id: &str, secret: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{id}:{secret}")))
}

/// The parameters of the URL a redirect sends the browser to.
pub fn params_of(url: &str) -> Vec<(String, String)> {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    form_urlencoded::parse(query.as_bytes())
        .map(|(n, v)| (n.into_owned(), v.into_owned()))
        .collect()
}

pub fn param(params: &[(String, String)], name: &str) -> Option<String> {
    params
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.clone())
}

/// The sealed request in the authorization page.
pub fn sealed_request(page: &Answer) -> String {
    let html = super::text(&page.body);
    let at = html.find("data-authorization=\"").expect("a login page") + 20;
    html[at..].split('"').next().unwrap().to_string()
}

/// The page's part of a login, against the provider at `base` (the
/// issuer's URL on this replica): the button (`/api/start` with the
/// sealed request), the wallet's answer (`wallet` makes the URL it posts
/// to from the service's session id), and the polls that end it. Returns
/// the URL the page is sent to.
pub async fn through_page(base: &str, sealed: &str, wallet: impl FnOnce(&str) -> String) -> String {
    through_page_presenting(base, sealed, wallet, Bytes::new()).await
}

/// As [`through_page`], the wallet presenting `claims` (a JSON object's
/// text; empty: the mock's own claims).
pub async fn through_page_presenting(
    base: &str,
    sealed: &str,
    wallet: impl FnOnce(&str) -> String,
    claims: Bytes,
) -> String {
    let mut browser = Browser::default();
    let started = browser
        .request(
            Method::POST,
            &format!("{base}/api/start?authorization={}", enc(sealed)),
            &[("content-type", "application/json")],
        )
        .await;
    assert_eq!(started.status, 200, "{}", super::text(&started.body));
    let set = started.headers["set-cookie"].to_str().unwrap();
    let path = base.parse::<http::Uri>().unwrap().path().to_string();
    let api = format!("Path={}/api", path.trim_end_matches('/'));
    assert!(set.contains(&api), "{set}");
    browser.cookie = Some(set.split(';').next().unwrap().to_string());
    let session = Session::of(&started.json());
    let content_type: &[(&str, &str)] = match claims.is_empty() {
        true => &[],
        false => &[("content-type", "application/json")],
    };
    let acted = send(
        Method::POST,
        &wallet(&session.service_id),
        content_type,
        claims,
    )
    .await;
    assert_eq!(acted.status, 200, "{}", super::text(&acted.body));
    let status_url = format!("{base}/api/status?transactionId={}", session.handle);
    let deadline = Instant::now() + END_LIMIT;
    let ended = loop {
        let answer = browser.request(Method::GET, &status_url, &[]).await;
        assert_eq!(answer.status, 200, "{}", super::text(&answer.body));
        if answer.json()["status"] != "pending" {
            break answer.json();
        }
        assert!(
            Instant::now() < deadline,
            "still pending after {END_LIMIT:?}"
        );
        // The verifier asks the service at most once a second; asking it
        // faster only reads the same answer.
        tokio::time::sleep(SERVICE_POLL_SPACING).await;
    };
    assert!(
        ended.get("claims").is_none(),
        "claims reach the page: {ended}"
    );
    ended["redirect"].as_str().expect("a redirect").to_string()
}

/// A whole login at the provider at `base`: the authorization page for
/// `query`, then [`through_page`]. Returns the URL the page is sent to.
pub async fn login(base: &str, query: &str, wallet: impl FnOnce(&str) -> String) -> String {
    login_presenting(base, query, wallet, &Value::Null).await
}

/// As [`login`], the wallet presenting the claims `presented` (the mock's
/// own when `null`).
pub async fn login_presenting(
    base: &str,
    query: &str,
    wallet: impl FnOnce(&str) -> String,
    presented: &Value,
) -> String {
    let page = send(
        Method::GET,
        &format!("{base}/authorize?{query}"),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(page.status, 200, "{}", super::text(&page.body));
    let body = match presented {
        Value::Null => Bytes::new(),
        claims => Bytes::from(claims.to_string()),
    };
    through_page_presenting(base, &sealed_request(&page), wallet, body).await
}

/// The discovery document of the provider at `base`.
pub async fn discovery(base: &str) -> Value {
    let url = format!("{base}/.well-known/openid-configuration");
    let answer = send(Method::GET, &url, &[], Bytes::new()).await;
    assert_eq!(answer.status, 200);
    answer.json()
}

/// The code in a redirect that carries one.
pub fn code_of(redirect: &str) -> String {
    param(&params_of(redirect), "code").unwrap_or_else(|| panic!("no code in {redirect}"))
}

/// A token request at the provider at `base`, with `form` and `headers`.
pub async fn token(base: &str, form: &str, headers: &[(&str, &str)]) -> Answer {
    let mut all = vec![("content-type", "application/x-www-form-urlencoded")];
    all.extend_from_slice(headers);
    send(
        Method::POST,
        &format!("{base}/token"),
        &all,
        Bytes::from(form.to_string()),
    )
    .await
}

/// The shop redeems `code` at the provider at `base`, with its secret.
pub async fn shop_redeems(base: &str, code: &str) -> Answer {
    let form = shop_form(code);
    token(base, &form, &[("authorization", &basic("shop", SECRET))]).await
}

/// `userinfo` at the provider at `base` with `access_token`.
pub async fn userinfo(base: &str, access_token: &str) -> Answer {
    let bearer = format!("Bearer {access_token}");
    send(
        Method::GET,
        &format!("{base}/userinfo"),
        &[("authorization", &bearer)],
        Bytes::new(),
    )
    .await
}

/// The JWK set the provider at `base` publishes.
pub async fn jwks(base: &str) -> jsonwebtoken::jwk::JwkSet {
    let answer = send(Method::GET, &format!("{base}/jwks"), &[], Bytes::new()).await;
    assert_eq!(answer.status, 200);
    serde_json::from_slice(&answer.body).unwrap()
}

/// The `kid` in an ID token's header.
pub fn kid_of(id_token: &str) -> String {
    let header = jsonwebtoken::decode_header(id_token).unwrap();
    assert_eq!(header.alg, jsonwebtoken::Algorithm::RS256);
    header.kid.expect("a kid")
}

/// An ID token's claims, its signature checked with the key of `jwks`
/// its `kid` names, and its `iss` and `aud` as given.
pub fn verified_with(
    jwks: &jsonwebtoken::jwk::JwkSet,
    id_token: &str,
    issuer: &str,
    audience: &str,
) -> Result<Value, String> {
    let kid = kid_of(id_token);
    let jwk = jwks
        .find(&kid)
        .ok_or_else(|| format!("the kid {kid} is not published"))?;
    let key = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
    let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
    validation.set_audience(&[audience]);
    validation.set_issuer(&[issuer]);
    jsonwebtoken::decode::<Value>(id_token, &key, &validation)
        .map(|data| data.claims)
        .map_err(|err| err.to_string())
}
