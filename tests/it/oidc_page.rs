//! The authorization endpoint's page as a person uses it (docs/oidc.md):
//! a login whose request the relying party posted survives the page's
//! language switch, which carries the request sealed, never its
//! parameters, and still ends at the relying party with its `state`,
//! `nonce` and PKCE intact; beside the QR code it names the host of the
//! site the login returns to.

use crate::oidc::Provider;
use crate::support;
use crate::support::relying_party::{
    self, code_of, param, params_of, sealed_request, shop_query, shop_redeems,
};
use crate::support::sidecar::{Answer, send};

use bytes::Bytes;
use http::Method;

/// The authorization endpoint's page for a request posted as a form.
async fn posted(provider: &Provider, form: &str) -> Answer {
    send(
        Method::POST,
        &provider.url("/authorize"),
        &[("content-type", "application/x-www-form-urlencoded")],
        Bytes::from(form.to_string()),
    )
    .await
}

/// The `href` of the page's switch to the language `tag`, as a browser
/// reads it.
fn switch_to(page: &Answer, tag: &str) -> String {
    let html = support::text(&page.body);
    let at = html
        .find(&format!(r#"hreflang="{tag}""#))
        .unwrap_or_else(|| panic!("no switch to {tag} in\n{html}"));
    let start = html[..at].rfind("href=\"").expect("the link's href") + 6;
    let href = html[start..].split('"').next().unwrap();
    href.replace("&amp;", "&")
}

/// The `data-{name}` attribute of the page's body.
fn body_data(page: &Answer, name: &str) -> String {
    let html = support::text(&page.body);
    let marker = format!("data-{name}=\"");
    let at = html.find(&marker).expect("a login page") + marker.len();
    html[at..].split('"').next().unwrap().to_string()
}

#[tokio::test]
async fn a_posted_login_survives_the_language_switch_and_completes() {
    let provider = Provider::start(&[]).await;
    let english = posted(&provider, &shop_query("")).await;
    assert_eq!(english.status, 200, "{}", support::text(&english.body));
    assert_eq!(english.headers["content-language"], "en");

    // The switch names the request sealed, and nothing of it in the clear.
    let href = switch_to(&english, "de");
    let names: Vec<String> = params_of(&href).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["authorization", "lang"], "{href}");
    let german = provider.get(&format!("/authorize{href}")).await;
    assert_eq!(german.status, 200, "{}", support::text(&german.body));
    assert_eq!(german.headers["content-language"], "de");
    assert!(support::text(&german.body).contains(r#"<html lang="de""#));
    // The same login: a session the page kept for it goes on.
    assert_eq!(
        body_data(&german, "request"),
        body_data(&english, "request")
    );
    // And back, from the switched page.
    let back = provider
        .get(&format!("/authorize{}", switch_to(&german, "en")))
        .await;
    assert_eq!(back.status, 200, "{}", support::text(&back.body));
    assert_eq!(back.headers["content-language"], "en");

    let mock = &provider.running.mock;
    let redirect =
        relying_party::through_page(&provider.base(), &sealed_request(&german), |service_id| {
            mock.wallet_present_url(service_id)
        })
        .await;
    assert_eq!(
        param(&params_of(&redirect), "state").as_deref(),
        Some("st-1")
    );
    let tokens = shop_redeems(&provider.base(), &code_of(&redirect)).await;
    assert_eq!(tokens.status, 200, "{}", support::text(&tokens.body));
    let id_token = tokens.json()["id_token"].as_str().unwrap().to_string();
    let jwks = relying_party::jwks(&provider.base()).await;
    let claims =
        relying_party::verified_with(&jwks, &id_token, relying_party::ISSUER, "shop").unwrap();
    assert_eq!(claims["nonce"], "n-1");
}

/// A sealed request that does not open here gets lanyard's error page, as
/// an unknown client does: never a redirect.
#[tokio::test]
async fn a_switch_with_a_request_not_sealed_here_gets_lanyards_error_page() {
    let provider = Provider::start(&[]).await;
    for sealed in ["", "not-sealed", &"A".repeat(4000)] {
        let answer = provider
            .get(&format!("/authorize?authorization={sealed}&lang=de"))
            .await;
        assert_eq!(answer.status, 400, "{sealed:.20}");
        assert!(answer.headers.get("location").is_none());
        // In the language the switch asked for, as the page would have been.
        assert!(
            support::text(&answer.body)
                .contains("Diese Anmeldung ist abgelaufen oder hier nicht gültig."),
            "{}",
            support::text(&answer.body)
        );
    }
}

/// Beside the QR code the page names the host the login returns to: a
/// person shown the code on another site than the one they use can tell
/// (docs/oidc.md, "Threats"), in every language.
#[tokio::test]
async fn the_qr_code_names_the_host_of_the_site_that_asks() {
    let provider = Provider::start(&[]).await;
    let page = provider.authorize(&shop_query("")).await;
    let html = support::text(&page.body);
    assert!(
        html.contains(r#"<div id="qr"></div><p id="qr-site">Scan it only if you started signing in to <strong class="isolated" dir="ltr">shop.example</strong> yourself.</p>"#),
        "{html}"
    );
    let german = provider
        .authorize(&format!("{}&ui_locales=de", shop_query("")))
        .await;
    let html = support::text(&german.body);
    assert!(
        html.contains(
            r#"<strong class="isolated" dir="ltr">shop.example</strong> selbst begonnen"#
        ),
        "{html}"
    );
}

/// The `src` or `href` that follows `marker` in `html`.
fn url_after(html: &str, marker: &str) -> String {
    let at = html
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in\n{html}"));
    let rest = &html[at + marker.len()..];
    rest.split('"').next().unwrap().to_string()
}

/// A client's own brand (docs/oidc.md, "A brand per client") is its
/// logins' page, in every language the switch offers, its logo and
/// accent served from the page's origin at URLs named by their content;
/// a client without one gets the deployment's brand file.
#[tokio::test]
async fn a_clients_own_brand_is_its_logins_page_and_others_keep_the_deployments() {
    let dir = tempfile::tempdir().unwrap();
    let clients = relying_party::branded_clients_file(dir.path());
    let brand_file = format!("{}/config/brand.example.toml", env!("CARGO_MANIFEST_DIR"));
    let provider = Provider::start(&[
        ("LANYARD_OIDC_CLIENTS_FILE", clients.as_str()),
        ("LANYARD_VERIFIER_BRAND_FILE", brand_file.as_str()),
    ])
    .await;
    let english = provider.authorize(&shop_query("")).await;
    assert_eq!(english.status, 200, "{}", support::text(&english.body));
    let html = support::text(&english.body);
    assert!(html.contains(r#"alt="Wine &amp; Co""#), "{html}");
    assert!(html.contains("Wine &amp; Co sells wine to adults only."));
    // The brand's label over lanyard's own for the same claim.
    assert!(
        html.contains(r#""age_over_18":"Old enough for wine""#),
        "{html}"
    );
    assert!(!html.contains("Acme Bank"), "not the deployment's brand");
    assert!(
        html.contains(">Wine &amp; Co</strong> asks you"),
        "who asks"
    );

    let logo = url_after(&html, r#"<p class="brand"><img src=""#);
    assert!(logo.starts_with("/wallet/assets/brand/logo-"), "{logo}");
    let served = provider.running.url.clone() + &logo;
    let served = send(Method::GET, &served, &[], Bytes::new()).await;
    assert_eq!(served.status, 200);
    assert_eq!(support::text(&served.body), relying_party::WINE_LOGO);
    assert_eq!(served.headers["content-type"], "image/svg+xml");
    assert_eq!(
        served.headers["cache-control"],
        "public, max-age=31536000, immutable"
    );
    assert_eq!(
        served.headers["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    );
    let style = url_after(
        &html,
        r#"<link rel="stylesheet" href="/wallet/assets/brand/"#,
    );
    let style = format!("{}/wallet/assets/brand/{style}", provider.running.url);
    let css = send(Method::GET, &style, &[], Bytes::new()).await;
    assert_eq!(css.status, 200);
    assert!(support::text(&css.body).contains("--accent: #7a1f2b;"));
    let unknown = provider.get("/assets/brand/logo-0123").await;
    assert_eq!(unknown.status, 404);

    // The switch reopens the sealed request: the same client's brand.
    let german = provider
        .get(&format!("/authorize{}", switch_to(&english, "de")))
        .await;
    let html = support::text(&german.body);
    assert!(html.contains("Wine &amp; Co verkauft Wein nur an Erwachsene."));
    assert!(
        html.contains(r#""age_over_18":"Alt genug für Wein""#),
        "{html}"
    );
    assert!(html.contains(&format!(r#"<img src="{logo}""#)));

    let plain = shop_query("").replace("client_id=shop", "client_id=plain");
    let html = support::text(&provider.authorize(&plain).await.body);
    assert!(
        html.contains(r#"<img src="/wallet/assets/logo" alt="Acme Bank">"#),
        "{html}"
    );
    assert!(!html.contains("Wine"));
}
