//! A browser app signs in through `lanyard verifier`'s OpenID Connect
//! provider with nothing but its page's code: a single-page app built on
//! `oidc-client-ts` (a library nobody here wrote), a public client with
//! PKCE, in Debian's headless Chromium, the embedded mock as the service
//! and its wallet. The token endpoint and userinfo answer the app's
//! origin, the origin of its registered redirect URI, with CORS
//! (docs/oidc.md, "Browser apps"); the same app served from an origin
//! that is not registered, holding the code and the app's stored login
//! state, gets no tokens, and the code still redeems from the right
//! origin. The browser's part is `tests/oidc/spa.mjs` and
//! `tests/oidc/spa/`; the assertions are here.
//!
//! Needs Node.js 20+ and npm (`npm ci` runs in `tests/oidc` on first use)
//! and Debian's chromium; scripts/test installs them.

use crate::support::oidc_scripts::{Provider, Script};

use serde_json::{Value, json};

/// The app's client id at lanyard.
const CLIENT_ID: &str = "wallet-spa";
/// What the mock's wallet presents (src/mock/verification.rs).
const GIVEN_NAME: &str = "Erika";
const BIRTHDATE: &str = "1984-01-26";

/// One sign-in by the app; `foreign` also has the app on the other
/// origin try the code first. Returns the final report, the app's origin
/// and the other origin.
async fn sign_in(foreign: bool) -> (Value, String, String) {
    let mut vars = vec![("OIDC_CLIENT_ID", CLIENT_ID)];
    if foreign {
        vars.push(("OIDC_SPA_FOREIGN_ORIGIN", "1"));
    }
    let mut app = Script::start("spa.mjs", &vars);
    let listening = app.next("listening", String::new).await;
    let redirect_uri = listening["redirect_uri"].as_str().unwrap();
    // A public client: no secret, so PKCE alone binds the code.
    let mut provider = Provider::start(
        "",
        json!({ "clients": [{
            "client_id": CLIENT_ID,
            "redirect_uris": [redirect_uri],
            "client_name": "Wallet SPA",
        }]}),
    )
    .await;
    app.tell(&provider.issuer).await;
    let outcome = app.next("signed_in", || provider.logs()).await;
    app.finish().await;
    let origin = listening["origin"].as_str().unwrap().to_string();
    let other = listening["other_origin"].as_str().unwrap().to_string();
    (outcome, origin, other)
}

/// A token or userinfo request a browser made, as the script saw it.
struct Seen {
    method: String,
    /// `token` or `userinfo`.
    endpoint: String,
    origin: Option<String>,
    /// lanyard's answer, when the browser let the page see it.
    status: Option<u64>,
    allowed: Option<String>,
    /// Why the browser kept the answer from the page.
    failed: Option<String>,
}

/// The token and userinfo requests the browser `label` made.
fn requests(outcome: &Value, label: &str) -> Vec<Seen> {
    let text = |value: &Value| value.as_str().map(str::to_string);
    outcome["network"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|seen| seen["browser"] == label)
        .map(|seen| Seen {
            method: text(&seen["method"]).unwrap_or_default(),
            endpoint: seen["url"]
                .as_str()
                .and_then(|url| url.rsplit('/').next())
                .unwrap_or_default()
                .to_string(),
            origin: text(&seen["origin"]),
            status: seen["status"].as_u64(),
            allowed: text(&seen["allow_origin"]),
            failed: text(&seen["failed"]),
        })
        .collect()
}

/// The app showed the person's claims from the ID token and from its own
/// userinfo call, and every answer lanyard gave it named its origin.
fn assert_app_signed_in(outcome: &Value, origin: &str) {
    assert!(outcome["error"].is_null(), "{outcome:#}");
    let result = &outcome["result"];
    assert_eq!(result["has_id_token"], true, "{outcome:#}");
    assert_eq!(result["has_access_token"], true, "{outcome:#}");
    assert!(
        result["token_type"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case("bearer")),
        "{outcome:#}"
    );
    let profile = &result["profile"];
    assert_eq!(profile["aud"], CLIENT_ID, "{outcome:#}");
    assert_eq!(profile["given_name"], GIVEN_NAME, "{outcome:#}");
    assert_eq!(profile["birthdate"], BIRTHDATE, "{outcome:#}");
    assert_eq!(result["userinfo_status"], 200, "{outcome:#}");
    assert_eq!(result["userinfo"]["sub"], profile["sub"], "{outcome:#}");
    assert_eq!(result["userinfo"]["given_name"], GIVEN_NAME, "{outcome:#}");

    let seen = requests(outcome, "app");
    let answered = |endpoint: &str, method: &str| {
        seen.iter().any(|s| {
            s.method == method && s.endpoint == endpoint && s.status.is_some_and(|c| c == 200)
        })
    };
    // oidc-client-ts's userinfo call and the app's own carry an
    // Authorization header: Chromium sent them only after a preflight
    // lanyard granted.
    assert!(answered("token", "POST"), "{outcome:#}");
    assert!(answered("userinfo", "GET"), "{outcome:#}");
    for s in &seen {
        assert_eq!(s.origin.as_deref(), Some(origin), "{outcome:#}");
        assert_eq!(
            s.allowed.as_deref(),
            Some(origin),
            "{} {}: {outcome:#}",
            s.method,
            s.endpoint
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oidc_client_ts_signs_in_from_the_browser_and_calls_userinfo() {
    let (outcome, origin, _) = sign_in(false).await;
    assert_app_signed_in(&outcome, &origin);
    assert!(
        outcome["page_text"]
            .as_str()
            .is_some_and(|text| text.contains("Wallet SPA")),
        "the authorization page does not name the app: {outcome:#}"
    );
}

/// The app on an origin that is not registered, holding a code and the
/// PKCE verifier the app stored, tries to redeem it: lanyard refuses the
/// request without CORS, so the page reads nothing, and does not spend
/// the code, which the app then redeems from its own origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_on_an_unregistered_origin_gets_no_tokens_and_the_code_still_redeems() {
    let (outcome, origin, other) = sign_in(true).await;
    let foreign = &outcome["foreign"];
    assert!(foreign["result"].is_null(), "{outcome:#}");
    assert!(foreign["error"].is_string(), "{outcome:#}");
    // The page on the other origin sent it, and the browser kept
    // lanyard's answer from the page: no Access-Control-Allow-Origin.
    // (Chromium shows playwright a failed request's headers without
    // `Origin`.)
    let tried = requests(&outcome, "other origin");
    assert!(
        tried.iter().any(|s| s.method == "POST"
            && s.endpoint == "token"
            && s.origin.as_deref().is_none_or(|o| o == other)
            && s.allowed.is_none()
            && (s.failed.is_some() || s.status.is_some_and(|c| c >= 400))),
        "the other origin's token request was not refused: {outcome:#}"
    );
    assert_app_signed_in(&outcome, &origin);
}
