//! What the browser loads: the page, its script, style and icon, compiled
//! into the binary and served under a strict Content-Security-Policy, and
//! the QR code, an SVG lanyard renders (docs/verifier.md).

mod brands;
mod render;

pub use brands::ClientBrands;
pub use render::{BRAND_STYLE_PATH, ErrorPage, LOGO_PATH, Pages, Rendered};

use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::Body as _;
use qrcode::render::svg;
use qrcode::{EcLevel, QrCode};

use super::i18n::Asked;

/// Nothing from another origin, no inline script or style, no framing,
/// no form posts, no plugins: the page's own files and its own API only.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

/// A file of the page.
pub struct Asset {
    pub path: &'static str,
    content_type: &'static str,
    body: &'static str,
}

/// What the page loads. The page itself is rendered per language
/// (`render`).
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/assets/verifier.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("page/verifier.js"),
    },
    Asset {
        path: "/assets/verifier.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("page/verifier.css"),
    },
    Asset {
        path: "/assets/icon.svg",
        content_type: "image/svg+xml",
        body: include_str!("page/icon.svg"),
    },
];

pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|asset| asset.path == path)
}

impl Asset {
    /// The file with its headers; `head` leaves the body out.
    pub fn response(&self, head: bool) -> Response<Full<Bytes>> {
        let body = match head {
            true => Bytes::new(),
            false => Bytes::from_static(self.body.as_bytes()),
        };
        let mut response = Response::new(Full::new(body));
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(self.content_type),
        );
        if head {
            headers.insert(header::CONTENT_LENGTH, HeaderValue::from(self.body.len()));
        }
        // Revalidated each time: a new lanyard's page must not run an old
        // script against a new API.
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

/// Features the page never uses, denied to it and to anything that might
/// be injected into it (a wallet hand-over is a link, not an API).
pub const PERMISSIONS_POLICY: &str = "accelerometer=(), autoplay=(), camera=(), \
     display-capture=(), fullscreen=(), geolocation=(), gyroscope=(), hid=(), \
     identity-credentials-get=(), magnetometer=(), microphone=(), midi=(), payment=(), \
     publickey-credentials-get=(), serial=(), usb=(), xr-spatial-tracking=()";
/// Once a browser has reached the page over https, it keeps to https for a
/// year (RFC 6797); sent only when a trusted proxy says https, as a plain
/// http answer's would be ignored, and a wrong one would lock users out.
pub const STRICT_TRANSPORT_SECURITY: &str = "max-age=31536000";

/// The headers every answer of the verifier carries, the server's own
/// refusals (431, 503) included: they are the same whatever the request.
pub fn security_headers() -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    for (name, value) in [
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (
            header::HeaderName::from_static("cross-origin-opener-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("cross-origin-resource-policy"),
            "same-origin",
        ),
        (
            header::HeaderName::from_static("permissions-policy"),
            PERMISSIONS_POLICY,
        ),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    headers
}

/// The logo's own policy: an SVG opened as a document (its URL typed in,
/// or followed from elsewhere) runs nothing, fetches nothing, and is a
/// sandboxed origin of its own; its inline styles still apply.
pub const LOGO_CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; style-src 'unsafe-inline'; sandbox";

/// Adds [`security_headers`] to an answer (keeping a policy of its own),
/// and `Strict-Transport-Security`
/// when the browser came over https.
pub fn secure(headers: &mut http::HeaderMap, https: bool) {
    // An answer with a policy of its own (the logo's) keeps it.
    let own_policy = headers.remove(header::CONTENT_SECURITY_POLICY);
    headers.extend(security_headers());
    if let Some(policy) = own_policy {
        headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    }
    if https {
        headers.insert(
            header::STRICT_TRANSPORT_SECURITY,
            HeaderValue::from_static(STRICT_TRANSPORT_SECURITY),
        );
    }
}

/// The page in its language, for a browser that asked for `lang`; its
/// text depends on `Accept-Language`, which caches must key on.
pub fn page(rendered: &Rendered, head: bool) -> Response<Full<Bytes>> {
    let length = rendered.body.len();
    let mut response = Response::new(Full::new(match head {
        true => Bytes::new(),
        false => rendered.body.clone(),
    }));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // Revalidated each time: a new lanyard's page must not run an old
    // script against a new API.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    language_headers(headers, &rendered.lang);
    if head {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    response
}

fn language_headers(headers: &mut http::HeaderMap, lang: &str) {
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Language"));
    if let Ok(lang) = HeaderValue::from_str(lang) {
        headers.insert(header::CONTENT_LANGUAGE, lang);
    }
}

/// The page for an OpenID Connect login (docs/oidc.md): the same page,
/// its files and API under the issuer's path `base`, carrying the sealed
/// authorization request for `/api/start` and for its language switch
/// (so that a request posted to the authorization endpoint survives the
/// switch, its parameters kept out of URLs), and saying who asks and,
/// beside the QR code, the `site` (its host) the login returns to. Never
/// stored: it holds this request alone.
pub fn login_page(
    rendered: &Rendered,
    base: &str,
    authorization: &str,
    request: &str,
    asker: &str,
    site: Option<&str>,
) -> Response<Full<Bytes>> {
    let site = site.map_or_else(String::new, |host| rendered.site(host));
    let switch: String = form_urlencoded::byte_serialize(authorization.as_bytes()).collect();
    let page = rendered
        .html
        .replace("href=\"/assets/", &format!("href=\"{base}/assets/"))
        .replace("src=\"/assets/", &format!("src=\"{base}/assets/"))
        .replace(
            "<body>",
            &format!(
                r#"<body data-base="{base}/" data-authorization="{authorization}" data-request="{request}">"#
            ),
        )
        .replace(r#"<p id="asker" hidden></p>"#, &rendered.asker(asker))
        .replace(r#"<div id="qr"></div>"#, &format!(r#"<div id="qr"></div>{site}"#))
        .replace(
            r#"href="?lang="#,
            &format!(r#"href="?authorization={switch}&amp;lang="#),
        );
    let mut response = html(page);
    language_headers(response.headers_mut(), &rendered.lang);
    response
}

/// lanyard's own page ([`Pages::error`]: its HTML and language) as an
/// answer with `status`; never stored, as a refused login's page holds
/// that request's words.
pub fn error_page((page, lang): (String, String), status: StatusCode) -> Response<Full<Bytes>> {
    let mut response = html(page);
    *response.status_mut() = status;
    language_headers(response.headers_mut(), &lang);
    response
}

fn html(page: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(page)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `text` as HTML text and attribute content.
pub fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The brand file's logo or stylesheet, served from lanyard's own origin
/// under the page's CSP (docs/translations.md, docs/verifier.md "Branding").
pub fn brand_asset(
    brand: &crate::config::brand::Brand,
    path: &str,
    head: bool,
) -> Option<Response<Full<Bytes>>> {
    let (content_type, body) = match path {
        LOGO_PATH => {
            let logo = brand.logo.as_ref()?;
            (logo.content_type, logo.bytes.clone())
        }
        BRAND_STYLE_PATH => ("text/css; charset=utf-8", Bytes::from(brand.stylesheet()?)),
        _ => return None,
    };
    // Revalidated: the file's URL stays when the brand file changes.
    let cache = "no-cache";
    Some(brand_file(
        content_type,
        body,
        path == LOGO_PATH,
        cache,
        head,
    ))
}

/// A brand's logo (`logo`: under [`LOGO_CONTENT_SECURITY_POLICY`]) or
/// stylesheet, kept by caches as `cache` says.
fn brand_file(
    content_type: &'static str,
    body: Bytes,
    logo: bool,
    cache: &'static str,
    head: bool,
) -> Response<Full<Bytes>> {
    let length = body.len();
    let mut response = Response::new(Full::new(match head {
        true => Bytes::new(),
        false => body,
    }));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    if logo {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(LOGO_CONTENT_SECURITY_POLICY),
        );
    }
    if head {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    response
}

/// The answer for a path with no page: lanyard's own page saying so, in
/// the language `asked` chooses, its files under `base`; `head` leaves
/// the body out.
pub fn not_found(pages: &Pages, asked: Asked<'_>, base: &str, head: bool) -> Response<Full<Bytes>> {
    let page = ErrorPage {
        title: "not-found-title",
        text: &["not-found"],
        switch: true,
    };
    let mut response = error_page(pages.error(&page, asked, base), StatusCode::NOT_FOUND);
    if head {
        let length = response.body().size_hint().exact().unwrap_or(0);
        *response.body_mut() = Full::new(Bytes::new());
        response
            .headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(length));
    }
    response
}

/// `data` as a QR code in SVG, at error correction level M (15 % of the
/// code may be unreadable: a screen's glare, a phone's angle). `None` when
/// `data` does not fit a QR code, which `request_uri`'s bound prevents.
pub fn qr_svg(data: &str) -> Option<String> {
    let code = QrCode::with_error_correction_level(data.as_bytes(), EcLevel::M).ok()?;
    Some(
        code.render::<svg::Color>()
            .min_dimensions(256, 256)
            .dark_color(svg::Color("#000000"))
            .light_color(svg::Color("#ffffff"))
            .quiet_zone(true)
            .build(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_qr_code_is_an_svg_with_no_style_or_script() {
        let svg =
            qr_svg("openid4vp://?client_id=rp&request_uri=https%3A%2F%2Fsvc%2Fr%2F1").unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        for banned in ["style", "<script", "href"] {
            assert!(!svg.contains(banned), "{banned} in {svg}");
        }
    }

    #[test]
    fn the_longest_request_uri_taken_fits_a_qr_code() {
        let longest = "x".repeat(super::super::assumptions::MAX_REQUEST_URI);
        assert!(qr_svg(&longest).is_some());
    }

    #[test]
    fn the_page_loads_only_its_own_files() {
        let pages = Pages::render(crate::verifier::i18n::Languages::load().unwrap(), None);
        let page = pages.choose(Asked::default()).html.as_str();
        for reference in [
            "/assets/verifier.js",
            "/assets/verifier.css",
            "/assets/icon.svg",
        ] {
            assert!(page.contains(reference), "{reference}");
            assert!(asset(reference).is_some(), "{reference}");
        }
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains("<style") && !page.contains("style="));
        assert!(!page.contains("<script>"), "no inline script");
    }
}
