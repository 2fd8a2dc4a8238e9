//! The ID token's signature: the provider's key (a PEM key, or one in a
//! PKCS#11 token, as `SA_PRIVATE_KEY` may be), its JWK set with the key
//! before it, and the `kid` that ties an ID token to its key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::config::credentials::{RsaPublic, SigningKey};

/// Signatures waiting for a key in a token, which signs one at a time:
/// beyond these, a token request is answered 503 at once rather than
/// queued behind a slow HSM.
pub const MAX_WAITING_SIGNATURES: usize = 64;

/// Why there is no signature.
#[derive(Debug)]
pub enum SignError {
    /// [`MAX_WAITING_SIGNATURES`] are waiting already.
    Busy,
    /// The key failed, or its token did not answer in time; the reason
    /// names the setting, never key material.
    Failed(String),
}

pub struct Signer {
    key: Arc<SigningKey>,
    kid: String,
    /// The JWK set, as served.
    jwks: Bytes,
    /// One signature in a token at a time ([`SigningKey::off_async`]).
    turn: Semaphore,
    waiting: AtomicUsize,
    /// How long a signature in a token may take (`LANYARD_TOKEN_TIMEOUT`).
    limit: Duration,
}

impl Signer {
    /// For `key`, whose public half is known (the settings checked it),
    /// publishing `previous` beside it.
    pub fn new(
        key: Arc<SigningKey>,
        previous: Option<&RsaPublic>,
        limit: Duration,
    ) -> Result<Signer, String> {
        let public = key
            .public()
            .ok_or("the ID token key's public half is not known")?;
        let mut keys = vec![jwk(public)];
        keys.extend(previous.map(jwk));
        let jwks = json!({ "keys": keys }).to_string();
        Ok(Signer {
            kid: thumbprint(public),
            key,
            jwks: Bytes::from(jwks),
            turn: Semaphore::new(1),
            waiting: AtomicUsize::new(0),
            limit,
        })
    }

    pub fn jwks(&self) -> Bytes {
        self.jwks.clone()
    }

    #[cfg(test)]
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// `payload` as a signed JWT (RS256, this key's `kid`).
    pub async fn sign(&self, payload: &Value) -> Result<String, SignError> {
        let header = json!({"alg": "RS256", "typ": "JWT", "kid": self.kid});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(payload.to_string())
        );
        let signature = match self.key.blocks() {
            false => self.key.sign_rs256(input.as_bytes()),
            true => self.sign_in_token(input.clone()).await?,
        };
        signature
            .map(|signature| format!("{input}.{signature}"))
            .map_err(SignError::Failed)
    }

    /// A token signs one at a time: the rest wait their turn, a bounded
    /// number of them, each within the limit.
    async fn sign_in_token(&self, input: String) -> Result<Result<String, String>, SignError> {
        if self.waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING_SIGNATURES {
            self.waiting.fetch_sub(1, Ordering::AcqRel);
            return Err(SignError::Busy);
        }
        let turn = tokio::time::timeout(self.limit, self.turn.acquire()).await;
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        let Ok(Ok(_turn)) = turn else {
            return Err(SignError::Busy);
        };
        Ok(self
            .key
            .off_async(self.limit, move |key| key.sign_rs256(input.as_bytes()))
            .await)
    }
}

/// A public key as a JWK (RFC 7517, RFC 7518 §6.3.1), for signatures with
/// RS256 only.
fn jwk(public: &RsaPublic) -> Value {
    json!({
        "kty": "RSA",
        "use": "sig",
        "alg": "RS256",
        "kid": thumbprint(public),
        "n": URL_SAFE_NO_PAD.encode(&public.modulus),
        "e": URL_SAFE_NO_PAD.encode(&public.exponent),
    })
}

/// The key's JWK thumbprint (RFC 7638 §3): SHA-256 over its required
/// members in lexicographic order with no white space, in base64url. Every
/// replica with the key computes the same `kid`, and it changes with the
/// key.
fn thumbprint(public: &RsaPublic) -> String {
    let canonical = format!(
        r#"{{"e":"{}","kty":"RSA","n":"{}"}}"#,
        URL_SAFE_NO_PAD.encode(&public.exponent),
        URL_SAFE_NO_PAD.encode(&public.modulus)
    );
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, canonical.as_bytes());
    URL_SAFE_NO_PAD.encode(digest.as_ref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::credentials::parse_private_key;

    /// RFC 7638 §3.1's example key and its thumbprint.
    #[test]
    fn the_kid_is_the_rfc_7638_thumbprint() {
        let n = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
        let public = RsaPublic {
            modulus: URL_SAFE_NO_PAD.decode(n).unwrap(),
            exponent: vec![1, 0, 1],
        };
        assert_eq!(
            thumbprint(&public),
            "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"
        );
    }

    #[tokio::test]
    async fn an_id_token_verifies_with_the_published_key_by_its_kid() {
        let pem = include_str!("../../../tests/fixtures/rsa2048.pkcs8.pem");
        let key = Arc::new(parse_private_key(pem).unwrap());
        let signer = Signer::new(key, None, Duration::from_secs(1)).unwrap();
        let token = signer
            .sign(&json!({"sub": "x", "aud": "shop"}))
            .await
            .unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.kid.as_deref(), Some(signer.kid()));
        let jwks: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&signer.jwks()).unwrap();
        let jwk = jwks.find(signer.kid()).unwrap();
        let decoding = jsonwebtoken::DecodingKey::from_jwk(jwk).unwrap();
        let mut validation = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::RS256);
        validation.set_audience(&["shop"]);
        validation.required_spec_claims.clear();
        let data = jsonwebtoken::decode::<Value>(&token, &decoding, &validation).unwrap();
        assert_eq!(data.claims["sub"], "x");
    }
}
