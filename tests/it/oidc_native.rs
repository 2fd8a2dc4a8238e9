//! A native app's login (docs/oidc.md, "Redirect URIs"): a loopback IP
//! redirect URI registered without a port takes the port the app listens
//! on, at every step of the login: the authorization page, the page's
//! `/api/start`, the final redirect, and the token request (RFC 8252
//! §7.3).

use crate::support;
use crate::support::relying_party::{self, ISSUER, enc, param, params_of};
use crate::support::sidecar::send;
use crate::support::verifier;

use bytes::Bytes;
use http::Method;

/// RFC 7636 Appendix B.
const VERIFIER: &str = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk";
const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";
const REGISTERED: &str = "http://127.0.0.1/native/cb";

#[tokio::test]
async fn a_native_app_logs_in_on_the_loopback_port_it_listens_on() {
    let dir = tempfile::tempdir().unwrap();
    let clients = serde_json::json!({"clients": [
        {"client_id": "native", "redirect_uris": [REGISTERED, "http://localhost/native/cb"]},
    ]});
    let clients = support::write(dir.path(), "clients.json", &clients.to_string());
    let key = relying_party::key_file(dir.path(), "oidc.pem");
    let settings = [
        ("LANYARD_OIDC_ISSUER", ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", clients.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
    ];
    let running = verifier::start(support::mock().await, None, &settings).await;
    let base = format!("{}{}", running.url, relying_party::ISSUER_PATH);
    // A port as the app's own listener would be given one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let redirect_uri = format!("http://127.0.0.1:{port}/native/cb");
    let query = |redirect_uri: &str| {
        format!(
            "response_type=code&client_id=native&redirect_uri={}&scope=openid&state=s-1&code_challenge={CHALLENGE}&code_challenge_method=S256",
            enc(redirect_uri)
        )
    };

    let mock = &running.mock;
    let redirect = relying_party::login(&base, &query(&redirect_uri), |service_id| {
        mock.wallet_present_url(service_id)
    })
    .await;
    assert!(
        redirect.starts_with(&format!("{redirect_uri}?")),
        "goes to the port the request named: {redirect}"
    );
    let params = params_of(&redirect);
    assert_eq!(param(&params, "state").as_deref(), Some("s-1"));
    let code = param(&params, "code").expect("a code");
    let form = |redirect_uri: &str| {
        format!(
            "grant_type=authorization_code&client_id=native&code={}&redirect_uri={}&code_verifier={VERIFIER}",
            enc(&code),
            enc(redirect_uri)
        )
    };
    // The token request names the redirect URI the request named
    // (RFC 6749 §4.1.3), port and all.
    let registered = relying_party::token(&base, &form(REGISTERED), &[]).await;
    assert_eq!(registered.json()["error"], "invalid_grant");
    let redeemed = relying_party::token(&base, &form(&redirect_uri), &[]).await;
    assert_eq!(redeemed.status, 200, "{}", support::text(&redeemed.body));

    // `localhost` is matched exactly, never on another port; a port of
    // another form is no port.
    for refused in [
        format!("http://localhost:{port}/native/cb"),
        format!("http://127.0.0.1:0{port}/native/cb"),
        format!("http://user@127.0.0.1:{port}/native/cb"),
    ] {
        let page = send(
            Method::GET,
            &format!("{base}/authorize?{}", query(&refused)),
            &[],
            Bytes::new(),
        )
        .await;
        assert_eq!(page.status, 400, "{refused}");
        assert!(page.headers.get("location").is_none(), "{refused}");
    }
}
