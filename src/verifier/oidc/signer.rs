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
            kid: public.kid(),
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
        let place = Place::take(&self.waiting).ok_or(SignError::Busy)?;
        let turn = tokio::time::timeout(self.limit, self.turn.acquire()).await;
        drop(place);
        let Ok(Ok(_turn)) = turn else {
            return Err(SignError::Busy);
        };
        Ok(self
            .key
            .off_async(self.limit, move |key| key.sign_rs256(input.as_bytes()))
            .await)
    }
}

/// A place among the signatures waiting for the token's turn, given back
/// however the wait ends: a token request whose client hung up is dropped
/// mid-wait, and must not keep its place for good.
struct Place<'a>(&'a AtomicUsize);

impl<'a> Place<'a> {
    /// A place, unless [`MAX_WAITING_SIGNATURES`] are taken.
    fn take(waiting: &'a AtomicUsize) -> Option<Place<'a>> {
        if waiting.fetch_add(1, Ordering::AcqRel) >= MAX_WAITING_SIGNATURES {
            waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Place(waiting))
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A public key as a JWK (RFC 7517, RFC 7518 §6.3.1), for signatures with
/// RS256 only.
fn jwk(public: &RsaPublic) -> Value {
    json!({
        "kty": "RSA",
        "use": "sig",
        "alg": "RS256",
        "kid": public.kid(),
        "n": URL_SAFE_NO_PAD.encode(&public.modulus),
        "e": URL_SAFE_NO_PAD.encode(&public.exponent),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::credentials::parse_private_key;

    /// A token request whose client hangs up while its signature waits for
    /// the token's turn leaves the queue as it found it: after more such
    /// than the queue holds, a signature is still made, not refused as busy.
    #[tokio::test]
    async fn a_signature_abandoned_while_queued_gives_its_place_back() {
        let pem = include_str!("../../../tests/fixtures/rsa2048.pkcs8.pem");
        let key = Arc::new(parse_private_key(pem).unwrap());
        let signer = Signer::new(key, None, Duration::from_secs(10)).unwrap();
        let busy = signer.turn.acquire().await.unwrap();
        for _ in 0..=MAX_WAITING_SIGNATURES {
            let mut queued = Box::pin(signer.sign_in_token("abandoned".into()));
            // Polled until it waits for its turn, then dropped.
            tokio::select! {
                biased;
                done = &mut queued => panic!("not queued behind the busy token: {done:?}"),
                () = std::future::ready(()) => {}
            }
        }
        assert_eq!(signer.waiting.load(Ordering::Acquire), 0);
        drop(busy);
        let signed = signer.sign_in_token("wanted".into()).await;
        assert!(matches!(signed, Ok(Ok(_))), "{signed:?}");
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
