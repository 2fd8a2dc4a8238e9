//! The shop's routes, called without a socket, and one login end to end
//! against a stand-in provider on a real loopback socket: the provider's
//! side is written here in a few lines, not taken from the verifier.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rsa::KeyPair;
use aws_lc_rs::signature::KeyPair as _;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use http::Response;
use http_body_util::{BodyExt as _, Full};
use hyper::service::service_fn;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;
use tokio::net::TcpListener;

use super::id_token::KeySet;
use super::login::s256_challenge;
use super::*;
use crate::mock::generate_rsa_key;

const BASE: &str = "http://127.0.0.1:4000";

/// A provider's signing key and its JWK set (with an EC key of the same
/// `kid` first, which the shop must pass over).
pub(super) struct Signer {
    key: EncodingKey,
    pub jwks: Value,
}

impl Signer {
    pub(super) fn new(kid: &str) -> Signer {
        let generated = generate_rsa_key().unwrap();
        let pem = generated.private_pem.expose();
        let base64: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        let pair = KeyPair::from_pkcs8(&STANDARD.decode(base64).unwrap()).unwrap();
        let public = pair.public_key();
        let component = |bytes: &[u8]| URL_SAFE_NO_PAD.encode(bytes);
        let jwks = json!({"keys": [
            {"kty": "EC", "kid": kid, "crv": "P-256", "x": "AA", "y": "AA"},
            {
                "kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                "n": component(public.modulus().big_endian_without_leading_zero()),
                "e": component(public.exponent().big_endian_without_leading_zero()),
            },
        ]});
        Signer {
            key: EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap(),
            jwks,
        }
    }

    pub(super) fn keys(&self) -> KeySet {
        serde_json::from_value(self.jwks.clone()).unwrap()
    }

    pub(super) fn sign(&self, kid: Option<&str>, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::RS256);
        header.kid = kid.map(str::to_string);
        jsonwebtoken::encode(&header, claims, &self.key).unwrap()
    }
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn request(method: Method, uri: &str, cookie: Option<&str>) -> Request<()> {
    let mut builder = Request::builder().method(method).uri(uri);
    if let Some(cookie) = cookie {
        builder = builder.header(header::COOKIE, cookie);
    }
    builder.body(()).unwrap()
}

fn get(uri: &str, cookie: Option<&str>) -> Request<()> {
    request(Method::GET, uri, cookie)
}

async fn text(reply: Reply) -> String {
    let bytes = reply.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// `name=value` of the reply's cookie named `name`, as a `Cookie` header
/// sends it back.
fn set_cookie(reply: &Reply, name: &str) -> Option<String> {
    reply
        .headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_string())
}

fn query_of(location: &str) -> HashMap<String, String> {
    let (_, query) = location.split_once('?').unwrap();
    form_urlencoded::parse(query.as_bytes())
        .into_owned()
        .collect()
}

fn client_of(issuer: &str) -> ShopClient {
    ShopClient {
        issuer: issuer.into(),
        client_id: "shop".into(),
        client_secret: "s3cret".into(),
    }
}

/// A shop that has read a discovery document already, so a login needs
/// no provider.
fn discovered_shop() -> Shop {
    let shop = Shop::new(BASE.into());
    shop.set_client(client_of("http://127.0.0.1:8081"));
    *shop.discovered.lock() = Some(Discovered {
        issuer: "http://127.0.0.1:8081".into(),
        provider: Arc::new(Provider {
            authorization_endpoint: "http://127.0.0.1:8081/authorize".into(),
            token_endpoint: "http://127.0.0.1:8081/token".into(),
            jwks_uri: "http://127.0.0.1:8081/jwks".into(),
        }),
        read_at: Instant::now(),
    });
    shop
}

/// Begins a login: the authorization request's parameters and the
/// cookie to send back.
async fn begin(shop: &Shop) -> (HashMap<String, String>, String) {
    let reply = shop.handle(get("/shop/login", None)).await;
    assert_eq!(reply.status(), StatusCode::SEE_OTHER);
    let location = reply.headers()[header::LOCATION].to_str().unwrap();
    let query = query_of(location);
    (query, set_cookie(&reply, LOGIN_COOKIE).unwrap())
}

#[test]
fn every_path_of_the_shop_is_under_its_prefix() {
    for path in [
        HOME_PATH,
        LOGIN_PATH,
        CALLBACK_PATH,
        LOGOUT_PATH,
        STYLESHEET_PATH,
    ] {
        assert!(path.starts_with(&format!("{SHOP_PREFIX}/")), "{path}");
    }
}

#[tokio::test]
async fn without_a_provider_the_shop_says_it_is_not_set_up() {
    let shop = Shop::new(BASE.into());
    for path in ["/shop/", "/shop/login", "/shop/callback?state=x"] {
        let reply = shop.handle(get(path, None)).await;
        assert_eq!(reply.status(), StatusCode::NOT_FOUND, "{path}");
        assert!(text(reply).await.contains("not set up"), "{path}");
    }
    let css = shop.handle(get("/shop/shop.css", None)).await;
    assert_eq!(css.status(), StatusCode::OK);
    let bare = shop.handle(get("/shop", None)).await;
    assert_eq!(bare.headers()[header::LOCATION], "/shop/");
}

#[tokio::test]
async fn the_login_sends_the_browser_to_the_provider_with_every_parameter() {
    let shop = discovered_shop();
    let reply = shop.handle(get("/shop/login", None)).await;
    let location = reply.headers()[header::LOCATION].to_str().unwrap();
    assert!(location.starts_with("http://127.0.0.1:8081/authorize?"));
    let query = query_of(location);
    assert_eq!(query["response_type"], "code");
    assert_eq!(query["client_id"], "shop");
    assert_eq!(query["redirect_uri"], "http://127.0.0.1:4000/shop/callback");
    assert_eq!(query["scope"], "openid");
    assert_eq!(query["code_challenge_method"], "S256");
    let state = &query["state"];
    let pending = shop.pending.lock();
    let started = pending.get(state, Instant::now()).expect("remembered");
    assert_eq!(query["nonce"], started.login.nonce);
    assert_eq!(
        query["code_challenge"],
        s256_challenge(&started.login.code_verifier)
    );
    let cookie = reply.headers()[header::SET_COOKIE].to_str().unwrap();
    assert_eq!(
        cookie,
        format!("shop_login={state}; Path=/shop/; Max-Age=600; HttpOnly; SameSite=Lax")
    );
}

#[tokio::test]
async fn an_answer_is_believed_only_for_a_pending_login_of_this_browser() {
    let shop = discovered_shop();
    let iss = "iss=http%3A%2F%2F127.0.0.1%3A8081";
    let unknown = shop
        .handle(get(
            &format!("/shop/callback?code=c&state=nope&{iss}"),
            None,
        ))
        .await;
    assert_eq!(unknown.status(), StatusCode::BAD_REQUEST);
    assert!(text(unknown).await.contains("unknown"));

    let (query, cookie) = begin(&shop).await;
    let callback = format!("/shop/callback?code=c&state={}&{iss}", query["state"]);
    let elsewhere = shop.handle(get(&callback, Some("shop_login=other"))).await;
    assert!(text(elsewhere).await.contains("not begun in this browser"));
    // The login was used up by that answer: a second try is refused.
    let again = shop.handle(get(&callback, Some(&cookie))).await;
    assert!(text(again).await.contains("unknown"));

    let (query, cookie) = begin(&shop).await;
    let twice = format!("/shop/callback?state={0}&state={0}&{iss}", query["state"]);
    let twice = shop.handle(get(&twice, Some(&cookie))).await;
    assert!(text(twice).await.contains("repeats a parameter"));
}

#[tokio::test]
async fn an_answer_from_another_issuer_is_refused_before_it_is_read() {
    let shop = discovered_shop();
    for iss in [
        "",
        "&iss=http%3A%2F%2Fevil.test",
        "&iss=http%3A%2F%2F127.0.0.1%3A8081%2F",
    ] {
        let (query, cookie) = begin(&shop).await;
        let uri = format!(
            "/shop/callback?error=access_denied&state={}{iss}",
            query["state"]
        );
        let reply = shop.handle(get(&uri, Some(&cookie))).await;
        assert_eq!(reply.status(), StatusCode::BAD_REQUEST, "{iss}");
        assert!(text(reply).await.contains("does not come from"), "{iss}");
    }
}

#[tokio::test]
async fn a_declined_login_says_so_and_forgets_the_login_cookie() {
    let shop = discovered_shop();
    let (query, cookie) = begin(&shop).await;
    let uri = format!(
        "/shop/callback?error=access_denied&state={}&iss=http%3A%2F%2F127.0.0.1%3A8081",
        query["state"]
    );
    let reply = shop.handle(get(&uri, Some(&cookie))).await;
    assert_eq!(reply.status(), StatusCode::OK);
    assert_eq!(
        set_cookie(&reply, LOGIN_COOKIE).as_deref(),
        Some("shop_login=")
    );
    let html = text(reply).await;
    assert!(html.contains("You declined"));
    assert!(html.contains("<a href=\"/shop/\">Back to the shop</a>"));
}

#[tokio::test]
async fn another_error_is_named_only_when_it_is_a_known_code() {
    let shop = discovered_shop();
    for (error, shown) in [
        (
            "login_required",
            "The provider refused the login (login_required).",
        ),
        ("%3Cb%3Ebold%3C%2Fb%3E", "The provider refused the login."),
    ] {
        let (query, cookie) = begin(&shop).await;
        let uri = format!(
            "/shop/callback?error={error}&state={}&iss=http%3A%2F%2F127.0.0.1%3A8081",
            query["state"]
        );
        let reply = shop.handle(get(&uri, Some(&cookie))).await;
        assert_eq!(reply.status(), StatusCode::BAD_GATEWAY);
        let html = text(reply).await;
        assert!(html.contains(shown), "{html}");
        assert!(!html.contains("bold"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_login_left_ten_minutes_is_forgotten() {
    let shop = discovered_shop();
    let (query, cookie) = begin(&shop).await;
    tokio::time::advance(LOGIN_LIFETIME).await;
    let uri = format!(
        "/shop/callback?code=c&state={}&iss=http%3A%2F%2F127.0.0.1%3A8081",
        query["state"]
    );
    let reply = shop.handle(get(&uri, Some(&cookie))).await;
    assert!(text(reply).await.contains("older than ten minutes"));
}

#[tokio::test]
async fn a_page_is_used_only_with_its_method() {
    let shop = discovered_shop();
    let reply = shop
        .handle(request(Method::POST, "/shop/login", None))
        .await;
    assert_eq!(reply.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.headers()[header::ALLOW], "GET, HEAD");
    let reply = shop.handle(get("/shop/logout", None)).await;
    assert_eq!(reply.headers()[header::ALLOW], "POST");
    let reply = shop.handle(get("/shop/nothing", None)).await;
    assert_eq!(reply.status(), StatusCode::NOT_FOUND);
}

/// What the stand-in provider was sent and will answer.
#[derive(Default)]
struct Seen {
    id_token: String,
    token_requests: Vec<(Option<String>, HashMap<String, String>)>,
}

/// A provider on a loopback port: discovery, keys, and a token endpoint
/// answering whatever ID token the test put in `seen`.
async fn stand_in_provider(signer: &Signer, seen: Arc<Mutex<Seen>>) -> String {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let issuer = format!("http://{}", listener.local_addr().unwrap());
    let discovery = json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{issuer}/authorize"),
        "token_endpoint": format!("{issuer}/token"),
        "jwks_uri": format!("{issuer}/jwks"),
    });
    let jwks = signer.jwks.clone();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (discovery, jwks, seen) = (discovery.clone(), jwks.clone(), seen.clone());
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let (discovery, jwks, seen) = (discovery.clone(), jwks.clone(), seen.clone());
                async move {
                    let body = match req.uri().path() {
                        "/.well-known/openid-configuration" => discovery.to_string(),
                        "/jwks" => jwks.to_string(),
                        _ => {
                            let auth = req.headers().get(header::AUTHORIZATION);
                            let auth = auth.map(|v| v.to_str().unwrap().to_string());
                            let form = req.into_body().collect().await?.to_bytes();
                            let form = form_urlencoded::parse(&form).into_owned().collect();
                            let mut seen = seen.lock().unwrap();
                            seen.token_requests.push((auth, form));
                            json!({"token_type": "Bearer", "id_token": seen.id_token}).to_string()
                        }
                    };
                    Ok::<_, hyper::Error>(Response::new(Full::new(Bytes::from(body))))
                }
            });
            tokio::spawn(crate::mock::serve_connection(stream, None, service));
        }
    });
    issuer
}

#[tokio::test]
async fn a_login_ends_with_the_id_token_s_claims_on_the_shop_s_page() {
    let signer = Signer::new("k1");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let issuer = stand_in_provider(&signer, seen.clone()).await;
    let shop = Shop::new(BASE.into());
    shop.set_client(client_of(&issuer));

    let (query, login_cookie) = begin(&shop).await;
    let claims = json!({
        "iss": issuer, "sub": "u-1", "aud": "shop", "nonce": query["nonce"],
        "iat": unix_now(), "exp": unix_now() + 300,
        "given_name": "<i>Erika</i>", "age_over_18": true,
    });
    seen.lock().unwrap().id_token = signer.sign(Some("k1"), &claims);
    let iss: String = form_urlencoded::byte_serialize(issuer.as_bytes()).collect();
    let uri = format!(
        "/shop/callback?code=the-code&state={}&iss={iss}",
        query["state"]
    );
    let reply = shop.handle(get(&uri, Some(&login_cookie))).await;
    assert_eq!(
        reply.status(),
        StatusCode::SEE_OTHER,
        "{}",
        text(reply).await
    );
    assert_eq!(reply.headers()[header::LOCATION], "/shop/");
    let session = set_cookie(&reply, SESSION_COOKIE).unwrap();

    let (auth, form) = seen.lock().unwrap().token_requests.pop().unwrap();
    assert_eq!(
        auth.as_deref(),
        Some("Basic c2hvcDpzM2NyZXQ="),
        "shop:s3cret"
    );
    assert_eq!(form["grant_type"], "authorization_code");
    assert_eq!(form["code"], "the-code");
    assert_eq!(form["redirect_uri"], "http://127.0.0.1:4000/shop/callback");
    assert_eq!(
        s256_challenge(&form["code_verifier"]),
        query["code_challenge"]
    );

    let html = text(shop.handle(get("/shop/", Some(&session))).await).await;
    assert!(
        html.contains("<dt>given_name</dt><dd>&lt;i&gt;Erika&lt;/i&gt;</dd>"),
        "{html}"
    );
    assert!(html.contains("<dt>age_over_18</dt><dd>true</dd>"));

    let out = shop
        .handle(request(Method::POST, "/shop/logout", Some(&session)))
        .await;
    assert_eq!(
        set_cookie(&out, SESSION_COOKIE).as_deref(),
        Some("shop_session=")
    );
    let html = text(shop.handle(get("/shop/", Some(&session))).await).await;
    assert!(html.contains("id=\"login\"") && !html.contains("Erika"));
}

#[tokio::test]
async fn an_id_token_for_another_login_is_refused() {
    let signer = Signer::new("k1");
    let seen = Arc::new(Mutex::new(Seen::default()));
    let issuer = stand_in_provider(&signer, seen.clone()).await;
    let shop = Shop::new(BASE.into());
    shop.set_client(client_of(&issuer));

    let (query, login_cookie) = begin(&shop).await;
    let claims = json!({
        "iss": issuer, "sub": "u-1", "aud": "shop", "nonce": "a replayed one",
        "iat": unix_now(), "exp": unix_now() + 300, "given_name": "Erika",
    });
    seen.lock().unwrap().id_token = signer.sign(Some("k1"), &claims);
    let iss: String = form_urlencoded::byte_serialize(issuer.as_bytes()).collect();
    let uri = format!("/shop/callback?code=c&state={}&iss={iss}", query["state"]);
    let reply = shop.handle(get(&uri, Some(&login_cookie))).await;
    assert_eq!(reply.status(), StatusCode::BAD_GATEWAY);
    assert!(set_cookie(&reply, SESSION_COOKIE).is_none());
    let html = text(reply).await;
    assert!(html.contains("nonce is not this login"), "{html}");
    assert!(!html.contains("Erika"));
}

#[tokio::test]
async fn the_mock_serves_the_shop_on_its_listener() {
    let mock = crate::mock::MockService::start().await.unwrap();
    let base = mock.base_url();
    assert_eq!(mock.shop_url(), format!("{base}/shop/"));
    assert_eq!(mock.shop_redirect_uri(), format!("{base}/shop/callback"));
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let fetch = |url: String| {
        let request = Request::get(url).body(Full::new(Bytes::new())).unwrap();
        client.request(request)
    };
    let before = fetch(mock.shop_url()).await.unwrap();
    assert_eq!(before.status(), StatusCode::NOT_FOUND);
    mock.set_shop(client_of("http://127.0.0.1:1"));
    let after = fetch(mock.shop_url()).await.unwrap();
    assert_eq!(after.status(), StatusCode::OK);
    let html = after.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&html).contains("Log in with your wallet"));
    // A provider that is not there: the shop says so, on a page.
    let login = fetch(format!("{base}/shop/login")).await.unwrap();
    assert_eq!(login.status(), StatusCode::BAD_GATEWAY);
}
