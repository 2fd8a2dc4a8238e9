//! A native app's login (docs/oidc.md, "Redirect URIs"): a loopback IP
//! redirect URI registered without a port takes the port the app listens
//! on, at every step of the login: the authorization page, the page's
//! `/api/start`, the final redirect, and the token request (RFC 8252
//! §7.3). First as requests over sockets, then in a real browser:
//! `tests/oidc/native.mjs` is the app (panva's `openid-client` behind a
//! loopback listener) and Debian's headless Chromium its system browser,
//! in which the person presents in the mock wallet, and in which a
//! redirect URI in any other form stays on lanyard's error page.
//!
//! The browser tests need Node.js 20+ and npm (`npm ci` runs in
//! `tests/oidc` on first use, tests/it/support/node.rs) and Debian's
//! chromium; scripts/test installs them.

use crate::support;
use crate::support::oidc_scripts::Script;
use crate::support::relying_party::{self, ISSUER, enc, param, params_of};
use crate::support::sidecar::send;
use crate::support::verifier;

use bytes::Bytes;
use http::Method;
use serde_json::Value;

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

/// The client the browser tests register, as the page names it.
const NATIVE_APP_NAME: &str = "Native App";

/// The provider with the native app's client, registered on the loopback
/// IP without a port, and `localhost` exactly on its default port.
async fn native_provider(dir: &std::path::Path) -> verifier::Running {
    let clients = serde_json::json!({"clients": [
        {
            "client_id": "native",
            "redirect_uris": [REGISTERED, "http://localhost/native/cb"],
            "client_name": NATIVE_APP_NAME,
        },
    ]});
    let clients = support::write(dir, "clients.json", &clients.to_string());
    let key = relying_party::key_file(dir, "oidc.pem");
    let settings = [
        ("LANYARD_OIDC_ISSUER", ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", clients.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
    ];
    verifier::start(support::mock().await, None, &settings).await
}

/// Runs `tests/oidc/native.mjs`, the native app and Chromium as its
/// system browser, against `running` with `vars`: its one report, which
/// must be `event`.
async fn native_app(running: &verifier::Running, vars: &[(&str, &str)], event: &str) -> Value {
    let base = format!("{}{}", running.url, relying_party::ISSUER_PATH);
    let mut all = vars.to_vec();
    all.extend([
        ("OIDC_BASE", base.as_str()),
        ("OIDC_ISSUER", ISSUER),
        ("OIDC_CLIENT_ID", "native"),
    ]);
    let mut app = Script::start("native.mjs", &all);
    let report = app.next(event, String::new).await;
    app.finish().await;
    report
}

/// RFC 8252 §7.3 in a real browser: the app listens on a port the system
/// gave it, and Chromium takes the person from lanyard's page to that
/// port; the app redeems the code with that same redirect URI and gets
/// an ID token for itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_app_signs_in_through_chromium_on_the_loopback_port_it_listens_on() {
    let dir = tempfile::tempdir().unwrap();
    let running = native_provider(dir.path()).await;
    let outcome = native_app(&running, &[], "signed_in").await;

    let port = outcome["port"].as_u64().expect("the app's port");
    let redirect_uri = format!("http://127.0.0.1:{port}/native/cb");
    assert_eq!(
        outcome["redirect_uri"],
        redirect_uri.as_str(),
        "{outcome:#}"
    );
    assert!(
        outcome["page_text"]
            .as_str()
            .is_some_and(|text| text.contains(NATIVE_APP_NAME)),
        "the authorization page does not name the app: {outcome:#}"
    );
    // Chromium came back to the app's own port, once, with the code, the
    // state it sent and lanyard's iss (RFC 9207), which openid-client
    // checked before redeeming.
    let callback = &outcome["callback"];
    assert_eq!(
        callback["origin"],
        format!("http://127.0.0.1:{port}"),
        "{outcome:#}"
    );
    assert_eq!(callback["pathname"], "/native/cb", "{outcome:#}");
    assert!(
        callback["code"].as_str().is_some_and(|c| !c.is_empty()),
        "{outcome:#}"
    );
    assert_eq!(callback["state"], outcome["expected_state"], "{outcome:#}");
    assert_eq!(callback["iss"], ISSUER, "{outcome:#}");
    assert_eq!(
        outcome["app_requests"].as_array().map(Vec::len),
        Some(1),
        "{outcome:#}"
    );
    // The token request named the port too (RFC 6749 §4.1.3), with the
    // PKCE verifier and no secret.
    let sent = &outcome["token_request"];
    assert_eq!(sent["grant_type"], "authorization_code", "{outcome:#}");
    assert_eq!(sent["client_id"], "native", "{outcome:#}");
    assert_eq!(sent["redirect_uri"], redirect_uri.as_str(), "{outcome:#}");
    assert_eq!(sent["code_verifier_sent"], true, "{outcome:#}");
    let id_token = &outcome["id_token"];
    assert_eq!(id_token["iss"], ISSUER, "{outcome:#}");
    assert_eq!(id_token["aud"], "native", "{outcome:#}");
    assert_eq!(id_token["nonce"], outcome["expected_nonce"], "{outcome:#}");
    assert!(
        id_token["sub"].as_str().is_some_and(|s| !s.is_empty()),
        "{outcome:#}"
    );
}

/// What a port-less loopback registration does not stretch to, each in
/// Chromium: lanyard's error page, even for a request that a provider
/// which took the redirect URI would send straight back to it
/// (`prompt=none`), and the app's listener never hears of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chromium_shows_lanyard_s_error_page_for_a_non_canonical_loopback_redirect() {
    let dir = tempfile::tempdir().unwrap();
    let running = native_provider(dir.path()).await;
    let refused = serde_json::json!([
        "http://user@127.0.0.1:{port}/native/cb",
        "http://127.0.0.1:0/native/cb",
        "http://127.0.0.1:0{port}/native/cb",
        "HTTP://127.0.0.1:{port}/native/cb",
        "http://127.0.0.1:{port}/native/cb#app",
        "http://[0:0:0:0:0:0:0:1]:{port}/native/cb",
        // Registered exactly: on its default port only (RFC 8252 §8.3).
        "http://localhost:{port}/native/cb",
    ]);
    let outcome = native_app(
        &running,
        &[("NATIVE_REFUSED", &refused.to_string())],
        "refused",
    )
    .await;

    assert_eq!(
        outcome["heard"],
        serde_json::json!([]),
        "the app heard of a refused login: {outcome:#}"
    );
    let shown = outcome["shown"].as_array().expect("what Chromium showed");
    assert_eq!(
        shown.len(),
        2 * refused.as_array().unwrap().len(),
        "{outcome:#}"
    );
    let authorize = format!("{}{}/authorize?", running.url, relying_party::ISSUER_PATH);
    for page in shown {
        assert_eq!(page["status"], 400, "{page:#}");
        assert!(
            page["url"]
                .as_str()
                .is_some_and(|url| url.starts_with(&authorize)),
            "Chromium left lanyard's page: {page:#}"
        );
        assert_eq!(page["title"], "This login cannot go on", "{page:#}");
        assert!(
            page["text"]
                .as_str()
                .is_some_and(|text| text.contains("not one registered for the application")),
            "{page:#}"
        );
    }
    // The app's own redirect URI with `prompt=none` comes straight back
    // to its listener: hearing nothing above was not deafness.
    let control = &outcome["control"];
    let back = format!(
        "http://127.0.0.1:{}/native/cb?error=login_required&",
        outcome["port"]
    );
    assert!(
        control["url"]
            .as_str()
            .is_some_and(|url| url.starts_with(&back)),
        "{outcome:#}"
    );
    assert_eq!(
        control["heard"].as_array().map(Vec::len),
        Some(1),
        "{outcome:#}"
    );
}
