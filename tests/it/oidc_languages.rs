//! The language of every page lanyard shows at the issuer's path
//! (docs/translations.md): a login's page, a refused login's page and a
//! path with no page, each in the first of `?lang=`, `ui_locales` and
//! `Accept-Language` that matches a shipped language, falling through
//! each that matches none, else English; the refused login's and the
//! missing path's pages built as the page is (its style under the
//! issuer's path, `<html lang dir>`), never naming what the request held.

use crate::oidc::Provider;
use crate::support;
use crate::support::relying_party::shop_query;
use crate::support::sidecar::{Answer, send};

use bytes::Bytes;
use http::Method;

/// `path` at the issuer, asked with `Accept-Language: accept` when given.
async fn asked(provider: &Provider, path: &str, accept: Option<&str>) -> Answer {
    let headers: Vec<(&str, &str)> = accept.map(|a| ("accept-language", a)).into_iter().collect();
    send(Method::GET, &provider.url(path), &headers, Bytes::new()).await
}

/// The language `answer` is in, by its header and by its `<html lang>`,
/// which must agree.
fn language_of(answer: &Answer) -> String {
    let html = support::text(&answer.body);
    let tag = answer.headers["content-language"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(
        html.contains(&format!(r#"<html lang="{tag}""#)),
        "Content-Language {tag}, but\n{html}"
    );
    tag
}

/// Each step of the choice, on a login's page and on a refused one's:
/// the query's `lang`, then `ui_locales`, then `Accept-Language`, then
/// English, each passed over when it names no shipped language.
#[tokio::test]
async fn each_page_takes_the_first_language_that_matches_falling_through_the_rest() {
    let provider = Provider::start(&[]).await;
    let login = shop_query("");
    let unknown =
        "response_type=code&client_id=nobody&redirect_uri=https%3A%2F%2Fa.example%2F&scope=openid";
    let steps: &[(&str, Option<&str>, &str)] = &[
        ("&lang=pl&ui_locales=de", Some("fr"), "pl"),
        ("&lang=ja&ui_locales=ko%20de-CH", Some("fr"), "de"),
        ("&lang=ja&ui_locales=ko", Some("ja, ar-EG;q=0.9"), "ar"),
        ("&ui_locales=ja", Some("es-MX"), "es"),
        ("&lang=ja&ui_locales=ko", Some("ja"), "en"),
        ("", None, "en"),
    ];
    for (query, accept, expected) in steps {
        for (what, base, status) in [
            ("login", &login, 200),
            ("refused", &unknown.to_string(), 400),
        ] {
            let answer = asked(&provider, &format!("/authorize?{base}{query}"), *accept).await;
            assert_eq!(answer.status, status, "{what} {query} {accept:?}");
            assert_eq!(language_of(&answer), *expected, "{what} {query} {accept:?}");
        }
    }
}

/// A refused login's page in Arabic: its words, right to left, the
/// page's style under the issuer's path, nothing of the request.
#[tokio::test]
async fn a_refused_login_is_on_a_page_in_the_persons_language() {
    let provider = Provider::start(&[]).await;
    let query = "response_type=code&client_id=evil%3Cb%3E&redirect_uri=https%3A%2F%2Fevil.example%2F&scope=openid";
    let answer = asked(&provider, &format!("/authorize?{query}"), Some("ar")).await;
    assert_eq!(answer.status, 400);
    let html = support::text(&answer.body);
    assert!(html.contains(r#"<html lang="ar" dir="rtl">"#), "{html}");
    assert!(html.contains("لا يمكن متابعة تسجيل الدخول هذا"), "{html}");
    assert!(
        html.contains("التطبيق الذي أرسلك إلى هنا غير معروف"),
        "{html}"
    );
    assert!(
        html.contains(r#"href="/wallet/assets/verifier.css""#),
        "{html}"
    );
    assert!(!html.contains("evil"), "reflected: {html}");
    assert!(
        !html.contains("This login"),
        "English on an Arabic page: {html}"
    );
    assert_eq!(answer.headers["cache-control"], "no-store");
}

/// A path under the issuer with no page: lanyard's page saying so, in
/// the browser's language, with the switch to the others; `HEAD` the
/// same without a body.
#[tokio::test]
async fn a_missing_page_under_the_issuer_says_so_in_the_persons_language() {
    let provider = Provider::start(&[]).await;
    let answer = asked(&provider, "/no-such-page", Some("pl-PL")).await;
    assert_eq!(answer.status, 404);
    assert_eq!(language_of(&answer), "pl");
    let html = support::text(&answer.body);
    assert!(html.contains("<h1>Nie znaleziono strony</h1>"), "{html}");
    assert!(
        html.contains(r#"href="/wallet/assets/verifier.css""#),
        "{html}"
    );
    assert!(html.contains(r#"hreflang="ar""#), "the switch: {html}");
    let german = asked(&provider, "/no-such-page?lang=de", Some("pl")).await;
    assert_eq!(language_of(&german), "de");
    let head = send(
        Method::HEAD,
        &provider.url("/no-such-page"),
        &[],
        Bytes::new(),
    )
    .await;
    assert_eq!(head.status, 404);
    assert!(head.body.is_empty());
    assert_eq!(
        head.headers["content-length"],
        answer_length(&provider).await.to_string().as_str()
    );
}

async fn answer_length(provider: &Provider) -> usize {
    asked(provider, "/no-such-page", None).await.body.len()
}
