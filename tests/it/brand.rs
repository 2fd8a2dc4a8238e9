//! The brand's logo as the verifier serves it (docs/verifier.md,
//! "Branding"): from its own origin, under a policy of its own, so that
//! the SVG opened as a document runs and fetches nothing.

use crate::support;
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
