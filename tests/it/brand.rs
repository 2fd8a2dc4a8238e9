//! The brand's logo as the verifier serves it (docs/verifier.md,
//! "Branding"): from its own origin, under a policy of its own, so that
//! the SVG opened as a document runs and fetches nothing; and a client's
//! own brand in the clients file (docs/oidc.md, "A brand per client")
//! refused at start-up as the brand file is.

use crate::support;
use crate::support::relying_party;
use crate::support::sidecar::send;
use crate::support::verifier;

use bytes::Bytes;
use http::Method;

#[tokio::test]
async fn the_logo_is_served_sandboxed_and_never_sniffed() {
    let brand_file = format!("{}/config/brand.example.toml", env!("CARGO_MANIFEST_DIR"));
    let settings = [("LANYARD_VERIFIER_BRAND_FILE", brand_file.as_str())];
    let running = verifier::start(support::mock().await, None, &settings).await;
    let logo = send(
        Method::GET,
        &format!("{}/assets/logo", running.url),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(logo.status, 200);
    assert_eq!(logo.headers["content-type"], "image/svg+xml");
    assert_eq!(
        logo.headers["content-security-policy"],
        "default-src 'none'; style-src 'unsafe-inline'; sandbox"
    );
    assert_eq!(logo.headers["x-content-type-options"], "nosniff");
    // The page keeps its own policy.
    let page = send(Method::GET, &format!("{}/", running.url), &[], Bytes::new()).await;
    assert_eq!(
        page.headers["content-security-policy"],
        lanyard::verifier::CONTENT_SECURITY_POLICY
    );
}

/// A bad brand in the clients file stops `lanyard verifier` and `lanyard
/// check` (exit 2) as a bad brand file does: every problem in one run,
/// each naming the setting, the file, the client and the key, and never
/// a client's secret. Each check itself is unit-tested in
/// `src/config/oidc/client_brand.rs`.
#[tokio::test]
async fn a_bad_client_brand_stops_start_up_naming_the_client_and_the_key() {
    let mock = support::mock().await;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let secret = relying_party::SECRET;
    let clients = serde_json::json!({"clients": [
        {"client_id": "shop", "client_secret": secret, "redirect_uris": ["https://shop.example/cb"],
         "brand": {"name": "Shop", "accent": "#777777"}},
        {"client_id": "fine", "client_secret": secret, "redirect_uris": ["https://fine.example/cb"],
         "brand": {"name": "Fine", "accent": "#1f4e8c"}},
        {"client_id": "wine", "client_secret": secret, "redirect_uris": ["https://wine.example/cb"],
         "brand": {"logo": "missing.svg", "claims": {"age_over_18": {"e_n": "Over 18"}}}},
    ]});
    let clients = support::write(d, "clients.json", &clients.to_string());
    let key = relying_party::key_file(d, "oidc.pem");
    let provider = [
        ("LANYARD_OIDC_ISSUER", relying_party::ISSUER),
        ("LANYARD_OIDC_CLIENTS_FILE", clients.to_str().unwrap()),
        ("LANYARD_OIDC_SIGNING_KEY_FILE", key.as_str()),
        ("LANYARD_VERIFIER_LISTEN", "127.0.0.1:0"),
        ("PROJECT_ID", verifier::PROJECT),
        ("RULE_ID", verifier::RULE),
        ("WALLET_BASE_URL", "https://wallet.example"),
    ];
    let file = format!(
        "LANYARD_OIDC_CLIENTS_FILE (environment variable LANYARD_OIDC_CLIENTS_FILE): {}: ",
        clients.display()
    );
    for command in ["verifier", "check"] {
        let out = support::lanyard(&[command], support::settings(&mock, d, &provider)).await;
        let stderr = support::text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {stderr}");
        for expected in [
            "clients[0].brand (client `shop`): `accent`: #777777 has a contrast of 4.48:1",
            "clients[2].brand (client `wine`): `name`: is required",
            "clients[2].brand (client `wine`): `logo`: ",
            "missing.svg cannot be read: no such file",
            "clients[2].brand (client `wine`): `claims.age_over_18.e_n`: is not a well-formed BCP 47 language tag",
        ] {
            let line = stderr.lines().find(|line| line.contains(expected));
            let line = line.unwrap_or_else(|| panic!("{command}: {expected} not in\n{stderr}"));
            assert!(line.contains(&file), "{command}: {line}");
        }
        assert!(!stderr.contains("`fine`"), "{stderr}");
        assert!(!stderr.contains(secret), "{stderr}");
    }
}
