//! The secrets one login carries through the browser and back: `state`
//! (ties the provider's answer to the login that asked, RFC 6749 §10.12),
//! `nonce` (ties the ID token to it, OpenID Connect Core §3.1.2.1) and the
//! PKCE verifier (RFC 7636: only who started the login can redeem its
//! code), and the authorization request that sends them.
//!
//! Pure but for the randomness; imports nothing of the mock.

use std::fmt;

use aws_lc_rs::digest::{SHA256, digest};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Random bytes in each value: 32 bytes are 43 base64url characters, the
/// shortest code verifier RFC 7636 §4.1 allows, and 256 bits no one guesses.
const RANDOM_BYTES: usize = 32;

/// The system gave no randomness; nothing safe can be made without it.
#[derive(Debug, thiserror::Error)]
#[error("no randomness")]
pub(super) struct NoRandomness;

/// A login's `state`, `nonce` and code verifier. Its `Debug` hides them:
/// any of them in a log would let a reader finish someone's login.
pub(super) struct Login {
    pub state: String,
    pub nonce: String,
    pub code_verifier: String,
}

impl fmt::Debug for Login {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Login([redacted])")
    }
}

impl Login {
    pub(super) fn new() -> Result<Login, NoRandomness> {
        Ok(Login {
            state: random_token()?,
            nonce: random_token()?,
            code_verifier: random_token()?,
        })
    }

    /// The URL the browser is sent to: `endpoint` with the request's
    /// parameters added to whatever query it has (OpenID Connect Core
    /// §3.1.2.1 lets an endpoint carry one).
    pub(super) fn authorization_url(
        &self,
        endpoint: &str,
        client_id: &str,
        redirect_uri: &str,
        rule: Option<&str>,
    ) -> String {
        let scope = match rule {
            Some(rule) => format!("openid {rule}"),
            None => "openid".into(),
        };
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("scope", &scope)
            .append_pair("state", &self.state)
            .append_pair("nonce", &self.nonce)
            .append_pair("code_challenge", &s256_challenge(&self.code_verifier))
            .append_pair("code_challenge_method", "S256")
            .finish();
        let separator = match endpoint.split_once('?') {
            None => "?",
            Some((_, "")) => "",
            Some(_) => "&",
        };
        format!("{endpoint}{separator}{query}")
    }
}

/// A fresh random value, base64url without padding.
pub(super) fn random_token() -> Result<String, NoRandomness> {
    let mut bytes = [0u8; RANDOM_BYTES];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| NoRandomness)?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// RFC 7636 §4.2: `BASE64URL(SHA256(ASCII(code_verifier)))`.
pub(super) fn s256_challenge(code_verifier: &str) -> String {
    URL_SAFE_NO_PAD.encode(digest(&SHA256, code_verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_appendix_b_s() {
        assert_eq!(
            s256_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn each_login_s_values_are_fresh_and_long_enough_for_pkce() {
        let a = Login::new().unwrap();
        let b = Login::new().unwrap();
        for value in [&a.state, &a.nonce, &a.code_verifier] {
            assert_eq!(value.len(), 43);
            // RFC 7636 §4.1's unreserved characters.
            assert!(
                value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._~".contains(c))
            );
        }
        assert_ne!(a.state, a.nonce);
        assert_ne!(a.code_verifier, b.code_verifier);
        assert_eq!(format!("{a:?}"), "Login([redacted])");
    }

    fn query_of(url: &str) -> HashMap<String, String> {
        let (_, query) = url.split_once('?').unwrap();
        form_urlencoded::parse(query.as_bytes())
            .into_owned()
            .collect()
    }

    #[test]
    fn the_authorization_request_carries_every_parameter() {
        let login = Login::new().unwrap();
        let url = login.authorization_url(
            "http://127.0.0.1:8081/authorize",
            "shop",
            "http://127.0.0.1:4000/shop/callback",
            None,
        );
        assert!(url.starts_with("http://127.0.0.1:8081/authorize?"), "{url}");
        let query = query_of(&url);
        let expected = [
            ("response_type", "code"),
            ("client_id", "shop"),
            ("redirect_uri", "http://127.0.0.1:4000/shop/callback"),
            ("scope", "openid"),
            ("state", login.state.as_str()),
            ("nonce", login.nonce.as_str()),
            ("code_challenge_method", "S256"),
        ];
        for (name, value) in expected {
            assert_eq!(query[name], value, "{name}");
        }
        assert_eq!(
            query["code_challenge"],
            s256_challenge(&login.code_verifier)
        );
        assert_eq!(query.len(), 8, "and nothing else: {url}");
        assert!(
            !url.contains(&login.code_verifier),
            "the verifier stays home"
        );
    }

    #[test]
    fn an_endpoint_s_own_query_is_kept() {
        let login = Login::new().unwrap();
        let url =
            login.authorization_url("http://p.test/auth?tenant=a", "c", "http://r.test/", None);
        assert!(url.starts_with("http://p.test/auth?tenant=a&response_type=code&"));
        assert_eq!(query_of(&url)["tenant"], "a");
        let url = login.authorization_url("http://p.test/auth?", "c", "http://r.test/", None);
        assert!(url.starts_with("http://p.test/auth?response_type=code&"));
    }
}
