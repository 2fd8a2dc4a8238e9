//! The shop's pages: the shop with its login link or the claims of the
//! person logged in, what became of a login, and the redirects between
//! them. No script; one stylesheet of the shop's own.
//!
//! Claims come from an ID token, which is data from elsewhere: every
//! claim's name and value is escaped, so none is ever markup. Of the
//! mock it imports only the frame its pages share with the wallet's.

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use serde_json::{Map, Value};

use crate::mock::surface::{Frame, html_page};

/// The page's own stylesheet and its own form posts; nothing else, not
/// even an inline style.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; style-src 'self'; \
     form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// The shop's paths: what its pages link to and its routes answer, all
/// under the mock's `/shop`.
pub(super) const HOME_PATH: &str = "/shop/";
pub(super) const LOGIN_PATH: &str = "/shop/login";
/// The scope of the demo's age-only rule (`lanyard demo` registers it for
/// the shop's client): a login that asks it is asked only whether the
/// person is over 18 (docs/oidc.md, "Rules per client").
pub const AGE_SCOPE: &str = "age";
pub(super) const CALLBACK_PATH: &str = "/shop/callback";
pub(super) const LOGOUT_PATH: &str = "/shop/logout";
pub(super) const STYLESHEET_PATH: &str = "/shop/shop.css";

const STYLESHEET: &str = "\
body { font-family: system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; }
.button { display: inline-block; padding: .6rem 1.2rem; border: 0; border-radius: .4rem;
  background: #1f6feb; color: #fff; font: inherit; text-decoration: none; cursor: pointer; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1rem; }
dt { font-weight: 600; }
dd { margin: 0; overflow-wrap: anywhere; }
";

/// A reply of the shop's.
pub(super) type Page = Response<Full<Bytes>>;

/// The shop: the login link, or who is logged in and a way out.
pub(super) fn home(claims: Option<&Map<String, Value>>) -> Page {
    let body = match claims {
        None => format!(
            "<p>Welcome. Log in to see what your wallet tells the shop about you.</p>\n\
             <p><a class=\"button\" id=\"login\" href=\"{LOGIN_PATH}\">Log in with your wallet</a></p>\n\
             <p><a class=\"button\" id=\"login-age\" href=\"{LOGIN_PATH}?scope={AGE_SCOPE}\">Only prove you are over 18</a></p>"
        ),
        Some(claims) => {
            let rows: String = claims
                .iter()
                .map(|(name, value)| {
                    let value = match value {
                        Value::String(text) => escape(text),
                        other => escape(&other.to_string()),
                    };
                    format!("<dt>{}</dt><dd>{value}</dd>\n", escape(name))
                })
                .collect();
            format!(
                "<p id=\"outcome\">You are logged in. The provider's ID token says:</p>\n\
                 <dl id=\"claims\">\n{rows}</dl>\n\
                 <form method=\"post\" action=\"{LOGOUT_PATH}\">\
                 <button class=\"button\" type=\"submit\" id=\"logout\">Log out</button></form>"
            )
        }
    };
    page(StatusCode::OK, &body)
}

/// What became of a login that did not end logged in; `sentence` is the
/// shop's own text.
pub(super) fn outcome(status: StatusCode, sentence: &str) -> Page {
    page(
        status,
        &format!(
            "<p id=\"outcome\">{}</p>\n<p><a href=\"{HOME_PATH}\">Back to the shop</a></p>",
            escape(sentence)
        ),
    )
}

/// The shop without a provider to log in with.
pub(super) fn not_set_up() -> Page {
    page(
        StatusCode::NOT_FOUND,
        "<p id=\"outcome\">The shop is not set up: no OpenID Connect provider is configured for it.</p>",
    )
}

pub(super) fn stylesheet() -> Page {
    let mut response = Response::new(Full::new(Bytes::from_static(STYLESHEET.as_bytes())));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/css; charset=utf-8"),
    );
    response
}

/// A 303 to `location`, setting `cookies`.
pub(super) fn see_other(location: HeaderValue, cookies: &[String]) -> Page {
    let mut response = Response::new(Full::new(Bytes::new()));
    *response.status_mut() = StatusCode::SEE_OTHER;
    let headers = response.headers_mut();
    headers.insert(header::LOCATION, location);
    for cookie in cookies {
        // A cookie's text is the shop's own: names, base64url, attributes.
        if let Ok(value) = HeaderValue::from_str(cookie) {
            headers.append(header::SET_COOKIE, value);
        }
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    response
}

fn page(status: StatusCode, body: &str) -> Page {
    let frame = Frame {
        name: "Demo shop",
        lead: "A relying party that logs you in with OpenID Connect (lanyard's mock service).",
        stylesheet: Some(STYLESHEET_PATH),
        policy: CONTENT_SECURITY_POLICY,
    };
    html_page(status, &frame, body)
}

/// Text made safe to place in an element or a quoted attribute.
fn escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn text(page: Page) -> String {
        use http_body_util::BodyExt as _;
        let bytes = page.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(bytes.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn claims_are_shown_as_text_never_as_markup() {
        let claims = json!({
            "given_name": "<script>alert(1)</script>",
            "<b>odd</b>": "a & \"b\" 'c'",
            "age_over_18": true,
        });
        let html = text(home(claims.as_object())).await;
        assert!(html.contains("<dt>given_name</dt><dd>&lt;script&gt;alert(1)&lt;/script&gt;</dd>"));
        assert!(
            html.contains(
                "<dt>&lt;b&gt;odd&lt;/b&gt;</dt><dd>a &amp; &quot;b&quot; &#39;c&#39;</dd>"
            )
        );
        assert!(html.contains("<dt>age_over_18</dt><dd>true</dd>"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("id=\"logout\""));
        assert!(!html.contains("id=\"login\""));
    }

    #[tokio::test]
    async fn every_page_forbids_script_and_other_origins() {
        for page in [
            home(None),
            outcome(StatusCode::BAD_REQUEST, "no"),
            not_set_up(),
        ] {
            let csp = &page.headers()[header::CONTENT_SECURITY_POLICY];
            assert_eq!(csp, CONTENT_SECURITY_POLICY);
            assert!(!CONTENT_SECURITY_POLICY.contains("script-src"));
            assert!(CONTENT_SECURITY_POLICY.starts_with("default-src 'none'"));
        }
        let html = text(home(None)).await;
        assert!(html.contains("<a class=\"button\" id=\"login\" href=\"/shop/login\">"));
        assert!(!html.contains("<script") && !html.contains("style="));
    }
}
