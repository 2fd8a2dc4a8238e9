//! The shop's requests to its provider: discovery (OpenID Connect
//! Discovery §4), the code's redemption at the token endpoint (RFC 6749
//! §4.1.3, with PKCE's verifier and `client_secret_basic`) and the key set.
//!
//! The shop is a demo's relying party, so it talks only plain HTTP to a
//! provider on this machine: it never becomes a way to make the mock
//! fetch other hosts. Each exchange is bounded in time and bytes, and
//! what a provider answers never reaches a page: each failure is a fixed
//! sentence, and the detail goes to the log.

use std::net::IpAddr;
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::id_token::KeySet;

/// Discovery documents, key sets and token answers are a few KiB.
const MAX_ANSWER: usize = 64 * 1024;
/// A provider on loopback answers in milliseconds; one that does not
/// within this is stuck, and the person is better told so.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Below the provider's likely keep-alive, so the shop closes first.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Where the provider's endpoints are, from its discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Provider {
    pub authorization_endpoint: String,
    pub token_endpoint: String,
    pub jwks_uri: String,
}

/// Why an exchange with the provider failed: fixed sentences, safe to show.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub(super) enum ProviderError {
    #[error("the shop talks only to a provider on this machine over plain http")]
    NotLoopback,
    #[error("the provider could not be reached")]
    Unreachable,
    #[error("the provider did not answer in time")]
    TimedOut,
    #[error("the provider's answer was too large")]
    TooLarge,
    #[error("the provider answered with an unexpected status")]
    Status,
    #[error("the provider's answer was not the JSON expected")]
    Malformed,
    #[error("the provider's discovery document names another issuer")]
    IssuerMismatch,
    #[error("the provider's discovery document has an endpoint that is not an http URL")]
    BadEndpoint,
    #[error("the provider refused to redeem the login's code{}", with_code(*.code))]
    Refused { code: Option<&'static str> },
    #[error("the provider's token answer held no ID token")]
    NoIdToken,
}

/// The discovery document's members the shop reads.
#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

#[derive(Deserialize)]
struct TokenAnswer {
    id_token: Option<String>,
}

#[derive(Deserialize)]
struct ErrorAnswer {
    error: String,
}

/// RFC 6749 §5.2's error codes: a provider's answer is shown only as one
/// of these, never as the text it sent.
const TOKEN_ERRORS: &[&str] = &[
    "invalid_request",
    "invalid_client",
    "invalid_grant",
    "unauthorized_client",
    "unsupported_grant_type",
    "invalid_scope",
];

/// A client for the provider, pooled across logins.
pub(super) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl Http {
    pub(super) fn new() -> Http {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(IDLE_TIMEOUT)
            .build(connector);
        Http { client }
    }

    /// Reads `{issuer}/.well-known/openid-configuration`, which must name
    /// `issuer` itself (Discovery §4.3).
    pub(super) async fn discover(&self, issuer: &str) -> Result<Provider, ProviderError> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            issuer.trim_end_matches('/')
        );
        let document: Discovery = self.get_json(&url).await?;
        if document.issuer != issuer {
            tracing::warn!(issuer, named = %document.issuer, "shop: discovery names another issuer");
            return Err(ProviderError::IssuerMismatch);
        }
        // The browser follows the authorization endpoint, the shop fetches
        // the others.
        let browsed = document.authorization_endpoint.parse::<Uri>();
        if !browsed.is_ok_and(|uri| matches!(uri.scheme_str(), Some("http" | "https"))) {
            return Err(ProviderError::BadEndpoint);
        }
        loopback_http(&document.token_endpoint)?;
        loopback_http(&document.jwks_uri)?;
        Ok(Provider {
            authorization_endpoint: document.authorization_endpoint,
            token_endpoint: document.token_endpoint,
            jwks_uri: document.jwks_uri,
        })
    }

    /// Redeems `code`, answering the ID token.
    pub(super) async fn redeem(
        &self,
        provider: &Provider,
        client: Credentials<'_>,
        code: &str,
        code_verifier: &str,
    ) -> Result<String, ProviderError> {
        let form = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", client.redirect_uri)
            .append_pair("code_verifier", code_verifier)
            .finish();
        let request = Request::builder()
            .method(Method::POST)
            .uri(loopback_http(&provider.token_endpoint)?)
            .header(header::AUTHORIZATION, client.basic())
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::from(form)))
            .map_err(|_| ProviderError::BadEndpoint)?;
        let (status, body) = self.exchange(request).await?;
        if status != StatusCode::OK {
            let error = serde_json::from_slice::<ErrorAnswer>(&body).ok();
            let code = error.and_then(|e| TOKEN_ERRORS.iter().copied().find(|c| *c == e.error));
            tracing::warn!(%status, error = code, "shop: the token endpoint refused the code");
            return Err(ProviderError::Refused { code });
        }
        let answer: TokenAnswer = parse(&body)?;
        answer.id_token.ok_or(ProviderError::NoIdToken)
    }

    /// The provider's key set, fetched for each login: logins are rare and
    /// human-paced, and a key the provider rotated is then never missed.
    pub(super) async fn keys(&self, provider: &Provider) -> Result<KeySet, ProviderError> {
        self.get_json(&provider.jwks_uri).await
    }

    async fn get_json<T: DeserializeOwned>(&self, url: &str) -> Result<T, ProviderError> {
        let request = Request::builder()
            .uri(loopback_http(url)?)
            .header(header::ACCEPT, "application/json")
            .body(Full::new(Bytes::new()))
            .map_err(|_| ProviderError::BadEndpoint)?;
        let (status, body) = self.exchange(request).await?;
        if status != StatusCode::OK {
            tracing::warn!(url, %status, "shop: the provider answered an unexpected status");
            return Err(ProviderError::Status);
        }
        parse(&body)
    }

    /// Sends `request` and reads the answer whole, within the time and
    /// byte bounds.
    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<(StatusCode, Bytes), ProviderError> {
        let uri = request.uri().clone();
        let exchange = async {
            let response = self.client.request(request).await.map_err(|err| {
                tracing::warn!(%uri, error = %err, "shop: the provider could not be reached");
                ProviderError::Unreachable
            })?;
            let status = response.status();
            let body = crate::collect::collect(response.into_body(), MAX_ANSWER)
                .await
                .map_err(|err| match err.is_too_large() {
                    true => ProviderError::TooLarge,
                    false => ProviderError::Unreachable,
                })?;
            Ok((status, body))
        };
        tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
            .await
            .unwrap_or(Err(ProviderError::TimedOut))
    }
}

/// The shop's client registration, as the token endpoint is sent it.
#[derive(Clone, Copy)]
pub(super) struct Credentials<'a> {
    pub client_id: &'a str,
    pub client_secret: &'a str,
    pub redirect_uri: &'a str,
}

impl Credentials<'_> {
    /// RFC 6749 §2.3.1: each part form-encoded, then joined and base64'd.
    fn basic(&self) -> String {
        let encode =
            |part: &str| -> String { form_urlencoded::byte_serialize(part.as_bytes()).collect() };
        let pair = format!("{}:{}", encode(self.client_id), encode(self.client_secret));
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )
    }
}

/// " (invalid_grant)", or nothing when the provider sent no known code.
pub(super) fn with_code(code: Option<&'static str>) -> String {
    code.map(|code| format!(" ({code})")).unwrap_or_default()
}

fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ProviderError> {
    serde_json::from_slice(body).map_err(|_| ProviderError::Malformed)
}

/// `url` as a URI, when it is plain http to a loopback host.
pub(super) fn loopback_http(url: &str) -> Result<Uri, ProviderError> {
    let uri: Uri = url.parse().map_err(|_| ProviderError::NotLoopback)?;
    let host = uri.host().unwrap_or_default();
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || ip.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() == Some("http") && loopback {
        true => Ok(uri),
        false => Err(ProviderError::NotLoopback),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_http_on_loopback_is_fetched() {
        for url in [
            "http://127.0.0.1:8081/jwks",
            "http://localhost:8081/",
            "http://[::1]:8081/token",
            "http://127.0.0.2/x",
        ] {
            assert!(loopback_http(url).is_ok(), "{url}");
        }
        for url in [
            "https://127.0.0.1:8081/jwks",
            "http://example.com/jwks",
            "http://10.0.0.1/jwks",
            "http://127.0.0.1.example.com/",
            "/jwks",
            "not a url",
        ] {
            assert_eq!(
                loopback_http(url).unwrap_err(),
                ProviderError::NotLoopback,
                "{url}"
            );
        }
    }

    #[test]
    fn basic_credentials_are_form_encoded_first() {
        let client = Credentials {
            client_id: "shop",
            client_secret: "s3cr:t +/",
            redirect_uri: "",
        };
        let value = client.basic();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(value.strip_prefix("Basic ").unwrap())
            .unwrap();
        assert_eq!(decoded, b"shop:s3cr%3At+%2B%2F");
    }
}
