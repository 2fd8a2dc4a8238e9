//! The mock wallet as a page a person clicks through in the demo
//! (docs/verifier.md): what the verifier asks for, and "Present" or
//! "Decline". The verifier's wallet button lands on `GET /mock/wallet?
//! request_uri=…` (the demo's `WALLET_BASE_URL` with the OpenID4VP
//! request's query); `GET /mock/wallet/{transaction_id}` shows the same
//! page to a browser. Plain HTML forms, no script, no style.
//!
//! The page echoes only what the mock made itself: a transaction id found
//! in its session table (a UUID), and fixed text. Nothing a client sent
//! reaches the markup, so there is nothing to escape.

use bytes::Bytes;
use http::{HeaderMap, Response, StatusCode, header};
use http_body_util::Full;

use super::surface::{Frame, WALLET_PREFIX, html_page};

/// Nothing but this page and its own form posts.
const CONTENT_SECURITY_POLICY: &str =
    "default-src 'none'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// Whether the request is a browser's navigation rather than an API
/// call: browsers ask for `text/html` first, curl and fetch for `*/*`.
pub(super) fn wants_html(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept
                .split(',')
                .next()
                .is_some_and(|first| first.trim().starts_with("text/html"))
        })
}

/// The transaction a wallet link names: `request_uri` must be one of this
/// mock's own `{base}/mock/wallet/{transaction_id}`.
pub(super) fn transaction_of_link(query: Option<&str>, base_url: &str) -> Option<String> {
    let request_uri = form_urlencoded::parse(query?.as_bytes())
        .find(|(name, _)| name == "request_uri")?
        .1;
    let own = format!("{base_url}{WALLET_PREFIX}/");
    let transaction_id = request_uri.strip_prefix(&own)?;
    (!transaction_id.is_empty() && !transaction_id.contains(['/', '?', '#']))
        .then(|| transaction_id.to_string())
}

/// The consent page for a pending session, or what became of it;
/// `transaction_id` is one the session table holds.
pub(super) fn consent(
    transaction_id: &str,
    status: &'static str,
    claims: &serde_json::Map<String, serde_json::Value>,
) -> Response<Full<Bytes>> {
    let tx = transaction_id;
    let body = if status == "pending" {
        let items: String = claims
            .keys()
            .map(|name| format!("<li>{name}</li>"))
            .collect();
        format!(
            "<p>The verifier <strong>lanyard-mock-verifier</strong> asks for a credential with:</p>\n\
             <ul>{items}</ul>\n\
             <form method=\"post\" action=\"{WALLET_PREFIX}/{tx}/present\"><button type=\"submit\" id=\"present\">Present</button></form>\n\
             <form method=\"post\" action=\"{WALLET_PREFIX}/{tx}/decline\"><button type=\"submit\" id=\"decline\">Decline</button></form>"
        )
    } else {
        format!("<p id=\"outcome\">This request is already {status}.</p>")
    };
    page(StatusCode::OK, &body)
}

/// After "Present" or "Decline".
pub(super) fn done(presented: bool) -> Response<Full<Bytes>> {
    let said = match presented {
        true => "Presented. The verifier now has your credential's claims.",
        false => "Declined. Nothing was shared.",
    };
    page(
        StatusCode::OK,
        &format!(
            "<p id=\"outcome\">{said}</p>\n<p>You can close this tab and return to the verifier.</p>"
        ),
    )
}

/// A wallet link or action the mock cannot follow.
pub(super) fn problem(status: StatusCode, sentence: &'static str) -> Response<Full<Bytes>> {
    page(status, &format!("<p id=\"outcome\">{sentence}</p>"))
}

fn page(status: StatusCode, body: &str) -> Response<Full<Bytes>> {
    let frame = Frame {
        name: "Mock wallet",
        lead: "The demo's stand-in for a wallet app (lanyard's mock service).",
        stylesheet: None,
        policy: CONTENT_SECURITY_POLICY,
    };
    html_page(status, &frame, body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn a_wallet_link_names_one_of_this_mock_s_transactions() {
        let base = "http://127.0.0.1:4000";
        let link = "client_id=x&request_uri=http%3A%2F%2F127.0.0.1%3A4000%2Fmock%2Fwallet%2Fabc-1";
        assert_eq!(
            transaction_of_link(Some(link), base).as_deref(),
            Some("abc-1")
        );
        for other in [
            "request_uri=http%3A%2F%2Fevil.example%2Fmock%2Fwallet%2Fabc",
            "request_uri=http%3A%2F%2F127.0.0.1%3A4000%2Fmock%2Fwallet%2Fa%2Fpresent",
            "client_id=x",
        ] {
            assert_eq!(transaction_of_link(Some(other), base), None, "{other}");
        }
    }

    #[test]
    fn browsers_get_the_page_and_scripts_get_json() {
        let mut headers = HeaderMap::new();
        assert!(!wants_html(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        assert!(!wants_html(&headers));
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/html,application/xhtml+xml,*/*;q=0.8"),
        );
        assert!(wants_html(&headers));
    }
}
